"""Reinforcement learning on the core in loops/: gymnasium environments (envs.py), rollout storage
and GAE (storage.py), PPO with separate actor and critic Learners (ppo.py)."""
