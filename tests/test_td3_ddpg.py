"""TD3 and DDPG (rl/td3.py, rl/ddpg.py): their losses against float64 numpy references of the papers'
formulas (targets perturbed away from the online networks), each phase moves only its own model and
the targets move only in their Polyak update (TD3's every --policy-frequency iterations), bad input
exits 2 with one line (resume: tests/test_rl.py), `python -m metrics` evaluates a TD3 run,
and both learn Pendulum in a short budget (slow)."""
import json

import numpy as np
import pytest
from mindspore import Tensor

from conftest import assert_refused, run_script, scalar_tags
from test_rl import TINY_RUNS, tiny_agent


def tiny(tmp_path, algo, *extra):
    return tiny_agent(tmp_path, "--algo", algo, "--hidden", 16, "--batch-size", 8, "--learning-starts", 20, *extra)


def mlp(seq, x):
    """float64 forward of rl.sac.relu_mlp from its weights (Dense: x W^T + b)."""
    dense = [cell for cell in seq.cells() if hasattr(cell, "weight")]
    for i, d in enumerate(dense):
        x = x @ d.weight.asnumpy().astype(np.float64).T + d.bias.asnumpy().astype(np.float64)
        if i < len(dense) - 1:
            x = np.maximum(x, 0.0)
    return x


def mu(actor, obs):
    scale, bias = actor.scale.asnumpy().astype(np.float64), actor.bias.asnumpy().astype(np.float64)
    return np.tanh(mlp(actor.mlp, obs)) * scale + bias


def q(seq, obs, action):
    return mlp(seq, np.concatenate([obs, action], -1))[:, 0]


def perturb(*cells, seed=7, size=0.3):
    """Move the target networks away from the online ones (they start as copies)."""
    rng = np.random.default_rng(seed)
    for cell in cells:
        for p in cell.get_parameters():
            p.set_data(Tensor((p.asnumpy() + size * rng.standard_normal(p.shape)).astype(np.float32)))


def batch(B=8, seed=2):
    rng = np.random.default_rng(seed)
    obs, next_obs = (rng.normal(size=(B, 3)).astype(np.float32) for _ in range(2))
    actions = rng.uniform(-2, 2, (B, 1)).astype(np.float32)
    rewards = rng.normal(size=B).astype(np.float32)
    terminated = np.array([0, 1, 0, 0, 1, 0, 0, 0], np.float32)[:B]
    # smoothing noise: some draws beyond the clip (0.2 * 4 = 0.8 > 0.5), of both signs
    noise = np.array([[4.0], [-4.0], [0.3], [-0.5], [3.0], [1.0], [-3.5], [0.0]], np.float32)[:B]
    return obs, actions, rewards, next_obs, terminated, noise


def close(value, reference):
    return value == pytest.approx(reference, rel=1e-4, abs=1e-5)


