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
import json
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


def made_by_translation(run_dir):
    """Whether RUN_DIR/config.json names an image-to-image recipe (gan/__init__.py TRANSLATORS)."""
    from gan import TRANSLATORS
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            return json.load(f).get("recipe") in TRANSLATORS.values()
    except (OSError, ValueError, AttributeError):
        return False


def translate(args):
    """(outputs, picture) of an image-to-image run: the first --num held-out source images translated."""
    from gan.translation import in_chunks
    from gan.translation_metrics import load_run
    if args.label >= 0 or args.no_ema or args.seed:
        raise UserError("--class, --no-ema and --seed are for train_gan.py runs; this is a train_translate.py run")
    trainer, _, path = load_run(args.run_dir, args.checkpoint)
    direction = args.direction or "AtoB"
    if direction not in trainer.DIRECTIONS:
        raise UserError(f"--direction {direction}: this {trainer.cfg.model} run translates {', '.join(trainer.DIRECTIONS)}")
    inputs, _ = trainer.test_images(direction)
    if args.num > len(inputs):
        raise UserError(f"--num {args.num}: the held-out source images are {len(inputs)}")
    out = in_chunks(lambda x: trainer.translate(direction, x), inputs[:args.num])
    picture = trainer.picture_of(direction, inputs[:min(args.num, 64)]) if args.out.lower().endswith(".png") else None
    trainer.run.close()
    return out, picture, path


def sample(args):
    """(samples, picture) of a train_gan.py run."""
    from gan.models import TrainedGenerator
    from gan.pictures import image_grid, scatter_plot
    if args.direction:
        raise UserError("--direction is for train_translate.py runs")
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
    if gen.kind == "toy":
        from data import SOURCES
        picture = scatter_plot(out, SOURCES[gen.config["dataset"]](SimpleNamespace(**gen.config)).centers)
    else:
        picture = image_grid(out[:256])
    return out, picture, gen.path


def main(argv):
    args = parse(argv)
    from gan.models import graph_mode_on_cpu
    graph_mode_on_cpu()
    translation = made_by_translation(args.run_dir)
    out, picture, path = translate(args) if translation else sample(args)
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
    print(f"wrote {args.out}: {out.shape[0]} {'translations' if translation else 'samples'} from {path}")
    return 0


if __name__ == "__main__":
    run_cli(main)
