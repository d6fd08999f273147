"""Each gradient transform against a numpy reference, inside a compiled step."""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn, ops

from loops import transforms as T
from loops.optim import make_optimizer
from loops.step import make_step

RNG = np.random.default_rng(1)
GRADS = (RNG.normal(size=(3, 2)).astype(np.float32) * 3, RNG.normal(size=(2,)).astype(np.float32))


def apply_jit(transform, grads, noise=None, apply_in=True):
    @ms.jit
    def f(g0, g1, noise):
        return transform((g0, g1), apply_in if not transform.can_skip else ops.ones((), ms.bool_), noise)
    (o0, o1), apply = f(Tensor(grads[0]), Tensor(grads[1]), noise)
    return [o0.asnumpy(), o1.asnumpy()], apply


def test_clip_by_value_matches_numpy(graph_mode):
    out, _ = apply_jit(T.ClipByValue(0.5), GRADS)
    for o, g in zip(out, GRADS):
        np.testing.assert_allclose(o, np.clip(g, -0.5, 0.5))
    assert max(np.abs(o).max() for o in out) <= 0.5


def test_clip_by_global_norm_matches_numpy(graph_mode):
    norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in GRADS))
    out, _ = apply_jit(T.ClipByGlobalNorm(1.0), GRADS)
    for o, g in zip(out, GRADS):
        np.testing.assert_allclose(o, g * min(1.0, 1.0 / (norm + 1e-6)), rtol=1e-5)
    # a norm already under the limit passes unchanged
    out, _ = apply_jit(T.ClipByGlobalNorm(norm * 2), GRADS)
    for o, g in zip(out, GRADS):
        np.testing.assert_allclose(o, g, rtol=1e-6)


def test_clip_by_norm_of_a_model_of_members_clips_each_members_own_norm(graph_mode):
    # two members side by side (leading dimension 2): member 0's norm ~6.6, member 1's a tenth of it
    grads = (np.stack([GRADS[0], GRADS[0] / 10]), np.stack([GRADS[1], GRADS[1] / 10]))
    norms = [np.sqrt(sum((g[k].astype(np.float64) ** 2).sum() for g in grads)) for k in range(2)]
    limit = 1.0
    assert norms[1] < limit < norms[0]  # only member 0 is clipped: one shared norm would scale both
    t = T.from_flags([], "x.", members=2, clip_norm=limit).transforms[0]
    out, _ = apply_jit(t, grads)
    for o, g in zip(out, grads):
        np.testing.assert_allclose(o[0], g[0] * limit / (norms[0] + 1e-6), rtol=1e-5)
        np.testing.assert_allclose(o[1], g[1], rtol=1e-6)


def test_transforms_that_see_all_gradients_at_once_refuse_a_model_of_members():
    for flags in (dict(skip_nonfinite=True), dict(loss_scale="static")):
        with pytest.raises(ValueError, match="would couple a model's 3 members"):
            T.from_flags([], "x.", members=3, **flags)
    T.from_flags([], "x.", members=3, clip_value=0.5, clip_norm=1.0)  # elementwise, or per member: allowed


def test_grad_noise_adds_sigma_times_host_noise(graph_mode):
    params = [ms.Parameter(Tensor(g), name=f"p{i}") for i, g in enumerate(GRADS)]
    t = T.GradNoise(0.3, params)
    assert t.noise_size == 8
    noise = np.random.default_rng(2).standard_normal(8).astype(np.float32)
    out, _ = apply_jit(t, GRADS, Tensor(noise))
    np.testing.assert_allclose(out[0], GRADS[0] + 0.3 * noise[:6].reshape(3, 2), rtol=1e-6)
    np.testing.assert_allclose(out[1], GRADS[1] + 0.3 * noise[6:], rtol=1e-6)


def test_skip_nonfinite_vetoes_and_counts(graph_mode):
    t = T.SkipNonFinite("x.")
    _, apply = apply_jit(t, GRADS)
    assert bool(apply.asnumpy()) and int(t.skipped.asnumpy()) == 0
    bad = (GRADS[0].copy(), GRADS[1].copy())
    bad[1][0] = np.inf
    _, apply = apply_jit(t, bad)
    assert not bool(apply.asnumpy()) and int(t.skipped.asnumpy()) == 1


def test_chain_order_and_state_names():
    params = [ms.Parameter(Tensor(g), name=f"w{i}") for i, g in enumerate(GRADS)]
    chain = T.from_flags(params, "d.", clip_norm=1.0, grad_noise=0.1, accumulate=2, skip_nonfinite=True)
    kinds = [type(t).__name__ for t in chain.transforms]
    assert kinds == ["Accumulate", "SkipNonFinite", "ClipByGlobalNorm", "GradNoise"]
    names = sorted(p.name for p in chain.get_parameters())
    assert names == ["d.accumulate.count", "d.accumulate.good", "d.accumulate.w0", "d.accumulate.w1",
                     "d.skip_nonfinite.skipped"]
    assert chain.can_skip and chain.noise_size == 8


