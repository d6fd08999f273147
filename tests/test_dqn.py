"""DQN (rl/dqn.py): the TD loss against a float64 numpy reference, the target network's updates, the
epsilon schedule, bad input (exact resume: tests/test_rl.py), re-evaluation and a short convergence run."""
import json

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from conftest import assert_refused, run_script, scalar_tags
from test_rl import TINY_RUNS, tiny_agent


def tiny_dqn(tmp_path, *extra):
    return tiny_agent(tmp_path, "--algo", "dqn", "--hidden", 16, "--batch-size", 8, "--learning-starts", 20, *extra)


def q_numpy(net, obs):
    """float64 forward of a relu_mlp Q network from its weights."""
    w = [p.asnumpy().astype(np.float64) for p in net.trainable_params()]
    h = np.maximum(obs @ w[0].T + w[1], 0)
    h = np.maximum(h @ w[2].T + w[3], 0)
    return h @ w[4].T + w[5]


def perturb(cell, rng, scale=0.3):
    for p in cell.trainable_params():
        p.set_data(Tensor((p.asnumpy() + scale * rng.normal(size=p.shape)).astype(np.float32)))


def fixed_batch(seed=3, B=12):
    rng = np.random.default_rng(seed)
    obs, next_obs = (rng.normal(size=(B, 4)).astype(np.float32) for _ in range(2))
    actions = rng.integers(0, 2, (B, 1)).astype(np.float32)
    rewards = rng.normal(scale=2.0, size=B).astype(np.float32)  # TD errors on both sides of Huber's |d| = 1
    terminated = np.array([0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0], np.float32)[:B]
    return obs, actions, rewards, next_obs, terminated


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("loss_name", ["mse", "huber"])
def test_td_loss_and_its_gradient_match_numpy(graph_mode, tmp_path, double, loss_name):
    agent, run = tiny_dqn(tmp_path, "--loss", loss_name, *(["--double"] if double else []), "--gamma", 0.9)
    rng = np.random.default_rng(7)
    perturb(agent.target, rng)  # a target that differs from the online network: which one a term uses shows
    perturb(agent.q.net, rng)
    obs, actions, rewards, next_obs, terminated = batch = fixed_batch()
    gamma, B = 0.9, len(obs)
    q_next_online, q_next_target = q_numpy(agent.q.net, next_obs), q_numpy(agent.target, next_obs)
    plain = q_next_target.max(-1)
    dbl = q_next_target[np.arange(B), q_next_online.argmax(-1)]
    assert np.abs(plain - dbl).max() > 0.05  # the two targets differ on this batch: swapping them fails
    assert np.abs(q_next_online.max(-1) - plain).max() > 0.05  # so do online and target network
    y = rewards + gamma * (1 - terminated) * (dbl if double else plain)
    q_sa = q_numpy(agent.q.net, obs)[np.arange(B), actions[:, 0].astype(int)]
    d = q_sa - y
    if loss_name == "huber":
        assert (np.abs(d) < 1).any() and (np.abs(d) > 1).any()  # both pieces are exercised
        expected, dloss = np.mean(np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5)), np.clip(d, -1, 1) / B
    else:
        expected, dloss = np.mean(d * d), 2 * d / B

    fn = agent.q_loss_fn()
    td, q_mean = (float(x.asnumpy()) for x in fn(*map(Tensor, batch)))
    assert td == pytest.approx(expected, rel=1e-5)
    assert q_mean == pytest.approx(q_sa.mean(), rel=1e-5, abs=1e-6)
    # y is a constant: the gradient of the last layer's bias is the loss's derivative in Q(s, a) alone
    bias = agent.q.net.trainable_params()[-1]
    grad = ms.grad(fn, grad_position=None, weights=[bias], has_aux=True)(*map(Tensor, batch))[0][0].asnumpy()
    expected_grad = np.array([dloss[actions[:, 0] == k].sum() for k in range(2)])
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-4, atol=1e-6)
    run.close()


def weights(cell):
    return [p.asnumpy().copy() for p in cell.trainable_params()]


