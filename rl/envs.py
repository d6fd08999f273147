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
    except (gym.error.Error, ImportError) as e:  # ImportError: gymnasium's "module:Env-v0" form
        raise UserError(f"--env {env_id}: {(str(e).splitlines() or [type(e).__name__])[0]}")
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


# ---- exact resume: the environments' state as JSON (classic control only) ----
CLASSIC_CONTROL = "gymnasium.envs.classic_control."


def exact_state_supported(envs):
    """Whether env_state captures everything that decides these environments' future: true for
    gymnasium's classic-control environments (a few numbers and a numpy Generator each)."""
    return all(type(e.unwrapped).__module__.startswith(CLASSIC_CONTROL) for e in envs.env.envs)


def _encode(value):
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return {"scalar": value.item(), "dtype": str(value.dtype)}
    return value


def _decode(value):
    if isinstance(value, dict) and "array" in value:
        return np.array(value["array"], dtype=value["dtype"])
    if isinstance(value, dict) and "scalar" in value:
        return np.dtype(value["dtype"]).type(value["scalar"])
    return value


def _plain_attributes(obj):
    """The instance attributes that are numbers, arrays or None (state and constants; not spaces,
    renderers or strings). float64 arrays and Python floats survive JSON exactly (repr round-trips)."""
    return {k: _encode(v) for k, v in vars(obj).items()
            if v is None or isinstance(v, (bool, int, float, np.ndarray, np.generic))}


def env_state(envs):
    """JSON-able state of a RecordEpisodeStatistics(SyncVectorEnv) of classic-control environments:
    per environment its plain attributes, its np_random state and its TimeLimit's elapsed steps;
    the episode statistics in progress. None where exact_state_supported is false."""
    if not exact_state_supported(envs):
        return None
    per_env = []
    for env in envs.env.envs:
        base = env.unwrapped
        per_env.append({"attributes": _plain_attributes(base),
                        "np_random": base.np_random.bit_generator.state,
                        "elapsed_steps": _time_limit(env)._elapsed_steps})
    stats = {k: _encode(getattr(envs, k)) for k in ("episode_returns", "episode_lengths", "prev_dones", "episode_count")}
    return {"envs": per_env, "stats": stats}


def set_env_state(envs, state):
    """Put the environments back into `state` (from env_state)."""
    for env, saved in zip(envs.env.envs, state["envs"]):
        base = env.unwrapped
        for k, v in saved["attributes"].items():
            setattr(base, k, _decode(v))
        base.np_random.bit_generator.state = saved["np_random"]
        _time_limit(env)._elapsed_steps = saved["elapsed_steps"]
    for k, v in state["stats"].items():
        setattr(envs, k, _decode(v))


def _time_limit(env):
    while not isinstance(env, gym.wrappers.TimeLimit):
        env = env.env
    return env
