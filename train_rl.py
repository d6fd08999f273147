"""Train an actor and a critic with PPO on a gymnasium environment: two Learners, two compiled steps.

    python train_rl.py                                  # PPO on CartPole-v1 (the default)
    python train_rl.py --env Acrobot-v1 --total-steps 300000
    python train_rl.py --env Pendulum-v1 --gamma 0.9    # continuous actions (Gaussian policy)
    tensorboard --logdir runs

--steps counts PPO updates (each: one rollout of --num-steps x --num-envs environment steps, then
--update-epochs x --num-minibatches actor steps and as many critic steps); --total-steps sets it in
environment steps instead. SAC (--algo sac) is not implemented yet.
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")

import json
from dataclasses import dataclass

import numpy as np

from loops.config import RunConfig, opt, parse_config, run_cli
from loops.driver import Hook
from loops.learner import all_state, model_flags
from loops.run import Run

RLFlags = model_flags(RunConfig, {"actor": "the actor", "critic": "the critic"},
                      lr=opt(1e-3, "learning rate of both models (annealed linearly to 0 with --anneal-lr)"))


@dataclass
class RLConfig(RLFlags):
    algo: str = opt("ppo", "algorithm (sac: not implemented yet)", ["ppo", "sac"])
    env: str = opt("CartPole-v1", "gymnasium environment id (a Box observation space)")
    num_envs: int = opt(8, "environments stepped side by side")
    num_steps: int = opt(32, "steps per environment in each rollout")
    total_steps: int = opt(100_000, "environment steps to train for (sets --steps when that is 0)")
    steps: int = opt(0, "PPO updates; 0: --total-steps / (--num-envs x --num-steps)")
    update_epochs: int = opt(20, "passes over each rollout")
    num_minibatches: int = opt(1, "minibatches per pass")
    gamma: float = opt(0.98, "discount")
    gae_lambda: float = opt(0.8, "GAE lambda")
    clip_coef: float = opt(0.2, "PPO ratio clip epsilon")
    ent_coef: float = opt(0.0, "entropy bonus weight")
    anneal_lr: bool = opt(True, "anneal the learning rates linearly to 0 over the run")
    hidden: int = opt(64, "hidden units of the actor's and the critic's two tanh layers")
    eval_episodes: int = opt(10, "episodes of the deterministic policy evaluated at the end")
    log_every: int = opt(10, "log every N updates")

    def validate(self):
        if self.steps == 0:
            self.steps = max(1, self.total_steps // (self.num_envs * self.num_steps))
        super().validate()
        self.check(self.algo == "ppo", "--algo sac is not implemented yet (PPO only for now)")
        self.check_positive("num_envs", "num_steps", "total_steps", "update_epochs", "num_minibatches", "hidden",
                            "eval_episodes", "gamma", "clip_coef")
        self.check(0 < self.gamma <= 1 and 0 <= self.gae_lambda <= 1, "--gamma must be in (0, 1], --gae-lambda in [0, 1]")
        self.check_non_negative("ent_coef")
        batch = self.num_envs * self.num_steps
        self.check(batch % self.num_minibatches == 0,
                   f"--num-minibatches ({self.num_minibatches}) must divide --num-envs x --num-steps ({batch})")


def main(argv):
    cfg = parse_config(RLConfig, argv, __doc__)  # exits after printing under --dry-run
    with Run(cfg) as run:
        from rl.ppo import PPO  # after Run: MindSpore's context is set
        agent = PPO(cfg, run)  # env errors first: a bad --env leaves no run dir behind
        run.open("train_rl", cfg.env, cfg.algo)
        state = all_state(agent.actor, agent.critic)
        run.restore(state)  # --resume: weights, optimizers and host RNG; the environments start new episodes
        run.begin(state)
        code = run.train(agent.phases(), hooks=[Hook(cfg.log_every, agent.log_hook)])
        results = None
        if code == 0:
            returns = agent.evaluate(cfg.eval_episodes)
            last = [r for r, _ in agent.episodes[-20:]]
            results = {"eval_return_mean": float(np.mean(returns)), "eval_return_std": float(np.std(returns)),
                       "eval_episodes": len(returns), "env_steps": agent.env_steps, "updates": cfg.steps,
                       "train_return_last20": float(np.mean(last)) if last else None, "device": run.device}
        run.finish(results)
        agent.envs.close()
    if results:
        print(f"done: {json.dumps({k: results[k] for k in ('eval_return_mean', 'train_return_last20', 'env_steps')})}"
              f" run dir: {cfg.run_dir}")
    return code


if __name__ == "__main__":
    run_cli(main)
