"""Image metrics as pure numpy functions of classifier features / probabilities.

They are computed on a small classifier that this project trains on the dataset's own labels
(metrics/classifier.py), not on Inception-v3: the numbers compare runs of this project with each
other, NOT with published Inception-FID values.

  fid        Frechet distance between Gaussians fitted to the two feature sets (Heusel et al. 2017)
  kid        unbiased MMD^2 with the cubic polynomial kernel, mean over subsets (Binkowski et al. 2018)
  prdc       precision, recall, density, coverage with k nearest neighbours (Naeem et al. 2020, k=5)
  class_score  exp(E_x KL(p(y|x) || p(y))): the Inception Score formula on our classifier, one split
  inception_score  the same formula over 10 splits, mean and std (Salimans et al. 2016), for the
             InceptionV3 of --fid-weights (metrics/evaluate.py: is_inception, is_inception_std)
  class_coverage  classes that receive at least 20% of their fair share of argmax predictions, and
             KL(predicted class histogram || uniform)
"""
import warnings

import numpy as np
from scipy import linalg
from scipy.special import log_softmax, rel_entr

PRDC_CHUNK = 1024  # rows of a distance matrix at a time: 10k x 10k would be 800 MB per matrix


def fid(a, b):
    """|mu_a - mu_b|^2 + tr(C_a) + tr(C_b) - 2 tr((C_a C_b)^(1/2)).

    With fewer samples than feature dimensions (e.g. InceptionV3's 2048 at n < 2048) both covariances
    are singular: then tr((C_a C_b)^(1/2)) is computed exactly as the nuclear norm of Xa Xb^T (X the
    centred samples / sqrt(n - 1): C_a C_b and (Xa Xb^T)(Xa Xb^T)^T share their non-zero eigenvalues),
    in O(n^2 d) instead of a d x d sqrtm (~25 s at d = 2048) that fails and is then regularised."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    mu_a, mu_b = a.mean(0), b.mean(0)
    if min(len(a), len(b)) < a.shape[1]:
        xa, xb = (a - mu_a) / np.sqrt(len(a) - 1), (b - mu_b) / np.sqrt(len(b) - 1)
        trace_sqrt = np.linalg.svd(xa @ xb.T, compute_uv=False).sum()
        return float(((mu_a - mu_b) ** 2).sum() + (xa ** 2).sum() + (xb ** 2).sum() - 2 * trace_sqrt)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = _sqrtm(cov_a @ cov_b)
    if not np.isfinite(covmean).all():  # singular product: regularise as the reference code does
        eps = np.eye(len(cov_a)) * 1e-6
        covmean = _sqrtm((cov_a + eps) @ (cov_b + eps))
    covmean = covmean.real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * np.trace(covmean))


def _sqrtm(matrix):
    """scipy.linalg.sqrtm without its `disp` argument (deprecated in SciPy 1.17, gone in 1.18): the
    same computation on every SciPy; its accuracy warning is silenced, a singular product is handled
    by the caller (dead ReLU units make it singular)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return linalg.sqrtm(matrix)


def kid(a, b, subsets=20, subset_size=200, seed=0):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    d = a.shape[1]
    m = min(subset_size, len(a), len(b))
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(subsets):
        x = a[rng.choice(len(a), m, replace=False)]
        y = b[rng.choice(len(b), m, replace=False)]
        kxx, kyy, kxy = ((x @ x.T) / d + 1) ** 3, ((y @ y.T) / d + 1) ** 3, ((x @ y.T) / d + 1) ** 3
        values.append((kxx.sum() - np.trace(kxx)) / (m * (m - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
                      - 2 * kxy.mean())
    return float(np.mean(values))


def _pairwise(a, b):
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
    return np.sqrt(np.maximum(sq, 0))


def _kth_neighbour(x, k):
    """Distance from each row of x to its k-th nearest other row (index 0 is the point itself)."""
    return np.concatenate([np.partition(_pairwise(x[i:i + PRDC_CHUNK], x), k, axis=1)[:, k]
                           for i in range(0, len(x), PRDC_CHUNK)])


def prdc(real, fake, k=5):
    """Precision, recall, density, coverage; the (real, fake) distances in row chunks, so memory grows
    with PRDC_CHUNK x n, not n x n."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    real_radius, fake_radius = _kth_neighbour(real, k), _kth_neighbour(fake, k)
    inside_any = np.zeros(len(fake), bool)  # fake j inside some real ball
    inside_count = np.zeros(len(fake))  # number of real balls holding fake j
    recall_hits, coverage_hits = 0, 0
    for i in range(0, len(real), PRDC_CHUNK):
        d = _pairwise(real[i:i + PRDC_CHUNK], fake)  # (real chunk, fake)
        inside = d < real_radius[i:i + PRDC_CHUNK, None]
        inside_any |= inside.any(axis=0)
        inside_count += inside.sum(axis=0)
        recall_hits += int((d < fake_radius[None, :]).any(axis=1).sum())
        coverage_hits += int((d.min(axis=1) < real_radius[i:i + PRDC_CHUNK]).sum())
    return {"precision": float(inside_any.mean()), "recall": recall_hits / len(real),
            "density": float(inside_count.mean() / k), "coverage": coverage_hits / len(real)}


def class_score(probs, eps=1e-12):
    p = np.asarray(probs, np.float64)
    marginal = p.mean(0, keepdims=True)
    return float(np.exp((p * (np.log(p + eps) - np.log(marginal + eps))).sum(1).mean()))


def inception_score(probs, splits=10):
    """(mean, std) over `splits` of exp(E_x KL(p(y|x) || p(y))), p(y) the mean of p(y|x) within each
    split: the formula and split boundaries (i * N // splits) of Salimans et al.'s improved-gan code,
    also used by torch-fidelity, Mimicry and StudioGAN; std is numpy's (ddof 0), as theirs. Float64;
    0 * log 0 counts 0. Samples are split in the given order (no shuffle)."""
    p = np.asarray(probs, np.float64)
    n = len(p)
    if n < splits:
        raise ValueError(f"the Inception Score over {splits} splits needs at least {splits} samples, got {n}")
    scores = []
    for i in range(splits):
        part = p[i * n // splits:(i + 1) * n // splits]
        marginal = part.mean(0, keepdims=True)
        scores.append(np.exp(rel_entr(part, marginal).sum(1).mean()))
    return float(np.mean(scores)), float(np.std(scores))


def softmax64(logits):
    """Class probabilities from logits, in float64 (as torch-fidelity: no float32 underflow to 0)."""
    return np.exp(log_softmax(np.asarray(logits, np.float64), axis=1))


def class_coverage(probs, min_share=0.2):
    p = np.asarray(probs)
    k = p.shape[1]
    hist = np.bincount(p.argmax(1), minlength=k) / len(p)
    nz = hist > 0
    return {"classes_covered": int((hist >= min_share / k).sum()),
            "class_kl": float((hist[nz] * np.log(hist[nz] * k)).sum())}
