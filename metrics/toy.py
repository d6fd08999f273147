"""Mode coverage metrics for the 2-D mixtures (as in VEEGAN and PacGAN).

A sample is high quality (hq) when it lies within 3 std of its nearest mode. A mode is covered when
it holds at least 5% of its expected share of the samples (n / K) as high-quality samples;
`modes_pacgan` is PacGAN's own count (Lin et al. 2018, their evaluation code): a mode with at least
one high-quality sample, for a like-for-like comparison with their tables.
Reverse KL (PacGAN's third column): KL(p || uniform) of the generated distribution over modes,
p taken from the high-quality samples' nearest modes (empty modes add 0; no hq sample at all
gives log K, the value of total collapse).
"""
import numpy as np


def mode_stats(samples, centers, std):
    samples = np.asarray(samples, np.float64)
    d = np.linalg.norm(samples[:, None, :] - centers[None, :, :].astype(np.float64), axis=2)
    nearest = d.argmin(axis=1)
    good = d[np.arange(len(samples)), nearest] <= 3 * std
    k = len(centers)
    counts = np.bincount(nearest[good], minlength=k)
    covered = counts >= 0.05 * len(samples) / k
    if counts.sum() == 0:
        reverse_kl = float(np.log(k))
    else:
        p = counts / counts.sum()
        nz = p > 0
        reverse_kl = float(np.sum(p[nz] * np.log(p[nz] * k)))
    return {"modes": int(covered.sum()), "modes_pacgan": int((counts >= 1).sum()), "hq": float(good.mean()),
            "reverse_kl": reverse_kl,
            "mode_counts": counts.tolist()}
