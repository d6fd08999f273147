"""LeakyReLU with fewer kernels than `nn.LeakyReLU`, and the same numbers.

MindSpore's `nn.LeakyReLU` computes maximum(a * x, x); the gradient of `maximum` on CPU is a
comparison, two selects and a sum, so one activation costs ~7 small kernels forward and backward.
Here the slope is a mask: x * (a + (1 - a) [x > 0]); its gradient is one multiplication by the
same mask. Values, gradients and second-order gradients (R1, gradient penalty) are bit-identical to
nn.LeakyReLU's (the mask is exactly 1 or a in float32), except the gradient at exactly x = 0: a here,
as in PyTorch, (1 + a) / 2 in nn.LeakyReLU, which splits the tie of its maximum
(tests/test_activations.py). Measured: toy-GAN iterations 1.25x faster, DCGAN 1.04x
(`python bench/bench_activation.py`, bench/RESULTS.md).
"""
from mindspore import nn


class LeakyReLU(nn.Cell):
    def __init__(self, alpha=0.2):
        super().__init__()
        self.alpha = alpha

    def construct(self, x):
        return x * ((x > 0).astype(x.dtype) * (1.0 - self.alpha) + self.alpha)
