"""Evaluate a run's latest (or a given) checkpoint and write its metrics.json.

    python -m metrics RUN_DIR [--checkpoint PATH] [--num N] [--no-ema] [--fid-weights INCEPTION.ckpt]
                              [--protocol {quick,paper}]
    python -m metrics RL_RUN_DIR [--checkpoint PATH] [--episodes N] [--gif]

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
RL runs (train_rl.py): mean and std return of the deterministic policy over N episodes, a plot of one
episode (episode.png) and, with --gif (needs pygame), that episode as an animated GIF (episode.gif).
"""
import argparse
import json
import os
import sys
from types import SimpleNamespace

os.environ.setdefault("GLOG_v", "4")


def main(argv):
    from loops.config import UserError, _Parser
    from metrics.protocol import PAPER_SAMPLES, PROTOCOLS
    parser = _Parser(prog="python -m metrics", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a train_gan.py or train_rl.py run directory")
    parser.add_argument("--checkpoint", default="", help="checkpoint to evaluate (default: the run's latest)")
    parser.add_argument("--num", type=int, default=0, help="samples (default: the run's --eval-samples)")
    parser.add_argument("--no-ema", action="store_true", help="evaluate the raw generator, not its EMA")
    parser.add_argument("--fid-weights", default="", help="mindcv inception_v3 .ckpt: adds fid_inception and "
                                                           "is_inception")
    parser.add_argument("--protocol", default=None, choices=sorted(PROTOCOLS),
                        help="quick (default): --eval-samples generated vs as many real images; paper: "
                             f"{PAPER_SAMPLES} generated vs the full training set")
    parser.add_argument("--episodes", type=int, default=0, help="RL: episodes (default: the run's --eval-episodes)")
    parser.add_argument("--gif", action="store_true", help="RL: also save the episode as an animated GIF (pygame)")
    args = parser.parse_args(argv)
    kind = run_kind(args.run_dir)
    rl_only = [f for f, on in (("--episodes", args.episodes), ("--gif", args.gif)) if on]
    gan_only = [f for f, on in (("--num", args.num), ("--no-ema", args.no_ema), ("--fid-weights", args.fid_weights),
                                ("--protocol", args.protocol)) if on]
    if kind == "rl" and gan_only:
        raise UserError(f"{', '.join(gan_only)}: for train_gan.py runs; {args.run_dir} is a train_rl.py run")
    if kind == "gan" and rl_only:
        raise UserError(f"{', '.join(rl_only)}: for train_rl.py runs; {args.run_dir} is a train_gan.py run")
    if kind == "rl":
        if args.episodes < 0:
            raise UserError(f"--episodes must be >= 0 (0: the run's --eval-episodes), got {args.episodes}")
        from rl.evaluate import evaluate_run
        print(json.dumps(evaluate_run(args.run_dir, args.checkpoint, args.episodes, args.gif), indent=2))
        return 0
    if args.num < 0:
        raise UserError(f"--num must be >= 0 (0: the run's --eval-samples), got {args.num}")
    import mindspore as ms
    import numpy as np
    from data import SOURCES
    from gan.models import TrainedGenerator
    from loops import rundir
    from metrics.evaluate import make_evaluator

    ms.set_context(mode=ms.GRAPH_MODE)
    gen = TrainedGenerator(args.run_dir, args.checkpoint, ema=not args.no_ema)
    cfg, meta = gen.config, gen.meta
    inception = None
    if args.fid_weights:  # checked and loaded before any sampling, so a bad file fails fast
        if len(meta["data_shape"]) != 3:
            raise UserError("--fid-weights needs an image run; this run's data are 2-D points")
        from metrics.inception import load_inception
        inception = load_inception(args.fid_weights)
    protocol = args.protocol or "quick"
    n = args.num or (PAPER_SAMPLES if protocol == "paper" else cfg["eval_samples"])
    z = np.random.default_rng([cfg["seed"], 8]).standard_normal((n, cfg["z_dim"]), dtype=np.float32)
    labels = np.arange(n, dtype=np.int32) % gen.num_classes if gen.num_classes else None  # as train_gan evaluates
    samples = sample_in_chunks(gen, z, labels)
    source = SOURCES[cfg["dataset"]](SimpleNamespace(**cfg))
    evaluator = make_evaluator(source, n, cfg["seed"], log=lambda m: print(m, file=sys.stderr),
                               inception=inception, protocol=protocol)
    metrics = evaluator(samples, labels)
    metrics["protocol"] = evaluator.protocol
    out_path = os.path.join(args.run_dir, "metrics.json")
    existing = json.load(open(out_path)) if os.path.isfile(out_path) else {}
    existing.update(metrics, step=meta["step"], checkpoint=os.path.basename(gen.path), ema=not args.no_ema)
    rundir.write_metrics(args.run_dir, existing)
    shown = {k: v for k, v in metrics.items() if not isinstance(v, list)}
    print(json.dumps({"checkpoint": gen.path, "step": meta["step"], "samples": n, "ema": not args.no_ema, **shown},
                     indent=2))
    return 0


def sample_in_chunks(gen, z, labels, chunk=2500):
    """G(z) for many z (--protocol paper: 50000) in fixed-size calls, the last one padded: one compile,
    and memory bounded by one chunk's activations. Up to `chunk` samples: one call, as before."""
    import numpy as np
    if len(z) <= chunk:
        return gen.sample(z, labels)
    out = []
    for i in range(0, len(z), chunk):
        part, pad = z[i:i + chunk], chunk - len(z[i:i + chunk])
        zs = np.concatenate([part, np.zeros((pad, z.shape[1]), z.dtype)])
        ys = None if labels is None else np.concatenate([labels[i:i + chunk], np.zeros(pad, labels.dtype)])
        out.append(gen.sample(zs, ys)[:len(part)])
    return np.concatenate(out)


def run_kind(run_dir):
    """"rl" (config.json names an algorithm), "gan" (a latent size and a dataset), or "gan" when there
    is no readable config.json (the GAN path then reports what is missing); UserError for other runs."""
    from loops.config import UserError
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        return "gan"
    if "algo" in config:
        return "rl"
    if "z_dim" in config and "dataset" in config:
        return "gan"
    raise UserError(f"{run_dir} is neither a train_gan.py nor a train_rl.py run: nothing to evaluate")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from loops.config import run_cli
    run_cli(main)
