"""The driver loop: scheduling in Python, math in jit.

An iteration runs a list of phases in order (e.g. one model x 5, another once, a target update); a phase runs `repeat`
times when `step % every == 0`. A phase is a pair:
  draw(step)    host inputs of one call at iteration `step` (numpy arrays from the host RNG), and
  body(*inputs) the uncompiled device function, returning a tuple of scalar Tensors named `tags`.

Single-step mode compiles each body and calls it once per phase call. Multi-step mode
(`steps_per_call=K`) compiles ONE function that runs K whole iterations in a `while` loop, with the
host inputs of all K iterations drawn in the same order and passed in stacked: same math, same
RNG stream, so the weights are bit-identical, but one call (and one host round trip) per K
iterations instead of ~3 per iteration; per-call overhead dominates small models on CPU.
`fuse=True` uses the same engine with K=1 (one call per iteration, all phases inside, a phase's
repeats in a loop of their own): for algorithms whose
next iteration's inputs depend on this iteration's weights (a model acting between updates).
On this project's 2-core VMs a compiled call that updates Parameters sometimes costs 5-50 ms of
spinning runtime threads whatever its size, while the same updates looped inside one call cost
~3 ms each (bench/RESULTS.md): fewer, bigger calls are the cure. Between calls, Pace, InFlight and
HostSync (below) decide when the host waits for the device.

Single-step mode reads each call's losses (the non-finite check) right after it while calls are
slow, and only at log, hook and checkpoint points once they are measured to be tiny (HostSync); a
multi-step call returns its tags' means as host floats (one sync per call). Hooks and checkpoints run at their own
intervals (in multi-step mode: after the call that crosses them). SIGINT/SIGTERM finish the
current call, save a checkpoint, and stop.
"""
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

import mindspore as ms
import numpy as np
from mindspore import Tensor, ops

from loops.config import RunFailure
from loops.logging import is_loss_tag
from loops.step import maybe_jit


def host_tensor(array):
    """numpy -> Tensor without a copy where possible (from_numpy needs C order; keeps 0-d as 0-d,
    which np.ascontiguousarray would not)."""
    array = np.asarray(array)
    return Tensor.from_numpy(array if array.flags.c_contiguous else array.copy())


class InFlight:
    """Keeps the host input Tensors of the last few calls alive.

    A compiled call returns before the device has run it, and a Tensor made with from_numpy that is
    freed while its call may still read it makes MindSpore wait for that call: on CPU this wait cost
    ~110 us per call, more than the whole regression step (190 vs 75 us per call; bench/RESULTS.md).
    Freed a few calls later, the inputs are long done with.
    """
    CALLS = 8

    def __init__(self):
        self.recent = deque(maxlen=self.CALLS)

    def keep(self, tensors):
        self.recent.append(tensors)
        return tensors


class Pace:
    """Whether the host waits for one phase's call before going on.

    A call returns before the device has run it. Launching the next graph while one is still in
    flight is slow in MindSpore 2.10 on CPU: a 32x32 conv-net iteration of three separate calls (two
    model updates and a weight average) took 1.23-1.26 s read once per iteration and 0.43 s with each
    call read before the next one (the multi-step engine: 0.39-0.47 s; bench/RESULTS.md). So every
    call is waited for, except in a phase measured to be tiny (FAST_CALLS calls in a row under
    FAST_S): there the wait itself is the cost (regression: ~0.13 ms of a 0.26 ms step), and once
    every phase is tiny the driver reads the losses later, in bulk (HostSync).
    """
    FAST_S = 2e-3
    FAST_CALLS = 20

    def __init__(self):
        self.fast_calls, self.waits, self.busy_s, self.calls = 0, True, 0.0, 0

    def wait(self, outputs, launched):
        """Called right after a call returned its (not yet computed) outputs."""
        if not self.waits:
            return
        device = [o for o in outputs if hasattr(o, "asnumpy")]
        if device:
            device[-1].asnumpy()  # the outputs of one call are ready together
        self.calls += 1
        if self.calls == 1:  # the first call also compiled the graph
            return
        took = time.perf_counter() - launched
        self.busy_s += took
        self.fast_calls = self.fast_calls + 1 if took < self.FAST_S else 0
        self.waits = self.fast_calls < self.FAST_CALLS


