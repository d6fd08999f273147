"""What every algorithm in rl/ shares: the vector environments, the record of finished episodes,
CleanRL-style logging, deterministic evaluation, and the host state a checkpoint holds besides the
Parameters (environment state, current observations, episodes, environment steps).

An algorithm subclasses Agent and defines phases() (the driver phases of one iteration), state()
(every Parameter a checkpoint holds) and deterministic_action(obs); before_save() and
host_state() / load_host_state() when it keeps more host data (SAC: the replay buffer). Its models
that learn are the Learner attributes it sets (learners()); CleanRL's tags, evaluation and the end-of-run
metrics come from here."""
import sys
import time

import numpy as np

from loops.config import UserError
from loops.learner import Learner
from loops.schedules import lr_at
from rl.envs import action_spec, env_state, finished_episodes, make_envs, set_env_state

KEEP_EPISODES = 100  # finished episodes kept in checkpoints (the metrics use the last 20 at most)


class Agent:
    PROGRESS_TAGS = ("charts/episodic_return_mean20", "losses/actor")  # shown on the progress line
    ACTIONS = ("discrete", "continuous")  # the action spaces the algorithm takes (Discrete, Box)

    def __init__(self, cfg, run):
        self.cfg, self.run, self.rng = cfg, run, run.rng
        self.envs, self.obs = make_envs(cfg.env, cfg.num_envs, cfg.seed)
        self.discrete, self.n_actions, self.bounds = action_spec(self.envs)
        self.check_action_space()
        self.obs_dim = self.obs.shape[1]
        self.episodes, self.env_steps = [], 0
        self.unlogged = []  # (env step, return, length) of episodes finished since the last log line
        self.tick, self.tick_env_steps = time.perf_counter(), 0

    def check_action_space(self):
        """UserError (envs closed) when this algorithm cannot act in the environment, naming the
        registered algorithms that can."""
        kind = "discrete" if self.discrete else "continuous"
        if kind in self.ACTIONS:
            return
        self.envs.close()
        from rl import ALGORITHMS, algorithm
        fit = [name for name in sorted(ALGORITHMS) if kind in algorithm(name).AGENT.ACTIONS]
        needs = "continuous (Box)" if kind == "discrete" else "discrete"
        raise UserError(f"--algo {self.cfg.algo} needs {needs} actions; {self.cfg.env} has "
                        f"{self.envs.single_action_space}: use --algo {' or '.join(fit)}")

    def step_envs(self, env_action):
        """One vector step; records finished episodes. Returns (obs, reward, terminated, truncated, info)."""
        obs, reward, terminated, truncated, info = self.envs.step(env_action)
        done = finished_episodes(info)
        self.env_steps += self.cfg.num_envs
        self.episodes += done
        self.unlogged += [(self.env_steps, r, l) for r, l in done]  # CleanRL's x: the global env step
        return obs.astype(np.float32), reward.astype(np.float32), terminated, truncated, info

    def scheduled_lr(self, name, step):
        """Model `name`'s learning rate at update `step`: --lr-<name> or --lr, annealed linearly to 0
        over the run with --anneal-lr."""
        base = getattr(self.cfg, f"lr_{name}") or self.cfg.lr
        return lr_at(step, base, "linear" if self.cfg.anneal_lr else "constant", self.cfg.steps)

    def learners(self):
        """The models that learn, in the order declared (their sizes go into config.json and the start line)."""
        return tuple(v for v in vars(self).values() if isinstance(v, Learner))

    def before_save(self):
        """Before a checkpoint is written: the episodes finished since the last log line go to
        TensorBoard (the run may end here); subclasses copy host data into Parameters too."""
        self.log_episodes()

    # ---- checkpoint meta: JSON, restored after the Parameters ----
    def host_state(self):
        return {**self.environment_state(), "env_steps": self.env_steps, "episodes": self.episodes[-KEEP_EPISODES:]}

    def load_host_state(self, meta):
        if not meta:
            return
        self.restore_environments(meta)
        self.env_steps = meta["env_steps"]
        self.episodes = [tuple(e) for e in meta["episodes"]]
        self.tick_env_steps = self.env_steps

    def environment_state(self):
        """The gymnasium environments' state and current observations, for the checkpoint meta (an agent
        whose environments live elsewhere overrides this and restore_environments)."""
        return {"env_state": env_state(self.envs), "obs": self.obs.tolist()}

    def restore_environments(self, meta):
        if meta.get("env_state") is not None:
            set_env_state(self.envs, meta["env_state"])
            self.obs = np.array(meta["obs"], np.float32)
        else:  # not a classic-control environment: its state was not saved
            print(f"note: {self.cfg.env} is not a classic-control environment: its state is not in the checkpoint, "
                  "so the resumed run starts new episodes (not bit-identical to an uninterrupted run)",
                  file=sys.stderr, flush=True)

    # ---- logging, CleanRL's tags ----
    def log_hook(self, step):
        """At driver iteration `step`: speed and the mean of the last 20 episodes (x: iterations);
        every episode finished since the last call (x: environment steps, as CleanRL logs them)."""
        now = time.perf_counter()
        values = {"charts/SPS": (self.env_steps - self.tick_env_steps) / max(now - self.tick, 1e-9),
                  "charts/env_steps": self.env_steps}
        recent = self.episodes[-20:]
        if recent:
            values["charts/episodic_return_mean20"] = float(np.mean([r for r, _ in recent]))
            values["charts/episodic_length_mean20"] = float(np.mean([l for _, l in recent]))
        self.tick, self.tick_env_steps = now, self.env_steps
        self.run.logger.scalars(step, values)
        self.log_episodes()

    def log_episodes(self):
        if self.unlogged:
            self.run.logger.points({"charts/episodic_return": [(x, r) for x, r, _ in self.unlogged],
                                    "charts/episodic_length": [(x, l) for x, _, l in self.unlogged]})
            self.unlogged = []

    def results(self, episodes):
        """metrics.json at the end of a run: the evaluation (below), environment steps, updates, and
        the mean return of the last training episodes."""
        return {**self.evaluation(episodes), "env_steps": self.env_steps, "updates": self.cfg.steps,
                "train_return_last20": self.train_return(20), "train_return_last10": self.train_return(10),
                "device": self.run.device}

    def evaluation(self, episodes):
        """metrics.json's evaluation keys (at the end of a run and from `python -m metrics`): the
        deterministic policy's mean and std return over `episodes` episodes."""
        returns = np.asarray(self.evaluate(episodes), np.float64)
        return {"eval_return_mean": float(returns.mean()), "eval_return_std": float(returns.std()),
                "eval_episodes": len(returns)}

    def train_return(self, last):
        """Mean return of the last `last` finished training episodes (None before the first)."""
        recent = [r for r, _ in self.episodes[-last:]]
        return float(np.mean(recent)) if recent else None

    # ---- evaluation ----
    def deterministic_action(self, obs):
        """The action the trained policy takes without exploration (argmax / mean), for the env."""
        raise NotImplementedError

    def evaluate(self, episodes, seed=None):
        """The deterministic policy on a fresh environment: returns of `episodes` episodes."""
        return evaluate_policy(self.cfg.env, self.deterministic_action, episodes,
                               self.cfg.seed + 10_000 if seed is None else seed)


