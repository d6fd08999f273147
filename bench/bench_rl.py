"""RL training speed: environment steps per second of train_rl.py's PPO, SAC, DQN, TD3 and DDPG against
the same algorithms in PyTorch, written CleanRL-style (ppo.py, sac_continuous_action.py, dqn.py,
td3_continuous_action.py, ddpg_continuous_action.py: same networks,
hyperparameters, number of environments and host-side environment stepping), measured side by
side in this process.

    python bench/bench_rl.py [--sac-iters 400] [--ppo-updates 12] [--replay-iters 400] [--algos ppo,sac] [--record]
    python bench/bench_rl.py --algos ppo,ppo-native,ppo-cleanrl,ppo-cleanrl-native   # both PPO backends
    python bench/bench_rl.py --algos dqn,dqn-native,dqn-16envs,dqn-16envs-native     # both DQN backends

PPO: CartPole-v1, 8 envs x 32 steps, 20 epochs of one minibatch, two 64-unit tanh layers; -native rows:
--env-backend mindspore (rollout, GAE and updates in one compiled call; PyTorch still steps gymnasium);
ppo-cleanrl: CleanRL's CartPole sizes, 4 envs x 128 steps, 4 epochs of 4 minibatches.
SAC: Pendulum-v1, 1 env, batch 256, two 256-unit relu layers, policy frequency 1 (after the
random warm-up steps, which are not timed). DQN: CartPole-v1, batch 128, two 128-unit relu layers,
a Q update every 4 env steps, at epsilon 0.05. TD3 / DDPG: Pendulum-v1, batch 256, 256-unit relu
layers (TD3: twin critics, smoothing, actor every 2). Each side runs its full training iteration: acting,
environment steps, storage, every update. torch is not a project requirement: without it, only
MindSpore's rows are printed.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("GLOG_v", "4")

import numpy as np  # noqa: E402

from bench import record  # noqa: E402


def ours(algo, iters, extra=()):
    """(env steps per second, ms per iteration, share of time inside compiled calls) of train_rl.py's
    training iterations, after one untimed iteration (compilation, warm-up)."""
    from loops.config import parse_config
    from loops.driver import MultiStep
    from loops.run import Run
    from rl import algorithm
    recipe = algorithm(algo)  # what train_rl.py builds for --algo
    cfg = parse_config(recipe.Config, ["--algo", algo, "--run-dir", tempfile.mkdtemp(), *extra], "")
    run = Run(cfg, recipe=recipe.__name__)
    agent = recipe.AGENT(cfg, run)
    k = getattr(cfg, "steps_per_call", 1)  # iterations per call (DQN's native backend)
    engine = MultiStep(agent.phases(), k)  # as train_rl.py runs them: one fused call per iteration (or per k)
    engine.run(0)
    inside, fn = [0.0], engine.fn

    def timed(*a):  # the compiled calls alone, to split off the host-side share
        t = time.perf_counter()
        out = fn(*a)
        out.asnumpy()
        inside[0] += time.perf_counter() - t
        return out
    engine.fn = timed
    iters = iters // k * k
    start_steps, t0 = agent.env_steps, time.perf_counter()
    for step in range(k, iters + k, k):
        engine.run(step)
    total = time.perf_counter() - t0
    if hasattr(agent, "harvest"):  # environments in the graph: count the last rollout's steps
        agent.harvest()
    run.close()
    agent.envs.close()
    return (agent.env_steps - start_steps) / total, total / iters * 1e3, inside[0] / total


# ---- PyTorch, CleanRL-style ----
def timed(iteration, iters):
    """Seconds for iteration(1) ... iteration(iters), after one untimed warm-up call iteration(0)."""
    iteration(0)
    t0 = time.perf_counter()
    for step in range(1, iters + 1):
        iteration(step)
    return time.perf_counter() - t0


def torch_sac(iters, hidden=256, batch=256, lr=1e-3, gamma=0.99, tau=0.005, policy_frequency=1, learning_starts=100):
    import torch
    from torch import nn
    torch.manual_seed(0)
    env, state, step_env, sample = torch_replay_env("Pendulum-v1", 100_000)
    o, a = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    scale, bias = torch.tensor((high - low) / 2), torch.tensor((high + low) / 2)

    def q_net():
        return nn.Sequential(nn.Linear(o + a, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(o, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
            self.mean, self.log_std = nn.Linear(hidden, a), nn.Linear(hidden, a)

        def get_action(self, x):
            h = self.trunk(x)
            mean, log_std = self.mean(h), torch.tanh(self.log_std(h))
            log_std = -5 + 0.5 * 7 * (log_std + 1)
            normal = torch.distributions.Normal(mean, log_std.exp())
            x_t = normal.rsample()
            y_t = torch.tanh(x_t)
            logp = (normal.log_prob(x_t) - torch.log(scale * (1 - y_t.pow(2)) + 1e-6)).sum(1)
            return y_t * scale + bias, logp

    actor, qf1, qf2 = Actor(), q_net(), q_net()
    qf1_t, qf2_t = q_net(), q_net()
    qf1_t.load_state_dict(qf1.state_dict())
    qf2_t.load_state_dict(qf2.state_dict())
    q_opt = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr)
    a_opt = torch.optim.Adam(actor.parameters(), lr)
    log_alpha = torch.zeros(1, requires_grad=True)
    alpha_opt = torch.optim.Adam([log_alpha], lr)
    rng = np.random.default_rng(0)
    for _ in range(learning_starts):
        step_env(rng.uniform(low, high).astype(np.float32))

    def iteration(step):
        with torch.no_grad():
            action = actor.get_action(torch.from_numpy(state["obs"][None].astype(np.float32)))[0][0].numpy()
        step_env(np.clip(action, low, high))
        b = sample(rng, batch)
        with torch.no_grad():
            next_a, next_logp = actor.get_action(b["next_obs"])
            nq = torch.min(qf1_t(torch.cat([b["next_obs"], next_a], 1)), qf2_t(torch.cat([b["next_obs"], next_a], 1))).view(-1)
            y = b["rewards"] + (1 - b["terminated"]) * gamma * (nq - log_alpha.exp() * next_logp)
        x = torch.cat([b["obs"], b["actions"]], 1)
        q_loss = ((qf1(x).view(-1) - y) ** 2).mean() + ((qf2(x).view(-1) - y) ** 2).mean()
        q_opt.zero_grad()
        q_loss.backward()
        q_opt.step()
        if step % policy_frequency == 0:
            for _ in range(policy_frequency):
                pi, logp = actor.get_action(b["obs"])
                x = torch.cat([b["obs"], pi], 1)
                a_loss = (log_alpha.exp().detach() * logp - torch.min(qf1(x), qf2(x)).view(-1)).mean()
                a_opt.zero_grad()
                a_loss.backward()
                a_opt.step()
                with torch.no_grad():
                    _, logp = actor.get_action(b["obs"])
                alpha_loss = (-log_alpha.exp() * (logp + (-a))).mean()
                alpha_opt.zero_grad()
                alpha_loss.backward()
                alpha_opt.step()
        with torch.no_grad():
            for net, target in ((qf1, qf1_t), (qf2, qf2_t)):
                for p, t in zip(net.parameters(), target.parameters()):
                    t.data.copy_(tau * p.data + (1 - tau) * t.data)

    total = timed(iteration, iters)
    return iters / total, total / iters * 1e3


def torch_replay_env(env_id, cap, seed=0):
    """A gymnasium env and a CleanRL-style numpy ring buffer: (env, buffers, step(action), sample(rng, n))."""
    import gymnasium as gym
    env = gym.make(env_id)
    o = env.observation_space.shape[0]
    a = env.action_space.shape[0] if env.action_space.shape else 1
    buf = {k: np.zeros((cap,) + s, np.float32) for k, s in
           dict(obs=(o,), actions=(a,), rewards=(), next_obs=(o,), terminated=()).items()}
    state = {"obs": env.reset(seed=seed)[0], "size": 0}

    def step(action):
        next_obs, r, term, trunc, _ = env.step(action)
        for k, v in zip(buf, (state["obs"], action, r, next_obs, term)):
            buf[k][state["size"] % cap] = v
        state["size"] += 1
        state["obs"] = env.reset()[0] if term or trunc else next_obs

    def sample(rng, n):
        import torch
        rows = rng.integers(0, min(state["size"], cap), n)
        return {k: torch.from_numpy(v[rows]) for k, v in buf.items()}
    return env, state, step, sample


def torch_q_nets(obs_dim, n, hidden, lr):
    """CleanRL's Q network (here two relu layers of `hidden`), its target copy and Adam."""
    import torch
    from torch import nn

    def q_net():
        return nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, n))
    q, target = q_net(), q_net()
    target.load_state_dict(q.state_dict())
    return q, target, torch.optim.Adam(q.parameters(), lr)