@dataclass
class Phase:
    name: str
    draw: Callable   # step -> tuple of numpy arrays (host inputs of one call)
    body: Callable   # (*Tensors) -> tuple of scalar Tensors
    tags: tuple = ()  # names of the body's outputs, for logging
    every: int = 1
    repeat: int = 1
    compiled: Callable = field(default=None, repr=False)
    in_flight: InFlight = field(default_factory=InFlight, repr=False)
    pace: Pace = field(default_factory=Pace, repr=False)

    def run(self, step):
        if self.compiled is None:
            self.compiled = maybe_jit(self.body)
        inputs = self.in_flight.keep(tuple(host_tensor(a) for a in self.draw(step)))
        launched = time.perf_counter()
        outputs = self.compiled(*inputs)
        self.pace.wait(outputs if isinstance(outputs, tuple) else (outputs,), launched)
        return dict(zip(self.tags, outputs))


@dataclass
class Hook:
    every: int
    run: Callable  # step -> None (called after `step` iterations are done)


class Interrupted(BaseException):
    """SIGINT/SIGTERM during work that has no safe point to stop at but its end (an evaluation).
    A BaseException: no `except Exception` in library code swallows it."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


class InterruptOnSignal:
    """While active, SIGINT/SIGTERM raise Interrupted (between Python bytecodes: after the compiled
    call that is running)."""

    def __enter__(self):
        self.previous = {sig: signal.signal(sig, self.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def handle(self, signum, frame):
        raise Interrupted(signum)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the loop checks between calls."""

    def __init__(self):
        self.signum = None
        self.previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum, frame):
        if self.signum is not None:  # second signal: stop waiting
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def run_iteration(phases, step):
    """One iteration of the phase schedule; returns the last output of each phase, merged."""
    out = {}
    for phase in phases:
        if step % phase.every == 0:
            for _ in range(phase.repeat):
                out.update(phase.run(step))
    return out


