"""Score one GAN training run at several EMA decays at once (an experiment tool for choosing --ema).

    python -m tools.ema_probe --decays 0.995,0.999 -- --dataset fashion-mnist --seed 3 --run-dir runs/p3
    python -m tools.ema_probe --table runs/p0 runs/p1 ... --goal "pixel_precision>=0.55" --goal "pixel_recall>=0.7"

The EMA copy of G never feeds back into training (D and G learn from the same draws whatever the
decay), so one run can carry extra averages beside its own: each follows G at its own decay in the
same compiled loop, and after training each is scored by the run's evaluator at the same evaluation
latents as the run's own G_ema. RUN/ema_probe.json holds {"run": the run's own scores and --ema,
"probes": {decay: scores}}; the run's checkpoint, metrics.json and samples are those of train_gan.py with the
same flags. The probes are not checkpointed: a probed run cannot be resumed.
`--table RUN...` summarises probed runs (one per seed) per decay, as tools/sweep.py summarises seeds:
mean +- std (min, max) of a few metrics, how many runs meet each --goal and how many meet all of them.
"""
import json
import os
import runpy
import sys

from loops.config import UserError, run_cli
from tools.sweep import COMPARE, parse_goal, summarize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHOWN = ("fid", "precision", "recall", "coverage", "pixel_precision", "pixel_recall")  # --table's rows


def parse(argv):
    """(decays, train_gan.py's flags) from `--decays A,B,... -- FLAGS`; UserError on anything else."""
    if len(argv) < 3 or argv[0] != "--decays" or argv[2] != "--":
        raise UserError("usage: python -m tools.ema_probe --decays 0.995,0.999 -- TRAIN_GAN_FLAGS "
                        "(or --table RUN_DIR... [--goal KEY>=X])")
    try:
        decays = [float(x) for x in argv[1].split(",")]
    except ValueError:
        decays = []
    if not decays or not all(0.0 < d < 1.0 for d in decays):
        raise UserError(f"--decays needs decays in (0, 1), comma-separated, got {argv[1]!r}")
    if "--resume" in argv[3:]:
        raise UserError("a probed run cannot resume (its extra averages are not checkpointed)")
    return decays, argv[3:]


def install(decays):
    """Patch GANTrainer so that every trainer made after this carries the extra averages."""
    from gan import trainer as gan_trainer
    from loops.driver import Phase
    from loops.ema import EMA
    from loops.learner import declare
    trainer = gan_trainer.GANTrainer
    make, phases, final_results = trainer.__init__, trainer.phases, trainer.final_results

    def made(self, cfg, run, source, nets):
        make(self, cfg, run, source, nets)
        self.probes = []
        for i, decay in enumerate(decays):
            copy = declare(f"g_ema_probe{i}", gan_trainer.nets_for(cfg, source)[2], amp=cfg.amp)
            average = EMA(self.g.net, copy, decay)
            average.copy()  # starts as G, as the run's own G_ema does
            self.probes.append((decay, average, EMA(copy, self.g_ema, 0.0)))
        backup = declare("g_ema_backup", gan_trainer.nets_for(cfg, source)[2], amp=cfg.amp)
        self.save_g_ema, self.restore_g_ema = EMA(self.g_ema, backup, 0.0), EMA(backup, self.g_ema, 0.0)

    def with_probes(self):
        extra = [Phase(f"ema_probe{i}", lambda step: (), average.phase_body, (f"ema_probe{i}/decay",))
                 for i, (_, average, _) in enumerate(self.probes)]
        return phases(self) + extra

    def scored(self):
        results = final_results(self)
        numbers = lambda metrics: {k: v for k, v in metrics.items() if isinstance(v, (int, float))}  # noqa: E731
        scores = {"run": {"ema": self.cfg.ema, **numbers(results)}, "probes": {}}
        self.save_g_ema.copy()
        for decay, _, into_g_ema in self.probes:
            into_g_ema.copy()
            metrics = self.eval_hook.evaluator(*self.eval_samples())
            scores["probes"][str(decay)] = numbers(metrics)
        self.restore_g_ema.copy()  # the run's own G_ema again, before the final checkpoint is written
        with open(os.path.join(self.cfg.run_dir, "ema_probe.json"), "w") as f:
            json.dump(scores, f, indent=1)
        return results

    trainer.__init__, trainer.phases, trainer.final_results = made, with_probes, scored


def by_decay(run_dirs):
    """{decay: [one sweep-style run record per run dir]} from each RUN/ema_probe.json (the run's own
    average under its --ema; a decay missing from a run is missing from its list)."""
    found = {}
    for seed, run_dir in enumerate(run_dirs):
        with open(os.path.join(run_dir, "ema_probe.json")) as f:
            scores = json.load(f)
        own = {k: v for k, v in scores["run"].items() if k != "ema"}
        for decay, metrics in [(str(scores["run"]["ema"]), own)] + list(scores["probes"].items()):
            found.setdefault(float(decay), {})[seed] = {"seed": seed, "status": 0, "metrics": metrics}
    return {decay: list(runs.values()) for decay, runs in sorted(found.items())}


def table(run_dirs, goals):
    """Markdown: per decay, mean +- std (min, max) of SHOWN and the runs meeting every goal."""
    head = ["| decay | runs |"] + [f" {k} |" for k in SHOWN] + [" all goals met |"]
    lines = ["".join(head), "|" + "---|" * (len(SHOWN) + 3)]
    for decay, runs in by_decay(run_dirs).items():
        summary = summarize(runs, goals)
        cells = []
        for key in SHOWN:
            row = summary.get(key)
            cells.append(f"{row['mean']:.3f} +- {row['std']:.3f} ({row['min']:.3f}, {row['max']:.3f})"
                         + "".join(f"; {g['goal']}: {g['met']}" for g in row.get("goals", [])) if row else "")
        met = sum(all(key in r["metrics"] and COMPARE[op](float(r["metrics"][key]), x) for key, op, x in goals)
                  for r in runs)
        lines.append(f"| {decay:g} | {len(runs)} | " + " | ".join(cells) + f" | {met} of {len(runs)} |")
    return "\n".join(lines)


def main(argv):
    if argv[:1] == ["--table"]:
        dirs, goals, rest = [], [], argv[1:]
        while rest:
            if rest[0] == "--goal" and len(rest) > 1:
                goals.append(parse_goal(rest[1]))
                rest = rest[2:]
            else:
                dirs.append(rest.pop(0))
        missing = [d for d in dirs if not os.path.isfile(os.path.join(d, "ema_probe.json"))]
        if not dirs or missing:
            raise UserError(f"--table needs probed run dirs (each with an ema_probe.json); without one: "
                            f"{', '.join(missing) or 'none given'}")
        print(table(dirs, goals))
        return 0
    decays, flags = parse(argv)
    install(decays)
    # train_gan.py runs as `python train_gan.py FLAGS` would (as tools/sweep.py runs it, but in this
    # process, where the trainer is patched); a library imports no entry script
    sys.argv[:] = [os.path.join(ROOT, "train_gan.py"), *flags]
    runpy.run_path(sys.argv[0], run_name="__main__")  # exits through run_cli with the run's status
    return 0


if __name__ == "__main__":
    run_cli(main)
