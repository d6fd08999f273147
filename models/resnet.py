"""SNGAN's ResNet generator and discriminator (Miyato et al. 2018); with classes, cGAN-PD
(Miyato & Koyama 2018): conditional BatchNorm in every generator block and a projection
discriminator. Layers, widths and initialisation follow mimicry's SNGANGenerator32/48/64,
SNGANDiscriminator32/48/64 and CGANPDGenerator32 / CGANPDDiscriminator32 (kwotsin/mimicry), which
follow the authors' Chainer code; trainable parameter counts equal mimicry's (tests/test_sngan.py).

Layouts by image size S, with `width` w (default 128 reproduces each published size). G: a linear
layer to a bottom x bottom map, then up-blocks (channels in -> out); D: the first block, then
blocks (channels; "v" marks one that halves the size):

    S   G                                              D
    32  4x4,   2w -> 2w -> 2w -> 2w      (ngf 256)     w v, w v, w, w                 (ndf 128)
    48  6x6,   4w -> 2w -> w -> w/2      (ngf 512)     w/2 v, w v, 2w v, 4w v, 8w     (ndf 1024)
    64  4x4,   8w -> 4w -> 2w -> w -> w/2 (ngf 1024)   w/2 v, w v, 2w v, 4w v, 8w v   (ndf 1024)

(mimicry's ngf / ndf are the widest layer: G's first, D's last; the narrow ends are ngf >> 3,
ngf >> 4 and ndf >> 4 as there.) Any other S divisible by 4 (8x8 digits, 28x28 MNIST) gets the
32x32 layout, with as many up-blocks as halve S down to at most 7: 8 -> 4 (one block),
28 -> 7 (two). G's output is tanh, in [-1, 1], with out_shape[0] channels; D takes in_shape[0]
channels (C x pack with PacGAN).

Blocks (pre-activation ResNet):
  G block:   x -> BN, ReLU, up x2 (bilinear), conv3x3, BN, ReLU, conv3x3  +  conv1x1(up x2 (x))
  D block:   r = ReLU(x) -> conv3x3, ReLU, conv3x3 [, avgpool2]  +  [conv1x1 [, avgpool2]] (r)
  first D block: x -> conv3x3, ReLU, conv3x3, avgpool2  +  conv1x1(avgpool2(x))
D ends with ReLU, a global SUM pool and a linear layer; with classes it adds <embed(y), h>.

One detail as mimicry computes it, not as the Chainer code writes it: mimicry's D block opens with
nn.ReLU(inplace=True) on its input, which also rewrites the tensor the shortcut reads, so the
shortcut sees ReLU(x), not x (identity shortcuts included). Here D blocks take ReLU(x) for both
paths, to compute what mimicry computes (and what its published scores were trained with).

Spectral norm is part of this discriminator: EVERY weight of D (convs, the linear head, the class
embedding) is spectrally normalised, whatever `spectral_norm` says. G has none.
Initialisation as mimicry: Xavier-uniform weights, gain sqrt(2) for the 3x3 convs inside blocks and
1 elsewhere (G's input linear and output conv, shortcuts, D's head and class embedding); biases
keep the PyTorch default U(+-1/sqrt(fan_in)) (also MindSpore's); conditional BN scales start at
N(1, 0.02) and shifts at 0. BatchNorm as PyTorch's defaults: eps 1e-5, running statistics
momentum 0.1 (MindSpore's momentum=0.9).
"""
import math

from mindspore import nn, ops
from mindspore.common.initializer import Normal, XavierUniform

from models.spectral_norm import SpectralNorm

RELU_GAIN = math.sqrt(2.0)


def conv(in_channels, out_channels, kernel, gain, spectral_norm=False):
    """kxk conv, stride 1, 'same' zero padding, with bias; Xavier-uniform weight with `gain`."""
    layer = nn.Conv2d(in_channels, out_channels, kernel, pad_mode="pad", padding=kernel // 2, has_bias=True,
                      weight_init=XavierUniform(gain))
    return SpectralNorm(layer) if spectral_norm else layer