class MultiStep:
    """K iterations of the phase schedule in one compiled while loop (see module docstring).

    Interval phases (`every` > 1, e.g. a lazy regulariser) run inside the loop under a host-made mask: their
    inputs are drawn on the host only for the iterations that run them (the RNG stream of single
    steps), and zeros of the same shapes fill the other slots. Their logged value is the mean over
    the iterations that ran them; a call in which a phase never ran does not report its tags.
    """

    def __init__(self, phases, k):
        if not any(p.tags for p in phases):
            raise ValueError("the multi-step engine needs at least one phase with tagged outputs")
        if any((p.every != 1 or (p.repeat != 1 and k == 1)) and not p.tags for p in phases):
            raise ValueError("an interval phase, or a repeated one at K=1, needs a tagged output (it runs under a "
                             "branch or loop that returns it)")
        self.phases, self.k = phases, k
        self.interval = [p.every != 1 for p in phases]
        self.shapes = [None] * len(phases)  # (shape, dtype) of one draw, learned from the first draw
        self.fn = None

    def _build(self, counts):
        phases, k = self.phases, self.k
        n_tags = sum(len(p.tags) for p in phases)
        interval = self.interval

        def iteration(i, runs, stacked):
            """Every phase of iteration i (a Tensor index into the stacked inputs): its summed tags."""
            offset, values = 0, []
            for p, (phase, count) in enumerate(zip(phases, counts)):
                phase_sum = None
                if phase.repeat > 1 and k == 1:
                    # one iteration per call (fuse): the repeats as a loop of their own, so the graph (and
                    # its compile time) does not grow with the number of repeats. Not inside the K-loop:
                    # there nested control flow leaks memory (~45 KB per run, MindSpore 2.10 CPU)
                    phase_sum = ops.zeros((len(phase.tags),), ms.float32)
                    r = Tensor(0, ms.int32)
                    while r < phase.repeat * runs[i, p].astype(ms.int32):  # 0 repeats where it does not run
                        outs = _stack_tags(phase, phase.body(*[stacked[offset + a][r] for a in range(count)]))
                        phase_sum = phase_sum + outs
                        r = r + 1
                else:
                    for r in range(phase.repeat):  # unrolled
                        j = i * phase.repeat + r
                        inputs = [stacked[offset + a][j] for a in range(count)]
                        if interval[p]:
                            if runs[i, p]:
                                outs = _stack_tags(phase, phase.body(*inputs))
                            else:
                                outs = ops.zeros((len(phase.tags),), ms.float32)
                        else:
                            outs = _stack_tags(phase, phase.body(*inputs))
                        if phase.tags:
                            phase_sum = outs if phase_sum is None else phase_sum + outs
                if phase.tags:
                    values.append(phase_sum)
                offset += count
            return ops.concat(values)

        def fused(runs, weights, *stacked):
            if k == 1:  # no outer loop: control flow nested in a loop costs ~45 KB of leaked memory per run
                return iteration(Tensor(0, ms.int32), runs, stacked) * weights
            # the loop carries ONE Tensor (the sum of every tagged output): graph-mode while loops
            # do not carry Python lists
            acc = ops.zeros((n_tags,), ms.float32)
            i = Tensor(0, ms.int32)
            while i < k:
                acc = acc + iteration(i, runs, stacked) * weights
                i = i + 1
            return acc
        return maybe_jit(fused)

    def _draw(self, p, step):
        arrays = tuple(np.asarray(a) for a in self.phases[p].draw(step))
        self.shapes[p] = [(a.shape, a.dtype) for a in arrays]
        return arrays

    def run(self, step):
        """Run iterations step..step+K-1; returns {tag: mean over the iterations that ran it}."""
        phases, k = self.phases, self.k
        runs = np.array([[(step + i) % p.every == 0 for p in phases] for i in range(k)])
        if any(self.shapes[p] is None and not runs[:, p].any() for p in range(len(phases))):
            # an interval phase that never ran yet and does not run in this window (a resume, with
            # every > K): its input shapes are unknown, so run this window one iteration at a time
            out = {}
            for i in range(k):
                out.update(run_iteration(phases, step + i))
            return out
        draws = [[] for _ in phases]
        for i in range(k):  # the same draw order as k single iterations
            for p, bucket in enumerate(draws):
                for _ in range(phases[p].repeat):
                    bucket.append(self._draw(p, step + i) if runs[i, p] else None)
        stacked = []
        for p, bucket in enumerate(draws):
            zeros = tuple(np.zeros(shape, dtype) for shape, dtype in self.shapes[p])
            bucket = [zeros if arrays is None else arrays for arrays in bucket]
            stacked += [host_tensor(np.stack(column)) for column in zip(*bucket)]
        if self.fn is None:
            self.fn = self._build([len(shapes) for shapes in self.shapes])
        counts = runs.sum(0)
        weights = np.concatenate([np.full(len(p.tags), 1.0 / max(1, n * p.repeat), np.float32)
                                  for p, n in zip(phases, counts)])
        # one host sync per call, for all tags at once: indexing the Tensor per tag cost an eager op
        # each, and the non-finite check reads every loss anyway
        # read at once: the call is done before its inputs are freed (no InFlight needed here)
        means = self.fn(host_tensor(runs), host_tensor(weights), *stacked).asnumpy()
        out, j = {}, 0
        for phase, n in zip(phases, counts):
            for tag in phase.tags:
                if n:
                    out[tag] = float(means[j])
                j += 1
        return out


def _stack_tags(phase, outs):
    """The first len(tags) outputs of a phase body as one float32 vector (() when untagged)."""
    return ops.stack([o.astype(ms.float32) for o in outs[:len(phase.tags)]]) if phase.tags else None


class NonFinite(RunFailure):
    """A loss turned NaN/Inf: raised before any checkpoint of that state is written."""

    def __init__(self, tag, first, last):
        self.tag, self.first, self.last = tag, first, last
        where = f"step {last}" if first == last else f"one of steps {first}-{last}"
        # loss/<name>: the model declared under that name; losses/<...>: other naming conventions
        whose = f" of model {tag.split('/')[-1]!r}" if tag.startswith("loss/") else ""
        super().__init__(f"{tag}{whose} became NaN/Inf at {where}; stopped without saving that state "
                         "(pass --skip-nonfinite to skip such updates instead)")


def check_finite(out, first, last):
    """Raise NonFinite if a loss in `out` is NaN/Inf (a device value costs one host sync)."""
    for tag, value in out.items():
        if is_loss_tag(tag) and not np.isfinite(float(value.asnumpy() if hasattr(value, "asnumpy") else value)):
            raise NonFinite(tag, first, last)


