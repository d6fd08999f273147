"""Small real-format datasets written by the tests themselves (nothing is downloaded).

Class k of every fixture draws a bright bar at a class-specific place, so a classifier can learn
the labels and a generator has modes to find."""
import os
import struct

import numpy as np
from PIL import Image


def pattern(k, size, rng):
    img = rng.integers(0, 40, size=(size, size)).astype(np.uint8)
    row = 2 + (k * (size - 4)) // 10
    img[row:row + max(1, size // 8), 2:size - 2] = 230
    return img


def write_idx(directory, n=300, size=28, seed=0):
    """train-images-idx3-ubyte / train-labels-idx1-ubyte as in the MNIST distribution."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).astype(np.uint8)
    images = np.stack([pattern(k, size, rng) for k in labels])
    with open(os.path.join(directory, "train-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, size, size) + images.tobytes())
    with open(os.path.join(directory, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 2049, n) + labels.tobytes())
    return images, labels


def write_cifar(directory, seed=0):
    """One data_batch_1.bin of 10000 records (label byte + 3072 bytes, R then G then B planes)."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = (np.arange(10000) % 10).astype(np.uint8)
    planes = np.stack([pattern(k, 32, rng) for k in labels])
    rgb = np.stack([planes, planes // 2, 255 - planes], axis=1)  # (N, 3, 32, 32)
    records = np.concatenate([labels[:, None], rgb.reshape(10000, -1)], axis=1)
    records.astype(np.uint8).tofile(os.path.join(directory, "data_batch_1.bin"))
    return rgb, labels


def write_png_folder(directory, classes=("a", "b"), per_class=12, size=20, seed=0):
    rng = np.random.default_rng(seed)
    for k, name in enumerate(classes):
        os.makedirs(os.path.join(directory, name), exist_ok=True)
        for i in range(per_class):
            gray = pattern(k * 5, size, rng)
            Image.fromarray(np.stack([gray] * 3, axis=-1)).save(os.path.join(directory, name, f"{i}.png"))
