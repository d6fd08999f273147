"""Spectral norm: the power-iteration estimate matches numpy's SVD, u moves only in training."""
import numpy as np
from mindspore import Tensor, nn

from models.spectral_norm import SpectralNorm


def test_sigma_matches_svd_and_normalised_layer_has_unit_norm(graph_mode):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(6, 5)).astype(np.float32)
    layer = SpectralNorm(nn.Dense(5, 6, weight_init=Tensor(w), bias_init="zeros"))
    layer.set_train(True)
    x = Tensor(np.eye(5, dtype=np.float32))
    for _ in range(30):  # one power iteration per training call
        out = layer(x).asnumpy()
    top = np.linalg.svd(w, compute_uv=False)[0]
    sigma = float(layer.sigma_and_u()[0].asnumpy())
    assert abs(sigma - top) / top < 1e-3
    # layer(I) = I @ W_sn^T: its top singular value is ~1
    assert abs(np.linalg.svd(out, compute_uv=False)[0] - 1.0) < 1e-3


def test_conv_layer_and_eval_mode_keeps_u(graph_mode):
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    layer = SpectralNorm(nn.Conv2d(3, 4, 3, pad_mode="pad", padding=1, has_bias=True, weight_init=Tensor(w), bias_init="zeros"))
    layer.set_train(True)
    x = Tensor(rng.normal(size=(2, 3, 5, 5)).astype(np.float32))
    for _ in range(30):
        layer(x)
    top = np.linalg.svd(w.reshape(4, -1), compute_uv=False)[0]
    assert abs(float(layer.sigma_and_u()[0].asnumpy()) - top) / top < 1e-3
    plain = nn.Conv2d(3, 4, 3, pad_mode="pad", padding=1, has_bias=True, weight_init=Tensor(w / top), bias_init="zeros")
    np.testing.assert_allclose(layer(x).asnumpy(), plain(x).asnumpy(), rtol=1e-3, atol=1e-4)
    evaluate = SpectralNorm(nn.Dense(3, 2))
    evaluate.set_train(False)
    u0 = evaluate.u.asnumpy().copy()
    evaluate(Tensor(np.ones((1, 3), np.float32)))
    np.testing.assert_array_equal(evaluate.u.asnumpy(), u0)