class HostSync:
    """The non-finite check, and when it reads the losses of single-step calls.

    While some phase's calls are still waited for (Pace), each iteration's losses are read right
    after it: the read costs nothing more. Once every phase is measured to be tiny, reading each would
    cost as much as the step (regression: ~0.13 ms of a 0.26 ms step), so losses wait here and
    `check()` reads them all at once: the driver calls it before anything reads or saves the state
    (a log line, a hook, a checkpoint, the stop) and at least every MAX_PENDING calls. The step a
    NaN is reported at stays exact: each call's losses are kept with their steps. Host floats
    (multi-step calls, read already) are checked at once.
    """
    MAX_PENDING = 100

    def __init__(self, check_losses, phases):
        self.check_losses, self.phases, self.pending = check_losses, phases, []

    def add(self, out, first, last):
        if not any(hasattr(value, "asnumpy") for value in out.values()):
            if self.check_losses:
                check_finite(out, first, last)
            return
        self.pending.append((out, first, last))
        if any(phase.pace.waits for phase in self.phases) or len(self.pending) >= self.MAX_PENDING:
            self.check()

    def check(self):
        """Read every pending call's outputs, oldest first (the error names the first bad step)."""
        pending, self.pending = self.pending, []
        for out, first, last in pending:
            if self.check_losses:
                check_finite(out, first, last)
        if pending and not self.check_losses:  # still wait for the device: calls finish in order
            [v for v in pending[-1][0].values() if hasattr(v, "asnumpy")][-1].asnumpy()


def crossed(prev, done, every):
    return bool(every) and done // every > prev // every


def train(phases, *, start_step, steps, log_every, logger, save, ckpt_every=0, hooks=(), steps_per_call=1,
          fuse=False, stop_on_nonfinite=True):
    """Run iterations start_step..steps-1. `save(step, final)` writes a checkpoint after `step`
    iterations: final=False at the --ckpt-every intervals, True at the end or on a signal.

    Returns (last logged scalars, exit code): 0 when all steps ran, 128+signal when stopped early.
    With stop_on_nonfinite, a NaN/Inf loss raises NonFinite before anything else is written.
    """
    multi = MultiStep(phases, steps_per_call) if steps_per_call > 1 or fuse else None
    guard = HostSync(stop_on_nonfinite, phases)
    last = {}
    latest = {}  # the newest value of every tag: interval phases log their last result
    step = start_step
    tick, tick_step = time.perf_counter(), start_step
    first = True
    with StopRequest() as stop:
        while step < steps:
            if first:
                logger.note("compiling the training step (the first call builds the graph)...")
                compile_start = time.perf_counter()
            if multi is not None and steps - step >= multi.k:
                out, n = multi.run(step), multi.k
            else:  # single-step mode, or the tail shorter than one multi-step call
                out, n = run_iteration(phases, step), 1
            if first:
                first_call = f"{n} steps (one call)" if n > 1 else "step"
                logger.note(f"compiled; the first {first_call} took {time.perf_counter() - compile_start:.1f} s")
                first = False
            prev, step = step, step + n
            guard.add(out, prev + 1, step)
            logger.advance(n)
            latest.update(out)
            due = [hook for hook in hooks if crossed(prev, step, hook.every)]
            stopping = stop.signum  # read once: a signal arriving now is handled after the next call
            log_now = crossed(prev, step, log_every) or step == steps
            if due or stopping is not None or log_now or crossed(prev, step, ckpt_every):
                guard.check()  # before anything reads or saves this state
            if log_now:
                now = time.perf_counter()
                latest["perf/steps_per_s"] = (step - tick_step) / max(now - tick, 1e-9)
                tick, tick_step = now, step
                last = logger.scalars(step, latest)
            for hook in due:
                hook.run(step)
            if stopping is not None:
                save(step, final=True)
                return last, 128 + stopping
            if crossed(prev, step, ckpt_every) and step != steps:
                save(step, final=False)
        save(steps, final=True)  # still under StopRequest: a signal now lets this save finish
    # a signal during the last call's hooks (an end-of-run evaluation, say) or the last save stops the run
    return last, 0 if stop.signum is None else 128 + stop.signum