def torch_dqn_update(q, target, opt, b, gamma):
    """CleanRL's Q step on batch `b`: MSE to r + gamma max_a' Q'(s', a') (1 - terminated)."""
    import torch
    with torch.no_grad():
        y = b["rewards"] + gamma * target(b["next_obs"]).max(1).values * (1 - b["terminated"])
    q_sa = q(b["obs"]).gather(1, b["actions"].long()).view(-1)
    loss = ((q_sa - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def torch_dqn(iters, hidden=128, batch=128, lr=1e-3, gamma=0.99, train_frequency=4, target_frequency=100,
              learning_starts=1000, epsilon=0.05, num_envs=1):
    """CleanRL's dqn.py loop at its final epsilon (this codebase's defaults): train_frequency env steps,
    one Q update, the target copied every target_frequency env steps. num_envs > 1: gymnasium's
    vector env, one forward for all of them per step (CleanRL's dqn.py takes one)."""
    if num_envs > 1:
        return torch_dqn_vector(iters, hidden, batch, lr, gamma, train_frequency, target_frequency, learning_starts,
                                epsilon, num_envs)
    import torch
    torch.manual_seed(0)
    env, state, step_env, sample = torch_replay_env("CartPole-v1", 50_000)
    o, n = env.observation_space.shape[0], env.action_space.n

    q, target, opt = torch_q_nets(o, n, hidden, lr)
    rng = np.random.default_rng(0)
    for _ in range(learning_starts):
        step_env(int(rng.integers(0, n)))
    env_steps = learning_starts

    def iteration(step):
        nonlocal env_steps
        for _ in range(train_frequency):
            if rng.random() < epsilon:
                action = int(rng.integers(0, n))
            else:
                with torch.no_grad():
                    action = int(q(torch.from_numpy(state["obs"][None].astype(np.float32))).argmax())
            step_env(action)
            env_steps += 1
            if env_steps % target_frequency == 0:
                target.load_state_dict(q.state_dict())
        b = sample(rng, batch)
        torch_dqn_update(q, target, opt, b, gamma)

    total = timed(iteration, iters)
    return iters * train_frequency / total, total / iters * 1e3


def torch_td3(iters, twin=True, hidden=256, batch=256, lr=1e-3, gamma=0.99, tau=0.005, exploration_noise=0.1,
              policy_noise=0.2, noise_clip=0.5, policy_frequency=2, learning_starts=1000):
    """CleanRL's td3_continuous_action.py loop (twin=False: its DDPG, with the actor and targets
    updated every step as the paper and this codebase do), one env step and one critic update an iteration."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    env, state, step_env, sample = torch_replay_env("Pendulum-v1", 100_000)
    o, a = env.observation_space.shape[0], env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    scale, bias = torch.tensor((high - low) / 2), torch.tensor((high + low) / 2)

    def mlp(inputs, outputs):
        return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, outputs))

    def pi(net, x):
        return torch.tanh(net(x)) * scale + bias
    actor, actor_t = mlp(o, a), mlp(o, a)
    qs, qs_t = [mlp(o + a, 1) for _ in range(1 + twin)], [mlp(o + a, 1) for _ in range(1 + twin)]
    for net, t in zip([actor] + qs, [actor_t] + qs_t):
        t.load_state_dict(net.state_dict())
    q_opt = torch.optim.Adam([p for q in qs for p in q.parameters()], lr)
    a_opt = torch.optim.Adam(actor.parameters(), lr)
    rng = np.random.default_rng(0)
    for _ in range(learning_starts):
        step_env(rng.uniform(low, high).astype(np.float32))
    every = policy_frequency if twin else 1

    def iteration(step):
        with torch.no_grad():
            action = pi(actor, torch.from_numpy(state["obs"][None].astype(np.float32)))[0].numpy()
        action = action + rng.normal(0, exploration_noise * (high - low) / 2, a).astype(np.float32)
        step_env(np.clip(action, low, high))
        b = sample(rng, batch)
        with torch.no_grad():
            next_a = pi(actor_t, b["next_obs"])
            if twin:
                noise = torch.from_numpy(rng.normal(0, policy_noise, (batch, a)).astype(np.float32))
                next_a = (next_a + noise.clamp(-noise_clip, noise_clip) * scale).clamp(torch.tensor(low), torch.tensor(high))
            x = torch.cat([b["next_obs"], next_a], 1)
            next_q = torch.min(torch.stack([t(x).view(-1) for t in qs_t]), 0).values
            y = b["rewards"] + (1 - b["terminated"]) * gamma * next_q
        x = torch.cat([b["obs"], b["actions"]], 1)
        q_loss = sum(((q(x).view(-1) - y) ** 2).mean() for q in qs)
        q_opt.zero_grad()
        q_loss.backward()
        q_opt.step()
        if step % every == 0:
            a_loss = -qs[0](torch.cat([b["obs"], pi(actor, b["obs"])], 1)).mean()
            a_opt.zero_grad()
            a_loss.backward()
            a_opt.step()
            with torch.no_grad():
                for net, t in zip([actor] + qs, [actor_t] + qs_t):
                    for p, tp in zip(net.parameters(), t.parameters()):
                        tp.data.copy_(tau * p.data + (1 - tau) * tp.data)

    total = timed(iteration, iters)
    return iters / total, total / iters * 1e3


def torch_ppo(updates, num_envs=8, num_steps=32, **kwargs):
    """(env steps per second, ms per iteration) of the PyTorch twin's PPO iterations."""
    total = timed(torch_ppo_iteration(num_envs, num_steps, **kwargs), updates)
    return updates * num_steps * num_envs / total, total / updates * 1e3


def torch_ppo_iteration(num_envs=8, num_steps=32, hidden=64, epochs=20, lr=1e-3, gamma=0.98, lam=0.8, clip=0.2,
                        minibatches=1, max_grad_norm=0.5):
    """One CleanRL-style PPO iteration in PyTorch on gymnasium's CartPole-v1 (rollout, GAE, updates), as
    a function of the step index."""
    import gymnasium as gym
    import torch
    from torch import nn
    from rl.storage import gae
    torch.manual_seed(0)
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    obs, _ = envs.reset(seed=0)
    o, n = envs.single_observation_space.shape[0], envs.single_action_space.n

    def mlp(out, gain):
        layers = [nn.Linear(o, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, out)]
        for layer, g in zip(layers[::2], (2 ** 0.5, 2 ** 0.5, gain)):
            nn.init.orthogonal_(layer.weight, g)
            nn.init.zeros_(layer.bias)
        return nn.Sequential(*layers)
    actor, critic = mlp(n, 0.01), mlp(1, 1.0)
    a_opt, c_opt = torch.optim.Adam(actor.parameters(), lr), torch.optim.Adam(critic.parameters(), lr)
    T = num_steps

    def update(step):
        nonlocal obs
        b_obs, b_act, b_logp, b_val, b_rew, b_done = (np.zeros((T, num_envs) + s, d) for s, d in
                                                      (((o,), np.float32), ((), np.int64), ((), np.float32),
                                                       ((), np.float32), ((), np.float32), ((), np.float32)))
        for t in range(T):
            with torch.no_grad():
                x = torch.from_numpy(obs.astype(np.float32))
                dist = torch.distributions.Categorical(logits=actor(x))
                action = dist.sample()
                b_logp[t], b_val[t] = dist.log_prob(action).numpy(), critic(x).view(-1).numpy()
            b_obs[t], b_act[t] = obs, action.numpy()
            obs, r, term, trunc, info = envs.step(action.numpy())
            b_rew[t], b_done[t] = r, term | trunc
        with torch.no_grad():
            nv = critic(torch.from_numpy(obs.astype(np.float32))).view(-1).numpy()
        adv, ret = gae(b_rew, b_val, b_done, nv, gamma, lam)
        x, act = torch.from_numpy(b_obs.reshape(-1, o)), torch.from_numpy(b_act.reshape(-1))
        old, adv, ret = (torch.from_numpy(v.reshape(-1).astype(np.float32)) for v in (b_logp, adv, ret))
        size = len(x) // minibatches
        for idx in (order[i * size:(i + 1) * size] for _ in range(epochs) for order in [torch.randperm(len(x))]
                    for i in range(minibatches)):
            mb_adv = adv[idx]
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            dist = torch.distributions.Categorical(logits=actor(x[idx]))
            ratio = (dist.log_prob(act[idx]) - old[idx]).exp()
            loss = -torch.min(ratio * mb_adv, ratio.clamp(1 - clip, 1 + clip) * mb_adv).mean()
            a_opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(actor.parameters(), max_grad_norm)  # each model's own norm, as --clip-norm
            a_opt.step()
            v_loss = 0.5 * ((critic(x[idx]).view(-1) - ret[idx]) ** 2).mean()
            c_opt.zero_grad()
            v_loss.backward()
            nn.utils.clip_grad_norm_(critic.parameters(), max_grad_norm)
            c_opt.step()
    return update


def torch_dqn_vector(iters, hidden, batch, lr, gamma, train_frequency, target_frequency, learning_starts, epsilon,
                     num_envs):
    """torch_dqn's loop over a gymnasium vector env of num_envs CartPoles (num_envs transitions per step)."""
    import gymnasium as gym
    import torch
    torch.manual_seed(0)
    envs = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    obs, _ = envs.reset(seed=0)
    o, n, cap = obs.shape[1], int(envs.single_action_space.n), 50_000
    buf = {k: np.zeros((cap,) + s, np.float32) for k, s in
           dict(obs=(o,), actions=(1,), rewards=(), next_obs=(o,), terminated=()).items()}
    state = {"obs": obs, "size": 0}

    q, target, opt = torch_q_nets(o, n, hidden, lr)
    rng = np.random.default_rng(0)

    def step_envs(greedy):
        explore = rng.random(num_envs) < (1.0 if not greedy else epsilon)
        action = rng.integers(0, n, num_envs)
        if greedy:
            with torch.no_grad():
                greedy = q(torch.from_numpy(state["obs"].astype(np.float32))).argmax(1).numpy()
                action = np.where(explore, action, greedy)
        next_obs, r, term, trunc, _ = envs.step(action)
        rows = (state["size"] + np.arange(num_envs)) % cap
        for k, v in zip(buf, (state["obs"], action.reshape(-1, 1), r, next_obs, term)):
            buf[k][rows] = v
        state["size"] += num_envs
        state["obs"] = next_obs
    for _ in range(learning_starts // num_envs):
        step_envs(False)
    env_steps = learning_starts // num_envs * num_envs

    def iteration(step):
        nonlocal env_steps
        for _ in range(train_frequency):
            step_envs(True)
            env_steps += num_envs
            if env_steps % target_frequency < num_envs:
                target.load_state_dict(q.state_dict())
        rows = rng.integers(0, min(state["size"], cap), batch)
        b = {k: torch.from_numpy(v[rows]) for k, v in buf.items()}
        torch_dqn_update(q, target, opt, b, gamma)

    total = timed(iteration, iters)
    envs.close()
    return iters * train_frequency * num_envs / total, total / iters * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sac-iters", type=int, default=400)
    parser.add_argument("--ppo-updates", type=int, default=12)
    parser.add_argument("--replay-iters", type=int, default=400, help="iterations of DQN, TD3 and DDPG")
    parser.add_argument("--algos", default="ppo,ppo-native,ppo-cleanrl,ppo-cleanrl-native,sac,dqn,td3,ddpg",
                        help="which rows, comma-separated")
    parser.add_argument("--ours-extra", default="", help="more train_rl.py flags for the MindSpore rows, e.g. "
                        "\"--train-frequency 1\" (the PyTorch rows do not follow them: compare MindSpore rows)")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    try:
        import torch
        torch_threads = torch.get_num_threads()
    except ImportError:
        torch = None
    rows = ["| algorithm | implementation | env steps / s | ms per iteration | vs PyTorch | time in compiled calls |",
            "|---|---|---|---|---|---|"]
    constant = ["--no-anneal-lr"]  # constant rates, as the PyTorch side (SAC, TD3, DDPG: their default)
    host = ["--env-backend", "gymnasium"]  # PPO's auto backend on CartPole is mindspore: these rows step gymnasium
    rows_wanted = {"ppo": ("PPO CartPole-v1 (1 iteration = 256 env steps + 20+20 updates)", args.ppo_updates,
                           torch_ppo, constant + host),
                   "sac": ("SAC Pendulum-v1 (1 iteration = 1 env step + 1 critic, 1 actor, 1 alpha update)",
                           args.sac_iters, torch_sac, []),
                   # at the final epsilon 0.05 (reached by the end of the warm-up here): the steady state
                   "dqn": ("DQN CartPole-v1 (1 iteration = 4 env steps + 1 Q update, epsilon 0.05)", args.replay_iters,
                           torch_dqn, constant + ["--exploration-fraction", "0.01"]),
                   "td3": ("TD3 Pendulum-v1 (1 iteration = 1 env step + 1 critic update; actor and targets every 2)",
                           args.replay_iters, torch_td3, []),
                   "ddpg": ("DDPG Pendulum-v1 (1 iteration = 1 env step + 1 critic, 1 actor update, targets)",
                            args.replay_iters, lambda n: torch_td3(n, twin=False), [])}
    # PPO with the environments in the graph (--env-backend mindspore), at train_rl.py's PPO defaults and at
    # CleanRL's CartPole ones (4 envs x 128 steps, 4 epochs of 4 minibatches)
    cleanrl = ["--num-envs", "4", "--num-steps", "128", "--update-epochs", "4", "--num-minibatches", "4"]
    native = ["--env-backend", "mindspore"]
    rows_wanted.update({
        "ppo-native": ("PPO CartPole-v1 (as above)", args.ppo_updates, torch_ppo, constant + native),
        "ppo-cleanrl": ("PPO CartPole-v1, CleanRL's sizes (1 iteration = 512 env steps + 16+16 updates)",
                        args.ppo_updates, lambda n: torch_ppo(n, 4, 128, epochs=4, minibatches=4), constant + cleanrl + host),
        "ppo-cleanrl-native": ("PPO CartPole-v1, CleanRL's sizes (as above)", args.ppo_updates,
                               lambda n: torch_ppo(n, 4, 128, epochs=4, minibatches=4), constant + cleanrl + native)})
    # DQN with the environments and replay in the graph (rl/dqn_native.py), 50 iterations per call: at the
    # defaults (one environment, 4 steps per update), and at 16 environments stepped once per update
    dqn = constant + ["--exploration-fraction", "0.01"]
    wide = ["--num-envs", "16", "--train-frequency", "1"]
    native_dqn = native + ["--steps-per-call", "50"]
    rows_wanted.update({
        "dqn-native": ("DQN CartPole-v1 (as above)", args.replay_iters, torch_dqn, dqn + native_dqn),
        "dqn-16envs": ("DQN CartPole-v1, 16 envs (1 iteration = 16 env steps + 1 Q update, epsilon 0.05)",
                       args.replay_iters, lambda n: torch_dqn(n, train_frequency=1, num_envs=16), dqn + wide),
        "dqn-16envs-native": ("DQN CartPole-v1, 16 envs (as above)", args.replay_iters,
                              lambda n: torch_dqn(n, train_frequency=1, num_envs=16), dqn + wide + native_dqn)})
    for algo in args.algos.split(","):
        label, n, ref, extra = rows_wanted[algo]
        sps, ms_iter, inside = ours(algo.split("-")[0], n, extra + args.ours_extra.split())
        ref_sps, ref_ms = ref(n) if torch else (None, None)
        ratio = f"{sps / ref_sps:.2f}x" if ref_sps else ""
        backend = extra[extra.index("--env-backend") + 1] if "--env-backend" in extra else ""
        how = f"train_rl.py --env-backend {backend}" if backend else "train_rl.py"
        rows.append(f"| {label} | {how} (MindSpore, graph mode) | {sps:.0f} | {ms_iter:.2f} | {ratio} | {inside:.0%} |")
        if ref_sps:
            rows.append(f"| | PyTorch eager, CleanRL-style ({torch_threads} threads) | {ref_sps:.0f} | {ref_ms:.2f} | 1.00x | |")
        print("\n".join(rows[-2:]), flush=True)
    table = "\n".join(rows)
    print(table)
    if args.record:
        record.append("RL training speed, MindSpore vs PyTorch", " ".join(["python", "bench/bench_rl.py"] + sys.argv[1:]), table)


if __name__ == "__main__":
    main()