def mse_of(net):
    """A forward function closing over `net` (the graph parser rejects default-argument closures)."""
    def forward(xb, yb):
        return ops.mean(ops.square(net(xb) - yb))
    return forward


def _dense_problem(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)
    net = nn.Dense(3, 2, weight_init=Tensor(rng.normal(size=(2, 3)).astype(np.float32)), bias_init="zeros")
    net.update_parameters_name(f"net{seed}.")
    return net, x, y


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_accumulation_equals_one_big_batch(graph_mode, optimizer):
    """K micro-batch calls with accumulate=K == one call on the K-times larger batch (mean loss)."""
    k = 4
    net_a, x, y = _dense_problem(3)
    net_b, _, _ = _dense_problem(3)
    results = []
    for net, acc in ((net_a, k), (net_b, 1)):
        opt = make_optimizer(optimizer, net.trainable_params(), 0.1, f"{net.weight.name}.")

        step = make_step(mse_of(net), opt, T.from_flags(opt.parameters, f"{net.weight.name}.", accumulate=acc))
        for _ in range(2):  # two updates, so optimizer state (Adam moments) is exercised too
            if acc == k:
                for i in range(k):
                    step(Tensor(x[2 * i:2 * i + 2]), Tensor(y[2 * i:2 * i + 2]))
            else:
                step(Tensor(x), Tensor(y))
        results.append(net.weight.asnumpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(results[0], _dense_problem(3)[0].weight.asnumpy())  # it did move


def test_accumulation_holds_back_until_k(graph_mode):
    net, x, y = _dense_problem(4)
    w0 = net.weight.asnumpy().copy()
    opt = make_optimizer("sgd", net.trainable_params(), 0.1, "acc.")

    step = make_step(mse_of(net), opt, T.from_flags(opt.parameters, "acc.", accumulate=3))
    step(Tensor(x), Tensor(y))
    step(Tensor(x), Tensor(y))
    np.testing.assert_array_equal(net.weight.asnumpy(), w0)
    step(Tensor(x), Tensor(y))
    assert not np.array_equal(net.weight.asnumpy(), w0)


def test_accumulation_leaves_out_vetoed_micro_batches_and_keeps_its_window(graph_mode):
    """accumulate=3 after a loss scaler: an overflowed (Inf) micro-batch is left out of the sum, the
    window still closes on the 3rd call, and the update is the mean of the good ones."""
    params = [ms.Parameter(Tensor(g), name=f"w{i}") for i, g in enumerate(GRADS)]
    chain = T.from_flags(params, "a.", accumulate=3, loss_scale="static")
    scale = float(chain.loss_scaler.scale_value.asnumpy())
    acc = chain.transforms[1]
    bad = (GRADS[0] * np.inf, GRADS[1] * scale)
    steps = [(GRADS[0] * scale, GRADS[1] * scale), bad, (2 * GRADS[0] * scale, 2 * GRADS[1] * scale)]
    applies = []
    for i, grads in enumerate(steps):
        out, apply = apply_jit(chain, grads)
        applies.append(bool(apply.asnumpy()))
        if i == 1:  # the vetoed call changed nothing but the call count
            assert int(acc.good.asnumpy()) == 1 and int(acc.count.asnumpy()) == 2
            np.testing.assert_allclose(acc.buffers[0].asnumpy(), GRADS[0], rtol=1e-6)
    assert applies == [False, False, True]
    for o, g in zip(out, GRADS):
        np.testing.assert_allclose(o, 1.5 * g, rtol=1e-6)  # (g + 2g) / 2 good micro-batches
    assert int(acc.count.asnumpy()) == 0 and int(acc.good.asnumpy()) == 0  # a fresh window
    for _ in range(3):  # a window of nothing but overflows applies nothing
        _, apply = apply_jit(chain, bad)
    assert not bool(apply.asnumpy()) and not np.isfinite(bad[0]).all()
    assert np.isfinite(acc.buffers[0].asnumpy()).all()


def test_loss_scale_unscales_vetoes_overflow_and_backs_off(graph_mode):
    chain = T.from_flags([], "amp.", loss_scale="dynamic")
    (t,) = chain.transforms
    assert chain.loss_scaler is t.scaler and sorted(p.name for p in chain.extra_parameters) == [
        "amp.loss_scale.counter", "amp.loss_scale.scale_value"]
    scale = float(t.scaler.scale_value.asnumpy())
    out, apply = apply_jit(chain, (GRADS[0] * scale, GRADS[1] * scale))
    np.testing.assert_allclose(out[0], GRADS[0], rtol=1e-6)
    assert bool(apply.asnumpy())
    bad = (GRADS[0].copy(), GRADS[1].copy())
    bad[0][0, 0] = np.inf
    _, apply = apply_jit(chain, bad)
    assert not bool(apply.asnumpy()) and int(t.overflows.asnumpy()) == 1
    assert float(t.scaler.scale_value.asnumpy()) == scale / 2  # dynamic: halved on overflow
    assert chain.skipped_count() == 1
