"""The feature extractor of the image metrics: a small CNN trained on the dataset's own labels.

Nothing can be downloaded here, so there are no Inception weights: instead, a classifier is trained
once per dataset (a few hundred steps with make_step, 10% held out for its accuracy) and cached
under $GANLAB_CACHE (default ~/.cache/mindspore-gan-lab), keyed by a hash of the images, labels
and this file's VERSION. Its 128-d penultimate layer gives the features (FID, KID, PRDC), its
softmax the class probabilities (class score, class coverage).

Since VERSION 2 the initial weights come from a fixed seed (torch's and MindSpore's default
uniform ranges, drawn by numpy), not from the MindSpore random state of whatever process trains it:
every machine trains the same classifier from the same data. Version-1 classifiers followed that
random state; cached ones are not reused (the version is in the cache key). metrics/reference/
ships the version-1 classifiers the numbers in docs/results.md from 2026-12-04 on were measured on
(sklearn digits, and those digits written as MNIST-format IDX by data/export_idx.py), and the
version-2 classifier of the real Fashion-MNIST training set: for those datasets they are read before
any cache, so every machine scores alike.
"""
import hashlib
import json
import os

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from loops import checkpoint
from loops.optim import make_optimizer
from loops.step import make_step, maybe_jit

VERSION = 2
REFERENCE_VERSIONS = (VERSION, 1)  # shipped classifiers of earlier versions stay the reference for their data
CHUNK = 250
LOG_EVERY = 100  # training steps between progress lines
TRAIN_STEPS = 600  # Adam steps of batch 64 (a classifier's file does not record them: change VERSION with them)
REFERENCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference")


class Classifier(nn.Cell):
    def __init__(self, shape, num_classes, width=32):
        super().__init__()
        channels, size = shape[0], shape[1]
        self.features = nn.SequentialCell([
            nn.Conv2d(channels, width, 3, stride=2, pad_mode="pad", padding=1, has_bias=True), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, pad_mode="pad", padding=1, has_bias=True), nn.ReLU(),
            nn.Flatten(),
            nn.Dense(2 * width * ((size + 3) // 4) ** 2, 128), nn.ReLU(),
        ])
        self.head = nn.Dense(128, num_classes)

    def construct(self, x):
        return self.head(self.features(x))


def to_float(images):
    return images.astype(np.float32) / 127.5 - 1.0 if images.dtype == np.uint8 else images.astype(np.float32)


def cache_dir():
    return os.environ.get("GANLAB_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mindspore-gan-lab")


def data_key(images, labels, version=VERSION):
    h = hashlib.sha256()
    h.update(f"v{version}{images.shape}{images.dtype}".encode())
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels).tobytes())
    return h.hexdigest()[:16]


def seed_weights(net, seed):
    """Every conv and dense layer's weight and bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (the
    range of MindSpore's and torch's defaults) by a numpy Generator of its own: the same net whatever
    the process's MindSpore random state."""
    rng = np.random.default_rng(seed)
    for _, cell in net.cells_and_names():
        if isinstance(cell, (nn.Conv2d, nn.Dense)):
            bound = 1 / np.sqrt(np.prod(cell.weight.shape[1:]))
            for p in (cell.weight, cell.bias):
                if p is not None:
                    p.set_data(Tensor(rng.uniform(-bound, bound, p.shape).astype(np.float32)))


def train(images, labels, num_classes, steps=None, batch=64, seed=0, log=None):
    """(classifier, held-out accuracy) after `steps` (default TRAIN_STEPS) Adam steps. The data split,
    batches and initial weights follow `seed`; `log(line)` hears the progress every LOG_EVERY steps."""
    steps = steps or TRAIN_STEPS
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(images))
    held = max(1, len(images) // 10)
    test_idx, train_idx = order[:held], order[held:]
    net = Classifier(images.shape[1:], num_classes)
    net.update_parameters_name("clf.")
    seed_weights(net, seed)
    opt = make_optimizer("adam", net.trainable_params(), 1e-3, "clf.")

    def forward(x, y):
        return ops.cross_entropy(net(x), y)
    step = make_step(forward, opt)
    batch = min(batch, len(train_idx))
    for i in range(steps):
        idx = rng.choice(train_idx, batch, replace=False)
        loss = step(Tensor(to_float(images[idx])), Tensor(labels[idx].astype(np.int32)))
        if log is not None and ((i + 1) % LOG_EVERY == 0 or i + 1 == steps):
            log(f"  metrics classifier: step {i + 1}/{steps}, loss {float(loss[0].asnumpy()):.3f}")
    extractor = FeatureExtractor(net)
    _, probs = extractor(to_float(images[test_idx]))
    return net, float((probs.argmax(1) == labels[test_idx]).mean())


def load_or_train(images, labels, num_classes, log=print):
    """The shipped reference classifier for this data, else the cached one, else one trained (and
    cached) now."""
    key = data_key(images, labels)
    path = os.path.join(cache_dir(), f"classifier-{key}.ckpt")
    net = Classifier(images.shape[1:], num_classes)
    net.update_parameters_name("clf.")
    shipped = [(os.path.join(REFERENCE_DIR, f"classifier-{data_key(images, labels, v)}.ckpt"), v)
               for v in REFERENCE_VERSIONS]
    for stored, version in shipped + [(path, VERSION)]:
        if os.path.isfile(stored):
            try:
                meta = checkpoint.load_into(stored, net.get_parameters())
                net.version = version
                return net, meta["accuracy"]
            except checkpoint.CorruptCheckpoint as e:  # a damaged file is never trusted: the next
                log(f"warning: {e}; not used")            # source, or training, replaces it
    log(f"training the metrics classifier for this dataset (once: {len(images)} images, cached in {cache_dir()})")
    trained, accuracy = train(images, labels, num_classes, log=log)
    trained.version = VERSION
    log(f"  metrics classifier: held-out accuracy {accuracy:.3f}")
    try:  # the cache is an optimisation: a full disk costs a retraining next time, not this run
        write(trained, accuracy, key, path)
    except OSError as e:
        log(f"warning: could not cache the metrics classifier in {cache_dir()} ({e.strerror or e})")
    return trained, accuracy


def write(net, accuracy, key, path):
    """The classifier as a checksummed checkpoint at path (temp file renamed: never a partial file)."""
    tmp = path[:-5] + f".tmp{os.getpid()}.ckpt"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        ms.save_checkpoint(list(net.get_parameters()), tmp, crc_check=True,
                           append_dict={"meta_json": json.dumps({"accuracy": accuracy, "key": key})})
        os.replace(tmp, path)
    except OSError:
        for leftover in (tmp, tmp[:-5] + ".tmp"):
            if os.path.exists(leftover):
                os.remove(leftover)
        raise


class FeatureExtractor:
    """x (N, C, H, W) float32 -> (features (N, 128), class probabilities (N, K)), in fixed chunks."""

    def __init__(self, net):
        net.set_train(False)

        def run(x):
            feats = net.features(x)
            return feats, ops.softmax(net.head(feats), axis=-1)
        self.fn = maybe_jit(run)

    def __call__(self, x):
        feats, probs = [], []
        for i in range(0, len(x), CHUNK):
            part = x[i:i + CHUNK]
            pad = np.zeros((CHUNK - len(part),) + part.shape[1:], np.float32)
            f, p = self.fn(Tensor.from_numpy(np.concatenate([part, pad])))
            feats.append(f.asnumpy()[:len(part)])
            probs.append(p.asnumpy()[:len(part)])
        return np.concatenate(feats), np.concatenate(probs)
