"""Write scikit-learn's 8x8 digits as MNIST-format IDX files (upscaled to 28x28), so the MNIST code
path can be run end to end without a download:

    python -m data.export_idx data/digits-idx && python train_gan.py --dataset mnist --data-dir data/digits-idx
"""
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
    out = sys.argv[1] if len(sys.argv) > 1 else "data/digits-idx"
    print(f"wrote {export(out)} images to {out}")
