"""Gradient penalties on D's input (R1, WGAN-GP) and PacGAN packing: all defined on what D judges.

With PacGAN packing a D input is m consecutive samples, so a penalty's gradient norm runs over all
m of them, and GP's m samples share one interpolation weight.
"""
import mindspore as ms
from mindspore import ops

from loops.step import jit_enabled


def per_sample_grad_norm(grad, pack_size=1):
    """||grad_i||_2 per D input, taken over every non-batch axis (C, H, W), not just one.
    With PacGAN packing a D input is m consecutive samples, so the norm runs over all m of them:
    the gradient w.r.t. the packed input is the per-sample gradients side by side."""
    return ops.sqrt(ops.sum(ops.square(grad.reshape(grad.shape[0] // pack_size, -1)), dim=1) + 1e-12)


def r1_penalty(grad, gamma, pack_size=1):
    """(gamma / 2) E ||grad_x D(x)||^2 over D inputs (Mescheder et al. 2018)."""
    return (gamma / 2) * ops.mean(ops.square(per_sample_grad_norm(grad, pack_size)))


def gradient_penalty(grad, pack_size=1):
    """E (||grad_x D(x_hat)||_2 - 1)^2 over D inputs (Gulrajani et al. 2017), unweighted."""
    return ops.mean(ops.square(per_sample_grad_norm(grad, pack_size) - 1.0))


def per_input_weights(alpha, pack_size, ndim):
    """GP's interpolation weights, one per D input (B/m,), repeated over the m samples of each pack
    and shaped to broadcast over a (B, ...) batch."""
    a = alpha.reshape(-1, 1).broadcast_to((alpha.shape[0], pack_size)).reshape(-1)
    return a.reshape((-1,) + (1,) * (ndim - 1))


def input_gradient(fn):
    """d fn / d (first input), for penalties that are differentiated again (second order).

    Compiled even under --mode pynative: MindSpore 2.10's PyNative autodiff silently drops the
    second-order gradient along a view op (reshape, transpose) that runs inside the first backward
    pass and feeds another backward op. R1 / GP then gave exactly zero gradient to the DCGAN head
    and to every spectral-norm layer (graph mode matched finite differences). Compiling just this
    function makes PyNative agree with graph mode to ~1e-7 (tests/test_penalties.py)."""
    grad = ms.grad(fn, grad_position=0)
    return grad if jit_enabled() else ms.jit(grad)


def pack(x, m):
    """PacGAN (Lin et al. 2018): m consecutive samples become one D input, concatenated along the
    first feature axis: (B, C, ...) -> (B/m, m*C, ...). D then judges m samples jointly, which
    penalises a generator that covers few modes."""
    return x if m == 1 else x.reshape((x.shape[0] // m, m * x.shape[1]) + x.shape[2:])
