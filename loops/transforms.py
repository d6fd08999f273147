"""Gradient interventions: small Cells mapping grads -> grads, chained optax-style.

Each transform has the signature `(grads, apply, noise) -> (grads, apply)`:
  grads  tuple of gradient Tensors, one per optimizer parameter;
  apply  the "do the update" flag: Python True, or a bool Tensor once a transform may veto it;
  noise  one flat float32 Tensor of standard normals drawn on the host (or None), so the RNG
         state lives on the host and resume stays exact (in-graph RNG state cannot be saved).

A transform declares `can_skip` (it may veto the update) and `noise_size` (how many host normals
it consumes). A new intervention is one class here plus one line in `from_flags`.
"""
import numpy as np
import mindspore as ms
from mindspore import nn, ops, Parameter, Tensor


def global_norm(grads):
    """sqrt(sum_i ||g_i||^2) over all gradients, as a float32 scalar Tensor.

    One concat and one reduction rather than a reduction per gradient: on CPU each kernel launch
    costs tens of microseconds, which is most of a small model's step (see bench/RESULTS.md)."""
    flat = ops.cat([g.reshape(-1).astype(ms.float32) for g in grads])
    return ops.sqrt(ops.sum(flat * flat))


class Transform(nn.Cell):
    """Identity. Stateful subclasses re-assert their Parameter names in `name_state` (Chain calls it
    after the Cell machinery has auto-prefixed them), so checkpoints read `d.skip_nonfinite.skipped`,
    not `transforms.1.skipped`."""
    can_skip = False
    noise_size = 0

    def name_state(self):
        pass

    def construct(self, grads, apply, noise):
        return grads, apply


class ClipByValue(Transform):
    """g <- clip(g, -v, v), elementwise."""

    def __init__(self, value):
        super().__init__()
        self.value = float(value)

    def construct(self, grads, apply, noise):
        return tuple(ops.clamp(g, -self.value, self.value) for g in grads), apply


class ClipByGlobalNorm(Transform):
    """g <- g * min(1, v / (||g|| + 1e-6)), the global norm over all gradients (as torch does)."""

    def __init__(self, max_norm):
        super().__init__()
        self.max_norm = float(max_norm)

    def construct(self, grads, apply, noise):
        scale = ops.clamp(self.max_norm / (global_norm(grads) + 1e-6), max=1.0)
        return tuple(g * scale.astype(g.dtype) for g in grads), apply


class GradNoise(Transform):
    """g <- g + sigma * n, n ~ N(0, I) drawn on the host, fresh every step (Neelakantan et al. 2015)."""

    def __init__(self, sigma, params):
        super().__init__()
        self.sigma = float(sigma)
        self.shapes = [tuple(p.shape) for p in params]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        self.noise_size = sum(self.sizes)

    def construct(self, grads, apply, noise):
        out = []
        offset = 0
        for g, shape, size in zip(grads, self.shapes, self.sizes):
            n = noise[offset:offset + size].reshape(shape)
            out.append(g + self.sigma * n.astype(g.dtype))
            offset += size
        return tuple(out), apply


class SkipNonFinite(Transform):
    """Veto the update when any gradient holds NaN/Inf, and count the vetoes in `skipped`."""
    can_skip = True

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix
        self.skipped = Parameter(Tensor(0, ms.int32), name="skipped", requires_grad=False)
        self.name_state()

    def name_state(self):
        self.skipped.name = self.prefix + "skip_nonfinite.skipped"

    def construct(self, grads, apply, noise):
        finite = ms.amp.all_finite(grads)
        # count only real vetoes, not calls where an earlier transform (accumulate) held back
        ops.assign_add(self.skipped, ops.logical_and(apply, ops.logical_not(finite)).astype(ms.int32))
        return grads, ops.logical_and(apply, finite)


class Accumulate(Transform):
    """Average gradients over K calls; only every K-th call applies the update.

    The applied gradient is (g_1 + ... + g_K) / K, which for equal micro-batches and a mean loss
    is the gradient of one K-times larger batch. Put it first in a chain so that clipping, noise
    and the finite check see the accumulated gradient. A micro-batch an earlier transform vetoed
    (a loss-scale overflow: its gradient may be Inf) is left out of the sum, and the window still
    closes after K calls, so updates stay aligned with the caller's phases: the update then averages
    the good micro-batches of the window, and a window with none applies nothing.
    """
    can_skip = True

    def __init__(self, k, params, prefix):
        super().__init__()
        self.k = int(k)
        self.prefix = prefix
        self.param_names = [p.name for p in params]
        self.buffers = ms.ParameterTuple(
            Parameter(ops.zeros(p.shape, p.dtype), name="buf" + str(i), requires_grad=False)
            for i, p in enumerate(params))
        self.count = Parameter(Tensor(0, ms.int32), name="count", requires_grad=False)  # calls in this window
        self.good = Parameter(Tensor(0, ms.int32), name="good", requires_grad=False)  # of them not vetoed
        self.name_state()

    def name_state(self):
        for buf, name in zip(self.buffers, self.param_names):
            buf.name = self.prefix + "accumulate." + name
        self.count.name = self.prefix + "accumulate.count"
        self.good.name = self.prefix + "accumulate.good"

    def construct(self, grads, apply, noise):
        count = self.count + 1
        good = self.good + apply.astype(ms.int32)
        closes = count >= self.k
        divisor = ops.maximum(good, 1).astype(ms.float32)
        summed = []
        for buf, g in zip(self.buffers, grads):
            total = buf + ops.select(apply, g, ops.zeros_like(g))  # select, not apply * g: 0 * Inf = NaN
            ops.assign(buf, ops.select(closes, ops.zeros_like(total), total))
            summed.append(total / divisor.astype(g.dtype))
        ops.assign(self.count, ops.select(closes, ops.zeros_like(count), count))
        ops.assign(self.good, ops.select(closes, ops.zeros_like(good), good))
        return tuple(summed), ops.logical_and(closes, good > 0)


