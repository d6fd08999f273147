"""train_rl.py: GAE, PPO's clipped objective and SAC's losses against numpy references, each update
moves only its own model, both algorithms learn in a short budget, resume (PPO's after a SIGKILL;
SAC's, TD3's and DQN's from a mid-run checkpoint) is bit-identical (environments included),
`python -m metrics` re-evaluates a run, bad input exits 2."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from mindspore import Tensor

import loops
from conftest import (ROOT, assert_refused, assert_same_arrays, checkpoint_arrays, cut_back_copy, error_lines,
                      run_script, scalar_tags)
from loops.checkpoint import list_checkpoints, read
from loops.driver import host_tensor
from rl import ALGORITHMS
from rl.storage import gae


def test_gae_matches_the_sum_of_discounted_td_errors():
    """A_t = sum_l (gamma lam)^l delta_{t+l}, the sum cut at the first step that ends an episode."""
    rng = np.random.default_rng(0)
    T, N, gamma, lam = 12, 3, 0.97, 0.9
    rewards, values = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    dones, next_value = (rng.uniform(size=(T, N)) < 0.2).astype(float), rng.normal(size=N)
    adv, ret = gae(rewards, values, dones, next_value, gamma, lam)
    following = np.concatenate([values[1:], next_value[None]])
    delta = rewards + gamma * following * (1 - dones) - values
    np.testing.assert_allclose(adv, discounted_td_sums(delta, dones, gamma, lam), rtol=0, atol=1e-9)
    np.testing.assert_allclose(ret, adv + values)


def discounted_td_sums(delta, ends, gamma, lam):
    """A_t = sum_l (gamma lam)^l delta_{t+l}, each sum cut after the first step that ends an episode
    (the definition GAE's recursion computes), for (T, N) arrays."""
    T, N = delta.shape
    adv = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            weight = 1.0
            for k in range(t, T):
                adv[t, n] += weight * delta[k, n]
                if ends[k, n]:
                    break
                weight *= gamma * lam
    return adv


def tiny_agent(tmp_path, *args):
    """The agent train_rl.py builds for these flags: its algorithm's Config and AGENT from rl/'s registry."""
    from loops.config import choose_recipe, parse_config
    from loops.run import Run
    from rl import ALGORITHMS, algorithm
    argv = [*map(str, args), "--run-dir", str(tmp_path / "run")]
    recipe = algorithm(choose_recipe(argv, "algo", ALGORITHMS, "ppo"))
    if "--env-backend" not in argv and "env_backend" in recipe.Config.__dataclass_fields__:
        argv += ["--env-backend", "gymnasium"]  # the host path unless a test asks for the graph (PPO's auto: mindspore)
    cfg = parse_config(recipe.Config, argv, "")
    run = Run(cfg, recipe=recipe.__name__)
    return recipe.AGENT(cfg, run), run


def tiny_ppo(tmp_path, env="CartPole-v1"):
    return tiny_agent(tmp_path, "--env", env, "--num-envs", 2, "--num-steps", 8)


def tiny_sac(tmp_path, *extra):
    return tiny_agent(tmp_path, "--algo", "sac", "--hidden", 16, "--batch-size", 8, "--learning-starts", 20, *extra)


def test_clipped_objective_matches_numpy(graph_mode, tmp_path):
    agent, run = tiny_ppo(tmp_path)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(6, 4)).astype(np.float32)
    actions = rng.integers(0, 2, 6).astype(np.int32)
    old_logp = np.log(rng.uniform(0.3, 0.7, 6)).astype(np.float32)
    adv = rng.normal(size=6).astype(np.float32)
    loss, kl, clipfrac, entropy = (float(x.asnumpy()) for x in agent.actor_loss_fn()(
        *map(Tensor.from_numpy, (obs, actions, old_logp, adv))))
    logits = agent.actor.net(Tensor.from_numpy(obs)).asnumpy().astype(np.float64)
    logp_all = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ratio = np.exp(logp_all[np.arange(6), actions] - old_logp)
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv)
    assert loss == pytest.approx(-surrogate.mean(), rel=1e-5)  # --ent-coef 0 by default
    assert clipfrac == pytest.approx(np.mean(np.abs(ratio - 1) > 0.2))
    assert kl == pytest.approx(np.mean(ratio - 1 - np.log(ratio)), rel=1e-4)
    assert entropy == pytest.approx(-(np.exp(logp_all) * logp_all).sum(-1).mean(), rel=1e-5)
    run.close()


