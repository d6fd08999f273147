"""rl/native_envs.py against gymnasium: one step from the very states gymnasium visits (float32 within
rounding, float64 equal), and whole vectorised episodes (autoreset, time limits, episode returns and
lengths) equal to a gymnasium vector env with RecordEpisodeStatistics on the same actions."""
import gymnasium as gym
import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from rl.native_envs import NATIVE_ENVS

STEPS = 3000


def random_actions(env, rng, n):
    if env.actions:
        return rng.integers(0, env.actions, size=n).astype(np.int32)
    # beyond the bounds too: gymnasium clips the torque / force (and MountainCar charges the unclipped one)
    return rng.uniform(1.5 * env.low, 1.5 * env.high, size=(n, env.action_dim)).astype(np.float32)


def gym_transitions(env_id, native, steps, seed=0):
    """(states before, actions, states after, rewards, terminated) of one gymnasium env stepped with
    random actions, reset whenever it ends (so the states are the ones training visits)."""
    env = gym.make(env_id).unwrapped  # no TimeLimit: long Pendulum / MountainCar trajectories
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = random_actions(native, rng, steps)
    before, after, rewards, terminated = [], [], [], []
    for i, a in enumerate(actions):
        if env_id == "MountainCarContinuous-v0" and i % 4:  # push along the velocity: reach the flag
            a = np.abs(a) * (1 if env.state[1] >= 0 else -1)
        actions[i] = a
        before.append(np.array(env.state, np.float64))
        _, r, term, _, _ = env.step(a if native.action_dim else int(a))
        after.append(np.array(env.state, np.float64))
        rewards.append(r)
        terminated.append(term)
        if term:
            env.reset()
    return np.array(before), actions, np.array(after), np.array(rewards), np.array(terminated)


@pytest.mark.parametrize("env_id", sorted(NATIVE_ENVS))
def test_one_step_equals_gymnasium_from_the_same_states(env_id):
    before, actions, after, rewards, terminated = gym_transitions(env_id, NATIVE_ENVS[env_id](), STEPS)
    assert terminated.any() or env_id == "Pendulum-v1"  # the termination branch is exercised
    for dtype, tol in ((ms.float64, 1e-12), (ms.float32, 2e-5)):
        native = NATIVE_ENVS[env_id](dtype)
        states, reward, term = native.dynamics(Tensor(before).astype(dtype), Tensor(actions))
        np.testing.assert_allclose(states.asnumpy(), after, rtol=tol, atol=tol, err_msg=str(dtype))
        np.testing.assert_allclose(reward.asnumpy(), rewards, rtol=tol, atol=tol, err_msg=str(dtype))
        if dtype == ms.float64:  # float32 may round a state across a threshold; float64 may not
            np.testing.assert_array_equal(term.asnumpy(), terminated)
        else:
            assert (term.asnumpy() != terminated).mean() < 1e-3


