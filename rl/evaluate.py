"""Evaluating a finished (or running) train_rl.py run from its checkpoint: `python -m metrics RUN_DIR`.

The agent is rebuilt from the config stored in the checkpoint, its Parameters loaded, and the
deterministic policy (argmax / mean) run for N episodes on environments seeded as train_rl.py's own
final evaluation (so the same checkpoint gives the same returns); one more episode is drawn as a plot
(episode.png) and, with --gif, rendered as an animated GIF (episode.gif, needs pygame)."""
import os
import sys

from loops import checkpoint, rundir
from loops.config import UserError
from rl.episode import can_render, plot_episode, record_episode, save_gif, save_png


def load_agent(run_dir, checkpoint_path=""):
    """(agent, checkpoint meta, checkpoint path) of a train_rl.py run: its algorithm's module rebuilds
    the agent from the config stored in the checkpoint."""
    from loops.run import Run
    from rl import ALGORITHMS, algorithm
    path = checkpoint_path or checkpoint.latest(run_dir)
    if not path:
        raise UserError(f"no checkpoint in {os.path.join(run_dir, 'checkpoints')}")
    _, meta = checkpoint.read(path)
    name = meta.get("config", {}).get("algo")
    if name not in ALGORITHMS:
        made_by = rundir.made_by_text(meta.get("recipe", ""), meta.get("script", ""))
        raise UserError(f"{path} is not a checkpoint of a train_rl.py run" + (f" (it is of {made_by})" if made_by else ""))
    recipe = algorithm(name)
    fields = recipe.Config.__dataclass_fields__
    cfg = recipe.Config(**{k: v for k, v in meta["config"].items() if k in fields})
    cfg.run_dir, cfg.resume, cfg.no_progress, cfg.device = run_dir, False, True, ""  # the best device here
    agent = recipe.AGENT(cfg, Run(cfg))
    checkpoint.load_into(path, agent.state())
    return agent, meta, path


class Evaluation:
    """`python -m metrics RUN_DIR` for every train_rl.py run (each algorithm module names it)."""
    description = ("RL runs: mean and std return of the deterministic policy over N episodes, a plot of one "
                   "episode (episode.png) and, with --gif (needs pygame), that episode as an animated GIF")

    def add_flags(self, parser):
        parser.add_argument("--checkpoint", default="", help="checkpoint to evaluate (default: the run's latest)")
        parser.add_argument("--episodes", type=int, default=0, help="episodes (default: the run's --eval-episodes)")
        parser.add_argument("--gif", action="store_true", help="also save the episode as an animated GIF (pygame)")

    def __call__(self, run_dir, args):
        if args.episodes < 0:
            raise UserError(f"--episodes must be >= 0 (0: the run's --eval-episodes), got {args.episodes}")
        return evaluate_run(run_dir, args.checkpoint, args.episodes, args.gif)


EVALUATION = Evaluation()


def evaluate_run(run_dir, checkpoint_path="", episodes=0, gif=False):
    if gif and not can_render():
        raise UserError("--gif needs pygame to render the environment: pip install pygame")
    agent, meta, path = load_agent(run_dir, checkpoint_path)
    cfg = agent.cfg
    evaluation = agent.evaluation(episodes or cfg.eval_episodes)
    episode = record_episode(cfg.env, agent.deterministic_action, cfg.seed + 20_000, frames=gif)
    title = (f"{cfg.algo.upper()} {cfg.env}, step {meta['step']}: one episode of the deterministic policy, "
             f"return {episode['rewards'].sum():.1f}")
    save_png(os.path.join(run_dir, "episode.png"), plot_episode(episode, title))
    if gif:
        save_gif(os.path.join(run_dir, "episode.gif"), episode["frames"])
    metrics = {**evaluation, "step": meta["step"], "checkpoint": os.path.basename(path)}
    existing = rundir.read_metrics(run_dir)
    existing.update(metrics)
    rundir.write_metrics(run_dir, existing)
    agent.envs.close()
    print(f"wrote {os.path.join(run_dir, 'episode.png')}" + (" and episode.gif" if gif else ""), file=sys.stderr)
    return metrics