def test_each_update_moves_only_its_own_model(graph_mode, tmp_path):
    agent, run = tiny_ppo(tmp_path)

    def weights(learner):
        return [p.asnumpy().copy() for p in learner.net.trainable_params()]
    a0, c0 = weights(agent.actor), weights(agent.critic)
    agent.actor_step(*map(host_tensor, agent.draw_actor(0)))
    a1, c1 = weights(agent.actor), weights(agent.critic)
    assert any(not np.array_equal(x, y) for x, y in zip(a0, a1)) and all(np.array_equal(x, y) for x, y in zip(c0, c1))
    agent.critic_step(*map(host_tensor, agent.draw_critic(0)))
    a2, c2 = weights(agent.actor), weights(agent.critic)
    assert all(np.array_equal(x, y) for x, y in zip(a1, a2)) and any(not np.array_equal(x, y) for x, y in zip(c1, c2))
    run.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["gymnasium", "mindspore"])  # the host loop, and the default (in the graph)
def test_ppo_learns_cartpole_far_above_a_random_policy(tmp_path, backend):
    run = tmp_path / "ppo"
    run_script("train_rl.py", "--run-dir", run, "--total-steps", 20000, "--log-every", 5, "--env-backend", backend)
    m = json.loads((run / "metrics.json").read_text())
    # a random policy averages ~22 on CartPole-v1; 20k steps of PPO gave 309 here (seed 0)
    assert m["eval_return_mean"] > 100 and m["train_return_last20"] > 60, m
    assert m["env_steps"] == 20000 // 256 * 256 and m["eval_episodes"] == 10
    events = scalar_tags(run)
    tags = set(events.Tags()["scalars"])
    assert {"charts/episodic_return", "charts/episodic_return_mean20", "charts/SPS", "losses/actor", "losses/critic",
            "losses/approx_kl", "losses/clipfrac", "losses/entropy", "grad_norm/actor", "grad_norm/critic"} <= tags
    # every finished episode at its environment step, as CleanRL logs them: on CartPole (reward 1 per
    # step) a return equals its length, the x-values are vector steps of 8 environments, and the
    # episodes add up to no more than the steps taken
    returns, lengths = events.Scalars("charts/episodic_return"), events.Scalars("charts/episodic_length")
    assert [(e.step, e.value) for e in returns] == [(e.step, e.value) for e in lengths]
    steps = [e.step for e in returns]
    assert steps == sorted(steps) and all(x % 8 == 0 for x in steps) and 0 < steps[-1] <= m["env_steps"]
    assert len(returns) > 20000 // 500 and sum(e.value for e in returns) <= m["env_steps"]
    assert m["train_return_last20"] == pytest.approx(np.mean([e.value for e in returns[-20:]]), rel=1e-6)


@pytest.mark.slow
def test_sac_learns_pendulum_far_above_a_random_policy(tmp_path):
    run = tmp_path / "sac"
    # 64 hidden units instead of 256 and learning from step 500: a third less time, still learns
    run_script("train_rl.py", "--algo", "sac", "--run-dir", run, "--total-steps", 5000, "--eval-episodes", 5,
               "--hidden", 64, "--learning-starts", 500)
    m = json.loads((run / "metrics.json").read_text())
    # random actions average about -1200 on Pendulum-v1; these 5k steps gave -100 here (seed 0,
    # 2026-12-06; -103 with the earlier annealed schedule)
    assert m["eval_return_mean"] > -400, m
    assert m["env_steps"] == 5000 and m["updates"] == 4500
    tags = set(scalar_tags(run).Tags()["scalars"])
    assert {"losses/qf1", "losses/qf2", "losses/actor", "losses/alpha", "charts/alpha", "grad_norm/alpha",
            "charts/episodic_return"} <= tags


def test_continuous_actions_train(tmp_path):
    run = tmp_path / "pendulum"
    run_script("train_rl.py", "--run-dir", run, "--env", "Pendulum-v1", "--steps", 2, "--num-envs", 2,
               "--num-steps", 100, "--update-epochs", 2, "--eval-episodes", 1, "--log-every", 1)
    m = json.loads((run / "metrics.json").read_text())
    assert m["env_steps"] == 400 and np.isfinite(m["eval_return_mean"]) and m["eval_return_mean"] < 0


