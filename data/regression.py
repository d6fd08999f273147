"""Synthetic linear data, y = w*x + b + noise, drawn from the host RNG (so resume is exact).

As in MindSpore's linear-regression tutorial: true w=2, b=3, Gaussian noise with std 0.01.
x ~ U[-2, 2] keeps SGD at lr 0.01 well inside its stable range (lr * 2 * max x^2 = 0.08).
"""
import numpy as np

TRUE_W, TRUE_B, NOISE_STD, X_RANGE = 2.0, 3.0, 0.01, 2.0


def sample_batch(rng, batch_size):
    """(x, y) float32 arrays of shape (batch_size, 1)."""
    x = rng.uniform(-X_RANGE, X_RANGE, size=(batch_size, 1)).astype(np.float32)
    noise = rng.normal(0.0, NOISE_STD, size=(batch_size, 1)).astype(np.float32)
    return x, (TRUE_W * x + TRUE_B + noise).astype(np.float32)
