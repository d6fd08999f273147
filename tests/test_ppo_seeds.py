"""`--num-seeds K` (rl/ppo_seeds.py): K PPO agents in one compiled call are K independent agents. One
call of a group of two equals two single native agents given the group's slices (weights,
environments, noise, minibatches); a group's run resumes bit for bit and leaves each seed its record."""
import json

import numpy as np
import pytest
from mindspore import Tensor

from conftest import assert_same_arrays, checkpoint_arrays, cut_back_copy, run_script, scalar_tags
from loops.checkpoint import read
from loops.driver import MultiStep
from test_ppo_native import ARGS
from test_rl import tiny_agent

K, N, T = 2, 4, 16  # seeds; ARGS' --num-envs and --num-steps


def single_weights(agent):
    """The single agent's trainable weights in the group's layout: Dense (out, in) -> (in, out), bias (1, out)."""
    out = []
    for learner in (agent.actor, agent.critic):
        for p in learner.net.trainable_params():
            a = p.asnumpy()
            out.append(a.T if a.ndim == 2 else a.reshape(1, -1))
    return out


def group_weights(group, k):
    return [p.asnumpy()[k].copy() for learner in (group.actor, group.critic) for p in learner.net.trainable_params()]


def set_single_weights(agent, weights):
    params = [p for learner in (agent.actor, agent.critic) for p in learner.net.trainable_params()]
    for p, w in zip(params, weights):
        p.set_data(Tensor(np.ascontiguousarray(w.T if p.ndim == 2 else w.reshape(p.shape))))


@pytest.mark.parametrize("env_id, elapsed, flags", [
    ("CartPole-v1", [0, 0, 490, 495], []), ("Pendulum-v1", [0, 190, 195, 199], []),
    # a clip by norm small enough to bind in every step: each seed's gradient is clipped by its own norm
    ("CartPole-v1", [0, 0, 490, 495], ["--clip-norm", 0.002])])