@pytest.mark.parametrize("args, message", [
    (["--env", "NoSuchEnv-v0"], "--env NoSuchEnv-v0: Environment `NoSuchEnv` doesn't exist"),
    (["--env", "FrozenLake-v1"], "observations must be a flat Box"),
    (["--algo", "sac", "--env", "CartPole-v1"], "--algo sac needs continuous (Box) actions"),
    # another algorithm's flags are unknown flags: this algorithm's config does not have them
    (["--algo", "sac", "--update-epochs", "3"], "unrecognized arguments: --update-epochs 3"),
    (["--lr-alpha", "0.1"], "unrecognized arguments: --lr-alpha 0.1"),
    (["--algo", "sac", "--num-steps", "3"], "unrecognized arguments: --num-steps 3; did you mean --steps?"),
    (["--algo", "sacc"], f"invalid choice: 'sacc' (choose from {', '.join(map(repr, sorted(ALGORITHMS)))}); "
                         "did you mean 'sac'?"),
    (["--num-envs", "0"], "--num-envs must be > 0, got 0"),  # 0 is not "auto"
    (["--alg", "sac"], "unrecognized arguments: --alg sac; did you mean --algo?"),  # no abbreviations: no recipe mix-up
    (["--env", ""], "--env must name a gymnasium environment"),  # refused before gymnasium sees it
    (["--algo", "sac", "--total-steps", "500", "--learning-starts", "500"], "must exceed --learning-starts"),
    (["--algo", "sac", "--learning-starts", "300", "--buffer-size", "200"], "must not exceed --buffer-size"),
    (["--algo", "sac", "--alpha", "0.2", "--lr-alpha", "0.1"], "--lr-alpha needs a learned temperature"),
    (["--num-minibatches", "3"], "must divide --num-envs x --num-steps"),
    # less than one rollout used to run a whole 256-step one without a word
    (["--total-steps", "10"], "--total-steps 10 is less than one ppo iteration, which takes 256 environment steps"),
    (["--total-steps", "10", "--num-envs", "2", "--num-steps", "7"], "takes 14 environment steps"),
    (["--env-backend", "mindspore", "--env", "MountainCar-v0"],
     "--env-backend mindspore has no MountainCar-v0; it has Acrobot-v1, CartPole-v1, MountainCarContinuous-v0, "
     "Pendulum-v1 (or use --env-backend gymnasium)"),
    (["--env-backend", "jax"], "invalid choice: 'jax'"),
    (["--algo", "sac", "--env-backend", "mindspore"], "unrecognized arguments: --env-backend mindspore"),
    (["--num-seeds", "2", "--env-backend", "gymnasium"],
     "--num-seeds 2 trains the seeds in one compiled call: it needs --env-backend mindspore"),
    (["--num-seeds", "2", "--env", "MountainCar-v0"],  # auto picks gymnasium where no native version exists
     "--num-seeds 2 trains the seeds in one compiled call: it needs --env-backend mindspore"),
    (["--num-seeds", "2", "--env-backend", "mindspore", "--loss-scale-critic", "static", "--skip-nonfinite"],
     "--num-seeds 2 does not take gradient transforms that see all seeds' gradients at once (one skip, "
     "one loss scale for all): drop --loss-scale (critic), --skip-nonfinite (actor, critic)"),
    (["--num-seeds", "2", "--env-backend", "mindspore", "--seed", "4294967295"],
     "--seed + --num-seeds - 1 must be in [0, 4294967295], got 4294967296"),
    (["--num-seeds", "0", "--env-backend", "mindspore"], "--num-seeds must be > 0, got 0"),
])
def test_bad_rl_input_exits_2_and_writes_nothing(tmp_path, capsys, args, message):
    import train_rl
    assert_refused(train_rl.main, args, capsys, tmp_path / "run", message)


def squashed_sample(actor, obs, noise):
    """numpy (float64) reference of the squashed Gaussian: action, log pi, from the actor's raw layers."""
    h = actor.trunk(Tensor(obs))
    mean, raw = actor.mean(h).asnumpy().astype(np.float64), actor.log_std(h).asnumpy().astype(np.float64)
    log_std = -5 + 0.5 * 7 * (np.tanh(raw) + 1)
    x = mean + np.exp(log_std) * noise
    scale, bias = actor.scale.asnumpy(), actor.bias.asnumpy()
    normal = -0.5 * noise ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    logp = (normal - np.log(scale * (1 - np.tanh(x) ** 2))).sum(-1)
    return np.tanh(x) * scale + bias, logp


