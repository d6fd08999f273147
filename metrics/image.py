"""Image metrics as pure numpy functions of classifier features / probabilities.

They are computed on a small classifier that this project trains on the dataset's own labels
(metrics/classifier.py), not on Inception-v3: the numbers compare runs of this project with each
other, NOT with published Inception-FID values.

  fid        Frechet distance between Gaussians fitted to the two feature sets (Heusel et al. 2017)
  kid        unbiased MMD^2 with the cubic polynomial kernel, mean over subsets (Binkowski et al. 2018)
  prdc       precision, recall, density, coverage with k nearest neighbours (Naeem et al. 2020, k=5)
  class_score  exp(E_x KL(p(y|x) || p(y))): the Inception Score computed with our classifier
  class_coverage  classes that receive at least 20% of their fair share of argmax predictions, and
             KL(predicted class histogram || uniform)
"""
import warnings

import numpy as np
from scipy import linalg


def fid(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    with warnings.catch_warnings():  # dead ReLU units make the product singular; handled below
        warnings.simplefilter("ignore")
        covmean, _ = linalg.sqrtm(cov_a @ cov_b, disp=False)
    if not np.isfinite(covmean).all():  # singular product: regularise as the reference code does
        eps = np.eye(len(cov_a)) * 1e-6
        covmean, _ = linalg.sqrtm((cov_a + eps) @ (cov_b + eps), disp=False)
    covmean = covmean.real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b) - 2 * np.trace(covmean))


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


def prdc(real, fake, k=5):
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    real_radius = np.sort(_pairwise(real, real), axis=1)[:, k]  # index 0 is the point itself
    fake_radius = np.sort(_pairwise(fake, fake), axis=1)[:, k]
    d = _pairwise(real, fake)  # (real, fake)
    inside_real = d < real_radius[:, None]
    precision = inside_real.any(axis=0).mean()
    recall = (d < fake_radius[None, :]).any(axis=1).mean()
    density = inside_real.sum(axis=0).mean() / k
    coverage = (d.min(axis=1) < real_radius).mean()
    return {"precision": float(precision), "recall": float(recall), "density": float(density),
            "coverage": float(coverage)}


def class_score(probs, eps=1e-12):
    p = np.asarray(probs, np.float64)
    marginal = p.mean(0, keepdims=True)
    return float(np.exp((p * (np.log(p + eps) - np.log(marginal + eps))).sum(1).mean()))


def class_coverage(probs, min_share=0.2):
    p = np.asarray(probs)
    k = p.shape[1]
    hist = np.bincount(p.argmax(1), minlength=k) / len(p)
    nz = hist > 0
    return {"classes_covered": int((hist >= min_share / k).sum()),
            "class_kl": float((hist[nz] * np.log(hist[nz] * k)).sum())}
