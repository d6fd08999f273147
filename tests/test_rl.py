"""train_rl.py (PPO): GAE and the clipped objective against numpy references, each update moves only
its own model, it learns CartPole in a short budget, continuous actions run, bad input exits 2."""
import json

import numpy as np
import pytest
from mindspore import Tensor

from conftest import error_lines, run_script, scalar_tags
from loops.driver import host_tensor
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
    for n in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                total += weight * delta[k, n]
                if dones[k, n]:
                    break
                weight *= gamma * lam
            assert adv[t, n] == pytest.approx(total, abs=1e-9)
    np.testing.assert_allclose(ret, adv + values)


def tiny_ppo(tmp_path, env="CartPole-v1"):
    import train_rl
    from loops.run import Run
    from rl.ppo import PPO
    cfg = train_rl.parse_config(train_rl.RLConfig, ["--env", env, "--num-envs", "2", "--num-steps", "8",
                                                    "--run-dir", str(tmp_path / "run")], "")
    run = Run(cfg)
    return PPO(cfg, run), run


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
def test_ppo_learns_cartpole_far_above_a_random_policy(tmp_path):
    run = tmp_path / "ppo"
    run_script("train_rl.py", "--run-dir", run, "--total-steps", 20000, "--log-every", 5)
    m = json.loads((run / "metrics.json").read_text())
    # a random policy averages ~22 on CartPole-v1; 20k steps of PPO gave 309 here (seed 0)
    assert m["eval_return_mean"] > 100 and m["train_return_last20"] > 60, m
    assert m["env_steps"] == 20000 // 256 * 256 and m["eval_episodes"] == 10
    tags = set(scalar_tags(run).Tags()["scalars"])
    assert {"charts/episodic_return", "charts/SPS", "losses/actor", "losses/critic", "losses/approx_kl",
            "losses/clipfrac", "losses/entropy", "grad_norm/actor", "grad_norm/critic"} <= tags


def test_continuous_actions_train(tmp_path):
    run = tmp_path / "pendulum"
    run_script("train_rl.py", "--run-dir", run, "--env", "Pendulum-v1", "--steps", 2, "--num-envs", 2,
               "--num-steps", 100, "--update-epochs", 2, "--eval-episodes", 1, "--log-every", 1)
    m = json.loads((run / "metrics.json").read_text())
    assert m["env_steps"] == 400 and np.isfinite(m["eval_return_mean"]) and m["eval_return_mean"] < 0


@pytest.mark.parametrize("args, message", [
    (["--env", "NoSuchEnv-v0"], "--env NoSuchEnv-v0: Environment `NoSuchEnv` doesn't exist"),
    (["--env", "FrozenLake-v1"], "observations must be a flat Box"),
    (["--algo", "sac"], "--algo sac is not implemented yet"),
    (["--num-minibatches", "3"], "must divide --num-envs x --num-steps"),
])
def test_bad_rl_input_exits_2_and_writes_nothing(tmp_path, args, message):
    proc = run_script("train_rl.py", "--run-dir", tmp_path / "run", *args, check=False)
    lines = error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "run").exists()
