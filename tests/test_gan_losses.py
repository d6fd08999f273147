"""GAN losses against hand-computed values, and their stability on extreme logits."""
import math

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from gan.losses import LOSSES, softplus
from gan.penalties import per_sample_grad_norm

REAL = np.array([2.0, -1.0], np.float32)
FAKE = np.array([0.5, -3.0], np.float32)


def sp(x):
    return math.log1p(math.exp(x))


# by hand, per the papers' formulas (means over the batch of 2)
EXPECTED = {
    "ns": ((sp(-2) + sp(1)) / 2 + (sp(0.5) + sp(-3)) / 2, (sp(-0.5) + sp(3)) / 2),
    "minimax": ((sp(-2) + sp(1)) / 2 + (sp(0.5) + sp(-3)) / 2, -(sp(0.5) + sp(-3)) / 2),
    "hinge": ((0 + 2) / 2 + (1.5 + 0) / 2, -(0.5 - 3) / 2),
    "wgan": ((0.5 - 3) / 2 - (2 - 1) / 2, -(0.5 - 3) / 2),
    "lsgan": (0.5 * (1 + 4) / 2 + 0.5 * (0.25 + 9) / 2, 0.5 * (0.25 + 16) / 2),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_matches_hand_computation(name):
    d_loss, g_loss = LOSSES[name]
    d_expected, g_expected = EXPECTED[name]
    np.testing.assert_allclose(float(d_loss(Tensor(REAL), Tensor(FAKE)).asnumpy()), d_expected, rtol=1e-6)
    np.testing.assert_allclose(float(g_loss(Tensor(FAKE)).asnumpy()), g_expected, rtol=1e-6)


def test_every_loss_has_a_d_and_g_function_and_ns_differs_from_minimax():
    assert set(LOSSES) == {"ns", "minimax", "hinge", "wgan", "lsgan"}
    assert LOSSES["ns"][1] is not LOSSES["minimax"][1]


def test_softplus_is_stable_on_extreme_logits():
    x = np.array([-1000, -30, 0, 30, 1000], np.float32)
    out = softplus(Tensor(x)).asnumpy()
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, np.logaddexp(0, x.astype(np.float64)), rtol=1e-6, atol=1e-12)
    for name, (d_loss, g_loss) in LOSSES.items():
        assert np.isfinite(d_loss(Tensor(x), Tensor(-x)).asnumpy()), name
        assert np.isfinite(g_loss(Tensor(x)).asnumpy()), name


def test_per_sample_grad_norm_takes_all_non_batch_axes():
    g = np.random.default_rng(0).normal(size=(3, 2, 4, 4)).astype(np.float32)
    expected = np.sqrt((g.reshape(3, -1) ** 2).sum(axis=1))
    np.testing.assert_allclose(per_sample_grad_norm(Tensor(g)).asnumpy(), expected, rtol=1e-5)
    # the classic bug (norm over one axis, then averaged) gives something else
    assert not np.allclose(np.linalg.norm(g, axis=1).mean(axis=(1, 2)), expected)