@pytest.mark.parametrize("tau, group", [(1.0, 1), (0.5, 1), (1.0, 3)])
def test_q_phase_moves_q_and_the_target_only_at_its_interval(graph_mode, tmp_path, tau, group):
    from loops.driver import MultiStep
    agent, run = tiny_dqn(tmp_path, "--train-frequency", 2, "--target-network-frequency", 6, "--tau", tau,
                          "--gradient-steps", group)
    engine = MultiStep(agent.phases(), 1)  # one iteration as train_rl.py runs it: one fused call
    due_count, buffered = 0, []
    for step in range(9):
        q0, t0 = weights(agent.q.net), weights(agent.target)
        before = agent.env_steps if step else 20
        engine.run(step)
        q1, t1 = weights(agent.q.net), weights(agent.target)
        after = agent.env_steps
        buffered.append(agent.buffer.size)
        # --learning-starts, then --train-frequency steps before every --gradient-steps-th iteration
        assert after == 20 + 2 * (step // group + 1) and after - before == (2 if step % group == 0 else 0)
        assert all(not np.array_equal(a, b) for a, b in zip(q0, q1))  # every iteration updates Q
        if after // 6 > before // 6:  # crossed a multiple of --target-network-frequency: the target moves
            due_count += 1
            for old_t, new_q, new_t in zip(t0, q1, t1):
                if tau == 1.0:
                    np.testing.assert_array_equal(new_t, new_q)  # a copy, bit for bit
                else:
                    np.testing.assert_allclose(new_t, (1 - tau) * old_t + tau * new_q, rtol=1e-6, atol=1e-7)
        else:
            for a, b in zip(t0, t1):
                np.testing.assert_array_equal(a, b)
    assert due_count == (3 if group == 1 else 1)  # at env steps 24, 30 and 36; grouped: 24 (steps 22, 24, 26)
    assert buffered == [20 + 2 * (s // group + 1) for s in range(9)]  # each stepped transition stored once
    # acting uses a numpy forward of the weights pulled after each update: the same greedy actions
    agent.pull_weights()
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    np.testing.assert_array_equal(agent.host_greedy(obs), agent.deterministic_action(obs))
    run.close()


def test_epsilon_schedule_is_linear_then_flat():
    from rl.dqn import Config, epsilon_at
    cfg = Config(total_steps=1000, start_e=1.0, end_e=0.05, exploration_fraction=0.5)
    assert epsilon_at(0, cfg) == 1.0
    assert epsilon_at(250, cfg) == pytest.approx(0.525)
    assert epsilon_at(500, cfg) == pytest.approx(0.05)
    assert epsilon_at(900, cfg) == pytest.approx(0.05)


def test_acting_follows_epsilon(graph_mode, tmp_path):
    """epsilon 0: every action is Q's argmax; epsilon 1: uniform (both actions about half the time)."""
    agent, run = tiny_dqn(tmp_path, "--start-e", 0, "--end-e", 0)
    agent.pull_weights()
    for _ in range(30):
        expected = agent.deterministic_action(agent.obs)
        agent.act()
        np.testing.assert_array_equal(agent.buffer.arrays["actions"][agent.buffer.pos - 1], expected.astype(np.float32))
    run.close()
    agent, run = tiny_dqn(tmp_path / "random", "--start-e", 1, "--end-e", 1)
    agent.pull_weights()
    for _ in range(400):
        agent.act()
    assert 0.4 < agent.buffer.arrays["actions"][:400].mean() < 0.6
    run.close()


@pytest.mark.parametrize("args, message", [
    (["--env", "Pendulum-v1"], "--algo dqn needs discrete actions; Pendulum-v1 has Box("),
    (["--exploration-fraction", "0"], "--exploration-fraction must be in (0, 1], got 0.0"),
    (["--exploration-fraction", "1.5"], "--exploration-fraction must be in (0, 1], got 1.5"),
    (["--start-e", "-0.1"], "--start-e must be in [0, 1], got -0.1"),
    (["--end-e", "2"], "--end-e must be in [0, 1], got 2.0"),
    (["--tau", "0"], "--tau must be in (0, 1], got 0.0"),
    (["--train-frequency", "0"], "--train-frequency must be > 0, got 0"),
    (["--gradient-steps", "0"], "--gradient-steps must be > 0, got 0"),
    (["--target-network-frequency", "0"], "--target-network-frequency must be > 0, got 0"),
    (["--batch-size", "0"], "--batch-size must be > 0, got 0"),
    (["--learning-starts", "-1"], "--learning-starts must be >= 0, got -1"),
    (["--loss", "l1"], "invalid choice: 'l1'"),
    (["--total-steps", "1000", "--learning-starts", "1000"], "must exceed --learning-starts (1000) by at least"),
    (["--num-steps", "8"], "unrecognized arguments: --num-steps 8"),  # PPO's flag
    (["--env-backend", "mindspore", "--env", "MountainCar-v0"],
     "--env-backend mindspore has no MountainCar-v0 for DQN; it has Acrobot-v1, CartPole-v1"),
    (["--env-backend", "mindspore", "--buffer-size", "2", "--num-envs", "3"], "--buffer-size (2) must be at least"),
    (["--env-backend", "mindspore", "--gradient-steps", "2"], "--gradient-steps must be 1 with --env-backend mindspore"),
    (["--steps-per-call", "4"], "--steps-per-call needs --env-backend mindspore"),
    (["--env-backend", "mindspore", "--steps-per-call", "0"], "--steps-per-call must be > 0, got 0"),
    (["--lr-actor", "0.1"], "unrecognized arguments: --lr-actor 0.1"),
])
def test_bad_dqn_input_exits_2_and_writes_nothing(tmp_path, capsys, args, message):
    import train_rl
    assert_refused(train_rl.main, ["--algo", "dqn", *args], capsys, tmp_path / "run", message)


def test_metrics_reevaluates_a_dqn_run(tmp_path):
    run = tmp_path / "run"
    run_script("train_rl.py", "--run-dir", run, *TINY_RUNS["dqn"], "--ckpt-every", 0, "--eval-episodes", 2)
    trained = json.loads((run / "metrics.json").read_text())
    proc = run_script("-m", "metrics", run)
    m = json.loads((run / "metrics.json").read_text())
    assert m["eval_return_mean"] == trained["eval_return_mean"] and m["eval_episodes"] == 2  # same seeds, same policy
    assert json.loads(proc.stdout)["step"] == trained["updates"] == 300
    assert (run / "episode.png").exists()
    tags = set(scalar_tags(run).Tags()["scalars"])
    assert {"losses/td_loss", "losses/q_values", "charts/epsilon", "grad_norm/q", "charts/episodic_return"} <= tags


@pytest.mark.slow
def test_dqn_learns_cartpole_far_above_a_random_policy(tmp_path):
    run = tmp_path / "dqn"
    run_script("train_rl.py", "--algo", "dqn", "--run-dir", run, "--total-steps", 8000, "--learning-starts", 500,
               "--exploration-fraction", 0.25, "--eval-episodes", 5, "--no-progress")
    m = json.loads((run / "metrics.json").read_text())
    # a random policy averages ~22 on CartPole-v1; seed 0 gave train 264.0 (last 20), evaluation 244.6 here
    # (about 30 s; 97 s wall on this 2-core VM under a load average of 13)
    assert m["train_return_last20"] > 100 and m["eval_return_mean"] > 100, m
    assert m["env_steps"] == 8000 and m["updates"] == 1875
