"""Evaluating a finished (or running) train_rl.py run from its checkpoint: `python -m metrics RUN_DIR`.

The agent is rebuilt from the config stored in the checkpoint, its Parameters loaded, and the
deterministic policy (argmax / mean) run for N episodes on environments seeded as train_rl.py's own
final evaluation (so the same checkpoint gives the same returns); one more episode is drawn as a plot
(episode.png) and, with --gif, rendered as an animated GIF (episode.gif, needs pygame)."""
import json
import os
import sys

import numpy as np

from loops import checkpoint, rundir
from loops.config import UserError
from rl.episode import can_render, plot_episode, record_episode, save_gif, save_png


def load_agent(run_dir, checkpoint_path=""):
    """(agent, checkpoint meta, checkpoint path) of a train_rl.py run."""
    import train_rl
    from loops.run import Run
    from rl import AGENTS
    path = checkpoint_path or checkpoint.latest(run_dir)
    if not path:
        raise UserError(f"no checkpoint in {os.path.join(run_dir, 'checkpoints')}")
    _, meta = checkpoint.read(path)
    fields = train_rl.RLConfig.__dataclass_fields__
    cfg = train_rl.RLConfig(**{k: v for k, v in meta["config"].items() if k in fields})
    cfg.run_dir, cfg.resume, cfg.no_progress = run_dir, False, True
    agent = AGENTS[cfg.algo](cfg, Run(cfg))
    checkpoint.load_into(path, agent.state())
    return agent, meta, path


def evaluate_run(run_dir, checkpoint_path="", episodes=0, gif=False):
    if gif and not can_render():
        raise UserError("--gif needs pygame to render the environment: pip install pygame")
    agent, meta, path = load_agent(run_dir, checkpoint_path)
    cfg = agent.cfg
    returns = agent.evaluate(episodes or cfg.eval_episodes)
    episode = record_episode(cfg.env, agent.deterministic_action, cfg.seed + 20_000, frames=gif)
    title = (f"{cfg.algo.upper()} {cfg.env}, step {meta['step']}: one episode of the deterministic policy, "
             f"return {episode['rewards'].sum():.1f}")
    save_png(os.path.join(run_dir, "episode.png"), plot_episode(episode, title))
    if gif:
        save_gif(os.path.join(run_dir, "episode.gif"), episode["frames"])
    metrics = {"eval_return_mean": float(np.mean(returns)), "eval_return_std": float(np.std(returns)),
               "eval_episodes": len(returns), "step": meta["step"], "checkpoint": os.path.basename(path)}
    out_path = os.path.join(run_dir, "metrics.json")
    existing = json.load(open(out_path)) if os.path.isfile(out_path) else {}
    existing.update(metrics)
    rundir.write_metrics(run_dir, existing)
    agent.envs.close()
    print(f"wrote {os.path.join(run_dir, 'episode.png')}" + (" and episode.gif" if gif else ""), file=sys.stderr)
    return metrics
