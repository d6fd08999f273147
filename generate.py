"""Draw samples from a trained generator.

    python generate.py RUN_DIR --num 1000 --out samples.npy
    python generate.py RUN_DIR --num 64 --out grid.png [--seed S] [--checkpoint PATH] [--no-ema]

.npy: float32 samples in the generator's output space (toy: (N, 2); images: (N, C, H, W) in [-1, 1]).
.png: an image grid, or a scatter plot over the mixture's modes for toy data.
The same run, checkpoint and seed give bit-identical output (latents come from numpy, and the
generator runs in eval mode at a fixed chunk shape).
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")

import argparse
from types import SimpleNamespace

import numpy as np

from loops.config import CommandLineParser, UserError, check_seed, run_cli
from loops.files import atomic_write

CHUNK = 500  # one compiled shape for every call; the last chunk is padded


def parse(argv):
    p = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--num", type=int, required=True, help="number of samples")
    p.add_argument("--out", required=True, help="FILE.npy or FILE.png")
    p.add_argument("--seed", type=int, default=0, help="seed of the latent noise")
    p.add_argument("--checkpoint", default="", help="checkpoint file (default: the run's latest)")
    p.add_argument("--no-ema", action="store_true", help="use the raw generator, not its EMA")
    p.add_argument("--class", dest="label", type=int, default=-1, help="class to sample (conditional runs)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    args = p.parse_args(argv)
    if args.num <= 0:
        raise UserError(f"--num must be > 0, got {args.num}")
    check_seed(args.seed)
    if os.path.splitext(args.out)[1].lower() not in (".npy", ".png"):
        raise UserError(f"--out must end in .npy or .png, got {args.out}")
    return args


def main(argv):
    args = parse(argv)
    from gan.models import TrainedGenerator, graph_mode_on_cpu
    graph_mode_on_cpu()
    gen = TrainedGenerator(args.run_dir, args.checkpoint, ema=not args.no_ema)
    if args.label >= 0 and not gen.conditional:
        raise UserError("--class needs a run trained with --conditional")
    if args.label >= gen.num_classes > 0:
        raise UserError(f"--class must be in [0, {gen.num_classes - 1}], got {args.label}")

    z = np.random.default_rng(args.seed).standard_normal((args.num, gen.z_dim), dtype=np.float32)
    # conditional runs: the asked class, or every class in turn
    labels = (np.full(args.num, args.label, np.int32) if args.label >= 0
              else np.arange(args.num, dtype=np.int32) % max(1, gen.num_classes))
    chunks = []
    for i in range(0, args.num, CHUNK):  # one compiled shape: the last chunk is padded
        part = z[i:i + CHUNK]
        padded = np.concatenate([part, np.zeros((CHUNK - len(part), part.shape[1]), np.float32)])
        chunks.append(gen.sample(padded, np.resize(labels[i:i + CHUNK], CHUNK))[:len(part)])
    out = np.concatenate(chunks).astype(np.float32)

    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot write --out {args.out}: {e.strerror or e}")
    # written atomically: a full disk leaves no partial file (WriteFailure, exit status 4)
    if args.out.lower().endswith(".npy"):
        def write(tmp):
            with open(tmp, "wb") as f:
                np.save(f, out)
        atomic_write(args.out, write, "--out", out.nbytes)
    else:
        from gan.pictures import image_grid, save_png, scatter_plot
        if gen.kind == "toy":
            from data import SOURCES
            source = SOURCES[gen.config["dataset"]](SimpleNamespace(**gen.config))
            save_png(args.out, scatter_plot(out, source.centers))
        else:
            save_png(args.out, image_grid(out[:256]))
    print(f"wrote {args.out}: {out.shape[0]} samples from {gen.path}")
    return 0


if __name__ == "__main__":
    run_cli(main)
