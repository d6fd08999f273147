"""Seeing a trained policy: one episode recorded, drawn as a plot of its observations, actions and
rewards over time (always: Pillow only), and saved as an animated GIF of the environment's own
rendering where it can render (gymnasium's classic control draws through pygame, an optional
dependency: `pip install pygame`)."""
import gymnasium as gym
import numpy as np
from PIL import Image, ImageDraw

from loops.files import atomic_write

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
          (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]


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
            out["frames"].append(env.render())
        action = act(obs[None].astype(np.float32))[0]
        out["obs"].append(obs)
        out["actions"].append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        out["rewards"].append(reward)
        done = terminated or truncated
    env.close()
    return {k: (np.asarray(v, np.float32) if k != "frames" else v) for k, v in out.items()}


def plot_episode(episode, title, width=720, panel=150):
    """Three stacked line charts (observation components, actions, reward) as an HWC uint8 array."""
    rows = [("observation", episode["obs"].reshape(len(episode["obs"]), -1)),
            ("action", episode["actions"].reshape(len(episode["actions"]), -1).astype(np.float32)),
            ("reward", episode["rewards"].reshape(-1, 1))]
    canvas = Image.new("RGB", (width, 24 + len(rows) * (panel + 10)), "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((8, 6), title, fill="black")
    left, right = 60, width - 10
    for r, (name, series) in enumerate(rows):
        top = 24 + r * (panel + 10)
        bottom = top + panel - 14
        lo, hi = float(series.min()), float(series.max())
        if hi - lo < 1e-9:
            lo, hi = lo - 1, hi + 1
        draw.rectangle([left, top, right, bottom], outline=(180, 180, 180))
        draw.text((4, top), f"{hi:.3g}", fill="gray")
        draw.text((4, bottom - 10), f"{lo:.3g}", fill="gray")
        draw.text((left + 4, bottom + 1), f"{name} vs step (0..{len(series) - 1})", fill="black")
        xs = left + np.arange(len(series)) / max(1, len(series) - 1) * (right - left)
        for k in range(series.shape[1]):
            ys = bottom - (series[:, k] - lo) / (hi - lo) * (bottom - top)
            draw.line(list(zip(xs.tolist(), ys.tolist())), fill=COLORS[k % len(COLORS)], width=2)
    return np.asarray(canvas)


def save_png(path, hwc):
    atomic_write(path, lambda tmp: Image.fromarray(hwc).save(tmp, format="PNG"), "episode plot")


def save_gif(path, frames, fps=30):
    """Frames (HWC uint8) as an animated GIF, halved in size (classic control renders 600x400)."""
    images = [Image.fromarray(f).reduce(2) for f in frames]
    atomic_write(path, lambda tmp: images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                                                  duration=int(1000 / fps), loop=0), "episode GIF")