def upsample(x):
    """x2 bilinear, align_corners=False (mimicry's F.interpolate(scale_factor=2, mode='bilinear'))."""
    return ops.interpolate(x, size=(2 * x.shape[2], 2 * x.shape[3]), mode="bilinear", align_corners=False)


def downsample(x):
    """2x2 average pooling as a reshape and a mean: MindSpore 2.10's avg_pool2d has no second
    derivative (R1 and WGAN-GP differentiate D's gradient: "AvgPool3DGrad's bprop not defined")."""
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).mean((3, 5))


class ConditionalBatchNorm2d(nn.Cell):
    """BatchNorm without its own affine, then per-class scale and shift: gamma[y] * BN(x) + beta[y].
    Scales start at N(1, 0.02), shifts at 0 (mimicry's single (classes, 2C) table, split in two)."""

    def __init__(self, num_features, num_classes):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features, eps=1e-5, momentum=0.9, affine=False)
        self.gamma = nn.Embedding(num_classes, num_features, embedding_table=Normal(0.02, mean=1.0))
        self.beta = nn.Embedding(num_classes, num_features, embedding_table="zeros")

    def construct(self, x, y):
        n, c = x.shape[0], x.shape[1]
        return self.gamma(y).reshape(n, c, 1, 1) * self.bn(x) + self.beta(y).reshape(n, c, 1, 1)


def batch_norm(num_features, num_classes):
    if num_classes:
        return ConditionalBatchNorm2d(num_features, num_classes)
    return nn.BatchNorm2d(num_features, eps=1e-5, momentum=0.9)


class GBlock(nn.Cell):
    """Upsampling generator block, in -> out channels, 2x the spatial size."""

    def __init__(self, in_channels, out_channels, num_classes=0):
        super().__init__()
        self.conditional = num_classes > 0
        self.b1 = batch_norm(in_channels, num_classes)
        self.c1 = conv(in_channels, out_channels, 3, RELU_GAIN)
        self.b2 = batch_norm(out_channels, num_classes)
        self.c2 = conv(out_channels, out_channels, 3, RELU_GAIN)
        self.c_sc = conv(in_channels, out_channels, 1, 1.0)

    def norm(self, bn, h, y):
        if self.conditional:
            return bn(h, y)
        return bn(h)

    def construct(self, x, y=None):
        h = self.c1(upsample(ops.relu(self.norm(self.b1, x, y))))
        h = self.c2(ops.relu(self.norm(self.b2, h, y)))
        return h + self.c_sc(upsample(x))


class DBlock(nn.Cell):
    """Discriminator block, in -> out channels (3x3 convs in -> in -> out), optionally halving the size.
    The shortcut is a 1x1 conv when the channels or the size change, else the identity."""

    def __init__(self, in_channels, out_channels, down=False):
        super().__init__()
        self.down = down
        self.c1 = conv(in_channels, in_channels, 3, RELU_GAIN, spectral_norm=True)
        self.c2 = conv(in_channels, out_channels, 3, RELU_GAIN, spectral_norm=True)
        self.c_sc = conv(in_channels, out_channels, 1, 1.0, spectral_norm=True) \
            if in_channels != out_channels or down else None

    def construct(self, x):
        x = ops.relu(x)  # both paths: mimicry's in-place ReLU (module docstring)
        h = self.c2(ops.relu(self.c1(x)))
        shortcut = x if self.c_sc is None else self.c_sc(x)
        if self.down:
            return downsample(h) + downsample(shortcut)
        return h + shortcut


