"""PPO with --env-backend mindspore (rl/ppo_native.py): one compiled call per iteration (rollout of the
native environments, GAE, every actor and critic update) against the host path: the same rollout
re-stepped eagerly, numpy GAE, and the host path's own actor and critic steps on the same minibatches."""
import numpy as np
import pytest
from mindspore import Tensor

from loops.driver import MultiStep, host_tensor
from rl.native_envs import NATIVE_ENVS
from rl import ppo_native
from rl.ppo_native import gae_discounts, gae_in_closed_form
from rl.storage import gae
from test_rl import tiny_agent

ARGS = ["--num-envs", 4, "--num-steps", 16, "--update-epochs", 2, "--num-minibatches", 2, "--hidden", 16]


def weights(agent):
    return [p.asnumpy().copy() for learner in (agent.actor, agent.critic) for p in learner.net.trainable_params()]


@pytest.mark.parametrize("env_id, elapsed, gae_loop", [("CartPole-v1", [0, 0, 490, 495], False),
                                                      ("CartPole-v1", [0, 0, 490, 495], True),
                                                      ("Pendulum-v1", [0, 190, 195, 199], False)])
def test_one_call_iteration_equals_the_host_path_on_the_same_rollout(graph_mode, tmp_path, monkeypatch, env_id,
                                                                    elapsed, gae_loop):
    if gae_loop:  # GAE's backward loop, which long rollouts run, instead of its closed form
        monkeypatch.setattr(ppo_native, "CLOSED_FORM_MAX_ROWS", 0)
    native, run = tiny_agent(tmp_path / "native", "--env", env_id, "--env-backend", "mindspore", *ARGS)
    host, host_run = tiny_agent(tmp_path / "host", "--env", env_id, *ARGS)
    assert type(native).__name__ == "NativePPO" and type(host).__name__ == "PPO"
    for a, b in zip(native.state(), host.state()):  # one starting point for both
        b.set_data(a.value().copy())
    carry = native.env_carry.asnumpy().copy()
    d = native.env.state_dim
    carry[:, d] = elapsed  # environments near their time limit: truncation and its bootstrap happen in the rollout
    native.env_carry.set_data(Tensor(carry))
    before = weights(native)
    drawn = []
    draw = native.draw_rollout
    native.draw_rollout = lambda step: drawn.append(draw(step)) or drawn[-1]
    phases = native.phases()
    MultiStep(phases, 1).run(0)
    action_noise, reset_noise = drawn[0]
    rows = {**native.rows.numpy(), **native.targets.numpy()}

    # the rollout: re-stepped eagerly, one environment step at a time, with the pre-update policy
    env = NATIVE_ENVS[env_id]()
    c, episodes = Tensor(carry), []
    for t in range(16):
        obs = env.observe(c[:, :d])
        np.testing.assert_array_equal(rows["obs"][t], obs.asnumpy())
        out = host.actor.net(obs).asnumpy()
        if native.discrete:
            action = (out + action_noise[t]).argmax(-1).astype(np.int32)
            env_action = action
        else:
            action = out + np.exp(host.actor.net.log_std.asnumpy()) * action_noise[t]
            env_action = np.clip(action, *native.bounds)
        np.testing.assert_allclose(rows["actions"][t], action, rtol=1e-6, atol=1e-6)
        c, step = env.step(c, Tensor(env_action), Tensor(reset_noise[t]))
        step = {k: v.asnumpy() for k, v in step.items()}
        cut = step["truncated"] & ~step["terminated"]
        final_value = host.critic.net(Tensor(step["final_obs"])).asnumpy().reshape(-1)
        np.testing.assert_allclose(rows["rewards"][t], step["reward"] + 0.98 * cut * final_value, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(rows["values"][t], host.critic.net(obs).asnumpy().reshape(-1), rtol=1e-6, atol=1e-6)
        done = step["terminated"] | step["truncated"]
        np.testing.assert_array_equal(rows["dones"][t], done)
        episodes += [(float(r), int(n)) for r, n in zip(step["episode_return"][done], step["episode_length"][done])]
    assert any(episodes) and native.env_steps == 0  # not read yet: harvest comes with the next draw or log
    native.harvest()
    assert native.env_steps == 64 and len(native.episodes) == len(episodes)
    np.testing.assert_allclose(native.episodes, episodes, rtol=1e-6)
    np.testing.assert_array_equal(native.env_carry.asnumpy(), c.asnumpy())

    # GAE: numpy's, from the stored rows and the value of the last observation
    next_value = host.critic.net(env.observe(c[:, :d])).asnumpy().reshape(-1)
    advantages, returns = gae(rows["rewards"], rows["values"], rows["dones"], next_value, 0.98, 0.8)
    np.testing.assert_allclose(rows["advantages"], advantages, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rows["returns"], returns, rtol=1e-5, atol=1e-5)

    # the updates: the host path's steps on the same minibatches, actor's then critic's
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in rows.items()}
    for idx in native.batches:
        adv = flat["advantages"][idx]
        adv = ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)
        lr = host.scheduled_lr("actor", 0)
        host.actor_step(*map(host_tensor, host.actor_step.host_inputs(
            (flat["obs"][idx], flat["actions"][idx], flat["logprobs"][idx], adv), None, lr)))
    for idx in native.batches:
        host.critic_step(*map(host_tensor, host.critic_step.host_inputs(
            (flat["obs"][idx], flat["returns"][idx]), None, host.scheduled_lr("critic", 0))))
    after, expected = weights(native), weights(host)
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))  # every weight moved
    for a, b in zip(after, expected):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    run.close()
    host_run.close()


@pytest.mark.parametrize("done_rate", [0.0, 0.3, 1.0])
def test_gae_in_closed_form_equals_the_backward_recursion(done_rate):
    """The in-graph GAE (no loop) against rl/storage.py's recursion, with episodes ending anywhere: several
    per environment, at the first and the last step, none, or every step."""
    rng = np.random.default_rng(0)
    T, N, gamma, lam = 16, 6, 0.9, 0.7
    rewards, values = rng.normal(size=(T, N)).astype(np.float32), rng.normal(size=(T, N)).astype(np.float32)
    dones = (rng.random((T, N)) < done_rate).astype(np.float32)
    dones[0, 0] = dones[-1, 1] = 1.0 if done_rate else 0.0
    next_value = rng.normal(size=N).astype(np.float32)
    expected, _ = gae(rewards, values, dones, next_value, gamma, lam)
    got = gae_in_closed_form(Tensor(rewards), Tensor(values), Tensor(dones), Tensor(next_value), gamma,
                             gae_discounts(T, gamma * lam)).asnumpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
