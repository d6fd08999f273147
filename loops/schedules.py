"""Learning-rate schedules as pure functions of the iteration, evaluated on the host.

The driver passes each step's value into the compiled step, which assigns it to the optimizer's
learning-rate Parameter before the update: the schedule is then exact on resume and identical in
single- and multi-step mode. A new schedule is one function and one dict line.
"""
import math


def constant(progress):
    return 1.0


def linear(progress):
    return 1.0 - progress


def cosine(progress):
    return 0.5 * (1.0 + math.cos(math.pi * progress))


SCHEDULES = {"constant": constant, "linear": linear, "cosine": cosine}


def lr_at(step, base, schedule, total, warmup=0):
    """Learning rate of iteration `step` (0-based): linear warm-up over `warmup` steps, then the
    schedule decays from base (progress 0) towards 0 (progress 1 at `total`)."""
    if warmup and step < warmup:
        return base * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * SCHEDULES[schedule](progress)
