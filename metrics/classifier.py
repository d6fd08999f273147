"""The feature extractor of the image metrics: a small CNN trained on the dataset's own labels.

Nothing can be downloaded here, so there are no Inception weights: instead, a classifier is trained
once per dataset (a few hundred steps with make_step, 10% held out for its accuracy) and cached
under $GANLAB_CACHE (default ~/.cache/mindspore-gan-lab), keyed by a hash of the images, labels
and this file's VERSION. Its 128-d penultimate layer gives the features (FID, KID, PRDC), its
softmax the class probabilities (class score, class coverage).

A trained classifier's initial weights follow the MindSpore random state of the process that trained
it, so two caches can hold two classifiers, and one checkpoint two FIDs. metrics/reference/ ships the
classifiers the numbers in docs/results.md from 2026-12-04 on were measured on (sklearn digits, and those
digits written as MNIST-format IDX by data/export_idx.py; a seed-0 train_gan.py run in an empty cache
rebuilds them bit for bit): for those datasets they are read before any cache, so every machine
scores alike.
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

VERSION = 1
CHUNK = 250
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


def data_key(images, labels):
    h = hashlib.sha256()
    h.update(f"v{VERSION}{images.shape}{images.dtype}".encode())
    h.update(np.ascontiguousarray(images).tobytes())
    h.update(np.ascontiguousarray(labels).tobytes())
    return h.hexdigest()[:16]


def train(images, labels, num_classes, steps=600, batch=64, seed=0):
    """(classifier, held-out accuracy). The data split and batches follow `seed`; the initial weights
    follow the caller's MindSpore random state (see the module docstring)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(images))
    held = max(1, len(images) // 10)
    test_idx, train_idx = order[:held], order[held:]
    net = Classifier(images.shape[1:], num_classes)
    net.update_parameters_name("clf.")
    opt = make_optimizer("adam", net.trainable_params(), 1e-3, "clf.")

    def forward(x, y):
        return ops.cross_entropy(net(x), y)
    step = make_step(forward, opt)
    batch = min(batch, len(train_idx))
    for _ in range(steps):
        idx = rng.choice(train_idx, batch, replace=False)
        step(Tensor(to_float(images[idx])), Tensor(labels[idx].astype(np.int32)))
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
    for stored in (os.path.join(REFERENCE_DIR, f"classifier-{key}.ckpt"), path):
        if os.path.isfile(stored):
            try:
                meta = checkpoint.load_into(stored, net.get_parameters())
                return net, meta["accuracy"]
            except checkpoint.CorruptCheckpoint as e:  # a damaged file is never trusted: the next
                log(f"warning: {e}; not used")            # source, or training, replaces it
    log(f"training the metrics classifier for this dataset (once; cached in {cache_dir()})")
    trained, accuracy = train(images, labels, num_classes)
    tmp = path[:-5] + f".tmp{os.getpid()}.ckpt"
    try:  # the cache is an optimisation: a full disk costs a retraining next time, not this run
        os.makedirs(cache_dir(), exist_ok=True)
        ms.save_checkpoint(list(trained.get_parameters()), tmp, crc_check=True,
                           append_dict={"meta_json": json.dumps({"accuracy": accuracy, "key": key})})
        os.replace(tmp, path)
    except OSError as e:
        for leftover in (tmp, tmp[:-5] + ".tmp"):
            if os.path.exists(leftover):
                os.remove(leftover)
        log(f"warning: could not cache the metrics classifier in {cache_dir()} ({e.strerror or e})")
    return trained, accuracy


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