class ReplayAgent(Agent):
    """An off-policy agent: `self.buffer` (rl/replay.py), filled by `step_and_store`, saved in every
    checkpoint (its Parameters via state(), its cursor in the host state)."""

    def step_and_store(self, action, stored_action=None):
        """One vector step with `action`; stores (obs, stored_action or action, reward, next_obs,
        terminated). A time limit is not terminal: `terminated` alone ends the bootstrap, and next_obs
        is the episode's final observation (not the next episode's first) wherever one ended."""
        obs, reward, terminated, truncated, info = self.step_envs(action)
        next_obs = obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            next_obs[i] = info["final_obs"][i]
        self.buffer.add(obs=self.obs, actions=action if stored_action is None else stored_action, rewards=reward,
                        next_obs=next_obs, terminated=terminated.astype(np.float32))
        self.obs = obs

    def host_state(self):
        return {**super().host_state(), "replay": self.buffer.state()}

    def load_host_state(self, meta):
        super().load_host_state(meta)
        if meta:
            self.buffer.load_from_parameters(meta["replay"])

    def before_save(self):
        super().before_save()
        self.buffer.sync_to_parameters()


class InGraphEnvironments:
    """Mixin (first base) of an agent whose environments run inside the graph (rl/native_envs.py): their
    state is the Parameter `env_carry`, saved with the weights instead of the host meta, and its finished
    episodes are read back from the device by `harvest()` before anything reads them."""

    def harvest(self):
        raise NotImplementedError

    def log_hook(self, step):
        self.harvest()
        super().log_hook(step)

    def before_save(self):
        self.harvest()
        super().before_save()

    def results(self, episodes):
        self.harvest()
        return super().results(episodes)

    def state(self):
        return super().state() + [self.env_carry]

    def environment_state(self):
        return {"env_state": None, "obs": None}  # the carry is the env_carry Parameter

    def restore_environments(self, meta):
        pass  # env_carry was loaded with the other Parameters


def evaluate_policy(env_id, act, episodes, seed):
    return evaluate_policies(env_id, act, episodes, seed, 1)[0]


def evaluate_policies(env_id, act, episodes, seed, copies):
    """[returns of `episodes` episodes on copy i]: `copies` environments seeded alike (each plays the
    episodes a single one would), stepped together; `act` gets their observations stacked (row i:
    copy i) and answers one action per row."""
    made = [make_envs(env_id, 1, seed) for _ in range(copies)]
    envs, obs = [e for e, _ in made], np.concatenate([o for _, o in made]).astype(np.float32)
    returns = [[] for _ in envs]
    while min(map(len, returns)) < episodes:
        actions = act(obs)
        for i, env in enumerate(envs):
            step_obs, _, _, _, info = env.step(actions[i:i + 1])
            obs[i] = step_obs[0]
            returns[i] += [r for r, _ in finished_episodes(info)]
    for env in envs:
        env.close()
    return [r[:episodes] for r in returns]
