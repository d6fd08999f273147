"""Layers of BigGAN (Brock et al. 2019) and SAGAN (Zhang et al. 2019): spectrally normalised, orthogonally
initialised conv / dense / embedding factories, conditional BatchNorm fed by [class embedding, z chunk],
and the self-attention block. Numbers follow PyTorch-StudioGAN (src/utils/ops.py).
"""
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Orthogonal

from models.spectral_norm import SpectralNorm

BN_EPS = 1e-4      # StudioGAN's batchnorm_2d: eps 1e-4
BN_MOMENTUM = 0.9  # torch momentum 0.1; MindSpore weighs the old running value instead


def sn_conv(in_channels, out_channels, kernel_size, bias=True):
    """Spectrally normalised Conv2d, stride 1, 'same' padding, orthogonal weight, zero bias."""
    return SpectralNorm(nn.Conv2d(in_channels, out_channels, kernel_size, pad_mode="pad", padding=kernel_size // 2,
                                  has_bias=bias, weight_init=Orthogonal(), bias_init="zeros"))


def sn_dense(in_features, out_features, bias=True):
    """Spectrally normalised Dense, orthogonal weight, zero bias."""
    return SpectralNorm(nn.Dense(in_features, out_features, has_bias=bias, weight_init=Orthogonal(),
                                 bias_init="zeros"))


def ortho_embedding(num_classes, dim):
    """A plain embedding table with orthogonal rows (BigGAN's shared class embedding)."""
    return nn.Embedding(num_classes, dim, embedding_table=Orthogonal())


def upsample2x(x):
    """Nearest-neighbour 2x upsampling: each pixel becomes a 2x2 block."""
    n, c, h, w = x.shape
    return ops.broadcast_to(x.reshape(n, c, h, 1, w, 1), (n, c, h, 2, w, 2)).reshape(n, c, 2 * h, 2 * w)


class ConditionalBatchNorm2d(nn.Cell):
    """BatchNorm without its own affine, then a per-sample affine predicted from a condition vector:
    out = BN(x) * (1 + W_g a) + W_b a, with W_g, W_b spectrally normalised linear maps (no bias).
    In BigGAN a = [shared class embedding, this block's z chunk] (the chunk alone when unconditional)."""

    def __init__(self, cond_dim, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM, affine=False)
        self.gain = sn_dense(cond_dim, channels, bias=False)
        self.bias = sn_dense(cond_dim, channels, bias=False)

    def construct(self, x, cond):
        n = x.shape[0]
        gain = (1 + self.gain(cond)).reshape(n, -1, 1, 1)
        bias = self.bias(cond).reshape(n, -1, 1, 1)
        return self.bn(x) * gain + bias


class SelfAttention(nn.Cell):
    """SAGAN self-attention: x + sigma * W_o (g softmax(theta^T phi)^T), with sigma starting at 0, so
    the block is the identity at first and its 1x1 convs get gradient only once sigma has moved.
    Keys (phi) and values (g) are 2x2 max-pooled, as in BigGAN: attention is (HW) x (HW/4)."""

    def __init__(self, channels):
        super().__init__()
        self.channels = channels
        self.theta = sn_conv(channels, channels // 8, 1, bias=False)
        self.phi = sn_conv(channels, channels // 8, 1, bias=False)
        self.g = sn_conv(channels, channels // 2, 1, bias=False)
        self.out = sn_conv(channels // 2, channels, 1, bias=False)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.sigma = Parameter(Tensor(np.zeros(1, np.float32)), name="sigma")

    def construct(self, x):
        n, c, h, w = x.shape
        theta = self.theta(x).reshape(n, c // 8, h * w)
        phi = self.pool(self.phi(x)).reshape(n, c // 8, h * w // 4)
        attention = ops.softmax(ops.bmm(theta.transpose(0, 2, 1), phi), axis=-1)  # (n, hw, hw/4)
        g = self.pool(self.g(x)).reshape(n, c // 2, h * w // 4)
        attended = ops.bmm(g, attention.transpose(0, 2, 1)).reshape(n, c // 2, h, w)
        return x + self.sigma.astype(x.dtype) * self.out(attended)

