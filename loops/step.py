"""make_step: the ONE place where value_and_grad and jit are called.

A training step is `value_and_grad(forward_fn, None, optimizer.parameters)`, a gradient
transform (loops/transforms.py), and `optimizer(grads)`, compiled with `mindspore.jit`
(or left eager under `--mode pynative`). Steps return Tensors, never numpy: the driver syncs
only at its log interval.
"""
import numpy as np
import mindspore as ms
from mindspore import ops, Tensor

from loops.transforms import Chain, global_norm


def jit_enabled():
    """Compile unless the user asked for PyNative (eager) mode."""
    return ms.get_context("mode") != ms.PYNATIVE_MODE


def maybe_jit(fn):
    """jit-compile `fn` in graph mode; leave it eager in PyNative mode."""
    return ms.jit(fn) if jit_enabled() else fn


class StepInputs:
    """The named host inputs of a step: ONE definition of their order, shared by the host side that
    draws them and the device side that reads them.

        layout = StepInputs(real=True, z=True, labels=conditional, aug=n_aug)
        flat = layout.pack(real=x, z=z, labels=y, aug=(a, b))   # host: a flat tuple, names checked
        real, z, labels, aug = layout.split(flat)                # device (inside jit): in field order

    A field declared True is one array; False: absent (pack wants it left out, split gives None);
    an int n: a group of n arrays (a tuple, possibly empty). `split` runs inside compiled functions:
    it only slices a tuple, with offsets fixed here in Python.
    """

    def __init__(self, **fields):
        self.names = tuple(fields)
        self.kinds = tuple(fields.values())
        self.counts = tuple(int(k) for k in self.kinds)
        self.starts = tuple(sum(self.counts[:i]) for i in range(len(self.counts)))
        self.groups = tuple(not isinstance(k, bool) for k in self.kinds)
        self.size = sum(self.counts)

    def pack(self, **values):
        """The flat tuple of host arrays, in field order; a present field must be given, an absent
        one must not be, a group must have its declared size."""
        flat = ()
        for name, count, group in zip(self.names, self.counts, self.groups):
            if group:
                value = tuple(values.pop(name, ()))
                if len(value) != count:
                    raise ValueError(f"step input {name!r}: {len(value)} arrays, the layout wants {count}")
                flat += value
            elif count:
                if name not in values:
                    raise ValueError(f"step input {name!r} is missing")
                flat += (values.pop(name),)
            elif values.pop(name, None) is not None:
                raise ValueError(f"step input {name!r} is not in this layout (declared absent)")
        if values:
            raise ValueError(f"unknown step input(s) {sorted(values)}; the layout has {self.names}")
        return flat

    def split(self, flat):
        out = ()
        for start, count, group in zip(self.starts, self.counts, self.groups):
            if group:
                out = out + (tuple(flat[start:start + count]),)
            elif count:
                out = out + (flat[start],)
            else:
                out = out + (None,)
        return out


class Step:
    """A compiled training step: `step(*inputs, rng=None) -> (loss, aux, grad_norm, grad_norm_after)`.

    `body` is the uncompiled function, for composing several steps inside one compiled loop;
    `scalars` the same with a flat output (loss, *aux, grad_norm, grad_norm_after) for driver phases.
    `transform` holds the gradient transform (and its state Parameters, for checkpoints).
    When the transform needs host noise, pass a numpy Generator as `rng`.
    The host inputs of one call are `host_inputs(forward_inputs, rng, lr)`: make_step alone decides
    where its own trailing inputs (learning rate, gradient noise) go.
    """

    def __init__(self, body, transform, takes_lr=False):
        self.body = body
        self.transform = transform
        self.noise_size = transform.noise_size
        self.takes_lr = takes_lr
        self.fn = maybe_jit(body)

    def draw_noise(self, rng):
        """() or (the standard normals the transform consumes this step,), drawn on the host."""
        return (rng.standard_normal(self.noise_size, dtype=np.float32),) if self.noise_size else ()

    def host_inputs(self, forward_inputs, rng, lr=None):
        """One call's host inputs: the forward function's, then (with takes_lr) the learning rate,
        then the gradient noise drawn from `rng` (in that order, always: exact resume)."""
        lr_input = (np.float32(lr),) if self.takes_lr else ()
        return tuple(forward_inputs) + lr_input + self.draw_noise(rng)

    def __call__(self, *inputs, rng=None):
        if self.noise_size:
            if rng is None:
                raise ValueError("this step adds gradient noise: pass rng=numpy Generator")
            inputs = inputs + (Tensor.from_numpy(self.draw_noise(rng)[0]),)
        return self.fn(*inputs)


