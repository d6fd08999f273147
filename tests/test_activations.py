"""models.activations.LeakyReLU: the same numbers as nn.LeakyReLU (values, gradients, second-order
gradients as R1 takes them), with fewer kernels."""
import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from models.activations import LeakyReLU


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32) * np.float32(3)
    x[0, :4] = [1e-30, -1e-30, 1e30, -1e30]  # tiny and huge, both signs
    x[1, :2] = [0.0, -0.0]
    return Tensor(x)


def _mlp_d(act):
    ms.set_seed(0)
    return nn.SequentialCell([nn.Dense(8, 16), act(0.2), nn.Dense(16, 16), act(0.2), nn.Dense(16, 1)])


def test_values_and_gradients_bit_identical_to_nn_leaky_relu():
    x = _inputs()
    ours, theirs = LeakyReLU(0.2), nn.LeakyReLU(0.2)
    assert np.array_equal(ours(x).asnumpy(), theirs(x).asnumpy())
    w = Tensor(np.random.default_rng(1).standard_normal((64, 8)).astype(np.float32))

    def grad_of(act):
        def weighted(v):
            return ops.sum(act(v) * w)
        return ms.grad(weighted)(x).asnumpy()
    g, g_nn = grad_of(ours), grad_of(theirs)
    zero = x.asnumpy() == 0
    assert np.array_equal(g[~zero], g_nn[~zero])
    assert np.allclose(np.unique((g / w.asnumpy()).round(6)), [0.2, 1.0])  # a slope of a or 1, nothing else
    # at exactly 0: slope a, as PyTorch's leaky_relu; nn.LeakyReLU splits the tie of its maximum
    assert np.allclose(g[zero] / w.asnumpy()[zero], 0.2) and np.allclose(g_nn[zero] / w.asnumpy()[zero], 0.6)


def test_second_order_gradient_identical_in_graph_mode(graph_mode):
    """R1's gradient w.r.t. D's weights differentiates through the activation's gradient."""
    x = _inputs()
    results = []
    for act in (LeakyReLU, nn.LeakyReLU):
        d = _mlp_d(act)
        d.set_train(True)

        def d_sum(v):
            return ops.sum(d(v))
        input_grad = ms.grad(d_sum)

        def r1(v):
            return ops.sum(ops.square(input_grad(v)))
        results.append([g.asnumpy() for g in ms.jit(ms.grad(r1, None, d.trainable_params()))(x)])
    assert all(np.array_equal(a, b) for a, b in zip(*results))
    assert any(np.abs(a).max() > 0 for a in results[0])


def test_keeps_float16():
    x = _inputs().astype(ms.float16)
    y = LeakyReLU(0.2)(x)
    assert y.dtype == ms.float16
    assert np.array_equal(y.asnumpy(), nn.LeakyReLU(0.2)(x).asnumpy())
