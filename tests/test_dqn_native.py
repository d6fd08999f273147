"""DQN with --env-backend mindspore (rl/dqn_native.py): one compiled call per iteration (epsilon-greedy
steps of the native environments, replay inserts, the Q step, the target update) against the same
iteration re-done step by step on the host; iterations per call change nothing; bad input."""
import numpy as np
import pytest
from mindspore import Tensor

from conftest import assert_same_arrays, checkpoint_arrays, run_script, scalar_tags
from loops.checkpoint import read
from loops.driver import MultiStep
from rl.native_envs import NATIVE_ENVS
from test_dqn import perturb
from test_rl import TINY_RUNS, tiny_agent

ARGS = ["--algo", "dqn", "--env-backend", "mindspore", "--hidden", 16, "--batch-size", 8, "--learning-starts", 4,
        "--num-envs", 3, "--train-frequency", 3, "--buffer-size", 32, "--start-e", 0.5, "--end-e", 0.5,
        "--target-network-frequency", 9, "--gamma", 0.9]


def test_one_call_iteration_equals_the_same_steps_on_the_host(graph_mode, tmp_path):
    """The warm-up (2 vector steps of 3 environments) and the first iteration (3 more, then the Q step and
    the target copy) against the same steps re-done one at a time with the host's draws."""
    agent, run = tiny_agent(tmp_path, *ARGS)
    assert type(agent).__name__ == "NativeDQN"
    rng = np.random.default_rng(5)
    perturb(agent.q.net, rng)
    perturb(agent.target, rng)  # the target differs from Q: which network a term uses shows
    d, buffer = agent.env.state_dim, agent.buffer
    carry = agent.env_carry.asnumpy().copy()
    carry[0, :d] = [2.35, 3.0, 0.0, 0.0]  # runs off the track at the first step (in the warm-up): terminated
    carry[1, d:] = [496, 496]  # reaches the 500-step limit at the 4th step (in the iteration): truncated
    agent.env_carry.set_data(Tensor(carry))
    old = rng.normal(size=(32, 2 * d + 3)).astype(np.float32)  # two earlier transitions in the buffer
    buffer.param.set_data(Tensor(old))
    buffer.pos = buffer.size = 2
    q0, t0 = (weights(net) for net in (agent.q.net, agent.target))
    drawn, vector_draws = [], []
    draw, draw_vector = agent.draw_q, agent.draw_vector_step
    agent.draw_q = lambda step: drawn.append(draw(step)) or drawn[-1]
    agent.draw_vector_step = lambda: vector_draws.append(draw_vector()) or vector_draws[-1]
    out = MultiStep(agent.phases(), 1).run(0)
    first_row, decay, epsilon, idx = drawn[0][4:8]
    assert len(vector_draws) == 5 and first_row == 0 and epsilon == 0.5
    assert decay == 0.0  # environment steps 6 -> 15 cross 9: the target copy is due
    explore = np.stack([v[0] for v in vector_draws])
    assert 0 < explore.sum() < explore.size  # both branches of epsilon-greedy are taken

    # every environment step, re-done one at a time: greedy actions of the pre-update Q (numpy)
    replay = buffer.param.asnumpy()
    native = NATIVE_ENVS["CartPole-v1"]()
    c, episodes = Tensor(carry), []
    for t, (explore, random_action, reset_noise, rows) in enumerate(vector_draws):
        obs = native.observe(c[:, :d]).asnumpy()
        action = np.where(explore > 0.5, random_action, forward(q0, obs).argmax(-1)).astype(np.int32)
        c, step = native.step(c, Tensor(action), Tensor(reset_noise))
        step = {k: v.asnumpy() for k, v in step.items()}
        np.testing.assert_array_equal(rows, 2 + 3 * t + np.arange(3))
        stored = replay[rows]
        np.testing.assert_array_equal(stored[:, :d], obs)
        np.testing.assert_array_equal(stored[:, d], action)
        np.testing.assert_array_equal(stored[:, d + 1], step["reward"])
        # the next observation is the one the action led to, also where the episode ended and was reset
        np.testing.assert_allclose(stored[:, d + 2:2 * d + 2], step["final_obs"], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(stored[:, 2 * d + 2], step["terminated"])
        for i in np.flatnonzero(step["terminated"] | step["truncated"]):  # x: the environment steps so far
            episodes.append((3 * (t + 1), float(step["episode_return"][i]), int(step["episode_length"][i])))
    np.testing.assert_allclose(agent.env_carry.asnumpy(), c.asnumpy(), rtol=1e-6, atol=1e-6)
    agent.harvest()
    assert agent.unlogged == episodes and agent.episodes == [e[1:] for e in episodes]
    assert (12, 500.0, 500) in episodes and any(x <= 6 for x, _, _ in episodes)  # in the iteration, in the warm-up
    assert agent.env_steps == 15 and (buffer.pos, buffer.size) == (17, 17)
    assert replay[17:].tolist() == old[17:].tolist()  # nothing else written

    # the Q step: on a batch of the rows after the inserts, Q and the target as they were before it
    assert (idx >= 8).any() and (idx < 17).all()
    b = replay[idx].astype(np.float64)
    obs, a, r, next_obs, term = b[:, :d], b[:, d].astype(int), b[:, d + 1], b[:, d + 2:2 * d + 2], b[:, 2 * d + 2]
    y = r + 0.9 * (1 - term) * forward(t0, next_obs).max(-1)
    td = np.mean((forward(q0, obs)[np.arange(len(a)), a] - y) ** 2)
    assert abs(out["losses/td_loss"] - td) <= 1e-5 * max(1.0, td)
    q1 = weights(agent.q.net)
    assert not any(np.array_equal(x, y) for x, y in zip(q1, q0))  # Q moved
    assert all(np.array_equal(x, y) for x, y in zip(q1, weights(agent.target)))  # then the target copied it


# Acrobot: 6 observations from 4 state numbers, two environments, 500 iterations of 4 steps after 100 of
# warm-up (its episodes last 500 steps at first: 4 end in 1050 steps each)
@pytest.mark.parametrize("env_args", [[], ["--env", "Acrobot-v1", "--num-envs", 2, "--total-steps", 2100]])
def test_iterations_per_call_change_nothing(tmp_path, env_args):
    """--steps-per-call K (K iterations in one compiled call, episodes read back later) trains the same run
    as one call per iteration: weights, replay, environments and episodes (and the steps they are logged
    at) to the bit."""
    args = [*TINY_RUNS["dqn"], "--env-backend", "mindspore", "--ckpt-every", 0, "--keep-ckpts", 0, "--no-progress",
            "--log-every", 1000, *env_args]
    runs = {k: tmp_path / f"k{k}" for k in (1, 7)}  # 300 iterations: 42 calls of 7, then 6 one at a time
    for k, run in runs.items():
        run_script("train_rl.py", "--run-dir", run, *args, "--steps-per-call", k)
    name = f"checkpoints/step_{500 if env_args else 300:08d}.ckpt"
    a, b = (checkpoint_arrays(run / name) for run in runs.values())
    assert_same_arrays(a, b)
    assert {"env_carry", "replay.rows", "q_target.0.weight"} <= set(a)
    (_, meta_a), (_, meta_b) = (read(str(run / name)) for run in runs.values())
    steps = 2100 if env_args else 700
    assert meta_a["episodes"] == meta_b["episodes"] and meta_a["env_steps"] == steps == meta_b["env_steps"]
    assert len(meta_a["episodes"]) >= 2
    if not env_args:  # CartPole: reward 1 per step
        assert all(r == l for r, l in meta_a["episodes"])
    points = [episode_points(run) for run in runs.values()]
    assert points[0] == points[1] and len(points[0]) >= 2  # the same episodes logged at the same steps


def episode_points(run):
    acc = scalar_tags(run)
    return [(e.step, e.value) for e in acc.Scalars("charts/episodic_return")]


def weights(net):
    return [p.asnumpy().copy() for p in net.trainable_params()]


def forward(w, x):
    """float64 forward of a relu_mlp from its weights."""
    w = [v.astype(np.float64) for v in w]
    h = np.maximum(x @ w[0].T + w[1], 0)
    h = np.maximum(h @ w[2].T + w[3], 0)
    return h @ w[4].T + w[5]