def test_seeds_in_one_call_are_independent_single_agents(graph_mode, tmp_path, env_id, elapsed, flags):
    group, run = tiny_agent(tmp_path / "group", "--env", env_id, "--env-backend", "mindspore", "--num-seeds", K, *ARGS,
                            *flags)
    assert type(group).__name__ == "SeedsPPO"
    if not group.discrete:  # distinct log stds: a seed reading another seed's would show
        group.actor.net.log_std.set_data(Tensor(np.array([[[-0.3]], [[0.2]]], np.float32)))
    carry = group.env_carry.asnumpy().copy()
    d = group.env.state_dim
    carry[:, d] = elapsed * K  # environments near their time limit: truncations and their bootstrap happen
    group.env_carry.set_data(Tensor(carry))
    start = [group_weights(group, k) for k in range(K)]
    assert not np.array_equal(start[0][0], start[1][0])  # each seed its own initial weights
    drawn = []
    draw = group.draw_rollout
    group.draw_rollout = lambda step: drawn.append(draw(step)) or drawn[-1]
    MultiStep(group.phases(), 1).run(0)
    group.harvest()
    action_noise, reset_noise = drawn[0]
    size = len(group.batches[0]) // K
    assert group.env_steps == K * N * T
    for k in range(K):
        single, single_run = tiny_agent(tmp_path / f"single{k}", "--env", env_id, "--env-backend", "mindspore", *ARGS,
                                        *flags)
        assert type(single).__name__ == "NativePPO"
        set_single_weights(single, start[k])
        if not single.discrete:
            single.actor.net.log_std.set_data(Tensor(np.array([-0.3, 0.2][k:k + 1], np.float32)))
        lanes = slice(k * N, (k + 1) * N)
        single.env_carry.set_data(Tensor(carry[lanes]))
        # seed k's minibatches: its rows of the group's, as indices into its own T x N rollout
        rows = [b[k * size:(k + 1) * size] for b in group.batches]
        assert all(((r % (K * N)) // N == k).all() for r in rows)  # a minibatch holds its own seed's rows only
        local = [((r // (K * N)) * N + r % N).astype(np.int32) for r in rows]

        def draw_single(step, agent=single, local=local, lanes=lanes):
            agent.harvest()
            agent.batches = local
            agent.rollouts_unread += 1
            return action_noise[:, lanes], reset_noise[:, lanes]
        single.draw_rollout = draw_single
        MultiStep(single.phases(), 1).run(0)
        single.harvest()
        after, expected = group_weights(group, k), single_weights(single)
        assert all(not np.array_equal(a, b) for a, b in zip(start[k], after))  # every weight moved
        for a, b in zip(after, expected):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        np.testing.assert_array_equal(group.env_carry.asnumpy()[lanes], single.env_carry.asnumpy())
        assert single.episodes and group.seed_episodes[k] == single.episodes
        # the group's evaluation steps every seed at once: each seed's returns are its single agent's
        assert group.evaluate_seeds(2)[k] == pytest.approx(single.evaluate(2), rel=1e-4)
        single_run.close()
    run.close()


def test_a_group_resumes_bit_identically_and_writes_each_seeds_record(tmp_path):
    args = ["--env-backend", "mindspore", "--num-seeds", 3, "--num-envs", 2, "--num-steps", 16, "--total-steps", 640,
            "--update-epochs", 2, "--hidden", 16, "--eval-episodes", 2, "--ckpt-every", 1, "--log-every", 5,
            "--keep-ckpts", 0, "--no-progress", "--seed", 7]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    run_script("train_rl.py", "--run-dir", whole, *args)
    cut_back_copy(whole, 10, cut)
    run_script("train_rl.py", "--run-dir", cut, *args, "--resume")
    name = "checkpoints/step_00000020.ckpt"
    a, b = checkpoint_arrays(whole / name), checkpoint_arrays(cut / name)
    assert_same_arrays(a, b)
    assert a["env_carry"].shape[0] == 3 * 2 and a["actor.net.0.weight"].shape[0] == 3
    (_, meta_a), (_, meta_b) = read(str(whole / name)), read(str(cut / name))
    for key in ("episodes", "seed_episodes", "env_steps", "rng"):
        assert meta_a[key] == meta_b[key], key
    assert meta_a["env_steps"] == 3 * 640
    group = json.loads((whole / "metrics.json").read_text())
    seeds = [json.loads((whole / f"seed{s}" / "metrics.json").read_text()) for s in (7, 8, 9)]
    assert [s["seed"] for s in seeds] == [7, 8, 9] and group["seeds"] == seeds
    assert all(s["env_steps"] == 640 and s["train_return_last20"] is not None for s in seeds)
    assert group["eval_return_mean"] == pytest.approx(np.mean([s["eval_return_mean"] for s in seeds]))
    assert group["eval_return_min_seed"] == min(s["eval_return_mean"] for s in seeds)
    assert seeds == [json.loads((cut / f"seed{s}" / "metrics.json").read_text()) for s in (7, 8, 9)]
    for s in range(3):  # each seed's TensorBoard run: its own episodes (x: its own environment steps)
        events = scalar_tags(whole / f"seed{7 + s}").Scalars("charts/episodic_return")
        assert events and max(e.step for e in events) <= 640
        assert [e.value for e in events][-20:] == pytest.approx([r for r, _ in meta_a["seed_episodes"][s]][-20:])
    # python -m metrics evaluates every seed again and keeps the group's and each seed's records in step
    run_script("-m", "metrics", whole, "--episodes", 3)
    group = json.loads((whole / "metrics.json").read_text())
    seeds = [json.loads((whole / f"seed{s}" / "metrics.json").read_text()) for s in (7, 8, 9)]
    assert group["seeds"] == seeds and all(s["eval_episodes"] == 3 and s["env_steps"] == 640 for s in seeds)
    assert group["eval_return_mean"] == pytest.approx(np.mean([s["eval_return_mean"] for s in seeds]))
    assert group["eval_return_min_seed"] == min(s["eval_return_mean"] for s in seeds)
    # a group's first seed names its seed folders: it cannot change on resume, not even with --force
    args[args.index("--seed") + 1] = 8
    proc = run_script("train_rl.py", "--run-dir", whole, *args, "--resume", "--force", "--total-steps", 960, check=False)
    assert proc.returncode == 2 and "not even with --force" in proc.stderr and "seed" in proc.stderr


def test_a_planted_link_at_a_seed_folder_is_refused_before_training(tmp_path):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (run / "seed1").symlink_to(elsewhere)
    proc = run_script("train_rl.py", "--run-dir", run, "--env-backend", "mindspore", "--num-seeds", 2, "--num-envs", 2,
                      "--num-steps", 16, "--total-steps", 320, "--hidden", 16, "--no-progress", check=False)
    assert proc.returncode == 2 and "seed1 is a symbolic link: a run writes only inside its run dir" in proc.stderr
    assert not list(elsewhere.iterdir()) and not list(run.glob("checkpoints/*"))