class DBlockOptimized(nn.Cell):
    """D's first block, on the image: no leading ReLU, always halves the size, pools before the
    shortcut's 1x1 conv (the Chainer SNGAN's OptimizedBlock)."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.c1 = conv(in_channels, out_channels, 3, RELU_GAIN, spectral_norm=True)
        self.c2 = conv(out_channels, out_channels, 3, RELU_GAIN, spectral_norm=True)
        self.c_sc = conv(in_channels, out_channels, 1, 1.0, spectral_norm=True)

    def construct(self, x):
        h = downsample(self.c2(ops.relu(self.c1(x))))
        return h + self.c_sc(downsample(x))


def _check_size(size):
    if size % 4:
        raise ValueError(f"SNGAN's ResNet needs an image size divisible by 4, got {size}")


def generator_layout(size, width):
    """(bottom width, channels before and after each up-block) for an S x S output (module docstring)."""
    _check_size(size)
    bottom, ups = size, 0
    while bottom % 2 == 0 and bottom >= 8:
        bottom, ups = bottom // 2, ups + 1
    if size in (48, 64):  # mimicry: ngf 512 (48) / 1024 (64), halved by every block
        ngf = {48: 4, 64: 8}[size] * width
        return bottom, [ngf >> i for i in range(ups + 1)]
    return bottom, [2 * width] * (ups + 1)


def discriminator_layout(size, width):
    """[(in, out, halves the size)] of the D blocks after the first, and the first block's width."""
    _check_size(size)
    if size in (48, 64):  # mimicry: ndf 1024, doubling from ndf >> 4; the 48 layout keeps 3x3 at the end
        ndf = 8 * width
        chans = [ndf >> i for i in (4, 3, 2, 1, 0)]
        blocks = [(a, b, True) for a, b in zip(chans[:-1], chans[1:])]
        if size == 48:
            blocks[-1] = (chans[-2], chans[-1], False)
        return chans[0], blocks
    return width, [(width, width, True), (width, width, False), (width, width, False)]


class SNGANGenerator(nn.Cell):
    """z -> image in [-1, 1], shape out_shape = (C, S, S). width w: ngf = 2w at 32x32, 4w at 48x48,
    8w at 64x64 (w = 128: mimicry's 256 / 512 / 1024). With classes (cGAN-PD): conditional
    BatchNorm in every block; y is then required."""

    def __init__(self, z_dim, out_shape, width=128, num_classes=0):
        super().__init__()
        channels, size = out_shape[0], out_shape[1]
        self.bottom, chans = generator_layout(size, width)
        self.base = chans[0]
        self.l1 = nn.Dense(z_dim, self.bottom * self.bottom * self.base, weight_init=XavierUniform(1.0))
        self.blocks = nn.CellList([GBlock(a, b, num_classes) for a, b in zip(chans[:-1], chans[1:])])
        self.bn = nn.BatchNorm2d(chans[-1], eps=1e-5, momentum=0.9)
        self.c_out = conv(chans[-1], channels, 3, 1.0)

    def construct(self, z, y=None):
        h = self.l1(z).reshape(z.shape[0], self.base, self.bottom, self.bottom)
        for block in self.blocks:
            h = block(h, y)
        return ops.tanh(self.c_out(ops.relu(self.bn(h))))


class SNGANDiscriminator(nn.Cell):
    """image -> one logit per sample, shape (N,). width w: ndf = w at 32x32, 8w at 48x48 and 64x64
    (w = 128: mimicry's 128 / 1024). Spectral norm on every layer always: `spectral_norm` is
    accepted for the common constructor signature and ignored (it is part of the architecture).
    With classes: the projection discriminator, logit = l(h) + <embed(y), h>, embedding spectrally
    normalised and Xavier-initialised as mimicry's CGANPDDiscriminator32."""

    def __init__(self, in_shape, width=128, num_classes=0, spectral_norm=True):
        super().__init__()
        channels, size = in_shape[0], in_shape[1]
        first, layout = discriminator_layout(size, width)
        self.blocks = nn.SequentialCell([DBlockOptimized(channels, first)] +
                                        [DBlock(a, b, down) for a, b, down in layout])
        features = layout[-1][1]
        self.head = SpectralNorm(nn.Dense(features, 1, weight_init=XavierUniform(1.0)))
        self.embed = SpectralNorm(nn.Embedding(num_classes, features, embedding_table=XavierUniform(1.0))) \
            if num_classes else None

    def construct(self, x, y=None):
        h = ops.sum(ops.relu(self.blocks(x)), (2, 3))  # global sum pooling
        out = self.head(h).squeeze(-1)
        if self.embed is not None:
            out = out + ops.sum(self.embed(y) * h, -1)
        return out
