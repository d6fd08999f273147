"""scikit-learn's bundled 8x8 handwritten digits (1797 images, 10 classes): no download needed."""
import numpy as np

from data.arrays import ArraySource


def load_digits_arrays():
    """(images float32 (N, 1, 8, 8) in [-1, 1], labels int32 (N,))."""
    from sklearn.datasets import load_digits  # imported here: only this dataset needs scikit-learn
    d = load_digits()
    images = (d.images.astype(np.float32) / 16.0) * 2.0 - 1.0
    return images[:, None], d.target.astype(np.int32)


def digits(batch_size, seed):
    images, labels = load_digits_arrays()
    return ArraySource(images, labels, batch_size, seed, num_classes=10)
