"""DiffAugment: each policy against numpy, and gradients flow through it to the images."""
import mindspore as ms
import numpy as np
from mindspore import Tensor, ops

from loops import augment

RNG = np.random.default_rng(0)
X = RNG.uniform(-1, 1, (4, 3, 8, 8)).astype(np.float32)


def test_translation_is_a_zero_filled_shift():
    rows, cols_t = augment.draw_translation(np.random.default_rng(1), 4, (3, 8, 8))
    out = augment.apply_translation(Tensor(X), Tensor(rows), Tensor(cols_t)).asnumpy()
    for k in range(4):
        expected = np.zeros_like(X[k])
        # recover the shifts from the matrices and rebuild the expected image with numpy slicing
        dy = [i - j for i in range(8) for j in range(8) if rows[k, 0, i, j]][0]
        dx = [j - i for i in range(8) for j in range(8) if cols_t[k, 0, i, j]][0]
        src = X[k]
        expected[:, max(0, dy):8 + min(0, dy), max(0, dx):8 + min(0, dx)] = \
            src[:, max(0, -dy):8 + min(0, -dy), max(0, -dx):8 + min(0, -dx)]
        np.testing.assert_allclose(out[k], expected, atol=1e-6)
        assert abs(dy) <= 1 and abs(dx) <= 1  # 1/8 of 8 pixels


def test_cutout_zeroes_a_half_size_square():
    (mask,) = augment.draw_cutout(np.random.default_rng(2), 4, (3, 8, 8))
    out = augment.apply_cutout(Tensor(X), Tensor(mask)).asnumpy()
    np.testing.assert_array_equal(out, X * mask)
    holes = (mask == 0).sum(axis=(1, 2, 3))
    assert (holes > 0).all() and (holes <= 16).all()


def test_color_matches_numpy():
    (f,) = augment.draw_color(np.random.default_rng(3), 4, (3, 8, 8))
    out = augment.apply_color(Tensor(X), Tensor(f)).asnumpy()
    x = X + (f[:, 0] - 0.5)
    m = x.mean(1, keepdims=True)
    x = (x - m) * (f[:, 1] * 2) + m
    m = x.mean((1, 2, 3), keepdims=True)
    np.testing.assert_allclose(out, (x - m) * (f[:, 2] + 0.5) + m, rtol=1e-5, atol=1e-6)


def test_gradient_flows_through_all_policies(graph_mode):
    policies = augment.parse("color,translation,cutout")
    params = tuple(Tensor(p) for p in augment.draw(np.random.default_rng(4), policies, 4, (3, 8, 8)))

    def total(x):
        return ops.sum(augment.apply(x, params, policies) ** 2)
    grad = ms.jit(ms.grad(total))(Tensor(X)).asnumpy()
    assert np.abs(grad).sum() > 0 and np.isfinite(grad).all()
