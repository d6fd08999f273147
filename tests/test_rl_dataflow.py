"""What each RL model learns from, checked against independent numpy: PPO's rollout is aligned (each
stored log-probability and value recomputes from the stored observation and action), the actor
learns from per-minibatch-normalised GAE advantages and the critic from the returns (gamma != lambda),
a time limit is bootstrapped (PPO) or stored as not terminal with the episode's final observation
(SAC), continuous PPO's Gaussian log-probability and entropy (scipy) with the entropy bonus's sign,
and the replay buffer's ring after it wraps. bench/mutation_check.py plants the bugs these catch."""
import gymnasium as gym
import numpy as np
import pytest
import scipy.stats
from mindspore import Tensor

from rl.ppo import log_prob_and_entropy
from rl.replay import ReplayBuffer
from test_rl import discounted_td_sums, tiny_agent

LIMIT = 5  # steps per episode of the short-limit environments: a rollout of 8 steps crosses one


@pytest.fixture(scope="module", autouse=True)
def short_time_limits():
    """Pendulum-v1 and CartPole-v1 cut at LIMIT steps (gymnasium's TimeLimit: truncated, not terminated)."""
    for name, entry in (("ShortPendulum-v1", "gymnasium.envs.classic_control.pendulum:PendulumEnv"),
                        ("ShortCartPole-v1", "gymnasium.envs.classic_control.cartpole:CartPoleEnv")):
        if name not in gym.registry:
            gym.register(name, entry_point=entry, max_episode_steps=LIMIT)


def record_env_steps(agent):
    """Wrap agent.step_envs: every vector step's (obs before, action, obs, reward, terminated,
    truncated, final observations) goes into the returned list."""
    seen, original = [], agent.step_envs

    def spy(action):
        before = agent.obs.copy()
        obs, reward, terminated, truncated, info = original(action)
        final = [np.array(info["final_obs"][i], np.float32) if (terminated | truncated)[i] else None
                 for i in range(len(obs))]
        seen.append(dict(before=before, action=np.array(action), obs=obs.copy(), reward=reward.copy(),
                         terminated=terminated.copy(), truncated=truncated.copy(), final=final))
        return obs, reward, terminated, truncated, info
    agent.step_envs = spy
    return seen


def ppo(tmp_path, env, *extra):
    return tiny_agent(tmp_path, "--env", env, "--num-envs", 2, "--num-steps", 8, *extra)


