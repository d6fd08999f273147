"""Batches from an in-memory image array, in epoch order with a fixed batch shape.

The order is a pure function of (seed, batch counter): epoch e uses permutation
default_rng([seed, e]), and the remainder of each epoch is dropped so that every batch has the same
shape (no recompiles). The counter goes into checkpoints, so a resumed run reads the same batches.
"""
import numpy as np


class ArraySource:
    kind = "image"

    def __init__(self, images, labels, batch_size, seed, num_classes):
        if len(images) < batch_size:
            raise ValueError(f"the dataset has {len(images)} images, fewer than --batch-size {batch_size}")
        self.images = images  # (N, C, H, W): float32 in [-1, 1], or uint8 (converted per batch)
        self.labels = labels.astype(np.int32)
        self.batch_size = batch_size
        self.seed = seed
        self.shape = tuple(images.shape[1:])
        self.num_classes = num_classes
        self.per_epoch = len(images) // batch_size
        self.counter = 0
        self._perm_epoch, self._perm = -1, None

    def _indices(self, k):
        epoch, j = divmod(k, self.per_epoch)
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(len(self.images))
            self._perm_epoch = epoch
        return self._perm[j * self.batch_size:(j + 1) * self.batch_size]

    def next(self, rng=None):
        idx = self._indices(self.counter)
        self.counter += 1
        batch = self.images[idx]
        if batch.dtype == np.uint8:
            batch = batch.astype(np.float32) * np.float32(1 / 127.5) - np.float32(1.0)
        return batch, self.labels[idx]

    def state(self):
        return {"counter": self.counter}

    def load_state(self, state):
        self.counter = int(state["counter"])
