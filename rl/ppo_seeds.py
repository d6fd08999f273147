"""`--num-seeds K`: K independent PPO agents trained in ONE process, side by side in ONE compiled call per
iteration (with --env-backend mindspore), as PureJaxRL trains many seeds at once.

Every Parameter of the actor and the critic gets a leading seed dimension (SeedDense: a batched
matmul, seed k's rows meet only seed k's weights), and the rollout's environments are K x --num-envs
lanes, seed-major, so rl/ppo_native.py's rollout, GAE and minibatch gathers run unchanged on all
seeds at once. What keeps the seeds apart: each seed's minibatches hold its own rows only (its own
permutation), its advantages are normalised over its own rows, and the loss is the SUM of the seeds'
losses, so each seed's gradient is its own loss's; Adam works per element, and a clip by norm clips
each seed's own norm (the Learners are built with members=K, loops/transforms.py). Transforms that
read all seeds' gradients at once (non-finite skipping, loss scaling) would couple them, so
--num-seeds refuses them (rl/ppo.py's Config). One group of K agents is one run: one config, one
checkpoint, one resume; seed S = --seed + k also gets its own record, RUN/seed<S>/ (TensorBoard
events with CleanRL's episode tags, and metrics.json: its deterministic policy's evaluation and its
last training episodes), so `tensorboard --logdir RUN` shows each seed as a run. The group's
metrics.json holds the mean over the seeds and each seed's numbers; --seed is fixed on resume.

The seeds share the host generator (each draws its own noise from it) and the initial weights come
one seed after the other from MindSpore's, so seed k of a group does not repeat a single run with
--seed S: it is an independent agent of the same recipe.
"""
import os

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Orthogonal, initializer
from tensorboardX.summary import scalar

from loops import rundir
from loops.config import UserError
from loops.logging import EventLog
from rl.agent import evaluate_policies
from rl.ppo_native import NativePPO


class SeedDense(nn.Cell):
    """K dense layers side by side: rows (K * M, inputs), seed-major -> (K * M, outputs). Each seed's
    weights are initialised as nn.Dense(weight_init=Orthogonal(gain)) would."""

    def __init__(self, seeds, inputs, outputs, gain):
        super().__init__()
        weights = [initializer(Orthogonal(gain), (outputs, inputs), ms.float32).init_data().asnumpy().T
                   for _ in range(seeds)]
        self.weight = Parameter(Tensor(np.stack(weights)), name="weight")
        self.bias = Parameter(Tensor(np.zeros((seeds, 1, outputs), np.float32)), name="bias")

    def construct(self, x):
        y = ops.bmm(x.reshape(self.weight.shape[0], -1, x.shape[-1]), self.weight) + self.bias
        return y.reshape(-1, y.shape[-1])


def seed_mlp(seeds, inputs, outputs, hidden, last_gain):
    """rl/ppo.py's mlp, K of them side by side."""
    return nn.SequentialCell(SeedDense(seeds, inputs, hidden, np.sqrt(2)), nn.Tanh(),
                             SeedDense(seeds, hidden, hidden, np.sqrt(2)), nn.Tanh(),
                             SeedDense(seeds, hidden, outputs, last_gain))


