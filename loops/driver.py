"""The driver loop: scheduling in Python, math in jit.

An iteration runs a list of phases in order (e.g. D x n_critic, G, EMA); a phase runs `repeat`
times when `step % every == 0`. Phase functions return dicts of tag -> Tensor; the driver only
syncs them to the host at `log_every`. Hooks (samples, evaluation) and checkpoints run at their
own intervals. SIGINT/SIGTERM finish the current iteration, save a checkpoint, and stop.
"""
import signal
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Phase:
    name: str
    run: Callable  # step -> dict of tag -> Tensor
    every: int = 1
    repeat: int = 1


@dataclass
class Hook:
    every: int
    run: Callable  # step -> None (called after `step` iterations are done)


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the loop checks between iterations."""

    def __init__(self):
        self.signum = None
        self.previous = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.previous[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum, frame):
        if self.signum is not None:  # second signal: give up waiting
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


def train(phases, *, start_step, steps, log_every, logger, save, ckpt_every=0, hooks=()):
    """Run iterations start_step..steps-1. `save(step)` writes a checkpoint after `step` iterations.

    Returns (last logged scalars, exit code): 0 when all steps ran, 128+signal when stopped early.
    """
    last = {}
    tick, tick_step = time.perf_counter(), start_step
    with StopRequest() as stop:
        for step in range(start_step, steps):
            out = run_iteration(phases, step)
            done = step + 1
            logger.advance()
            if done % log_every == 0 or done == steps:
                now = time.perf_counter()
                out["perf/steps_per_s"] = (done - tick_step) / max(now - tick, 1e-9)
                tick, tick_step = now, done
                last = logger.scalars(done, out)
            for hook in hooks:
                if hook.every and done % hook.every == 0:
                    hook.run(done)
            if stop.signum is not None:
                save(done)
                return last, 128 + stop.signum
            if ckpt_every and done % ckpt_every == 0 and done != steps:
                save(done)
    save(steps)
    return last, 0
