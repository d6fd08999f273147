"""Parameter constraints: projections applied in place right after an optimizer update.

A constraint is a callable () -> Tensor that assigns the projected values (in place, so compiled
graphs see them) and returns a value to order later work after it; make_step(constraint=...) runs
it after every update it applies.
"""
from mindspore import ops


class ClipWeights:
    """w <- clip(w, -c, c) for every given parameter (the weight clipping of Arjovsky et al. 2017,
    which keeps a model in a compact set and so K-Lipschitz for some K)."""

    def __init__(self, parameters, c):
        self.parameters = tuple(parameters)
        self.c = float(c)

    def __call__(self):
        done = None
        for p in self.parameters:
            out = ops.assign(p, ops.clamp(p, -self.c, self.c))
            done = out if done is None else ops.depend(done, out)
        return done
