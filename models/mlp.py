"""MLP generator and discriminator for 2-D toy mixtures (ring8, grid25)."""
from mindspore import nn

from models.activations import LeakyReLU
from models.embedding import generator_embedding, projection_embedding
from models.spectral_norm import maybe_sn


def mlp(sizes, act, spectral_norm=False):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(maybe_sn(nn.Dense(a, b), spectral_norm))
        if i < len(sizes) - 2:
            layers.append(act())
    return nn.SequentialCell(layers)


class MLPGenerator(nn.Cell):
    """z -> x in R^2 (no output squashing: the mixtures live on [-4, 4]^2)."""

    def __init__(self, z_dim, out_shape, width=128, depth=2, num_classes=0):
        super().__init__()
        self.num_classes = num_classes
        self.embed = generator_embedding(num_classes, z_dim)
        self.net = mlp([z_dim] + [width] * depth + [out_shape[0]], nn.ReLU)

    def construct(self, z, y=None):
        if self.embed is not None:
            z = z * self.embed(y)
        return self.net(z)


class MLPDiscriminator(nn.Cell):
    """x in R^2 -> one logit (unbounded: the losses take logits). With classes, a projection
    discriminator (Miyato & Koyama 2018): logit = head(h) + <embed(y), h>."""

    def __init__(self, in_shape, width=128, depth=2, num_classes=0, spectral_norm=False):
        super().__init__()
        self.body = nn.SequentialCell([mlp([in_shape[0]] + [width] * depth, lambda: LeakyReLU(0.2), spectral_norm),
                                       LeakyReLU(0.2)])
        self.head = maybe_sn(nn.Dense(width, 1), spectral_norm)
        self.embed = projection_embedding(num_classes, width, spectral_norm)

    def construct(self, x, y=None):
        h = self.body(x)
        out = self.head(h).squeeze(-1)
        if self.embed is not None:
            out = out + (self.embed(y) * h).sum(-1)
        return out
