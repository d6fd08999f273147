"""Score one GAN training run at several EMA decays at once (an experiment tool for choosing --ema).

    python -m tools.ema_probe --decays 0.995,0.999 -- --dataset fashion-mnist --seed 3 --run-dir runs/p3

The EMA copy of G never feeds back into training (D and G learn from the same draws whatever the
decay), so one run can carry extra averages beside its own: each follows G at its own decay in the
same compiled loop, and after training each is scored by the run's evaluator at the same evaluation
latents as the run's own G_ema. RUN/ema_probe.json holds {"run": the run's own scores and --ema,
"probes": {decay: scores}}; the run's checkpoint, metrics.json and samples are those of train_gan.py with the
same flags. The probes are not checkpointed: a probed run cannot be resumed.
"""
import json
import os
import sys

import train_gan
from gan import trainer as gan_trainer
from loops.driver import Phase
from loops.ema import EMA
from loops.learner import declare


def parse(argv):
    """(decays, train_gan.py's flags) from `--decays A,B,... -- FLAGS`; a bad list exits with status 2."""
    if len(argv) < 3 or argv[0] != "--decays" or argv[2] != "--":
        print("error: usage: python -m tools.ema_probe --decays 0.995,0.999 -- TRAIN_GAN_FLAGS", file=sys.stderr)
        sys.exit(2)
    try:
        decays = [float(x) for x in argv[1].split(",")]
    except ValueError:
        decays = []
    if not decays or not all(0.0 < d < 1.0 for d in decays):
        print(f"error: --decays needs decays in (0, 1), comma-separated, got {argv[1]!r}", file=sys.stderr)
        sys.exit(2)
    if "--resume" in argv[3:]:
        print("error: a probed run cannot resume (its extra averages are not checkpointed)", file=sys.stderr)
        sys.exit(2)
    return decays, argv[3:]


def install(decays):
    """Patch GANTrainer so that every trainer made after this carries the extra averages."""
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


if __name__ == "__main__":
    decays, flags = parse(sys.argv[1:])
    install(decays)
    sys.exit(train_gan.main(flags))