def numpy_values(agent, obs):
    return agent.critic.net(Tensor(np.asarray(obs, np.float32))).asnumpy().reshape(-1).astype(np.float64)


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_rollout_is_aligned(graph_mode, tmp_path, env):
    """Row t holds s_t, a_t (the action the environment ran), log pi(a_t | s_t) and V(s_t)."""
    agent, run = ppo(tmp_path, env)
    seen = record_env_steps(agent)
    agent.collect()
    buf, actor = agent.buffer, agent.actor.net
    for t, step in enumerate(seen):
        np.testing.assert_array_equal(buf.obs[t], step["before"])
        ran = buf.actions[t] if agent.discrete else np.clip(buf.actions[t], *agent.bounds)
        np.testing.assert_array_equal(ran, step["action"])
        logp, _ = log_prob_and_entropy(actor(Tensor(buf.obs[t])), actor.log_std, Tensor(buf.actions[t]), agent.discrete)
        np.testing.assert_allclose(buf.logprobs[t], logp.asnumpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(buf.values[t], numpy_values(agent, buf.obs[t]), rtol=1e-5, atol=1e-6)
        if t + 1 < len(seen):
            np.testing.assert_array_equal(seen[t + 1]["before"], step["obs"])
    run.close()


def reference_gae(seen, values, next_value, gamma, lam, value_of):
    """Advantages and returns from the raw environment steps: a truncated step's reward gains
    gamma V(final observation); an episode's end (terminated or truncated) cuts the sum
    A_t = sum_l (gamma lam)^l delta_{t+l}."""
    rewards = np.array([s["reward"] for s in seen], np.float64)
    ends = np.array([s["terminated"] | s["truncated"] for s in seen])
    for t, s in enumerate(seen):
        for i in np.flatnonzero(s["truncated"] & ~s["terminated"]):
            rewards[t, i] += gamma * value_of([s["final"][i]])[0]
    following = np.concatenate([values[1:], next_value[None]])
    delta = rewards + gamma * following * ~ends - values
    adv = discounted_td_sums(delta, ends, gamma, lam)
    return rewards, ends, adv, adv + values


def test_ppo_actor_learns_from_normalised_advantages_and_critic_from_returns(graph_mode, tmp_path):
    agent, run = ppo(tmp_path, "ShortPendulum-v1", "--gamma", 0.9, "--gae-lambda", 0.5, "--num-minibatches", 2)
    seen = record_env_steps(agent)
    first = agent.draw_actor(0)  # the iteration's first draw collects the rollout
    buf = agent.buffer
    assert any(s["truncated"].any() for s in seen)  # the rollout crosses a time limit
    values = numpy_values(agent, buf.obs.reshape(-1, agent.obs_dim)).reshape(buf.values.shape)
    rewards, ends, adv, returns = reference_gae(seen, values, numpy_values(agent, agent.obs), 0.9, 0.5,
                                                lambda o: numpy_values(agent, o))
    np.testing.assert_allclose(buf.rewards, rewards, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(buf.dones, ends)
    np.testing.assert_allclose(agent.advantages, adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(agent.returns, returns, rtol=1e-4, atol=1e-4)
    flat_obs, flat_adv, flat_ret = buf.obs.reshape(-1, agent.obs_dim), adv.reshape(-1), returns.reshape(-1)
    for i in range(2):  # both minibatches of the first epoch
        rows = agent.batches[i]
        obs, actions, old_logp, actor_adv = (first if i == 0 else agent.draw_actor(i))[:4]
        expected = (flat_adv[rows] - flat_adv[rows].mean()) / (flat_adv[rows].std() + 1e-8)
        np.testing.assert_array_equal(obs, flat_obs[rows])
        np.testing.assert_allclose(actor_adv, expected, rtol=1e-3, atol=1e-4)
        critic_obs, critic_returns = agent.draw_critic(i)[:2]
        np.testing.assert_array_equal(critic_obs, flat_obs[rows])
        np.testing.assert_allclose(critic_returns, flat_ret[rows], rtol=1e-4, atol=1e-4)
    run.close()


def test_sac_stores_a_time_limit_as_not_terminal_with_the_final_observation(graph_mode, tmp_path):
    agent, run = tiny_agent(tmp_path, "--algo", "sac", "--env", "ShortPendulum-v1", "--num-envs", 2,
                            "--hidden", 16, "--batch-size", 8, "--learning-starts", 4)
    seen = record_env_steps(agent)
    for i in range(7):
        agent.act(random=i < 4)  # random warm-up, then the policy: both paths store the same way
    arrays = {k: a[:2 * len(seen)].reshape((len(seen), 2) + a.shape[1:]) for k, a in agent.buffer.arrays.items()}
    assert any(s["truncated"].any() for s in seen)
    for t, s in enumerate(seen):
        np.testing.assert_array_equal(arrays["obs"][t], s["before"])
        np.testing.assert_array_equal(arrays["actions"][t], s["action"])
        np.testing.assert_array_equal(arrays["rewards"][t], s["reward"])
        np.testing.assert_array_equal(arrays["terminated"][t], s["terminated"])  # truncation is not terminal
        for i in range(2):
            expected = s["final"][i] if s["final"][i] is not None else s["obs"][i]
            np.testing.assert_array_equal(arrays["next_obs"][t, i], expected)
            if s["truncated"][i]:  # the next episode's first observation is not this one's last
                assert not np.array_equal(arrays["next_obs"][t, i], s["obs"][i])
    assert not arrays["terminated"].any()  # Pendulum never terminates
    run.close()


def test_continuous_ppo_log_prob_entropy_and_entropy_bonus(graph_mode, tmp_path):
    rng = np.random.default_rng(3)
    mean, log_std = rng.normal(size=(5, 2)), np.array([-0.4, 0.3])
    actions = rng.normal(size=(5, 2))
    logp, entropy = log_prob_and_entropy(*(Tensor(x.astype(np.float32)) for x in (mean, log_std, actions)), False)
    scale = np.exp(log_std)
    np.testing.assert_allclose(logp.asnumpy(), scipy.stats.norm.logpdf(actions, mean, scale).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(entropy.asnumpy(), np.full(5, scipy.stats.norm.entropy(scale=scale).sum()), rtol=1e-5)

    agent, run = ppo(tmp_path, "Pendulum-v1", "--ent-coef", 0.1)
    actor = agent.actor.net
    actor.log_std.set_data(Tensor(np.array([0.4], np.float32)))
    obs = rng.normal(size=(6, 3)).astype(np.float32)
    acts = rng.normal(size=(6, 1)).astype(np.float32)
    old_logp = rng.normal(-1.5, 0.3, 6).astype(np.float32)
    adv = rng.normal(size=6).astype(np.float32)
    loss, _, _, ent = (float(x.asnumpy()) for x in agent.actor_loss_fn()(*map(Tensor, (obs, acts, old_logp, adv))))
    mu = actor(Tensor(obs)).asnumpy().astype(np.float64)
    ratio = np.exp(scipy.stats.norm.logpdf(acts, mu, np.exp(0.4)).sum(-1) - old_logp)
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv)
    h = scipy.stats.norm.entropy(scale=np.exp(0.4))
    assert ent == pytest.approx(h, rel=1e-5)
    assert loss == pytest.approx(-surrogate.mean() - 0.1 * h, rel=1e-4)  # the bonus lowers the loss
    run.close()


def test_replay_buffer_ring_after_it_wraps_and_every_row_can_be_drawn():
    buf = ReplayBuffer(5, obs_dim=1, act_dim=1)

    def add(first):  # two rows, numbered by insertion order, in every array
        k = np.array([first, first + 1], np.float32)
        buf.add(obs=k[:, None], actions=-k[:, None], rewards=10 * k, next_obs=k[:, None] + 0.5, terminated=k % 2)
    add(0)
    rng = np.random.default_rng(0)
    assert (buf.pos, buf.size) == (2, 2)
    assert set(buf.sample(rng, 200)[0][:, 0]) == {0, 1}  # only filled rows, each of them
    for first in (2, 4, 6):  # 8 insertions into 5 rows: 5, 6, 7 overwrote 0, 1, 2
        add(first)
    assert (buf.pos, buf.size) == (3, 5)
    expected = np.array([5, 6, 7, 3, 4], np.float32)
    np.testing.assert_array_equal(buf.arrays["obs"][:, 0], expected)
    np.testing.assert_array_equal(buf.arrays["actions"][:, 0], -expected)
    np.testing.assert_array_equal(buf.arrays["rewards"], 10 * expected)
    np.testing.assert_array_equal(buf.arrays["next_obs"][:, 0], expected + 0.5)
    np.testing.assert_array_equal(buf.arrays["terminated"], expected % 2)
    obs, actions, rewards, next_obs, terminated = buf.sample(rng, 500)
    assert set(obs[:, 0]) == set(expected)  # every stored row is drawn, the newest included
    np.testing.assert_array_equal(actions, -obs)  # a drawn row's fields belong together
    np.testing.assert_array_equal(rewards, 10 * obs[:, 0])
    np.testing.assert_array_equal(terminated, obs[:, 0] % 2)