def test_sac_losses_match_numpy(graph_mode, tmp_path):
    agent, run = tiny_sac(tmp_path)
    rng = np.random.default_rng(2)
    B = 6
    obs, next_obs = (rng.normal(size=(B, 3)).astype(np.float32) for _ in range(2))
    actions = rng.uniform(-2, 2, (B, 1)).astype(np.float32)
    rewards, terminated = rng.normal(size=B).astype(np.float32), np.array([0, 1, 0, 0, 1, 0], np.float32)
    noise = rng.normal(size=(B, 1)).astype(np.float32)
    agent.alpha.net.value.set_data(Tensor(np.array([-0.7], np.float32)))
    alpha, gamma = np.exp(-0.7), agent.cfg.gamma
    for p in agent.target.get_parameters():  # targets that differ from the critics, as they do after a step
        p.set_data(Tensor(p.asnumpy() + rng.normal(0, 0.2, p.shape).astype(np.float32)))
    assert agent.target_entropy == -1.0  # -dim(A): Pendulum's action is one number

    def q(net, o, a):
        return [x.asnumpy().astype(np.float64) for x in net(Tensor(o), Tensor(a.astype(np.float32)))]

    loss, qf1, qf2, _ = (float(x.asnumpy()) for x in agent.critic_loss_fn()(
        *map(Tensor, (obs, actions, rewards, next_obs, terminated, noise))))
    next_a, next_logp = squashed_sample(agent.actor.net, next_obs, noise)
    t1, t2 = q(agent.target, next_obs, next_a)
    y = rewards + (1 - terminated) * gamma * (np.minimum(t1, t2) - alpha * next_logp)
    q1, q2 = q(agent.critic.net, obs, actions)
    assert qf1 == pytest.approx(np.mean((q1 - y) ** 2), rel=1e-4) and qf2 == pytest.approx(np.mean((q2 - y) ** 2), rel=1e-4)
    assert loss == pytest.approx(qf1 + qf2, rel=1e-6)

    actor_loss, entropy = (float(x.asnumpy()) for x in agent.actor_loss_fn()(Tensor(obs), Tensor(noise)))
    a, logp = squashed_sample(agent.actor.net, obs, noise)
    q1, q2 = q(agent.critic.net, obs, a)
    assert actor_loss == pytest.approx(np.mean(alpha * logp - np.minimum(q1, q2)), rel=1e-4)
    assert entropy == pytest.approx(-logp.mean(), rel=1e-4)
    alpha_loss, alpha_out = (float(x.asnumpy()) for x in agent.alpha_loss_fn()(Tensor(obs), Tensor(noise)))
    assert alpha_out == pytest.approx(alpha, rel=1e-6)
    assert alpha_loss == pytest.approx(-np.mean(alpha * (logp + agent.target_entropy)), rel=1e-4)
    # far in the tails tanh rounds to +-1 (MindSpore's CPU tanh even overshoots 1): log pi stays finite
    big = np.full((2, 1), 30.0, np.float32)
    assert np.isfinite(agent.actor.net(Tensor(obs[:2] * 1e3), Tensor(big))[1].asnumpy()).all()
    run.close()


def test_sac_updates_touch_only_their_own_model_and_polyak_moves_the_targets(graph_mode, tmp_path):
    from loops.driver import MultiStep
    agent, run = tiny_sac(tmp_path)

    def snap(*cells):
        return [p.asnumpy().copy() for c in cells for p in c.trainable_params()]
    critic_body, actor_body = (MultiStep([phase], 1) for phase in agent.phases())
    before = snap(agent.actor.net), snap(agent.critic.net), snap(agent.alpha.net), snap(agent.target)
    critic_body.run(1)  # iteration 1: the critic's update (and the Polyak step) only
    after = snap(agent.actor.net), snap(agent.critic.net), snap(agent.alpha.net), snap(agent.target)
    assert all(np.array_equal(x, y) for x, y in zip(before[0] + before[2], after[0] + after[2]))
    assert all(not np.array_equal(x, y) for x, y in zip(before[1], after[1]))
    tau = agent.cfg.tau
    for old_t, new_c, new_t in zip(before[3], after[1], after[3]):
        np.testing.assert_allclose(new_t, (1 - tau) * old_t + tau * new_c, rtol=1e-5, atol=1e-7)
    agent.batch = agent.buffer.sample(agent.rng, agent.cfg.batch_size)
    actor_body.run(0)  # the actor's and the temperature's updates only
    last = snap(agent.actor.net), snap(agent.critic.net), snap(agent.alpha.net), snap(agent.target)
    assert all(np.array_equal(x, y) for x, y in zip(after[1] + after[3], last[1] + last[3]))
    assert any(not np.array_equal(x, y) for x, y in zip(after[0], last[0])) and not np.array_equal(after[2][0], last[2][0])
    run.close()


