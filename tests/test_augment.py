"""DiffAugment: each policy against numpy, and gradients flow through it to the images."""
import mindspore as ms
import numpy as np
from mindspore import Tensor, ops

from gan import augment

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


def test_translation_reaches_an_eighth_of_the_size_rounded():
    """The reference DiffAugment shifts by up to int(size / 8 + 0.5): +-4 px on 28x28, +-1 on 8x8."""
    for size, limit in ((28, 4), (8, 1), (32, 4)):
        rows, _ = augment.draw_translation(np.random.default_rng(5), 400, (1, size, size))
        shifts = [[i - j for i in range(size) for j in range(size) if rows[k, 0, i, j]] for k in range(400)]
        # a shift of s keeps size - |s| rows: recover |s| from the number of ones
        amounts = {size - int(rows[k, 0].sum()) for k in range(400)}
        assert max(amounts) == limit, (size, sorted(amounts))
        assert all(s for s in shifts)  # every matrix is a (partial) shift


def test_d_step_applies_the_augmentation_draws(graph_mode):
    """Identity draws give exactly the un-augmented D loss; random draws change it."""
    from gan.models import build_models
    from gan.steps import make_gan_steps
    from loops.optim import make_optimizer
    policies = augment.parse("color,translation,cutout")
    shape = (1, 8, 8)
    ms.set_seed(0)  # a fixed initialisation (5 random ones gave relative loss changes of 0.01-0.30)
    G, D, _ = build_models("dcgan", 4, shape, 8)
    for p in D.trainable_params():  # x3 per layer (~81x the logits): a fresh D's tiny logits would make
        p.set_data(p * 3.0)          # every input look alike to the loss
    opt_g = make_optimizer("sgd", G.trainable_params(), 0.0, "g.")
    opt_d = make_optimizer("sgd", D.trainable_params(), 0.0, "d.")  # lr 0: every call sees the same D
    arity = augment.arity(policies, shape)
    plain, _ = make_gan_steps(G, D, "ns", opt_g, opt_d)
    augmented, _ = make_gan_steps(G, D, "ns", opt_g, opt_d, augment_policies=policies, augment_arity=arity)
    rng = np.random.default_rng(0)
    real = Tensor(rng.uniform(-1, 1, (4,) + shape).astype(np.float32))
    z = Tensor(rng.standard_normal((4, 4)).astype(np.float32))
    color = np.full((4, 3, 1, 1, 1), 0.5, np.float32)  # brightness +0, saturation x1, contrast x1
    eye = np.broadcast_to(np.eye(8, dtype=np.float32), (4, 1, 8, 8)).copy()
    identity = tuple(Tensor(a) for a in (color, eye, eye, np.ones((4, 1, 8, 8), np.float32)))
    random = tuple(Tensor(a) for a in augment.draw(rng, policies, 4, shape) + augment.draw(rng, policies, 4, shape))
    base = float(plain(real, z)[0].asnumpy())
    np.testing.assert_allclose(float(augmented(real, z, *identity, *identity)[0].asnumpy()), base, rtol=1e-5)
    assert abs(float(augmented(real, z, *random)[0].asnumpy()) - base) > 1e-3 * abs(base)