@pytest.mark.parametrize("env_id", sorted(NATIVE_ENVS))
def test_episodes_autoreset_and_time_limits_equal_gymnasium_vector_env(env_id):
    n, seed = 3, 5
    native = NATIVE_ENVS[env_id](ms.float64)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec(
        env_id, num_envs=n, vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}))
    obs, _ = envs.reset(seed=seed)
    inner = [e.unwrapped for e in envs.env.envs]

    def gym_states():
        return np.array([np.array(e.state, np.float64) for e in inner])
    carry = native.initial(Tensor(gym_states()))

    @ms.jit  # compiled: eager, 1000 steps of ~100 small ops took minutes
    def step(carry, actions, noise):
        return native.step(carry, actions, noise)
    rng = np.random.default_rng(seed)
    episodes = {"native": [], "gym": []}
    truncations = 0
    for _ in range(native.max_steps + 60):  # past one time limit
        actions = random_actions(native, rng, n)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        # the environments that ended were reset inside gymnasium's step: their new states are the noise
        carry, out = step(carry, Tensor(actions), Tensor(gym_states()))
        out = {key: value.asnumpy() for key, value in out.items()}
        np.testing.assert_allclose(out["obs"], obs, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(out["reward"], rewards, rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(out["terminated"], terminated)
        np.testing.assert_array_equal(out["truncated"], truncated)
        done = terminated | truncated
        if done.any():
            np.testing.assert_allclose(out["final_obs"][done], np.stack(info["final_obs"][done]), rtol=1e-6, atol=1e-6)
            mask = info["_episode"]
            episodes["gym"] += zip(info["episode"]["r"][mask].round(6), info["episode"]["l"][mask])
            episodes["native"] += zip(out["episode_return"][done].round(6), out["episode_length"][done])
        truncations += truncated.sum()
    assert episodes["native"] == episodes["gym"] and len(episodes["gym"]) >= n
    if env_id in ("Pendulum-v1", "MountainCarContinuous-v0"):
        assert truncations >= n  # the time limit was reached and reset


def test_a_rollout_in_one_compiled_while_loop_equals_stepping_one_call_at_a_time():
    """The whole rollout in one graph-mode while loop with a Tensor counter (a real loop: a Python
    counter unrolls it). The carry is one tensor: carrying a tuple gave wrong returns silently."""
    native = NATIVE_ENVS["Pendulum-v1"]()
    d = native.state_dim

    @ms.jit
    def rollout(carry, actions, noise):  # the carry plus one column: the summed reward
        packed, t = ms.ops.concat([carry, ms.ops.zeros((carry.shape[0], 1), carry.dtype)], 1), Tensor(0, ms.int32)
        while t < actions.shape[0]:
            carry, out = native.step(packed[:, :d + 2], actions[t], noise[t])
            packed = ms.ops.concat([carry, (packed[:, d + 2] + out["reward"]).reshape(-1, 1)], 1)
            t = t + 1
        return packed

    @ms.jit
    def step(carry, actions, noise):
        return native.step(carry, actions, noise)
    rng = np.random.default_rng(0)
    n, steps = 8, 450  # past two time limits
    noise = Tensor(np.stack([native.reset_noise(rng, n) for _ in range(steps)]))
    actions = Tensor(random_actions(native, rng, steps * n).reshape(steps, n, 1))
    first = native.initial(Tensor(native.reset_noise(np.random.default_rng(1), n)))
    packed = rollout(first, actions, noise).asnumpy()
    carry, total = first, np.zeros(n, np.float32)
    for t in range(steps):
        carry, out = step(carry, actions[t], noise[t])
        total += out["reward"].asnumpy()
    np.testing.assert_allclose(packed[:, :d + 2], carry.asnumpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(packed[:, d + 2], total, rtol=1e-5)
    assert (packed[:, d] == steps % native.max_steps).all()  # elapsed restarted at each time limit
    again = native.reset_noise(np.random.default_rng(0), n)
    np.testing.assert_array_equal(again, noise.asnumpy()[0])  # a function of the run's generator alone


@pytest.mark.parametrize("env_id", sorted(NATIVE_ENVS))
def test_time_limits_and_initial_states_are_gymnasiums(env_id):
    """The random-action episodes above end long before CartPole's or Acrobot's limit: the limits and
    the initial-state ranges are compared with gymnasium's own here."""
    native = NATIVE_ENVS[env_id]()
    assert native.max_steps == gym.spec(env_id).max_episode_steps
    env = gym.make(env_id).unwrapped
    theirs = np.array([np.array(env.reset(seed=s) and env.state, np.float64) for s in range(300)])
    ours = native.reset_noise(np.random.default_rng(0), 300)
    low, high = np.broadcast_to(native.reset_low, ours.shape[1:]), np.broadcast_to(native.reset_high, ours.shape[1:])
    for states in (theirs, ours):  # both fill the same box: inside it, and reaching near each edge
        assert (states >= low - 1e-7).all() and (states <= high + 1e-7).all()
        span = np.maximum(high - low, 1e-12)
        assert ((states.min(0) - low) / span < 0.05).all() and ((high - states.max(0)) / span < 0.05).all()


def test_a_step_that_terminates_at_the_time_limit_is_both_terminated_and_truncated():
    """As gymnasium's TimeLimit: truncated is set on the last allowed step even when it terminates."""
    native = NATIVE_ENVS["CartPole-v1"]()
    limit = native.max_steps
    # env 0 falls (x beyond 2.4) on its 500th step; env 1 falls earlier; env 2 reaches the limit upright
    carry = Tensor(np.array([[2.39, 1.0, 0, 0, limit - 1, 499.0], [2.39, 1.0, 0, 0, 10, 10.0],
                             [0, 0, 0, 0, limit - 1, 499.0]], np.float32))
    noise = Tensor(np.full((3, 4), 0.01, np.float32))
    carry, out = native.step(carry, Tensor(np.ones(3, np.int32)), noise)
    assert out["terminated"].asnumpy().tolist() == [True, True, False]
    assert out["truncated"].asnumpy().tolist() == [True, False, True]
    assert out["episode_length"].asnumpy().tolist() == [limit, 11, limit]
    np.testing.assert_allclose(carry.asnumpy(), np.concatenate([np.full((3, 4), 0.01), np.zeros((3, 2))], 1))
