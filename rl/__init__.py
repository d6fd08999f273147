"""Reinforcement learning on the core in loops/: gymnasium environments (envs.py), what every
algorithm shares (agent.py), rollout storage and GAE (storage.py), a replay buffer (replay.py), PPO
with an actor and a critic Learner (ppo.py), SAC with actor, twin-critic and temperature Learners (sac.py)."""


def _ppo(cfg, run):
    from rl.ppo import PPO
    return PPO(cfg, run)


def _sac(cfg, run):
    from rl.sac import SAC
    return SAC(cfg, run)


AGENTS = {"ppo": _ppo, "sac": _sac}