def make_step(forward_fn, optimizer, transform=None, has_aux=False, takes_lr=False, grad_reducer=None,
              constraint=None):
    """Build the step for `forward_fn(*inputs) -> loss` (or `(loss, aux)` with has_aux=True).

    Gradients are taken w.r.t. `optimizer.parameters` only, so one model's step can never move another's parameters.
    The step returns (loss, aux, global grad norm before the transform, after it); aux is () without
    has_aux. Extra trailing inputs: with takes_lr, this step's learning rate (a float32 scalar,
    assigned to the optimizer before its update: host-side schedules); then, with a transform
    that takes noise, the flat host noise.
    `grad_reducer` (grads -> grads; data parallel: loops/distributed.py) averages the gradients over
    ranks right after value_and_grad, so the transform (clipping, noise) sees the averaged gradients.
    `constraint` (loops/constraints.py; () -> Tensor, in-place) projects the parameters after each
    update, e.g. WGAN's weight clipping.
    """
    transform = transform if transform is not None else Chain()
    scaler = getattr(transform, "loss_scaler", None)  # mixed precision: scale the loss before grad
    if scaler is not None:
        unscaled_forward = forward_fn

        def forward_fn(*inputs):
            out = unscaled_forward(*inputs)
            return (scaler.scale(out[0]),) + tuple(out[1:]) if has_aux else scaler.scale(out)
    grad_fn = ms.value_and_grad(forward_fn, None, optimizer.parameters, has_aux=has_aux)
    takes_noise = transform.noise_size > 0
    lr_param = optimizer.lr_parameters[0] if takes_lr else None  # a free variable the graph can resolve
    can_skip = transform.can_skip
    changes_grads = not (isinstance(transform, Chain) and len(transform.transforms) == 0)

    def body(*inputs):
        if takes_noise:
            noise = inputs[-1]
            inputs = inputs[:-1]
        else:
            noise = None
        lr = None
        if takes_lr:
            lr = inputs[-1]
            inputs = inputs[:-1]
        out, grads = grad_fn(*inputs)
        if grad_reducer is not None:  # data parallel: mean over ranks (all-reduce)
            grads = grad_reducer(grads)
        if takes_lr:  # the update below reads the new rate: order it after the assign
            grads = ops.depend(grads, ops.assign(lr_param, lr))
        if has_aux:
            loss = out[0]
            aux = out[1:]
        else:
            loss = out
            aux = ()
        if scaler is not None:
            loss = scaler.unscale(loss)
        norm_before = global_norm(grads)
        if scaler is not None:  # report the norm of the true gradient, not of the scaled one
            norm_before = scaler.unscale(norm_before)
        if can_skip:
            grads, apply = transform(grads, ops.ones((), ms.bool_), noise)
            norm_after = global_norm(grads)
            if apply:
                # depend: order the update before the return and keep it from being pruned
                loss = ops.depend(loss, optimizer(grads))
                if constraint is not None:
                    loss = ops.depend(loss, constraint())
        else:
            grads, _ = transform(grads, True, noise)
            norm_after = global_norm(grads) if changes_grads else norm_before
            loss = ops.depend(loss, optimizer(grads))
            if constraint is not None:  # after the update: it reads the updated parameters
                loss = ops.depend(loss, constraint())
        return loss, aux, norm_before, norm_after

    def scalars(*inputs):  # flat, for the driver's tags: loss, *aux, grad norm, grad norm after
        loss, aux, norm_before, norm_after = body(*inputs)
        return (loss,) + tuple(aux) + (norm_before, norm_after)

    step = Step(body, transform, takes_lr)
    step.scalars = scalars
    return step