def test_environment_state_round_trips_through_json(tmp_path):
    from rl.envs import env_state, make_envs, set_env_state
    for env_id in ("CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCarContinuous-v0"):
        a, _ = make_envs(env_id, 2, 0)
        rng = np.random.default_rng(0)
        space = a.single_action_space

        def act():
            return rng.integers(0, space.n, 2) if hasattr(space, "n") else rng.uniform(space.low, space.high, (2,) + space.shape).astype(np.float32)
        for _ in range(120):
            a.step(act())
        b, _ = make_envs(env_id, 2, 123)  # other seeds, other states
        set_env_state(b, json.loads(json.dumps(env_state(a))))
        for _ in range(300):  # crosses episode ends: resets draw from the restored np_random
            x = act()
            ra, rb = a.step(x), b.step(x)
            for u, v in zip(ra[:4], rb[:4]):
                np.testing.assert_array_equal(u, v, err_msg=env_id)
            assert np.array_equal(ra[4].get("_episode", [False] * 2), rb[4].get("_episode", [False] * 2))
            if "_episode" in ra[4]:
                np.testing.assert_array_equal(ra[4]["episode"]["r"], rb[4]["episode"]["r"])


TINY_RUNS = {
    "ppo": ["--num-envs", 2, "--num-steps", 16, "--total-steps", 1280, "--update-epochs", 2, "--hidden", 16,
            "--eval-episodes", 2, "--ckpt-every", 1, "--log-every", 5, "--env-backend", "gymnasium"],
    "sac": ["--algo", "sac", "--total-steps", 260, "--learning-starts", 20, "--hidden", 16, "--batch-size", 16,
            "--buffer-size", 200, "--eval-episodes", 1, "--ckpt-every", 5, "--log-every", 20],  # 240 iterations
    "td3": ["--algo", "td3", "--total-steps", 260, "--learning-starts", 20, "--hidden", 16, "--batch-size", 16,
            "--buffer-size", 200, "--eval-episodes", 1, "--ckpt-every", 5, "--log-every", 20],  # 240 iterations
    "dqn": ["--algo", "dqn", "--total-steps", 700, "--learning-starts", 100, "--train-frequency", 2, "--hidden", 16,
            "--batch-size", 16, "--buffer-size", 200, "--target-network-frequency", 20, "--eval-episodes", 1,
            "--ckpt-every", 5, "--log-every", 20],  # 300 iterations
}
# DQN with the environments and replay in the graph, 3 iterations per call (checkpoints after the calls
# that cross multiples of 5: 96, not 95, is one)
TINY_RUNS["dqn-native"] = TINY_RUNS["dqn"] + ["--env-backend", "mindspore", "--steps-per-call", 3]


def latest_step(run):
    paths = list_checkpoints(run)
    return int(os.path.basename(paths[-1])[5:13]) if paths else -1


