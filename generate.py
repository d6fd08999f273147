"""Draw samples from a trained generator, or translate held-out images with an image-to-image run.

    python generate.py RUN_DIR --num 1000 --out samples.npy
    python generate.py RUN_DIR --num 64 --out grid.png [--seed S] [--checkpoint PATH] [--no-ema] [--class K]
    python generate.py TRANSLATE_RUN --num 16 --out rows.png [--direction AtoB|BtoA]

train_gan.py runs: .npy holds float32 samples in the generator's output space (toy: (N, 2); images:
(N, C, H, W) in [-1, 1]); .png an image grid, or a scatter plot over the mixture's modes for toy data.
The same run, checkpoint and seed give bit-identical output (latents come from numpy, and the
generator runs in eval mode at a fixed chunk shape).
train_translate.py runs: the first N held-out images of the source domain, in file order (class tasks:
the held-out images of the source class), translated; .npy (N, C, H, W) in [-1, 1], .png rows of
input | output (| reconstruction for CycleGAN | target for paired data).
An existing --out file is refused unless --overwrite is given.
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")

import argparse

import numpy as np

from loops.config import CommandLineParser, UserError, check_seed, run_cli
from loops.files import atomic_write

def parse(argv):
    p = CommandLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--num", type=int, required=True, help="number of samples")
    p.add_argument("--out", required=True, help="FILE.npy or FILE.png")
    p.add_argument("--seed", type=int, default=0, help="seed of the latent noise")
    p.add_argument("--checkpoint", default="", help="checkpoint file (default: the run's latest)")
    p.add_argument("--no-ema", action="store_true", help="use the raw generator, not its EMA")
    p.add_argument("--class", dest="label", type=int, default=-1, help="class to sample (conditional runs)")
    p.add_argument("--direction", default="", choices=["AtoB", "BtoA"],
                   help="image-to-image runs: which way to translate (default AtoB)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    args = p.parse_args(argv)
    if args.num <= 0:
        raise UserError(f"--num must be > 0, got {args.num}")
    check_seed(args.seed)
    if os.path.splitext(args.out)[1].lower() not in (".npy", ".png"):
        raise UserError(f"--out must end in .npy or .png, got {args.out}")
    if os.path.lexists(args.out) and not args.overwrite:
        raise UserError(f"--out {args.out} exists; pass --overwrite to replace it")
    return args


def main(argv):
    args = parse(argv)
    from gan.models import graph_mode_on_cpu
    graph_mode_on_cpu()
    from metrics.runs import generation_of
    out, picture, path, what = generation_of(args.run_dir)(args)  # the recipe that made the run decides
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
        from gan.pictures import save_png
        save_png(args.out, picture)
    print(f"wrote {args.out}: {out.shape[0]} {what} from {path}")
    return 0


if __name__ == "__main__":
    run_cli(main)
