"""make_step: graph vs PyNative parity, gradients only w.r.t. the optimizer's parameters, clipping
bounds the update, non-finite skipping leaves weights untouched."""
import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from loops import transforms as T
from loops.optim import make_optimizer
from loops.step import make_step


def _run(mode, transform_flags, steps=5):
    ms.set_context(mode=mode)
    rng = np.random.default_rng(0)
    net = nn.Dense(4, 3, weight_init=Tensor(rng.normal(size=(3, 4)).astype(np.float32)), bias_init="zeros")
    net.update_parameters_name(f"m{mode}.")
    opt = make_optimizer("adam", net.trainable_params(), 0.05, f"m{mode}.")

    def forward(x, y):
        pred = net(x)
        return ops.mean(ops.square(pred - y)), ops.mean(pred)
    step = make_step(forward, opt, T.from_flags(opt.parameters, f"m{mode}.", **transform_flags), has_aux=True)
    host = np.random.default_rng(1)
    outs = []
    for _ in range(steps):
        x = host.normal(size=(6, 4)).astype(np.float32)
        y = host.normal(size=(6, 3)).astype(np.float32)
        loss, aux, gn, gn_after = step(Tensor(x), Tensor(y), rng=host)
        outs.append((float(loss.asnumpy()), float(aux[0].asnumpy()), float(gn.asnumpy()), float(gn_after.asnumpy())))
    return np.array(outs), net.weight.asnumpy()


def test_graph_and_pynative_give_the_same_numbers(graph_mode):
    flags = dict(clip_norm=0.5, grad_noise=0.01, skip_nonfinite=True)
    g_outs, g_w = _run(ms.GRAPH_MODE, flags)
    p_outs, p_w = _run(ms.PYNATIVE_MODE, flags)
    np.testing.assert_allclose(g_outs, p_outs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_w, p_w, rtol=1e-5, atol=1e-6)
    assert (g_outs[:, 3] <= 0.5 + 0.01 * 4).all()  # after clipping (+ small noise)


def test_clip_norm_bounds_the_sgd_update(graph_mode):
    net = nn.Dense(5, 1, weight_init="zeros", bias_init="zeros")
    net.update_parameters_name("clip.")
    opt = make_optimizer("sgd", net.trainable_params(), 1.0, "clip.")
    step = make_step(lambda_free_forward(net), opt, T.from_flags(opt.parameters, "clip.", clip_norm=0.25))
    before = np.concatenate([p.asnumpy().ravel() for p in net.trainable_params()])
    loss, _, norm, norm_after = step(Tensor(np.full((4, 5), 10.0, np.float32)), Tensor(np.full((4, 1), 100.0, np.float32)))
    after = np.concatenate([p.asnumpy().ravel() for p in net.trainable_params()])
    assert float(norm.asnumpy()) > 100  # the raw gradient is huge
    assert np.linalg.norm(after - before) <= 0.25 + 1e-5  # lr 1: the update IS the clipped gradient
    assert np.linalg.norm(after - before) > 0.24


def lambda_free_forward(net):
    def forward(x, y):
        return ops.mean(ops.square(net(x) - y))
    return forward


def test_step_moves_only_its_optimizers_parameters(graph_mode):
    a = nn.Dense(2, 2)
    a.update_parameters_name("a.")
    b = nn.Dense(2, 2)
    b.update_parameters_name("b.")
    opt = make_optimizer("sgd", a.trainable_params(), 0.5, "a.")

    def forward(x):
        return ops.mean(ops.square(b(a(x))))
    step = make_step(forward, opt)
    b_before = [p.asnumpy().copy() for p in b.trainable_params()]
    a_before = [p.asnumpy().copy() for p in a.trainable_params()]
    step(Tensor(np.ones((3, 2), np.float32)))
    for p, v in zip(b.trainable_params(), b_before):
        np.testing.assert_array_equal(p.asnumpy(), v)
    assert any(not np.array_equal(p.asnumpy(), v) for p, v in zip(a.trainable_params(), a_before))


def test_skip_nonfinite_leaves_weights_untouched(graph_mode):
    net = nn.Dense(2, 1)
    net.update_parameters_name("nf.")
    opt = make_optimizer("adam", net.trainable_params(), 0.1, "nf.")
    chain = T.from_flags(opt.parameters, "nf.", skip_nonfinite=True)
    step = make_step(lambda_free_forward(net), opt, chain)
    w = net.weight.asnumpy().copy()
    step(Tensor(np.array([[np.nan, 1.0]], np.float32)), Tensor(np.ones((1, 1), np.float32)))
    np.testing.assert_array_equal(net.weight.asnumpy(), w)
    assert chain.skipped_count() == 1
    assert int(opt.state_step.asnumpy()) == 0  # Adam's state did not advance either


def test_a_scheduled_rate_applies_to_the_update_of_its_own_step(graph_mode):
    """SGD with a changing host rate: delta w = -lr_t * g at every step t (not the previous step's rate)."""
    w = ms.Parameter(Tensor(np.zeros(3, np.float32)), name="lrstep.w")
    opt = make_optimizer("sgd", [w], 1.0, "lrstep.")
    x = np.array([1.0, -2.0, 0.5], np.float32)

    def forward(inp):
        return ops.sum(w * inp)  # gradient = x
    step = make_step(forward, opt, takes_lr=True)
    before = w.asnumpy().copy()
    for lr in (0.1, 0.3, 0.05):
        step(Tensor(x), Tensor(np.float32(lr)))
        np.testing.assert_allclose(w.asnumpy() - before, -lr * x, rtol=1e-6)
        before = w.asnumpy().copy()


def test_loss_scaled_step_reports_the_true_gradient_norm(graph_mode):
    """With a dynamic loss scale of 2^16 the logged norm is the float32 gradient's, not 65536 x it."""
    norms = []
    for scale in ("none", "dynamic"):
        net = nn.Dense(4, 1, weight_init=Tensor(np.ones((1, 4), np.float32)), bias_init="zeros")
        net.update_parameters_name(f"ls{scale}.")
        opt = make_optimizer("sgd", net.trainable_params(), 0.01, f"ls{scale}.")
        step = make_step(lambda_free_forward(net), opt, T.from_flags(opt.parameters, f"ls{scale}.", loss_scale=scale))
        out = step(Tensor(np.ones((2, 4), np.float32)), Tensor(np.zeros((2, 1), np.float32)))
        norms.append((float(out[0].asnumpy()), float(out[2].asnumpy()), float(out[3].asnumpy())))
    np.testing.assert_allclose(norms[1], norms[0], rtol=1e-5)
