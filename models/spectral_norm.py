"""Spectral normalisation (Miyato et al. 2018) for Dense, Conv2d and Embedding layers.

W_sn = W / sigma(W), sigma estimated by one power iteration per training forward pass with a
persistent, non-trainable vector u (updated with ops.assign, only in training mode). u and v are
held constant for the gradient, as in the paper and PyTorch. MindSpore has no built-in version.
"""
import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops


def _l2_normalize(x, eps=1e-12):
    return x / (ops.sqrt(ops.sum(x * x)) + eps)


class SpectralNorm(nn.Cell):
    """Wraps an nn.Dense, nn.Conv2d or nn.Embedding; calls the same op with the normalised weight
    (an embedding table (classes, dim) is normalised as one matrix, as in the projection
    discriminator of Miyato & Koyama 2018)."""

    def __init__(self, layer, seed=0):
        super().__init__()
        self.layer = layer
        self.is_conv = isinstance(layer, nn.Conv2d)
        self.is_embedding = isinstance(layer, nn.Embedding)
        rows = self.weight().shape[0]
        u = np.random.default_rng(seed).normal(size=(rows,)).astype(np.float32)
        self.u = Parameter(Tensor(u / np.linalg.norm(u)), name="sn_u", requires_grad=False)

    def weight(self):
        return self.layer.embedding_table if self.is_embedding else self.layer.weight

    def sigma_and_u(self):
        """(sigma estimate, new u) after one power iteration, in float32 (also under mixed precision,
        where the weight or u may arrive in float16 and the matmul wants equal dtypes)."""
        w = self.weight().reshape(self.weight().shape[0], -1).astype(ms.float32)
        w_const = ops.stop_gradient(w)
        v = _l2_normalize(ops.matmul(self.u.astype(ms.float32), w_const))
        u = _l2_normalize(ops.matmul(w_const, v))
        return ops.sum(u * ops.matmul(w, v)), u

    def construct(self, x):
        sigma, u = self.sigma_and_u()
        if self.training:
            sigma = ops.depend(sigma, ops.assign(self.u, u))
        weight = self.weight() / sigma
        if self.is_embedding:
            return ops.gather(weight, x, 0)
        weight = weight.astype(x.dtype)  # mixed precision: the op runs in the input's dtype
        if self.is_conv:
            out = ops.conv2d(x, weight, stride=self.layer.stride, pad_mode=self.layer.pad_mode,
                             padding=self.layer.padding, dilation=self.layer.dilation, groups=self.layer.group)
            if self.layer.has_bias:
                out = out + self.layer.bias.reshape(1, -1, 1, 1)
            return out
        out = ops.matmul(x, weight.T)
        return out + self.layer.bias if self.layer.has_bias else out


def maybe_sn(layer, enabled):
    return SpectralNorm(layer) if enabled else layer