def test_td3_critic_and_actor_losses_match_numpy(graph_mode, tmp_path):
    agent, run = tiny(tmp_path, "td3")
    perturb(agent.actor_target, agent.critic_target)
    perturb(agent.critic.net.q2, seed=3, size=0.5)  # Q2 below Q1 on some rows: min(Q1, Q2) is not Q1
    # push the target actor to the upper bound for most states, so the smoothed action needs the bound clip
    last = [p for p in agent.actor_target.get_parameters() if p.name.endswith("mlp.4.bias")][0]
    last.set_data(Tensor(np.array([1.5], np.float32)))
    obs, actions, rewards, next_obs, terminated, noise = inputs = batch()
    loss, qf1, qf2, q1_mean, q2_mean = (float(x.asnumpy()) for x in agent.critic_loss_fn()(*map(Tensor, inputs)))
    cfg, critic, target = agent.cfg, agent.critic.net, agent.critic_target
    low, high, scale = -2.0, 2.0, 2.0

    def reference(smooth=True, clip_noise=True, clip_bounds=True, combine=np.minimum, sign=1.0,
                  actor_t=agent.actor_target, critic_t=target, done=terminated):
        eps = noise * cfg.policy_noise
        eps = np.clip(eps, -cfg.noise_clip, cfg.noise_clip) if clip_noise else eps
        a = mu(actor_t, next_obs) + (eps * scale if smooth else 0.0)
        a = np.clip(a, low, high) if clip_bounds else a
        y = rewards + sign * (1 - done) * cfg.gamma * combine(q(critic_t.q1, next_obs, a), q(critic_t.q2, next_obs, a))
        q1, q2 = q(critic.q1, obs, actions), q(critic.q2, obs, actions)
        return np.mean((q1 - y) ** 2), np.mean((q2 - y) ** 2)

    r1, r2 = reference()
    assert close(qf1, r1) and close(qf2, r2) and loss == pytest.approx(qf1 + qf2, rel=1e-6)
    assert close(q1_mean, q(critic.q1, obs, actions).mean()) and close(q2_mean, q(critic.q2, obs, actions).mean())
    # the fixed tensors tell every term apart: each of these mistakes would fail the checks above
    mistakes = {"no smoothing": dict(smooth=False), "noise not clipped": dict(clip_noise=False),
                "action not clipped": dict(clip_bounds=False), "max of the twins": dict(combine=np.maximum),
                "only Q1'": dict(combine=lambda a, b: a), "sign of the bootstrap": dict(sign=-1.0),
                "online actor as target": dict(actor_t=agent.actor.net),
                "online critic as target": dict(critic_t=critic),
                "terminated ignored": dict(done=np.zeros_like(terminated))}
    for what, change in mistakes.items():
        m1, m2 = reference(**change)
        assert not (close(qf1, m1) and close(qf2, m2)), what

    actor_loss = float(agent.actor_loss_fn()(Tensor(obs)).asnumpy())
    reference_actor = -q(critic.q1, obs, mu(agent.actor.net, obs)).mean()
    assert close(actor_loss, reference_actor)
    for what, wrong in {"sign": -reference_actor, "min of the twins": -np.minimum(
            q(critic.q1, obs, mu(agent.actor.net, obs)), q(critic.q2, obs, mu(agent.actor.net, obs))).mean(),
            "target actor": -q(critic.q1, obs, mu(agent.actor_target, obs)).mean()}.items():
        assert not close(actor_loss, wrong), what
    run.close()


def test_ddpg_critic_and_actor_losses_match_numpy(graph_mode, tmp_path):
    agent, run = tiny(tmp_path, "ddpg")
    perturb(agent.actor_target, agent.critic_target)
    obs, actions, rewards, next_obs, terminated, _ = batch()
    loss, q_mean = (float(x.asnumpy()) for x in agent.critic_loss_fn()(
        *map(Tensor, (obs, actions, rewards, next_obs, terminated))))
    cfg, critic, target = agent.cfg, agent.critic.net, agent.critic_target

    def reference(sign=1.0, actor_t=agent.actor_target, critic_t=target, done=terminated):
        y = rewards + sign * (1 - done) * cfg.gamma * q(critic_t.q, next_obs, mu(actor_t, next_obs))
        return np.mean((q(critic.q, obs, actions) - y) ** 2)

    assert close(loss, reference()) and close(q_mean, q(critic.q, obs, actions).mean())
    for what, change in {"sign of the bootstrap": dict(sign=-1.0),
                         "online actor as target": dict(actor_t=agent.actor.net),
                         "online critic as target": dict(critic_t=critic),
                         "terminated ignored": dict(done=np.zeros_like(terminated))}.items():
        assert not close(loss, reference(**change)), what
    actor_loss = float(agent.actor_loss_fn()(Tensor(obs)).asnumpy())
    reference_actor = -q(critic.q, obs, mu(agent.actor.net, obs)).mean()
    assert close(actor_loss, reference_actor) and not close(actor_loss, -reference_actor)
    assert not close(actor_loss, -q(target.q, obs, mu(agent.actor.net, obs)).mean())
    run.close()


def snap(*cells):
    return [p.asnumpy().copy() for c in cells for p in c.trainable_params()]


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def all_moved(a, b):
    return all(not np.array_equal(x, y) for x, y in zip(a, b))


