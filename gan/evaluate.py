"""`python -m metrics RUN_DIR` for a train_gan.py run: its generator's samples scored by metrics/.

Toy runs: modes, hq, reverse KL. Image runs: FID, KID, precision / recall / density / coverage,
class score and class coverage on the dataset's own classifier (see metrics/classifier.py); with
--fid-weights (mindcv's inception_v3 .ckpt) also fid_inception, the FID on InceptionV3 pool3
features, and is_inception / is_inception_std, the Inception Score over 10 splits (see
metrics/inception.py). fid_reference (fid_inception_reference): the FID of two disjoint real subsets
of the evaluation's size, i.e. what perfect samples would score. metrics.json's `protocol` says how
every number was made (feature networks, sample counts, real split, seed; metrics/evaluate.py).
--protocol quick (default): the run's --eval-samples generated vs as many training images; --protocol
paper: 50000 generated vs the full training set (all images the dataset has), as Mimicry and
StudioGAN; --num N overrides the generated count of either.
"""
import os
import sys
from types import SimpleNamespace

import numpy as np

from loops import rundir
from loops.config import UserError
from loops.memory import FLOAT, check_fits
from metrics.protocol import PAPER_SAMPLES, PROTOCOLS

def check_samples_fit(n, gen, scored):
    """Refuse (one line) a --num whose samples cannot fit in memory: the samples (chunks and their
    concatenation) and latents; scored: also as many real images and their features."""
    shape = gen.meta["data_shape"]
    size = int(np.prod(shape))
    scored_images = scored and len(shape) == 3  # toy runs keep no real samples or features
    per_sample = (3 * size + 2 * 138 if scored_images else 2 * size) + gen.z_dim
    check_fits([(f"--num {n} (the samples{' and the real images they are scored against' if scored else ''})",
                 n * per_sample * FLOAT)])


class Evaluation:
    """The evaluation command of a noise -> image (or toy) GAN run."""
    description = __doc__

    def add_flags(self, parser):
        parser.add_argument("--checkpoint", default="", help="checkpoint to evaluate (default: the run's latest)")
        parser.add_argument("--num", type=int, default=0, help="samples (default: the run's --eval-samples)")
        parser.add_argument("--no-ema", action="store_true", help="evaluate the raw generator, not its EMA")
        parser.add_argument("--fid-weights", default="", help="mindcv inception_v3 .ckpt: adds fid_inception and "
                                                               "is_inception")
        parser.add_argument("--protocol", default=None, choices=sorted(PROTOCOLS),
                            help="quick (default): --eval-samples generated vs as many real images; paper: "
                                 f"{PAPER_SAMPLES} generated vs the full training set")

    def __call__(self, run_dir, args):
        if args.num < 0:
            raise UserError(f"--num must be >= 0 (0: the run's --eval-samples), got {args.num}")
        import mindspore as ms
        from data import SOURCES
        from gan.models import TrainedGenerator
        from metrics.evaluate import make_evaluator
        ms.set_context(mode=ms.GRAPH_MODE)
        gen = TrainedGenerator(run_dir, args.checkpoint, ema=not args.no_ema)
        cfg, meta = gen.config, gen.meta
        inception = None
        if args.fid_weights:  # checked and loaded before any sampling, so a bad file fails fast
            if len(meta["data_shape"]) != 3:
                raise UserError("--fid-weights needs an image run; this run's data are 2-D points")
            from metrics.inception import load_inception
            inception = load_inception(args.fid_weights)
        protocol = args.protocol or "quick"
        n = args.num or (PAPER_SAMPLES if protocol == "paper" else cfg["eval_samples"])
        check_samples_fit(n, gen, scored=True)
        z = np.random.default_rng([cfg["seed"], 8]).standard_normal((n, cfg["z_dim"]), dtype=np.float32)
        labels = np.arange(n, dtype=np.int32) % gen.num_classes if gen.num_classes else None  # as train_gan evaluates
        samples = gen.sample(z, labels)  # in fixed chunks, as the training run evaluated
        source = SOURCES[cfg["dataset"]](SimpleNamespace(**cfg))
        evaluator = make_evaluator(source, n, cfg["seed"], log=lambda m: print(m, file=sys.stderr),
                                   inception=inception, protocol=protocol)
        metrics = evaluator(samples, labels)
        metrics["protocol"] = evaluator.protocol
        existing = rundir.read_metrics(run_dir)
        existing.update(metrics, step=meta["step"], checkpoint=os.path.basename(gen.path), ema=not args.no_ema)
        rundir.write_metrics(run_dir, existing)
        shown = {k: v for k, v in metrics.items() if not isinstance(v, list)}
        return {"checkpoint": gen.path, "step": meta["step"], "samples": n, "ema": not args.no_ema, **shown}


def generate(args):
    """generate.py on a train_gan.py run: (samples, picture, checkpoint, "samples"); --seed's latents in
    fixed-shape chunks (the last one padded), so a run, checkpoint and seed give bit-identical output."""
    from gan.models import TrainedGenerator
    from gan.pictures import image_grid, scatter_plot
    if args.direction:
        raise UserError("--direction is for train_translate.py runs")
    gen = TrainedGenerator(args.run_dir, args.checkpoint, ema=not args.no_ema)
    if args.label >= 0 and not gen.conditional:
        raise UserError("--class needs a run trained with --conditional")
    if args.label >= gen.num_classes > 0:
        raise UserError(f"--class must be in [0, {gen.num_classes - 1}], got {args.label}")
    check_samples_fit(args.num, gen, scored=False)
    z = np.random.default_rng(args.seed).standard_normal((args.num, gen.z_dim), dtype=np.float32)
    # conditional runs: the asked class, or every class in turn
    labels = (np.full(args.num, args.label, np.int32) if args.label >= 0
              else np.arange(args.num, dtype=np.int32) % max(1, gen.num_classes))
    out = gen.sample(z, labels if gen.conditional else None).astype(np.float32)  # fixed-shape chunks
    if gen.kind == "toy":
        from data import SOURCES
        picture = scatter_plot(out, SOURCES[gen.config["dataset"]](SimpleNamespace(**gen.config)).centers)
    else:
        picture = image_grid(out[:256])
    return out, picture, gen.path, "samples"


EVALUATION = Evaluation()
GENERATION = generate
