"""2-D Gaussian mixtures, the standard mode-collapse benchmarks (VEEGAN, PacGAN).

ring8:  8 Gaussians, std 0.02, evenly spaced on a circle of radius 2.
grid25: 25 Gaussians, std 0.05, at {-4, -2, 0, 2, 4}^2.
Samples are drawn from the host RNG, so a run's data stream is fixed by its seed and resumes exactly.
"""
import numpy as np


def ring8_centers():
    angles = 2 * np.pi * np.arange(8) / 8
    return np.stack([2 * np.cos(angles), 2 * np.sin(angles)], axis=1).astype(np.float32)


def grid25_centers():
    axis = np.array([-4, -2, 0, 2, 4], np.float32)
    return np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)


class ToyMixture:
    """An endless stream of batches from an equal-weight Gaussian mixture."""
    kind = "toy"

    def __init__(self, centers, std, batch_size):
        self.centers = centers
        self.std = float(std)
        self.batch_size = batch_size
        self.shape = (2,)
        self.num_classes = len(centers)

    def sample(self, rng, n):
        """(x float32 (n, 2), mode index int32 (n,))."""
        idx = rng.integers(0, len(self.centers), size=n)
        x = self.centers[idx] + self.std * rng.standard_normal((n, 2))
        return x.astype(np.float32), idx.astype(np.int32)

    def next(self, rng):
        return self.sample(rng, self.batch_size)

    def state(self):
        return {}

    def load_state(self, state):
        pass


def ring8(batch_size):
    return ToyMixture(ring8_centers(), 0.02, batch_size)


def grid25(batch_size):
    return ToyMixture(grid25_centers(), 0.05, batch_size)
