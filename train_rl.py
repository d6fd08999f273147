"""Train a reinforcement-learning agent on a gymnasium environment: the algorithm is looked up by
name in rl/ (rl/__init__.py ALGORITHMS), and its own config decides the flags. Every model of the
agent is a Learner with its own optimizer and its own compiled step.

    python train_rl.py                                  # PPO on CartPole-v1 (the default)
    python train_rl.py --algo sac                       # SAC on Pendulum-v1
    python train_rl.py --algo dqn                       # DQN on CartPole-v1; td3, ddpg: Pendulum-v1
    python train_rl.py --algo sac --help                # SAC's flags (each algorithm has its own)
    python train_rl.py --env Acrobot-v1 --total-steps 300000
    python -m metrics RUN_DIR --episodes 20 --gif       # evaluate the policy again, see it
    tensorboard --logdir runs

--steps counts driver iterations, each algorithm's own unit (its module's docstring says which).
PPO: one rollout of --num-steps x --num-envs environment steps and its updates; SAC, TD3, DDPG: one
step of the --num-envs environments and one critic update; DQN: one Q update, after --train-frequency
vector steps (before each group of --gradient-steps updates). --total-steps sets --steps in environment steps
instead. config.json records every value used and the algorithm that made the run.
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")
if __name__ == "__main__":  # --help or a mistyped flag answers before MindSpore loads (loops/flagcache.py)
    from loops.flagcache import check_flags_early
    from loops.config import choose_recipe
    from rl import ALGORITHMS, DEFAULT
    if "--config" not in " ".join(sys.argv):  # a preset may name another algorithm: parse it for real
        check_flags_early(__file__, variant=choose_recipe(sys.argv[1:], "algo", ALGORITHMS, DEFAULT))

import json

from loops.config import choose_recipe, parse_config, run_cli
from loops.driver import Hook
from loops.learner import settings
from loops.run import Run
from rl import ALGORITHMS, DEFAULT, algorithm


def main(argv):
    name = choose_recipe(argv, "algo", ALGORITHMS, DEFAULT)
    recipe = algorithm(name)
    cache = (__file__, name) if __name__ == "__main__" else None
    cfg = parse_config(recipe.Config, argv, __doc__, cache=cache)  # exits after printing under --dry-run
    with Run(cfg, recipe=recipe.__name__) as run:
        agent = recipe.AGENT(cfg, run)  # env errors first: a bad --env leaves no run dir behind
        run.open("train_rl", cfg.env, cfg.algo)
        state = agent.state()
        agent.load_host_state(run.restore(state))  # --resume: weights, optimizers, replay, host RNG, environments
        run.begin(state, meta=agent.host_state, learners=agent.learners()).progress_tags += list(agent.PROGRESS_TAGS)

        def save(step, final=True):
            agent.before_save()
            run.save(step, final)
        skip = any(settings(cfg, m)["skip_nonfinite"] for m in cfg.MODELS)  # else a NaN loss stops the run
        code = run.train(agent.phases(), hooks=[Hook(cfg.log_every, agent.log_hook)], save=save, fuse=True,
                         stop_on_nonfinite=not skip)
        results, code = run.evaluate(code, lambda: agent.results(cfg.eval_episodes))
        run.finish(results)
        agent.envs.close()
    if results:
        print(f"done: {json.dumps({k: results[k] for k in ('eval_return_mean', 'train_return_last20', 'env_steps')})}"
              f" run dir: {cfg.run_dir}")
    return code


if __name__ == "__main__":
    run_cli(main)
