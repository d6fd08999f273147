"""Score one GAN training run at several EMA decays at once (an experiment tool for choosing --ema).

    python -m tools.ema_probe --decays 0.995,0.999 -- --dataset fashion-mnist --seed 3 --run-dir runs/p3
    python -m tools.ema_probe --table runs/p0 runs/p1 ... --goal "pixel_precision>=0.55" --goal "pixel_recall>=0.7"

The EMA copy of G never feeds back into training (D and G learn from the same draws whatever the
decay), so one run can carry extra averages beside its own: each follows G at its own decay in the
same compiled loop, and after training each is scored by the run's evaluator at the same evaluation
latents as the run's own G_ema. RUN/ema_probe.json holds {"run": the run's own scores and --ema,
"probes": {decay: scores}}; the run's checkpoint, samples and scores are those of train_gan.py with the
same flags (metrics.json adds the probes' ema_probe<i>_decay tags). The probes are not checkpointed: a
probed run cannot be resumed, and it is one process (no --distributed).
`--table RUN...` summarises probed runs (one per seed) per decay, as tools/sweep.py summarises seeds:
mean +- std (min, max) of a few metrics, how many runs meet each --goal and how many meet all of them.
"""
import json
import os
import runpy
import sys

from loops.config import UserError, run_cli
from tools.sweep import COMPARE, check_goal_keys, numeric_metrics, parse_goal, summarize

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
    if len(set(decays)) != len(decays):
        raise UserError(f"--decays lists a decay twice: {argv[1]!r}")
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
        # before anything is trained or written (the run dir is only locked so far)
        if cfg.resume:  # also a preset's "resume": the probes would start from the resumed G
            raise UserError("a probed run cannot resume (its extra averages are not checkpointed)")
        if cfg.distributed:
            raise UserError("a probed run is one process (leave out --distributed)")
        make(self, cfg, run, source, nets)
        self.probes = []
        for i, decay in enumerate(decays):
            copy = declare(f"g_ema_probe{i}", gan_trainer.nets_for(cfg, source)[2], amp=cfg.amp)
            average = EMA(self.g.net, copy, decay)
            average.copy()  # starts as G, as the run's own G_ema does (a fresh run: resume is refused above)
            self.probes.append((decay, average, EMA(copy, self.g_ema, 0.0)))
        backup = declare("g_ema_backup", gan_trainer.nets_for(cfg, source)[2], amp=cfg.amp)
        self.save_g_ema, self.restore_g_ema = EMA(self.g_ema, backup, 0.0), EMA(backup, self.g_ema, 0.0)

    def with_probes(self):
        extra = [Phase(f"ema_probe{i}", lambda step: (), average.phase_body, (f"ema_probe{i}/decay",))
                 for i, (_, average, _) in enumerate(self.probes)]
        return phases(self) + extra

    def scored(self):
        from loops import rundir
        results = final_results(self)  # the final checkpoint is already written
        scores = {"run": {"ema": self.cfg.ema, **numeric_metrics(results)}, "probes": {}}
        self.save_g_ema.copy()
        try:
            for decay, _, into_g_ema in self.probes:
                into_g_ema.copy()
                metrics = self.eval_hook.evaluator(*self.eval_samples())
                scores["probes"][str(decay)] = numeric_metrics(metrics)
        finally:  # the run's own G_ema again (its digest, anything that samples it after this)
            self.restore_g_ema.copy()
        rundir.write_json(os.path.join(self.cfg.run_dir, "ema_probe.json"), scores)  # atomic; WriteFailure: exit 4
        return results

    trainer.__init__, trainer.phases, trainer.final_results = made, with_probes, scored


def by_decay(run_dirs):
    """{decay: [one sweep-style run record per run dir]} from each RUN/ema_probe.json (the run's own
    average under its --ema; a decay missing from a run is missing from its list)."""
    found = {}
    for seed, run_dir in enumerate(run_dirs):
        path = os.path.join(run_dir, "ema_probe.json")
        try:
            with open(path) as f:
                scores = json.load(f)
            own = {k: v for k, v in scores["run"].items() if k != "ema"}
            entries = [(float(scores["run"]["ema"]), own)] + [(float(k), v) for k, v in scores["probes"].items()]
            if not all(isinstance(metrics, dict) for _, metrics in entries):
                raise TypeError("a decay's scores are not an object")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise UserError(f"{path}: not a probed run's scores ({type(e).__name__}: {e})")
        for decay, metrics in entries:  # a probe at the run's own decay scores as the run: the run's kept
            found.setdefault(decay, {}).setdefault(seed, {"seed": seed, "status": 0, "metrics": numeric_metrics(metrics)})
    return {decay: list(runs.values()) for decay, runs in sorted(found.items())}


def table(run_dirs, goals):
    """Markdown: per decay, mean +- std (min, max) of SHOWN and the runs meeting every goal."""
    head = ["| decay | runs |"] + [f" {k} |" for k in SHOWN] + [" all goals met |"]
    lines = ["".join(head), "|" + "---|" * (len(SHOWN) + 3)]
    decays = by_decay(run_dirs)
    for runs in decays.values():
        for r in runs:
            check_goal_keys(goals, r["metrics"])
    for decay, runs in decays.items():
        summary = summarize(runs, goals)
        cells = []
        for key in SHOWN:
            row = summary.get(key)
            cells.append(f"{row['mean']:.3f} +- {row['std']:.3f} ({row['min']:.3f}, {row['max']:.3f})"
                         + "".join(f"; {g['goal']}: {g['met']}" for g in row.get("goals", [])) if row else "")
        met = sum(all(key in r["metrics"] and COMPARE[op](r["metrics"][key], x) for key, op, x in goals)
                  for r in runs)
        lines.append(f"| {decay!r} | {len(runs)} | " + " | ".join(cells)
                     + (f" | {met} of {len(runs)} |" if goals else " | - |"))
    return "\n".join(lines)


def main(argv):
    if argv[:1] == ["--table"]:
        dirs, goals, rest = [], [], argv[1:]
        while rest:
            if rest[0] == "--goal":
                if len(rest) < 2:
                    raise UserError("--goal needs KEY>=VALUE (or <=, >, <, ==)")
                goals.append(parse_goal(rest[1]))
                rest = rest[2:]
            elif rest[0].startswith("--"):
                raise UserError(f"--table takes run dirs and --goal, not {rest[0]}")
            else:
                dirs.append(rest.pop(0))
        if len({os.path.realpath(d) for d in dirs}) != len(dirs):
            raise UserError("--table lists a run dir twice")
        missing = [d for d in dirs if not os.path.isfile(os.path.join(d, "ema_probe.json"))]
        if not dirs or missing:
            raise UserError(f"--table needs probed run dirs (each with an ema_probe.json); without one: "
                            f"{', '.join(missing) or 'none given'}")
        print(table(dirs, goals))
        return 0
    decays, flags = parse(argv)
    script = os.path.join(ROOT, "train_gan.py")
    os.environ.setdefault("GLOG_v", "2" if "--debug" in flags else "4")  # before MindSpore loads, as train_gan.py
    from loops.flagcache import check_flags_early
    check_flags_early(script, flags)  # a bad train_gan.py flag: one error line, before the slow imports
    install(decays)
    # train_gan.py runs as `python train_gan.py FLAGS` would (as tools/sweep.py runs it, but in this
    # process, where the trainer is patched); a library imports no entry script
    sys.argv[:] = [script, *flags]
    runpy.run_path(sys.argv[0], run_name="__main__")  # exits through run_cli with the run's status
    return 0


if __name__ == "__main__":
    run_cli(main)
