"""What every GAN family does between compiled calls, given a sample function (never a z):

    pictures = SampleHook(run, lambda: image_grid(sample_fixed()), before=refresh_ema)
    evaluation = EvalHook(run, lambda: (samples, labels), make_evaluator=lambda: ..., before=refresh_ema)
    hooks = [Hook(cfg.sample_every, pictures), Hook(cfg.eval_every, evaluation)]

A noise -> image GAN samples G_ema at fixed latents; an image-to-image recipe translates fixed
held-out images; both hand their own function in. Under --distributed, `before` runs on every rank
(identical state) and the rest on rank 0 only.
"""
import os
import sys

from gan.pictures import save_png
from loops import distributed
from loops.config import WriteFailure


def _nothing():
    pass


class SampleHook:
    """TensorBoard image `tag` and RUN/samples/step_<N>.png of `picture(step)` (an HWC uint8 array)."""

    def __init__(self, run, picture, tag="samples", before=_nothing):
        self.run, self.picture, self.tag, self.before = run, picture, tag, before

    def __call__(self, step):
        self.before()
        if not distributed.is_main():
            return
        picture = self.picture(step)
        self.run.logger.image(self.tag, step, picture)
        try:
            os.makedirs(os.path.join(self.run.cfg.run_dir, "samples"), exist_ok=True)
            save_png(os.path.join(self.run.cfg.run_dir, "samples", f"step_{step:08d}.png"), picture)
        except (WriteFailure, OSError) as e:  # a picture is not worth a run that can still save its state
            print(f"warning: {e}; training goes on", file=sys.stderr, flush=True)


class EvalHook:
    """Scores `samples()` -> (samples, labels or None) with the evaluator that `make_evaluator()` builds
    at the first evaluation (it may train a classifier), logs `metrics/<name>` scalars, and rewrites
    metrics.json with the scores, their protocol and the latest logged values. `results` holds it all."""

    def __init__(self, run, samples, make_evaluator, before=_nothing):
        self.run, self.samples, self.make_evaluator, self.before = run, samples, make_evaluator, before
        self.evaluator, self.results = None, {}

    def __call__(self, step):
        self.before()
        if not distributed.is_main():
            return
        if self.evaluator is None:
            self.evaluator = self.make_evaluator()
        metrics = self.evaluator(*self.samples())
        logger = self.run.logger
        logger.scalars(step, {f"metrics/{k}": v for k, v in metrics.items() if not isinstance(v, list)})
        self.results.update(metrics, step=step)
        self.results["protocol"] = self.evaluator.protocol  # how every score was measured
        self.results.update({k.replace("/", "_"): v for k, v in logger.latest.items() if not k.startswith("metrics/")})
        try:
            self.run.write_metrics(self.results)
        except WriteFailure as e:  # rewritten at the next evaluation and at the end (where it must succeed)
            print(f"warning: {e}; training goes on", file=sys.stderr, flush=True)
