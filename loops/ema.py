"""Exponential moving average of a model's weights (Polyak averaging: an EMA copy
for sampling, Karras et al. 2018 and Yazici et al. 2019; a target network moved by Polyak averaging).

`target` is a second instance of the same model (eval mode, its own parameter names, e.g. `g_ema.*`):
ema <- decay * ema + (1 - decay) * source for trainable weights; non-trainable state (BatchNorm
running statistics) is copied. The update is compiled and writes in place (ops.assign), so compiled
functions of the target always see the current averages (data loaded with set_data after compiling
would be ignored).
"""
import mindspore as ms
from mindspore import Tensor, ops

from loops.step import maybe_jit


class EMA:
    def __init__(self, source, target, decay):
        self.decay = Tensor(float(decay), ms.float32)
        self.copy_all = Tensor(0.0, ms.float32)
        trainable = {id(p) for p in source.trainable_params()}
        pairs = list(zip(source.get_parameters(), target.get_parameters()))
        for s, t in pairs:
            assert s.shape == t.shape, (s.name, t.name)
        averaged = tuple((s, t) for s, t in pairs if id(s) in trainable)
        copied = tuple((s, t) for s, t in pairs if id(s) not in trainable)

        def update(decay):
            # thread every assign into the output: inside a compiled while loop, side effects that
            # nothing depends on are not reliably ordered after the source's update in the same iteration
            done = decay
            for s, t in averaged:
                done = ops.depend(done, ops.assign(t, decay * t + (1.0 - decay) * s))
            for s, t in copied:
                done = ops.depend(done, ops.assign(t, s))
            return done

        decay_tensor = self.decay

        def logged():  # a driver phase body: one update at the configured decay, logged as ema/decay
            return (update(decay_tensor),)

        self.body = update  # uncompiled, for the multi-step loop
        self.phase_body = logged
        self.fn = maybe_jit(update)

    def update(self):
        return self.fn(self.decay)

    def copy(self):
        """Make the target an exact copy of the source (decay 0)."""
        return self.fn(self.copy_all)
