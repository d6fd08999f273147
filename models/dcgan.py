"""DCGAN-style conv generator and discriminator that adapt to the dataset's image size.

The generator projects z to a (4w, S/4, S/4) map and upsamples twice by stride-2 transposed convs,
so S must be divisible by 4: 8x8 digits (2 -> 4 -> 8), 28x28 MNIST (7 -> 14 -> 28), 32x32 CIFAR-10
(8 -> 16 -> 32). The discriminator mirrors it with stride-2 convs. Channels: 1 or 3.
"""
from mindspore import nn, ops

from models.activations import LeakyReLU
from models.embedding import generator_embedding, projection_embedding
from models.spectral_norm import maybe_sn


class DCGANGenerator(nn.Cell):
    """z -> image in [-1, 1], shape (C, S, S). BatchNorm + ReLU, tanh output (Radford et al. 2016).
    With classes, z is multiplied by a learned class embedding."""

    def __init__(self, z_dim, out_shape, width=64, num_classes=0):
        super().__init__()
        channels, size = out_shape[0], out_shape[1]
        self.start = size // 4
        self.base = 2 * width
        self.embed = generator_embedding(num_classes, z_dim)
        self.project = nn.Dense(z_dim, self.base * self.start * self.start)
        self.bn0 = nn.BatchNorm2d(self.base)
        self.up = nn.SequentialCell([
            nn.Conv2dTranspose(self.base, width, 4, stride=2, pad_mode="pad", padding=1),
            nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2dTranspose(width, width // 2, 4, stride=2, pad_mode="pad", padding=1),
            nn.BatchNorm2d(width // 2), nn.ReLU(),
            nn.Conv2d(width // 2, channels, 3, pad_mode="pad", padding=1, has_bias=True),
            nn.Tanh(),
        ])

    def construct(self, z, y=None):
        if self.embed is not None:
            z = z * self.embed(y)
        h = self.project(z).reshape(z.shape[0], self.base, self.start, self.start)
        return self.up(ops.relu(self.bn0(h)))


class DCGANDiscriminator(nn.Cell):
    """image -> one logit. Stride-2 convs with LeakyReLU(0.2), no BatchNorm (safe with GP/R1).
    With classes, a projection discriminator: logit = head(h) + <embed(y), h>."""

    def __init__(self, in_shape, width=64, num_classes=0, spectral_norm=False):
        super().__init__()
        channels, size = in_shape[0], in_shape[1]
        sn = spectral_norm
        self.features = nn.SequentialCell([
            maybe_sn(nn.Conv2d(channels, width // 2, 3, pad_mode="pad", padding=1, has_bias=True), sn),
            LeakyReLU(0.2),
            maybe_sn(nn.Conv2d(width // 2, width, 4, stride=2, pad_mode="pad", padding=1, has_bias=True), sn),
            LeakyReLU(0.2),
            maybe_sn(nn.Conv2d(width, 2 * width, 4, stride=2, pad_mode="pad", padding=1, has_bias=True), sn),
            LeakyReLU(0.2),
        ])
        features = 2 * width * (size // 4) * (size // 4)
        self.head = maybe_sn(nn.Dense(features, 1), sn)
        self.embed = projection_embedding(num_classes, features, spectral_norm)

    def construct(self, x, y=None):
        h = self.features(x)
        h = h.reshape(h.shape[0], -1)
        out = self.head(h).squeeze(-1)
        if self.embed is not None:
            out = out + (self.embed(y) * h).sum(-1)
        return out
