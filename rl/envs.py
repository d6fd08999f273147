"""gymnasium vector environments, checked once: a Box observation space, a Discrete or Box action space.

Episodes reset in the same step they end (gymnasium's SAME_STEP autoreset: the step returns the next
episode's first observation and the final one in info["final_obs"]), and RecordEpisodeStatistics
reports each finished episode's return and length.
"""
import gymnasium as gym
import numpy as np

from loops.config import UserError


def make_envs(env_id, num_envs, seed):
    """`num_envs` copies of `env_id` stepped in this process, reset with seeds seed, seed+1, ...;
    UserError for an unknown id or unsupported spaces. Returns (envs, first observations)."""
    try:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    except gym.error.Error as e:
        raise UserError(f"--env {env_id}: {str(e).splitlines()[0]}")
    obs_space = envs.single_observation_space
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
        envs.close()
        raise UserError(f"--env {env_id}: observations must be a flat Box (a vector), got {obs_space}")
    if not isinstance(envs.single_action_space, (gym.spaces.Discrete, gym.spaces.Box)):
        envs.close()
        raise UserError(f"--env {env_id}: actions must be Discrete or Box, got {envs.single_action_space}")
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    obs, _ = envs.reset(seed=seed)
    return envs, obs.astype(np.float32)


def action_spec(envs):
    """(discrete?, number of actions or action dimension, (low, high) for Box actions)."""
    space = envs.single_action_space
    if isinstance(space, gym.spaces.Discrete):
        return True, int(space.n), None
    return False, int(np.prod(space.shape)), (space.low.astype(np.float32), space.high.astype(np.float32))


def finished_episodes(info):
    """[(return, length), ...] of the episodes that ended in this vector step."""
    if "episode" not in info:
        return []
    done = info["_episode"]
    return [(float(r), int(l)) for r, l in zip(info["episode"]["r"][done], info["episode"]["l"][done])]
