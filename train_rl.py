"""Train an actor-critic agent on a gymnasium environment: PPO (actor, critic) or SAC (actor, twin
Q critics, temperature), each model a Learner with its own optimizer and its own compiled step.

    python train_rl.py                                  # PPO on CartPole-v1 (the default)
    python train_rl.py --algo sac                       # SAC on Pendulum-v1
    python train_rl.py --env Acrobot-v1 --total-steps 300000
    python -m metrics RUN_DIR --episodes 20 --gif       # evaluate the policy again, see it
    tensorboard --logdir runs

--steps counts driver iterations. PPO: one iteration = one rollout of --num-steps x --num-envs
environment steps, then --update-epochs x --num-minibatches actor steps and as many critic steps.
SAC: one iteration = one step of the --num-envs environments and one critic step (actor and
temperature steps every --policy-frequency iterations), after --learning-starts random steps.
--total-steps sets --steps in environment steps instead. Flags left out (or given as `auto`) take the
algorithm's default (see AUTO in train_rl.py; config.json records the values used).
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")
if __name__ == "__main__":  # --help or a mistyped flag answers before MindSpore loads (loops/flagcache.py)
    from loops.flagcache import check_flags_early
    check_flags_early(__file__)

import json
from dataclasses import dataclass

from loops.config import RunConfig, opt, parse_config, run_cli
from loops.driver import Hook
from loops.learner import model_flags, settings
from loops.run import Run

MODELS = {"actor": "the actor", "critic": "the critic (SAC: both Q networks)", "alpha": "SAC's temperature"}
RLFlags = model_flags(RunConfig, MODELS, lr=opt(1e-3, "learning rate of every model"))

# the defaults of flags left out or given as `auto`, per algorithm: PPO's as tuned on CartPole
# (README: 500/500 on seeds 0-4), SAC's as CleanRL / the SB3 zoo's Pendulum settings
AUTO = {"ppo": dict(env="CartPole-v1", num_envs=8, total_steps=100_000, hidden=64, gamma=0.98, log_every=10),
        "sac": dict(env="Pendulum-v1", num_envs=1, total_steps=20_000, hidden=256, gamma=0.99, log_every=250)}
PPO_ONLY = ("num_steps", "update_epochs", "num_minibatches", "gae_lambda", "clip_coef", "ent_coef")
SAC_ONLY = ("buffer_size", "batch_size", "learning_starts", "tau", "policy_frequency", "alpha")


@dataclass
class RLConfig(RLFlags):
    RUNTIME_KEYS = RunConfig.RUNTIME_KEYS + ("total_steps", "eval_episodes")
    HELP_GROUPS = {"algorithm and environment": ("algo", "env", "num_envs", "total_steps", "steps", "hidden", "gamma",
                                                 "anneal_lr", "eval_episodes", "log_every"),
                   "PPO": PPO_ONLY, "SAC": SAC_ONLY}
    algo: str = opt("ppo", "algorithm", ["ppo", "sac"])
    env: str = opt("", "gymnasium environment id (a Box observation space)", auto="ppo CartPole-v1, sac Pendulum-v1")
    num_envs: int = opt(0, "environments stepped side by side", auto="ppo 8, sac 1")
    total_steps: int = opt(0, "environment steps to train for (sets --steps when that is auto)", auto="ppo 100k, sac 20k")
    steps: int = opt(0, "driver iterations (see above)", auto="from --total-steps")
    hidden: int = opt(0, "hidden units of every network's two layers", auto="ppo 64 tanh, sac 256 relu")
    gamma: float = opt(0.0, "discount", auto="ppo 0.98, sac 0.99")
    anneal_lr: bool = opt(True, "anneal the learning rates linearly to 0 over the run (CleanRL's SAC: constant)")
    eval_episodes: int = opt(10, "episodes of the deterministic policy evaluated at the end")
    log_every: int = opt(0, "log every N iterations", auto="ppo 10, sac 250")
    # PPO
    num_steps: int = opt(32, "PPO: steps per environment in each rollout")
    update_epochs: int = opt(20, "PPO: passes over each rollout")
    num_minibatches: int = opt(1, "PPO: minibatches per pass")
    gae_lambda: float = opt(0.8, "PPO: GAE lambda")
    clip_coef: float = opt(0.2, "PPO: ratio clip epsilon")
    ent_coef: float = opt(0.0, "PPO: entropy bonus weight")
    # SAC
    buffer_size: int = opt(100_000, "SAC: replay buffer capacity (transitions; saved in every checkpoint)")
    batch_size: int = opt(256, "SAC: transitions per update")
    learning_starts: int = opt(1000, "SAC: uniform random environment steps before the first update")
    tau: float = opt(0.005, "SAC: Polyak rate of the target critics")
    policy_frequency: int = opt(2, "SAC: actor and temperature steps, that many every that many iterations")
    alpha: float = opt(0.0, "SAC: fixed temperature; 0: learned (target entropy -dim(actions))")

    def validate(self):
        fields = type(self).__dataclass_fields__
        own, other = (PPO_ONLY, SAC_ONLY) if self.algo == "ppo" else (SAC_ONLY, PPO_ONLY)
        other = other + tuple(k for k in fields if k.endswith("_alpha")) if self.algo == "ppo" else other
        for key in other:
            self.check(getattr(self, key) == fields[key].default,
                       f"--{key.replace('_', '-')} is not a {self.algo.upper()} flag (this run is --algo {self.algo})")
        for key, value in AUTO[self.algo].items():
            if getattr(self, key) == fields[key].default:
                setattr(self, key, value)
        self.check_positive("num_envs", "total_steps", "hidden", "eval_episodes", "gamma", "log_every")
        self.check(0 < self.gamma <= 1, f"--gamma must be in (0, 1], got {self.gamma}")
        if self.algo == "ppo":
            self.check_positive("num_steps", "update_epochs", "num_minibatches", "clip_coef")
            self.check(0 <= self.gae_lambda <= 1, f"--gae-lambda must be in [0, 1], got {self.gae_lambda}")
            self.check_non_negative("ent_coef")
            batch = self.num_envs * self.num_steps
            self.check(batch % self.num_minibatches == 0,
                       f"--num-minibatches ({self.num_minibatches}) must divide --num-envs x --num-steps ({batch})")
            updates = self.total_steps // batch
        else:
            self.check_positive("buffer_size", "batch_size", "policy_frequency")
            self.check_non_negative("learning_starts", "alpha")
            self.check(0 < self.tau <= 1, f"--tau must be in (0, 1], got {self.tau}")
            self.check(self.learning_starts <= self.buffer_size,
                       f"--learning-starts ({self.learning_starts}) must not exceed --buffer-size ({self.buffer_size})")
            self.check(self.steps > 0 or self.total_steps > self.learning_starts,
                       f"--total-steps ({self.total_steps}) must exceed --learning-starts ({self.learning_starts})")
            if self.alpha > 0:  # a fixed temperature: there is no alpha model to configure
                for key in (k for k in fields if k.endswith("_alpha")):
                    self.check(getattr(self, key) == fields[key].default,
                               f"--{key.replace('_', '-')} needs a learned temperature (--alpha 0), not --alpha {self.alpha}")
            updates = (self.total_steps - self.learning_starts) // self.num_envs
        if self.steps == 0:
            self.steps = max(1, updates)
        super().validate()


def main(argv):
    cfg = parse_config(RLConfig, argv, __doc__)  # exits after printing under --dry-run
    with Run(cfg) as run:
        from rl import AGENTS  # after Run: MindSpore's context is set
        agent = AGENTS[cfg.algo](cfg, run)  # env errors first: a bad --env leaves no run dir behind
        run.open("train_rl", cfg.env, cfg.algo)
        state = agent.state()
        agent.load_host_state(run.restore(state))  # --resume: weights, optimizers, replay, host RNG, environments
        run.begin(state, meta=agent.host_state, learners=agent.learners()).progress_tags += ["charts/episodic_return", "losses/actor"]

        def save(step, final=True):
            agent.before_save()
            run.save(step, final)
        skip = any(settings(cfg, m)["skip_nonfinite"] for m in cfg.MODELS)  # else a NaN loss stops the run
        code = run.train(agent.phases(), hooks=[Hook(cfg.log_every, agent.log_hook)], save=save, fuse=True,
                         stop_on_nonfinite=not skip)
        results = None
        if code == 0:
            returns = agent.evaluate(cfg.eval_episodes)
            results = {"eval_return_mean": float(sum(returns) / len(returns)),
                       "eval_return_std": float((sum((r - sum(returns) / len(returns)) ** 2 for r in returns)
                                                 / len(returns)) ** 0.5),
                       "eval_episodes": len(returns), "env_steps": agent.env_steps, "updates": cfg.steps,
                       "train_return_last20": agent.train_return(20), "train_return_last10": agent.train_return(10),
                       "device": run.device}
        run.finish(results)
        agent.envs.close()
    if results:
        print(f"done: {json.dumps({k: results[k] for k in ('eval_return_mean', 'train_return_last20', 'env_steps')})}"
              f" run dir: {cfg.run_dir}")
    return code


if __name__ == "__main__":
    run_cli(main)
