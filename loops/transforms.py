"""Gradient interventions: small Cells mapping grads -> grads, chained optax-style.

Each transform has the signature `(grads, apply, noise) -> (grads, apply)`:
  grads  tuple of gradient Tensors, one per optimizer parameter;
  apply  the "do the update" flag: Python True, or a bool Tensor once a transform may veto it;
  noise  one flat float32 Tensor of standard normals drawn on the host (or None), so the RNG
         state lives on the host and resume stays exact (in-graph RNG state cannot be saved).

A transform declares `can_skip` (it may veto the update), `noise_size` (how many host normals it
consumes: each transform gets its own slice of the host noise), `counters` (Parameters counting
vetoed updates, summed by `Chain.skipped_count`), and, for the command line, `flag`, `default`,
`help` and `build(value, params, prefix)`. A new intervention is one class here plus one line in
TRANSFORMS: it then gets its flag on every model that learns (`--<flag>` and `--<flag>-<model>`,
see loops/learner.py) and its place in every chain.
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


def member_norms(grads, members):
    """(members,) float32: each member's global norm, for a model of `members` independent models side by
    side, every gradient with a leading dimension of that size (member k's part: g[k])."""
    flat = ops.cat([g.reshape(members, -1).astype(ms.float32) for g in grads], 1)
    return ops.sqrt(ops.sum(flat * flat, 1))


class Transform(nn.Cell):
    """Identity. Stateful subclasses re-assert their Parameter names in `name_state` (Chain calls it
    after the Cell machinery has auto-prefixed them), so checkpoints read `d.skip_nonfinite.skipped`,
    not `transforms.1.skipped`.

    Command-line registration (class attributes): `flag` (the config field, e.g. "clip_norm"),
    `default` (its off value, whose type is the flag's type) and `help`; `build(value, params, prefix)`
    makes the transform from a flag value that is not the default."""
    can_skip = False
    noise_size = 0
    counters = ()  # Parameters counting vetoed updates
    flag, default, help = None, None, ""
    # does it read all gradients at once? Then a model of independent members (set_members) couples them
    couples_members = False

    @classmethod
    def build(cls, value, params, prefix):
        return cls(value)

    def name_state(self):
        pass

    def set_members(self, members):
        """The model is `members` independent models side by side (every parameter's leading
        dimension): act on each member alone, or refuse when this transform cannot."""
        if members > 1 and self.couples_members:
            raise ValueError(f"{type(self).__name__} reads all gradients at once: it would couple a model's "
                             f"{members} members")

    def construct(self, grads, apply, noise):
        return grads, apply


class ClipByValue(Transform):
    """g <- clip(g, -v, v), elementwise."""
    flag, default, help = "clip_value", 0.0, "clip {whose}gradient elements to [-V, V] (0: off)"

    def __init__(self, value):
        super().__init__()
        self.value = float(value)

    def construct(self, grads, apply, noise):
        return tuple(ops.clamp(g, -self.value, self.value) for g in grads), apply


class ClipByGlobalNorm(Transform):
    """g <- g * min(1, v / (||g|| + 1e-6)), the global norm over all gradients (as torch does); for a
    model of independent members (set_members), each member's own norm and scale."""
    flag, default, help = "clip_norm", 0.0, "clip {whose}global gradient norm to V (0: off)"

    def __init__(self, max_norm):
        super().__init__()
        self.max_norm = float(max_norm)
        self.members = 1

    def set_members(self, members):
        self.members = members

    def construct(self, grads, apply, noise):
        if self.members == 1:
            scale = ops.clamp(self.max_norm / (global_norm(grads) + 1e-6), max=1.0)
            return tuple(g * scale.astype(g.dtype) for g in grads), apply
        scales = ops.clamp(self.max_norm / (member_norms(grads, self.members) + 1e-6), max=1.0)
        return tuple(g * scales.reshape((self.members,) + (1,) * (g.ndim - 1)).astype(g.dtype) for g in grads), apply


class GradNoise(Transform):
    """g <- g + sigma * n, n ~ N(0, I) drawn on the host, fresh every step (Neelakantan et al. 2015)."""
    flag, default, help = "grad_noise", 0.0, "add N(0, SIGMA^2) noise to every element of {whose}gradients (0: off)"

    @classmethod
    def build(cls, value, params, prefix):
        return cls(value, params)

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
    couples_members = True  # one veto for every member's update
    flag, default, help = "skip_nonfinite", False, "skip (and count) {whose}updates whose gradients hold NaN/Inf"

    @classmethod
    def build(cls, value, params, prefix):
        return cls(prefix)

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix
        self.skipped = Parameter(Tensor(0, ms.int32), name="skipped", requires_grad=False)
        self.counters = (self.skipped,)
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
    flag, default, help = "accumulate", 1, "average {whose}gradients over K micro-batches per update"

    @classmethod
    def build(cls, value, params, prefix):
        return cls(value, params, prefix)

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
    couples_members = True  # one scale and one veto for all members
    flag, default = "loss_scale", "none"
    help = "{whose}loss scaling: dynamic, static or none (mixed precision)"
    choices = ("none", "static", "dynamic")

    @classmethod
    def build(cls, value, params, prefix):
        return cls(LOSS_SCALERS[value](), prefix)

    def __init__(self, scaler, prefix):
        super().__init__()
        self.scaler = scaler
        self.loss_scaler = scaler  # make_step scales the loss by it before differentiating
        self.prefix = prefix
        self.state = [p for p in vars(scaler).values() if isinstance(p, Parameter)]
        # the scaler's own state (scale, counter) lives outside any Cell: listed for checkpoints
        self.extra_parameters = list(self.state)
        self.overflows = Parameter(Tensor(0, ms.int32), name="overflows", requires_grad=False)
        self.counters = (self.overflows,)
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
    """Apply transforms in order. It may skip if a member may; each member that takes noise gets
    its own slice of the host noise (their sizes add up); loss scalers, checkpointed extras and veto
    counters are collected from the members' attributes, so a new transform needs no edit here."""

    def __init__(self, *transforms):
        super().__init__()
        self.transforms = nn.CellList(list(transforms))
        self.can_skip = any(t.can_skip for t in transforms)
        self.noise_slices = []  # (start, stop) of each member's noise, or None
        start = 0
        for t in transforms:
            self.noise_slices.append((start, start + t.noise_size) if t.noise_size else None)
            start += t.noise_size
        self.noise_size = start
        scalers = [t.loss_scaler for t in transforms if getattr(t, "loss_scaler", None) is not None]
        self.loss_scaler = scalers[0] if scalers else None
        self.extra_parameters = [p for t in transforms for p in getattr(t, "extra_parameters", [])]
        self.counters = tuple(c for t in transforms for c in t.counters)
        for t in transforms:
            t.name_state()

    def construct(self, grads, apply, noise):
        for t, part in zip(self.transforms, self.noise_slices):
            grads, apply = t(grads, apply, None if part is None else noise[part[0]:part[1]])
        return grads, apply

    def skipped_count(self):
        """Vetoes so far (host int; not for jit): updates vetoed by the non-finite check, plus calls
        whose loss-scaled gradient overflowed; with accumulation an overflow drops one micro-batch
        rather than a whole update."""
        return sum(int(c.asnumpy()) for c in self.counters)


LOSS_SCALERS = {
    "none": None,
    "static": lambda: ms.amp.StaticLossScaler(2.0 ** 10),
    "dynamic": lambda: ms.amp.DynamicLossScaler(2.0 ** 16, 2, 1000),
}


# The order of a chain, which makes each member meaningful: loss scale first (unscaled gradients
# for the rest), accumulate (the rest see the averaged gradient), the finite check, clip, noise
# (noise after clipping, as DP-SGD does). A new intervention: its class above, one line here.
TRANSFORMS = (LossScale, Accumulate, SkipNonFinite, ClipByValue, ClipByGlobalNorm, GradNoise)


def from_flags(params, prefix="", members=1, **values):
    """The chain that flag values describe (`clip_norm=1.0, accumulate=4, ...`, by each transform's
    `flag`; a flag left out or at its default is off), in TRANSFORMS order. `members` > 1: the model is
    that many independent models side by side (every parameter's leading dimension, e.g. one agent per
    seed): each transform acts on each member alone, or refuses (ValueError)."""
    known = {t.flag for t in TRANSFORMS}
    unknown = sorted(set(values) - known)
    if unknown:
        raise TypeError(f"unknown gradient transform flag(s) {unknown}; known: {sorted(known)}")
    parts = [t.build(values[t.flag], params, prefix) for t in TRANSFORMS
             if values.get(t.flag, t.default) != t.default]
    for part in parts:
        part.set_members(members)
    return Chain(*parts)