# TD3 at a policy delay of 3, not only its default 2: a delay hard-coded anywhere fails here
@pytest.mark.parametrize("algo, k", [("td3", 3), ("ddpg", 1)])
def test_each_phase_moves_only_its_own_model_and_targets_move_in_their_update(graph_mode, tmp_path, algo, k):
    from loops.driver import MultiStep
    agent, run = tiny(tmp_path, algo, *(["--policy-frequency", k] if algo == "td3" else []))
    critic_phase, actor_phase = agent.phases()
    assert actor_phase.every == k and actor_phase.repeat == 1 and critic_phase.every == 1
    engine = MultiStep([critic_phase, actor_phase], 1)  # one iteration in one call, as train_rl.py
    tau = agent.cfg.tau
    models = (agent.actor.net,), (agent.critic.net,), (agent.actor_target,), (agent.critic_target,)
    for step in range(2 * k + 1):
        actor0, critic0, actor_t0, critic_t0 = (snap(*m) for m in models)
        engine.run(step)
        actor1, critic1, actor_t1, critic_t1 = (snap(*m) for m in models)
        assert all_moved(critic0, critic1), step  # the critic updates every iteration
        if step % k:  # no actor step, no target update
            assert same(actor0, actor1) and same(actor_t0, actor_t1) and same(critic_t0, critic_t1), step
            continue
        assert all_moved(actor0, actor1), step
        for old_t, new, new_t in zip(actor_t0 + critic_t0, actor1 + critic1, actor_t1 + critic_t1):
            np.testing.assert_allclose(new_t, (1 - tau) * old_t + tau * new, rtol=1e-5, atol=1e-7)
    # the phases alone: the critic's step moves the critic only, the actor's the actor and the targets only
    actor0, critic0, actor_t0, critic_t0 = (snap(*m) for m in models)
    MultiStep([critic_phase], 1).run(0)
    actor1, critic1, actor_t1, critic_t1 = (snap(*m) for m in models)
    assert all_moved(critic0, critic1) and same(actor0 + actor_t0 + critic_t0, actor1 + actor_t1 + critic_t1)
    MultiStep([actor_phase], 1).run(0)
    actor2, critic2, actor_t2, critic_t2 = (snap(*m) for m in models)
    assert same(critic1, critic2) and all_moved(actor1, actor2)
    assert all_moved(actor_t1, actor_t2) and all_moved(critic_t1, critic_t2)
    run.close()


