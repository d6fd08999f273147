"""Write scikit-learn's 8x8 digits as MNIST-format IDX files (upscaled to 28x28), so the MNIST code
path can be run end to end without a download:

    python -m data.export_idx data/digits-idx && python train_gan.py --dataset mnist --data-dir data/digits-idx
"""
import argparse
import os
import struct
import sys

import numpy as np
from PIL import Image


def export(directory, size=28):
    from sklearn.datasets import load_digits
    d = load_digits()
    images = np.stack([np.asarray(Image.fromarray((im * 255 / 16).astype(np.uint8)).resize((size, size), Image.BILINEAR))
                       for im in d.images])
    labels = d.target.astype(np.uint8)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "train-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), size, size) + images.tobytes())
    with open(os.path.join(directory, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.tobytes())
    return len(images)


if __name__ == "__main__":
    from loops.config import CommandLineParser  # one-line `error:` and exit 2, like every entry point
    parser = CommandLineParser(prog="python -m data.export_idx", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="data/digits-idx", help="output directory (default: %(default)s)")
    parser.add_argument("--size", type=int, default=28, help="image side in pixels (default: %(default)s)")
    args = parser.parse_args()
    if args.size < 4:
        parser.error(f"--size must be >= 4, got {args.size}")
    try:
        print(f"wrote {export(args.out, args.size)} images to {args.out}")
    except OSError as e:
        print(f"error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        sys.exit(2)