def test_the_backend_is_auto_and_a_run_resumes_only_on_its_own(tmp_path):
    """--env-backend left out: mindspore where a native environment exists, else gymnasium (config.json
    holds the choice); a run started on gymnasium, resumed without the flag, is refused with the words
    that continue it."""
    native, host = tmp_path / "native", tmp_path / "host"
    tiny = ["--num-envs", 2, "--num-steps", 8, "--update-epochs", 1, "--hidden", 8, "--eval-episodes", 1, "--steps", 1]
    run_script("train_rl.py", "--run-dir", native, *tiny)
    assert json.loads((native / "config.json").read_text())["env_backend"] == "mindspore"
    assert "env_carry" in checkpoint_arrays(native / "checkpoints" / "step_00000001.ckpt")
    run_script("train_rl.py", "--run-dir", host, *tiny, "--env-backend", "gymnasium")
    proc = run_script("train_rl.py", "--run-dir", host, *tiny[:-1], 2, "--resume", check=False)
    assert proc.returncode == 2 and ("env_backend: 'gymnasium' -> 'mindspore' cannot change on resume" in proc.stderr
                                     and proc.stderr.rstrip().endswith("resume with --env-backend gymnasium")), proc.stderr
    run_script("train_rl.py", "--run-dir", host, *tiny[:-1], 2, "--resume", "--env-backend", "gymnasium")
    # a run that differs in more than the backend (e.g. started before --clip-norm 0.5 was PPO's default):
    # the refusal names every flag that continues it, not only the backend, so one more try is enough
    old = tmp_path / "old"
    run_script("train_rl.py", "--run-dir", old, *tiny, "--env-backend", "gymnasium", "--clip-norm", 0)
    proc = run_script("train_rl.py", "--run-dir", old, *tiny[:-1], 2, "--resume", check=False)
    assert proc.returncode == 2 and proc.stderr.rstrip().endswith(
        "resume with --clip-norm 0.0 --env-backend gymnasium"), proc.stderr
    run_script("train_rl.py", "--run-dir", old, *tiny[:-1], 2, "--resume", "--clip-norm", 0, "--env-backend", "gymnasium")