def test_warm_up_is_uniform_then_the_policy_explores_within_the_bounds(graph_mode, tmp_path):
    agent, run = tiny(tmp_path, "td3", "--exploration-noise", 0.5)
    agent.draw_critic(0)
    assert agent.buffer.size == 21 and agent.env_steps == 21  # 20 random steps, then one of the policy
    warm = agent.buffer.arrays["actions"][:20]
    assert warm.min() < -1 and warm.max() > 1  # uniform over [-2, 2]
    obs = agent.obs.copy()
    agent.act(random=False)
    taken = agent.buffer.arrays["actions"][21]
    greedy = agent.deterministic_action(obs)[0]
    assert np.all(np.abs(taken) <= 2) and not np.array_equal(taken, greedy)
    run.close()


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_annealed_exploration_noise_falls_linearly_to_zero(graph_mode, tmp_path, algo):
    """--anneal-noise (the default): the noise's std is --exploration-noise x (1 - update / updates);
    --no-anneal-noise: constant, as CleanRL's."""
    agent, run = tiny(tmp_path, algo, "--exploration-noise", 0.3)
    steps = agent.cfg.steps
    assert [agent.exploration_noise(s) for s in (0, steps // 2, steps)] == pytest.approx([0.3, 0.15, 0.0], abs=1e-3)
    agent.draw_critic(0)  # warm-up, then one step of the policy
    for step, noisy in ((steps - 1, False), (0, True)):  # the last update's step is all but the policy's action
        obs = agent.obs.copy()
        agent.act(random=False, step=step)
        taken = agent.buffer.arrays["actions"][agent.buffer.pos - 1]
        gap = np.abs(taken - agent.deterministic_action(obs)[0]).max()
        assert (gap > 0.05) == noisy, (step, gap)
    run.close()
    agent, run = tiny(tmp_path / "constant", algo, "--exploration-noise", 0.3, "--no-anneal-noise")
    assert agent.exploration_noise(0) == agent.exploration_noise(agent.cfg.steps) == 0.3
    run.close()


@pytest.mark.parametrize("args, message", [
    (["--algo", "td3", "--env", "CartPole-v1"],
     "--algo td3 needs continuous (Box) actions; CartPole-v1 has Discrete(2): use --algo dqn or ppo"),
    (["--algo", "ddpg", "--env", "CartPole-v1"], "--algo ddpg needs continuous (Box) actions"),
    (["--algo", "td3", "--noise-clip", "-0.1"], "--noise-clip must be a finite number >= 0, got -0.1"),
    (["--algo", "td3", "--policy-noise", "nan"], "--policy-noise must be a finite number >= 0, got nan"),
    (["--algo", "td3", "--policy-frequency", "0"], "--policy-frequency must be > 0, got 0"),
    (["--algo", "ddpg", "--exploration-noise", "-1"], "--exploration-noise must be a finite number >= 0, got -1.0"),
    (["--algo", "ddpg", "--tau", "0"], "--tau must be in (0, 1], got 0.0"),
    (["--algo", "td3", "--batch-size", "0"], "--batch-size must be > 0, got 0"),
    (["--algo", "ddpg", "--total-steps", "500", "--learning-starts", "500"], "must exceed --learning-starts"),
    (["--algo", "td3", "--learning-starts", "300", "--buffer-size", "200"], "must not exceed --buffer-size"),
    # flags of other algorithms are unknown: DDPG has no smoothing and no delay
    (["--algo", "ddpg", "--policy-noise", "0.2"], "unrecognized arguments: --policy-noise 0.2"),
    (["--algo", "ddpg", "--policy-frequency", "2"], "unrecognized arguments: --policy-frequency 2"),
    (["--algo", "td3", "--lr-alpha", "0.1"], "unrecognized arguments: --lr-alpha 0.1"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    import train_rl
    assert_refused(train_rl.main, args, capsys, tmp_path / "run", message)


def test_metrics_reevaluates_a_td3_run(tmp_path):
    run = tmp_path / "run"
    run_script("train_rl.py", "--run-dir", run, *TINY_RUNS["td3"], "--ckpt-every", 0)
    trained = json.loads((run / "metrics.json").read_text())
    proc = run_script("-m", "metrics", run)
    m = json.loads((run / "metrics.json").read_text())
    assert m["eval_return_mean"] == trained["eval_return_mean"] and m["eval_episodes"] == 1  # same seeds, same policy
    assert json.loads(proc.stdout)["step"] == trained["updates"] == 240
    assert (run / "episode.png").is_file()
    assert {"losses/qf_loss", "losses/qf1_loss", "losses/qf2_loss", "losses/qf1_values", "losses/qf2_values",
            "losses/actor_loss", "grad_norm/actor", "grad_norm/critic"} <= set(scalar_tags(run).Tags()["scalars"])


# environment steps of the convergence tests: TD3's actor updates every second iteration and starts
# later (measured under heavy load: TD3 6000 steps: last-10 -606, evaluation -422; DDPG 4000 steps:
# last-10 -649, evaluation -92; both seed 0)
SLOW_STEPS = {"td3": 6000, "ddpg": 4000}


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_learns_pendulum_far_above_a_random_policy(tmp_path, algo):
    run = tmp_path / algo
    # a smaller budget than the defaults (docs/rl_td3_ddpg.md has those): 64 hidden units, batch 128
    run_script("train_rl.py", "--algo", algo, "--run-dir", run, "--total-steps", SLOW_STEPS[algo],
               "--learning-starts", 500, "--hidden", 64, "--batch-size", 128, "--eval-episodes", 3)
    m = json.loads((run / "metrics.json").read_text())
    # random actions average about -1200 on Pendulum-v1
    assert m["train_return_last10"] > -900 and m["eval_return_mean"] > -700, m
    assert m["env_steps"] == SLOW_STEPS[algo] and m["updates"] == SLOW_STEPS[algo] - 500
