"""Reinforcement learning on the core in loops/: gymnasium environments (envs.py), what every
algorithm shares (agent.py: the Agent base class; config.py: the flags every algorithm has), rollout
storage and GAE (storage.py), a replay buffer (replay.py), evaluation (evaluate.py), and one module
per algorithm.

An algorithm module defines `Config` (its flags: a dataclass deriving rl.config.RLConfig through
rl.config.algorithm_config, with its own defaults and help) and `Agent` (a subclass of rl.agent.Agent).
A new algorithm is that module plus one line in ALGORITHMS; train_rl.py, rl/evaluate.py and
`python -m metrics` find it here by name.
"""
import importlib

ALGORITHMS = {  # --algo name -> module
    "dqn": "rl.dqn",
    "ppo": "rl.ppo",
    "sac": "rl.sac",
    "td3": "rl.td3",
    "ddpg": "rl.ddpg",
}
DEFAULT = "ppo"


def algorithm(name):
    """The module of algorithm `name` (imported on first use: MindSpore loads with it)."""
    return importlib.import_module(ALGORITHMS[name])