class LossScale(Transform):
    """Loss scaling for mixed precision (mindspore.amp's Dynamic/StaticLossScaler).

    make_step multiplies the loss by the scale before differentiating (it finds this transform via
    Chain.loss_scaler); here the gradients are unscaled, a non-finite update is vetoed and counted in
    `overflows`, and a dynamic scaler halves its scale on overflow / grows it after a clean window.
    Put it first in a chain: every other transform must see unscaled gradients.
    """
    can_skip = True

    def __init__(self, scaler, prefix):
        super().__init__()
        self.scaler = scaler
        self.prefix = prefix
        self.state = [p for p in vars(scaler).values() if isinstance(p, Parameter)]
        self.overflows = Parameter(Tensor(0, ms.int32), name="overflows", requires_grad=False)
        self.name_state()

    def name_state(self):
        for p in self.state:
            p.name = self.prefix + "loss_scale." + p.name.split(".")[-1]
        self.overflows.name = self.prefix + "loss_scale.overflows"

    def construct(self, grads, apply, noise):
        grads = self.scaler.unscale(grads)
        finite = ms.amp.all_finite(grads)
        self.scaler.adjust(finite)
        ops.assign_add(self.overflows, ops.logical_and(apply, ops.logical_not(finite)).astype(ms.int32))
        return grads, ops.logical_and(apply, finite)


class Chain(Transform):
    """Apply transforms in order; skips and noise needs are the union of its members'."""

    def __init__(self, *transforms):
        super().__init__()
        self.transforms = nn.CellList(list(transforms))
        self.can_skip = any(t.can_skip for t in transforms)
        self.noise_size = max([t.noise_size for t in transforms] + [0])
        scalers = [t.scaler for t in transforms if isinstance(t, LossScale)]
        self.loss_scaler = scalers[0] if scalers else None
        # the scaler's own state (scale, counter) lives outside any Cell: list it for checkpoints
        self.extra_parameters = [p for t in transforms if isinstance(t, LossScale) for p in t.state]
        for t in transforms:
            t.name_state()

    def construct(self, grads, apply, noise):
        for t in self.transforms:
            grads, apply = t(grads, apply, noise)
        return grads, apply

    def skipped_count(self):
        """Vetoes so far (host int; not for jit): updates vetoed by the non-finite check, plus calls
        whose loss-scaled gradient overflowed; with accumulation an overflow drops one micro-batch
        rather than a whole update."""
        return (sum(int(t.skipped.asnumpy()) for t in self.transforms if isinstance(t, SkipNonFinite))
                + sum(int(t.overflows.asnumpy()) for t in self.transforms if isinstance(t, LossScale)))


LOSS_SCALERS = {
    "none": None,
    "static": lambda: ms.amp.StaticLossScaler(2.0 ** 10),
    "dynamic": lambda: ms.amp.DynamicLossScaler(2.0 ** 16, 2, 1000),
}


def from_flags(params, prefix="", clip_value=0.0, clip_norm=0.0, grad_noise=0.0, accumulate=1,
               skip_nonfinite=False, loss_scale="none"):
    """The chain the CLI flags describe, in the order that makes each meaningful:
    loss scale first (unscaled gradients for the rest), accumulate (the rest see the averaged
    gradient), the finite check, clip, noise (noise after clipping, as DP-SGD does)."""
    parts = []
    if LOSS_SCALERS[loss_scale] is not None:
        parts.append(LossScale(LOSS_SCALERS[loss_scale](), prefix))
    if accumulate > 1:
        parts.append(Accumulate(accumulate, params, prefix))
    if skip_nonfinite:
        parts.append(SkipNonFinite(prefix))
    if clip_value > 0:
        parts.append(ClipByValue(clip_value))
    if clip_norm > 0:
        parts.append(ClipByGlobalNorm(clip_norm))
    if grad_noise > 0:
        parts.append(GradNoise(grad_noise, params))
    return Chain(*parts)
