"""Seeing a trained policy: one episode recorded, drawn as a plot of its observations, actions and
rewards over time (always: Pillow only), and saved as an animated GIF of the environment's own
rendering where it can render (gymnasium's classic control draws through pygame, an optional
dependency: `pip install pygame`)."""
import gymnasium as gym
import numpy as np
from PIL import Image

from loops.config import UserError
from loops.files import atomic_write
from loops.plots import panels


def can_render():
    try:
        import pygame  # noqa: F401
        return True
    except ImportError:
        return False


def record_episode(env_id, act, seed, frames=False):
    """Run one episode of `act` (obs batch of 1 -> env action batch of 1) on env_id reset with `seed`.
    Returns a dict of arrays: obs (T, d), actions (T, ...), rewards (T,), and frames (a list of
    HWC uint8 arrays) when frames=True."""
    env = gym.make(env_id, render_mode="rgb_array" if frames else None)
    obs, _ = env.reset(seed=seed)
    out = {"obs": [], "actions": [], "rewards": [], "frames": []}
    done = False
    while not done:
        if frames:
            frame = env.render()
            if not isinstance(frame, np.ndarray):
                env.close()
                raise UserError(f"--gif: {env_id} does not render rgb_array frames")
            out["frames"].append(frame)
        action = act(obs[None].astype(np.float32))[0]
        out["obs"].append(obs)
        out["actions"].append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        out["rewards"].append(reward)
        done = terminated or truncated
    env.close()
    return {k: (np.asarray(v, np.float32) if k != "frames" else v) for k, v in out.items()}


def plot_episode(episode, title):
    """Observation components, actions and reward over the episode's steps (loops/plots.py panels)."""
    steps = np.arange(len(episode["rewards"]))
    return panels(title, [("observation vs step", steps, episode["obs"].reshape(len(steps), -1)),
                          ("action vs step", steps, episode["actions"].reshape(len(steps), -1)),
                          ("reward vs step", steps, episode["rewards"])])


def save_png(path, hwc):
    atomic_write(path, lambda tmp: Image.fromarray(hwc).save(tmp, format="PNG"), "episode plot")


def save_gif(path, frames, fps=30):
    """Frames (HWC uint8) as an animated GIF, halved in size (classic control renders 600x400)."""
    images = [Image.fromarray(f).reduce(2) for f in frames]
    atomic_write(path, lambda tmp: images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                                                  duration=int(1000 / fps), loop=0), "episode GIF")