class SeedActor(nn.Cell):
    """rl/ppo.py's Actor, K side by side: a log std per seed."""

    def __init__(self, seeds, obs_dim, n, hidden, discrete):
        super().__init__()
        self.net, self.discrete = seed_mlp(seeds, obs_dim, n, hidden, 0.01), discrete
        self.log_std = Parameter(Tensor(np.zeros((seeds, 1, n), np.float32)), name="log_std",
                                 requires_grad=not discrete)

    def construct(self, obs):
        return self.net(obs)

    def log_std_for(self, out):
        seeds, n = self.log_std.shape[0], self.log_std.shape[-1]
        return ops.broadcast_to(self.log_std, (seeds, out.shape[0] // seeds, n)).reshape(out.shape)


class SeedsPPO(NativePPO):
    def __init__(self, cfg, run):
        self.seeds = cfg.num_seeds
        super().__init__(cfg, run)
        self.seed_episodes = [[] for _ in range(self.seeds)]
        self.seed_unlogged = [[] for _ in range(self.seeds)]
        self.seed_logs = {}  # seed index -> EventLog, opened at the first write (the run dir exists by then)

    def actor_net(self):
        return SeedActor(self.seeds, self.obs_dim, self.n_actions, self.cfg.hidden, self.discrete)

    def critic_net(self):
        return seed_mlp(self.seeds, self.obs_dim, 1, self.cfg.hidden, 1.0)

    def seed_dir(self, k):
        """RUN/seed<S>, seed k's record (made on first use; a planted link there is refused, as the run's
        own folders' are: a run writes only inside its run dir)."""
        path = os.path.join(self.cfg.run_dir, f"seed{self.cfg.seed + k}")
        if os.path.islink(path):
            raise UserError(f"{path} is a symbolic link: a run writes only inside its run dir; replace the link "
                            "with the folder itself")
        os.makedirs(path, exist_ok=True)
        return path

    # ---- episodes: the group's (progress line, group tags) and each seed's ----
    def finished(self, t, lane, episode):
        super().finished(t, lane, episode)
        k = lane // self.cfg.num_envs
        self.seed_episodes[k].append(episode)
        # seed k's own environment steps: its N lanes per rollout step
        self.seed_unlogged[k].append((self.env_steps // self.seeds + (t + 1) * self.cfg.num_envs, *episode))

    def seed_log(self, k):
        if k not in self.seed_logs:
            self.seed_logs[k] = EventLog(self.seed_dir(k))
        return self.seed_logs[k]

    def log_hook(self, step):
        super().log_hook(step)
        for k, episodes in enumerate(self.seed_episodes):
            if episodes:
                log = self.seed_log(k)
                log.add(scalar("charts/episodic_return_mean20", float(np.mean([r for r, _ in episodes[-20:]]))), step)
                log.flush()

    def log_episodes(self):
        super().log_episodes()
        for k, unlogged in enumerate(self.seed_unlogged):
            if unlogged:
                log = self.seed_log(k)
                for x, r, l in unlogged:
                    log.add(scalar("charts/episodic_return", float(r)), x)
                    log.add(scalar("charts/episodic_length", float(l)), x)
                log.flush()
                unlogged.clear()

    def host_state(self):
        return {**super().host_state(), "seed_episodes": [e[-100:] for e in self.seed_episodes]}

    def load_host_state(self, meta):  # before training: every seed's folder is checked here
        super().load_host_state(meta)
        for k in range(self.seeds):
            self.seed_dir(k)
        if meta:
            self.seed_episodes = [[tuple(e) for e in episodes] for episodes in meta["seed_episodes"]]

    # ---- evaluation: each seed's deterministic policy ----
    def deterministic_action(self, obs):  # the first seed's (`python -m metrics`' episode plot)
        return super().deterministic_action(np.tile(obs, (self.seeds, 1)))[:len(obs)]

    def evaluate(self, episodes, seed=None):
        """Every seed's returns, seed after seed (`episodes` each)."""
        return [r for returns in self.evaluate_seeds(episodes, seed) for r in returns]

    def evaluate_seeds(self, episodes, seed=None):
        """[seed k's returns over `episodes` episodes]: each seed's deterministic policy on its own
        environment seeded as a single run's evaluation is (the same episodes for every seed), all
        seeds stepped together, one forward pass for all (PPO's greedy action on K rows: row k meets
        seed k's weights)."""
        return evaluate_policies(self.cfg.env, super().deterministic_action, episodes,
                                 self.cfg.seed + 10_000 if seed is None else seed, self.seeds)

    def results(self, episodes):
        """The group's metrics.json: the mean over the seeds of each seed's numbers, and each seed's;
        every seed's own metrics.json in RUN/seed<S>/ (its training numbers, then its evaluation)."""
        self.harvest()
        for k in range(self.seeds):
            recent = [r for r, _ in self.seed_episodes[k]]
            rundir.write_metrics(self.seed_dir(k), {
                "seed": self.cfg.seed + k, "env_steps": self.env_steps // self.seeds, "updates": self.cfg.steps,
                "train_return_last20": float(np.mean(recent[-20:])) if recent else None,
                "train_return_last10": float(np.mean(recent[-10:])) if recent else None})
        for log in self.seed_logs.values():
            log.close()
        self.seed_logs = {}
        group = self.evaluation(episodes)

        def mean(key):
            values = [s[key] for s in group["seeds"] if s[key] is not None]
            return float(np.mean(values)) if values else None
        return {**group, "train_return_last20": mean("train_return_last20"),
                "train_return_last10": mean("train_return_last10"), "env_steps": self.env_steps,
                "updates": self.cfg.steps, "device": self.run.device, "num_seeds": self.seeds}

    def evaluation(self, episodes):
        """Each seed's evaluation into its metrics.json (kept with its training numbers); the group's:
        the mean and std over every seed's episodes, the worst seed's mean, and each seed's record."""
        per_seed, pooled = [], []
        for k, returns in enumerate(self.evaluate_seeds(episodes)):
            returns = np.asarray(returns, np.float64)
            record = {**rundir.read_metrics(self.seed_dir(k)), "seed": self.cfg.seed + k,
                      "eval_return_mean": float(returns.mean()), "eval_return_std": float(returns.std()),
                      "eval_episodes": len(returns)}
            rundir.write_metrics(self.seed_dir(k), record)
            per_seed.append(record)
            pooled += list(returns)
        return {"eval_return_mean": float(np.mean(pooled)), "eval_return_std": float(np.std(pooled)),
                "eval_episodes": episodes, "eval_return_min_seed": min(s["eval_return_mean"] for s in per_seed),
                "seeds": per_seed}
