"""PyTorch twin of models/biggan.py (BigGAN at 32x32 as PyTorch-StudioGAN configures it for CIFAR-10),
for bench/bench_arch.py: the same layers, widths, initialisation and order of operations in plain
PyTorch eager (torch.nn.utils.spectral_norm with StudioGAN's eps 1e-6). Parameter names follow ours
(block0.bn1.gain, attention.theta, ...) so weights map one to one.

    from bench.torch_biggan import biggan_twin
    G, D = biggan_twin(z_dim=80, shape=(3, 32, 32), width=96, num_classes=10)
"""
import torch
import torch.nn.functional as F
from torch import nn

BN_EPS, BN_MOMENTUM = 1e-4, 0.1


def _sn(layer):
    nn.init.orthogonal_(layer.weight)
    if getattr(layer, "bias", None) is not None:
        nn.init.zeros_(layer.bias)
    return nn.utils.spectral_norm(layer, eps=1e-6)


def _conv(cin, cout, k, bias=True):
    return _sn(nn.Conv2d(cin, cout, k, 1, k // 2, bias=bias))


def _linear(cin, cout, bias=True):
    return _sn(nn.Linear(cin, cout, bias=bias))


def _up(x):
    return F.interpolate(x, scale_factor=2, mode="nearest")


class CondBN(nn.Module):
    """BN(x) * (1 + W_g a) + W_b a."""

    def __init__(self, cond_dim, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, eps=BN_EPS, momentum=BN_MOMENTUM, affine=False)
        self.gain, self.bias = _linear(cond_dim, c, False), _linear(cond_dim, c, False)

    def forward(self, x, a):
        return self.bn(x) * (1 + self.gain(a))[:, :, None, None] + self.bias(a)[:, :, None, None]


class SelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.theta, self.phi = _conv(c, c // 8, 1, False), _conv(c, c // 8, 1, False)
        self.g, self.out = _conv(c, c // 2, 1, False), _conv(c // 2, c, 1, False)
        self.sigma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        n, c, h, w = x.shape
        theta = self.theta(x).view(n, c // 8, h * w)
        phi = F.max_pool2d(self.phi(x), 2).view(n, c // 8, h * w // 4)
        attention = torch.softmax(torch.bmm(theta.permute(0, 2, 1), phi), -1)
        g = F.max_pool2d(self.g(x), 2).view(n, c // 2, h * w // 4)
        return x + self.sigma * self.out(torch.bmm(g, attention.permute(0, 2, 1)).view(n, c // 2, h, w))


class GenBlock(nn.Module):
    def __init__(self, cin, cout, cond_dim):
        super().__init__()
        self.bn1, self.conv1 = CondBN(cond_dim, cin), _conv(cin, cout, 3)
        self.bn2, self.conv2 = CondBN(cond_dim, cout), _conv(cout, cout, 3)
        self.skip = _conv(cin, cout, 1)

    def forward(self, x, a):
        h = self.conv1(_up(F.relu(self.bn1(x, a))))
        return self.conv2(F.relu(self.bn2(h, a))) + self.skip(_up(x))


class Generator(nn.Module):
    def __init__(self, z_dim, out_shape, width, num_classes=0, shared_dim=128):
        super().__init__()
        self.chunk, self.base = z_dim // 4, 4 * width
        self.shared = nn.Embedding(num_classes, shared_dim) if num_classes else None
        if self.shared is not None:
            nn.init.orthogonal_(self.shared.weight)
        cond_dim = self.chunk + (shared_dim if num_classes else 0)
        self.linear0 = _linear(self.chunk, self.base * 16)
        self.block0 = GenBlock(self.base, self.base, cond_dim)
        self.block1 = GenBlock(self.base, self.base, cond_dim)
        self.attention = SelfAttention(self.base)
        self.block2 = GenBlock(self.base, self.base, cond_dim)
        self.bn = nn.BatchNorm2d(self.base, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.conv_out = _conv(self.base, out_shape[0], 3)

    def forward(self, z, y=None):
        zs = torch.split(z, self.chunk, 1)
        conds = zs[1:] if self.shared is None else [torch.cat((self.shared(y), c), 1) for c in zs[1:]]
        h = self.linear0(zs[0]).view(z.shape[0], self.base, 4, 4)
        h = self.attention(self.block1(self.block0(h, conds[0]), conds[1]))
        h = self.block2(h, conds[2])
        return torch.tanh(self.conv_out(F.relu(self.bn(h))))


class DiscOptBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1, self.conv2, self.skip = _conv(cin, cout, 3), _conv(cout, cout, 3), _conv(cin, cout, 1)

    def forward(self, x):
        return F.avg_pool2d(self.conv2(F.relu(self.conv1(x))), 2) + self.skip(F.avg_pool2d(x, 2))


class DiscBlock(nn.Module):
    def __init__(self, cin, cout, downsample):
        super().__init__()
        self.downsample = downsample
        self.conv1, self.conv2 = _conv(cin, cout, 3), _conv(cout, cout, 3)
        self.skip = _conv(cin, cout, 1) if downsample or cin != cout else None

    def forward(self, x):
        x = F.relu(x)  # StudioGAN's in-place ReLU reaches the shortcut too
        h = self.conv2(F.relu(self.conv1(x)))
        s = x if self.skip is None else self.skip(x)
        return F.avg_pool2d(h, 2) + F.avg_pool2d(s, 2) if self.downsample else h + s


class Discriminator(nn.Module):
    def __init__(self, in_shape, width, num_classes=0):
        super().__init__()
        ch = 2 * width
        self.block0, self.attention = DiscOptBlock(in_shape[0], ch), SelfAttention(ch)
        self.block1 = DiscBlock(ch, ch, True)
        self.block2, self.block3 = DiscBlock(ch, ch, False), DiscBlock(ch, ch, False)
        self.linear = _linear(ch, 1)
        self.embed = _sn(nn.Embedding(num_classes, ch)) if num_classes else None

    def forward(self, x, y=None):
        h = self.block3(self.block2(self.block1(self.attention(self.block0(x)))))
        h = F.relu(h).sum((2, 3))
        out = self.linear(h).squeeze(-1)
        if self.embed is not None:
            out = out + (self.embed(y) * h).sum(-1)
        return out


def biggan_twin(z_dim, shape, width, num_classes=0):
    """(G, D) in PyTorch, the twin of models.biggan's pair."""
    return Generator(z_dim, shape, width, num_classes), Discriminator(shape, width, num_classes)
