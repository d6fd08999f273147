"""Small real-format datasets written by the tests themselves (nothing is downloaded).

Class k of every fixture draws a bright bar at a class-specific place, so a classifier can learn
the labels and a generator has modes to find."""
import gzip as gz
import os
import struct

import numpy as np
from PIL import Image


def pattern(k, size, rng):
    img = rng.integers(0, 40, size=(size, size)).astype(np.uint8)
    row = 2 + (k * (size - 4)) // 10
    img[row:row + max(1, size // 8), 2:size - 2] = 230
    return img


def write_idx(directory, n=300, size=28, seed=0, gzip=False, split="train"):
    """The IDX image and label files as in the MNIST distribution: train-* (split="train") or
    t10k-* (split="test"), uncompressed or, with gzip=True, only the .gz files as downloaded."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 10).astype(np.uint8)
    images = np.stack([pattern(k, size, rng) for k in labels]) if n else np.zeros((0, size, size), np.uint8)
    prefix = {"train": "train", "test": "t10k"}[split]
    path = os.path.join(directory, prefix + "-{}-idx{}-ubyte" + (".gz" if gzip else ""))
    write_file(path.format("images", 3), struct.pack(">IIII", 2051, n, size, size) + images.tobytes())
    write_file(path.format("labels", 1), struct.pack(">II", 2049, n) + labels.tobytes())
    return images, labels


def write_file(path, data):
    """Write bytes to path, gzip-compressed if it ends in .gz."""
    with (gz.open if str(path).endswith(".gz") else open)(path, "wb") as f:
        f.write(data)


def read_file(path):
    """The bytes of path, decompressed if it ends in .gz."""
    with (gz.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        return f.read()


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