def test_ppo_resume_after_sigkill_is_bit_identical(tmp_path):
    """Killed mid-run for real, resumed: the networks, optimizers, host RNG and the environments' state
    continue exactly, so the end equals an uninterrupted run's. Under --env-backend mindspore (this test)
    the environments' state is the env_carry Parameter, in the checkpoint's arrays; the gymnasium path
    and the off-policy agents cut a finished run back instead (below: the same checkpoints, one process less)."""
    algo = "ppo"
    args = [*map(str, TINY_RUNS[algo]), "--no-progress", "--env-backend", "mindspore"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    run_script("train_rl.py", "--run-dir", whole, *args, own_process=True)
    env = loops.child_env(GLOG_v="4")
    proc = subprocess.Popen([sys.executable, "train_rl.py", "--run-dir", str(killed), *args], cwd=ROOT, env=env,
                            stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    target = 20  # of 40 iterations
    deadline = time.monotonic() + 300
    while latest_step(killed) < target:  # wait on observed progress: a checkpoint past the target
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    final = latest_step(whole)
    assert latest_step(killed) < final
    run_script("train_rl.py", "--run-dir", killed, *args, "--resume", own_process=True)
    name = f"checkpoints/step_{final:08d}.ckpt"
    a, b = checkpoint_arrays(whole / name), checkpoint_arrays(killed / name)
    assert_same_arrays(a, b)
    (_, meta_a), (_, meta_b) = read(str(whole / name)), read(str(killed / name))
    for key in ("env_state", "obs", "episodes", "env_steps", "rng"):
        assert meta_a[key] == meta_b[key], key
    assert meta_a["episodes"] and meta_a["env_state"] is None and "env_carry" in a
    m_a, m_b = (json.loads((r / "metrics.json").read_text()) for r in (whole, killed))
    assert m_a["eval_return_mean"] == m_b["eval_return_mean"]


# the step to cut back to (TD3's 105 is odd: between its delayed updates) and what the checkpoint must hold;
# DDPG runs TD3's agent (rl/td3.py) with one critic and no delay: the same host state and checkpoint code
CUT_BACK = {"ppo": (20, {"actor", "critic"}),  # gymnasium's environments: their state is in the host meta
            "sac": (100, {"actor", "critic", "critic_target", "alpha", "replay"}),
            "td3": (105, {"actor", "critic", "actor_target", "critic_target", "replay"}),
            "dqn": (100, {"q", "q_target", "replay"}),
            "dqn-native": (96, {"q", "q_target", "replay", "env_carry"})}


@pytest.mark.parametrize("algo", sorted(CUT_BACK))
def test_resume_from_a_mid_run_checkpoint_is_bit_identical(tmp_path, algo):
    """A finished run cut back to a mid-run checkpoint and resumed: networks, optimizers, targets (and
    SAC's alpha), the replay buffer, host RNG and gymnasium's environments continue exactly, so the end
    equals the uninterrupted run's (PPO's native-backend test above kills a process for real)."""
    step, prefixes = CUT_BACK[algo]
    args = [*TINY_RUNS[algo], "--keep-ckpts", 0, "--no-progress"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    run_script("train_rl.py", "--run-dir", whole, *args)
    cut_back_copy(whole, step, cut)
    run_script("train_rl.py", "--run-dir", cut, *args, "--resume")
    name = f"checkpoints/step_{latest_step(whole):08d}.ckpt"
    a, b = checkpoint_arrays(whole / name), checkpoint_arrays(cut / name)
    assert_same_arrays(a, b)
    assert prefixes <= {k.split(".")[0] for k in a}
    (_, meta_a), (_, meta_b) = read(str(whole / name)), read(str(cut / name))
    for key in ("env_state", "obs", "episodes", "env_steps", "rng", "replay"):
        assert meta_a.get(key) == meta_b.get(key), key
    native = algo.endswith("native")  # the environments' state is the env_carry Parameter
    assert meta_a["episodes"] and (meta_a["env_state"] is None) == native and ("replay" in meta_a) == (algo != "ppo")
    m_a, m_b = (json.loads((r / "metrics.json").read_text()) for r in (whole, cut))
    assert m_a["eval_return_mean"] == m_b["eval_return_mean"]


def test_metrics_reevaluates_an_rl_run_and_draws_an_episode(tmp_path):
    from rl.episode import can_render
    run = tmp_path / "run"
    run_script("train_rl.py", "--run-dir", run, *TINY_RUNS["sac"], "--ckpt-every", 0)
    trained = json.loads((run / "metrics.json").read_text())
    proc = run_script("-m", "metrics", run, *(["--gif"] if can_render() else []))
    m = json.loads((run / "metrics.json").read_text())
    assert m["eval_return_mean"] == trained["eval_return_mean"] and m["eval_episodes"] == 1  # same seeds, same policy
    assert json.loads(proc.stdout)["step"] == trained["updates"]
    from PIL import Image
    assert Image.open(run / "episode.png").size[0] == 720
    if can_render():  # pygame is optional: with it, a GIF of the episode; without it, one error line
        gif = Image.open(run / "episode.gif")
        assert gif.n_frames == 200  # Pendulum's episodes last 200 steps
    else:
        proc = run_script("-m", "metrics", run, "--gif", check=False)
        assert proc.returncode == 2 and "needs pygame" in error_lines(proc)[0]


@pytest.mark.parametrize("algo_args", [["--num-envs", 2, "--num-steps", 8, "--update-epochs", 3, "--num-minibatches", 2],
                                       ["--algo", "sac", "--hidden", 16, "--batch-size", 8, "--learning-starts", 20]])
def test_fused_iterations_equal_separate_calls_bit_for_bit(graph_mode, tmp_path, algo_args):
    """train_rl.py runs each iteration as ONE compiled call (the driver's fuse mode, repeats in a loop
    of their own); the same seed through separate calls per phase and repeat gives the same weights."""
    from loops.driver import MultiStep, run_iteration
    results = []
    for fused in (False, True):
        agent, run = tiny_agent(tmp_path / str(fused), *algo_args)
        phases = agent.phases()
        engine = MultiStep(phases, 1) if fused else None
        for step in range(4):
            engine.run(step) if fused else run_iteration(phases, step)
        results.append([p.asnumpy().copy() for p in agent.state()])
        run.close()
    assert len(results[0]) == len(results[1])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_episode_statistics_count_every_step_under_same_step_autoreset():
    """Pendulum episodes last exactly 200 steps: with gymnasium < 1.4 the vector episode statistics
    counted every episode after the first one step short under SAME_STEP autoreset."""
    from rl.envs import finished_episodes, make_envs
    envs, _ = make_envs("Pendulum-v1", 2, 0)
    lengths = []
    for _ in range(650):
        lengths += [l for _, l in finished_episodes(envs.step(np.zeros((2, 1), np.float32))[4])]
    assert lengths == [200] * 6


def test_metrics_refuses_runs_and_flags_it_cannot_evaluate(tmp_path):
    run = tmp_path / "regression"
    run_script("train_regression.py", "--run-dir", run, "--steps", 5)
    proc = run_script("-m", "metrics", run, check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: {run}: recipe 'regression' defines no evaluation: nothing to evaluate"]
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "config.json").write_text(json.dumps({"algo": "sac"}))
    proc = run_script("-m", "metrics", tmp_path / "rl", "--num", 10, check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: unrecognized arguments: --num 10 ({tmp_path / 'rl'} is a run of rl.sac, whose evaluation takes "
        "--checkpoint, --episodes, --gif)"]
