"""CleanRL's ppo.py (CartPole-v1 defaults) in PyTorch, for bench/bench_rl_solve.py: how long from
process start until the mean return of the last 20 finished episodes first reaches a target.

    python bench/torch_ppo_cleanrl.py --seed 0 --total-steps 500000 --target 475

CleanRL's settings: 4 environments x 128 steps, 4 epochs of 4 minibatches, Adam lr 2.5e-4 (eps 1e-5)
annealed to 0, gamma 0.99, GAE lambda 0.95, clip 0.2 (value loss clipped too), entropy 0.01, value
coefficient 0.5, gradient norm clipped at 0.5, separate 64-64 tanh actor and critic under one
optimizer. It prints `solved <seconds since process start> <env steps>` when the target is reached and
stops there (or `not solved` at the end). torch is not a project dependency: install it beside the venv.
"""
import time

START = time.time()  # before the imports: the clock a user sees starts with the process

import argparse  # noqa: E402

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def layer(i, o, gain):
    linear = nn.Linear(i, o)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--total-steps", type=int, default=500_000)
    p.add_argument("--target", type=float, default=475.0)
    args = p.parse_args()
    num_envs, T, epochs, minibatches, lr = 4, 128, 4, 4, 2.5e-4
    gamma, lam, clip, ent, vf, max_norm = 0.99, 0.95, 0.2, 0.01, 0.5, 0.5
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    # same-step autoreset: the old gym API CleanRL's script was written for (and train_rl.py's envs)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec(
        "CartPole-v1", num_envs=num_envs, vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}))
    obs, _ = envs.reset(seed=args.seed)
    o, n = envs.single_observation_space.shape[0], envs.single_action_space.n
    actor = nn.Sequential(layer(o, 64, 2 ** 0.5), nn.Tanh(), layer(64, 64, 2 ** 0.5), nn.Tanh(), layer(64, n, 0.01))
    critic = nn.Sequential(layer(o, 64, 2 ** 0.5), nn.Tanh(), layer(64, 64, 2 ** 0.5), nn.Tanh(), layer(64, 1, 1.0))
    params = list(actor.parameters()) + list(critic.parameters())
    opt = torch.optim.Adam(params, lr=lr, eps=1e-5)
    batch = num_envs * T
    iterations = args.total_steps // batch
    returns, steps = [], 0
    obs_t = torch.tensor(obs, dtype=torch.float32)
    done_t = torch.zeros(num_envs)
    for it in range(iterations):
        opt.param_groups[0]["lr"] = (1.0 - it / iterations) * lr
        b_obs, b_act, b_logp, b_val = (torch.zeros((T, num_envs, o)), torch.zeros((T, num_envs)),
                                       torch.zeros((T, num_envs)), torch.zeros((T, num_envs)))
        b_rew, b_done = torch.zeros((T, num_envs)), torch.zeros((T, num_envs))
        for t in range(T):
            steps += num_envs
            b_obs[t], b_done[t] = obs_t, done_t
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=actor(obs_t))
                action = dist.sample()
                b_logp[t], b_val[t] = dist.log_prob(action), critic(obs_t).view(-1)
            b_act[t] = action
            obs, reward, term, trunc, info = envs.step(action.numpy())
            b_rew[t] = torch.tensor(reward, dtype=torch.float32)
            obs_t, done_t = torch.tensor(obs, dtype=torch.float32), torch.tensor(term | trunc, dtype=torch.float32)
            if "episode" in info:  # the episodes that ended in this step
                returns += [float(r) for r in info["episode"]["r"][info["_episode"]]]
                if len(returns) >= 20 and np.mean(returns[-20:]) >= args.target:
                    print(f"solved {time.time() - START:.2f} {steps}", flush=True)
                    return
        with torch.no_grad():  # GAE as CleanRL computes it (dones mark the step that STARTS an episode)
            next_value = critic(obs_t).view(-1)
            adv = torch.zeros_like(b_rew)
            last = 0
            for t in reversed(range(T)):
                nonterminal, following = (1.0 - done_t, next_value) if t == T - 1 else (1.0 - b_done[t + 1], b_val[t + 1])
                delta = b_rew[t] + gamma * following * nonterminal - b_val[t]
                adv[t] = last = delta + gamma * lam * nonterminal * last
            ret = adv + b_val
        x, a, lp, A, R, V = (v.reshape((batch,) + v.shape[2:]) for v in (b_obs, b_act, b_logp, adv, ret, b_val))
        size = batch // minibatches
        for _ in range(epochs):
            order = torch.randperm(batch)
            for i in range(minibatches):
                idx = order[i * size:(i + 1) * size]
                dist = torch.distributions.Categorical(logits=actor(x[idx]))
                ratio = (dist.log_prob(a[idx]) - lp[idx]).exp()
                mb = (A[idx] - A[idx].mean()) / (A[idx].std() + 1e-8)
                pg = torch.max(-mb * ratio, -mb * ratio.clamp(1 - clip, 1 + clip)).mean()
                v = critic(x[idx]).view(-1)
                v_clipped = V[idx] + (v - V[idx]).clamp(-clip, clip)
                v_loss = 0.5 * torch.max((v - R[idx]) ** 2, (v_clipped - R[idx]) ** 2).mean()
                loss = pg - ent * dist.entropy().mean() + vf * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, max_norm)
                opt.step()
    print(f"not solved {time.time() - START:.2f} {steps}", flush=True)


if __name__ == "__main__":
    main()
