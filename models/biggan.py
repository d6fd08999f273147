"""BigGAN at 32x32 (Brock et al. 2019) as PyTorch-StudioGAN configures it for CIFAR-10
(src/models/big_resnet.py, src/configs/CIFAR10/BigGAN.yaml): z_dim 80, shared_dim 128, width 96.

Generator: z is split into 4 equal chunks. Chunk 0 -> SN dense -> (4w, 4, 4); three residual up-blocks
(4 -> 8 -> 16 -> 32, 4w channels each), self-attention after the second (16x16); BN, ReLU, SN 3x3 conv,
tanh. Block k's two conditional BatchNorms get their gains and biases from [shared_embed(y), chunk k+1]
(hierarchical latent): one class embedding shared by all blocks instead of one per BN layer.
Unconditional (num_classes=0), as StudioGAN's big_resnet with g_cond_mtd "W/O": no embedding, the
conditional BatchNorms are conditioned on their z chunk alone.

Discriminator: an optimised first block (32 -> 16, 2w channels), self-attention at 16x16, a down-block
(16 -> 8) and two blocks at 8x8; ReLU, sum over space, SN dense -> one logit, plus the projection
<SN-embed(y), h> when class-conditional (Miyato & Koyama 2018).

Spectral norm on every conv, dense and D embedding of both nets (not on G's shared embedding), all
weights orthogonally initialised, biases zero: as StudioGAN (apply_g_sn, apply_d_sn, g_init/d_init
"ortho"). Parameter counts equal StudioGAN's (tests/test_biggan.py).

One difference, in eval mode only (sampling, the EMA generator, evaluation): StudioGAN's layers use
torch.nn.utils.spectral_norm, which in eval mode divides by u^T W v with the u and v stored by the
last training forward and no power iteration; models/spectral_norm.py (one implementation for every
architecture, mimicry's behaviour) runs one more power iteration from the stored u, without storing
it. Training forwards are the same. The two sigma estimates differ by one power iteration's progress
towards the top singular value (and torch's uses u, v from before the last optimizer step).

One StudioGAN detail kept on purpose: its D blocks apply an in-place ReLU to their input, which also
reaches the shortcut, so D's non-first blocks add relu(x), not x, on the skip path (BigGAN-PyTorch uses
an out-of-place ReLU there). We compute what StudioGAN computes, so its CIFAR-10 recipe carries over.
"""
from mindspore import nn, ops

from models.biggan_layers import (BN_EPS, BN_MOMENTUM, ConditionalBatchNorm2d, SelfAttention, ortho_embedding,
                                  sn_conv, sn_dense, upsample2x)
from models.resnet import downsample as halve
from models.spectral_norm import SpectralNorm

SIZE = 32
G_BLOCKS = 3  # 4 -> 8 -> 16 -> 32; z splits into G_BLOCKS + 1 chunks


class GenBlock(nn.Cell):
    """cBN, ReLU, 2x up, 3x3 conv, cBN, ReLU, 3x3 conv; shortcut: 2x up, 1x1 conv."""

    def __init__(self, in_channels, out_channels, cond_dim):
        super().__init__()
        self.bn1 = ConditionalBatchNorm2d(cond_dim, in_channels)
        self.conv1 = sn_conv(in_channels, out_channels, 3)
        self.bn2 = ConditionalBatchNorm2d(cond_dim, out_channels)
        self.conv2 = sn_conv(out_channels, out_channels, 3)
        self.skip = sn_conv(in_channels, out_channels, 1)

    def construct(self, x, cond):
        h = self.conv1(upsample2x(ops.relu(self.bn1(x, cond))))
        h = self.conv2(ops.relu(self.bn2(h, cond)))
        return h + self.skip(upsample2x(x))


class BigGANGenerator(nn.Cell):
    """(z, y) -> image in [-1, 1] of shape out_shape = (C, 32, 32). width: base channels (StudioGAN's
    g_conv_dim; every block has 4 * width). z_dim must split into 4 equal chunks. shared_dim: size of
    the shared class embedding (unused without classes)."""

    def __init__(self, z_dim, out_shape, width=96, num_classes=0, shared_dim=128):
        super().__init__()
        channels, size = out_shape[0], out_shape[-1]
        if tuple(out_shape[1:]) != (SIZE, SIZE):
            raise ValueError(f"biggan generates {SIZE}x{SIZE} images, got shape {tuple(out_shape)}")
        if z_dim % (G_BLOCKS + 1):
            raise ValueError(f"biggan splits z into {G_BLOCKS + 1} equal chunks: z_dim must be a multiple of "
                             f"{G_BLOCKS + 1}, got {z_dim}")
        self.chunk = z_dim // (G_BLOCKS + 1)
        self.base = 4 * width
        self.bottom = size // 2 ** G_BLOCKS
        self.shared = ortho_embedding(num_classes, shared_dim) if num_classes else None
        cond_dim = self.chunk + (shared_dim if num_classes else 0)
        self.linear0 = sn_dense(self.chunk, self.base * self.bottom * self.bottom)
        self.block0 = GenBlock(self.base, self.base, cond_dim)
        self.block1 = GenBlock(self.base, self.base, cond_dim)
        self.attention = SelfAttention(self.base)  # at 16x16 (StudioGAN attn_g_loc [2])
        self.block2 = GenBlock(self.base, self.base, cond_dim)
        self.bn = nn.BatchNorm2d(self.base, eps=BN_EPS, momentum=BN_MOMENTUM)
        self.conv_out = sn_conv(self.base, channels, 3)

    def conditions(self, z, y):
        """The three blocks' BN conditions: [shared(y), z chunk k] for k = 1..3 (chunk k alone without classes)."""
        c = self.chunk
        chunks = (z[:, c:2 * c], z[:, 2 * c:3 * c], z[:, 3 * c:4 * c])
        if self.shared is None:
            return chunks
        shared = self.shared(y)
        return ops.cat((shared, chunks[0]), 1), ops.cat((shared, chunks[1]), 1), ops.cat((shared, chunks[2]), 1)

    def construct(self, z, y=None):
        cond0, cond1, cond2 = self.conditions(z, y)
        h = self.linear0(z[:, :self.chunk]).reshape(z.shape[0], self.base, self.bottom, self.bottom)
        h = self.block0(h, cond0)
        h = self.attention(self.block1(h, cond1))
        h = self.block2(h, cond2)
        return ops.tanh(self.conv_out(ops.relu(self.bn(h))))


class DiscOptBlock(nn.Cell):
    """First D block (no pre-activation on the image): 3x3 conv, ReLU, 3x3 conv, 2x2 avg-pool;
    shortcut: avg-pool, 1x1 conv."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv1 = sn_conv(in_channels, out_channels, 3)
        self.conv2 = sn_conv(out_channels, out_channels, 3)
        self.skip = sn_conv(in_channels, out_channels, 1)
        self.pool = halve

    def construct(self, x):
        h = self.pool(self.conv2(ops.relu(self.conv1(x))))
        return h + self.skip(self.pool(x))


class DiscBlock(nn.Cell):
    """ReLU, 3x3 conv, ReLU, 3x3 conv[, avg-pool]; shortcut from relu(x) (StudioGAN's in-place ReLU,
    see the module docstring): a 1x1 conv[, avg-pool] when downsampling or changing width, else identity."""

    def __init__(self, in_channels, out_channels, downsample):
        super().__init__()
        self.downsample = downsample
        self.conv1 = sn_conv(in_channels, out_channels, 3)
        self.conv2 = sn_conv(out_channels, out_channels, 3)
        self.skip = sn_conv(in_channels, out_channels, 1) if downsample or in_channels != out_channels else None
        self.pool = halve

    def construct(self, x):
        x = ops.relu(x)
        h = self.conv2(ops.relu(self.conv1(x)))
        if self.skip is not None:
            x = self.skip(x)
        if self.downsample:
            h, x = self.pool(h), self.pool(x)
        return h + x


class BigGANDiscriminator(nn.Cell):
    """(x, y) -> one logit per sample, shape (N,). in_shape = (C * pack, 32, 32); width: StudioGAN's
    d_conv_dim (blocks have 2 * width channels). Spectral norm is part of the architecture and always
    on: spectral_norm=False is accepted (the shared constructor signature) and ignored."""

    def __init__(self, in_shape, width=96, num_classes=0, spectral_norm=False):
        super().__init__()
        if tuple(in_shape[1:]) != (SIZE, SIZE):
            raise ValueError(f"biggan discriminates {SIZE}x{SIZE} images, got shape {tuple(in_shape)}")
        ch = 2 * width
        self.block0 = DiscOptBlock(in_shape[0], ch)
        self.attention = SelfAttention(ch)  # at 16x16 (StudioGAN attn_d_loc [1])
        self.block1 = DiscBlock(ch, ch, downsample=True)
        self.block2 = DiscBlock(ch, ch, downsample=False)
        self.block3 = DiscBlock(ch, ch, downsample=False)
        self.linear = sn_dense(ch, 1)
        self.embed = SpectralNorm(ortho_embedding(num_classes, ch)) if num_classes else None

    def construct(self, x, y=None):
        h = self.attention(self.block0(x))
        h = self.block3(self.block2(self.block1(h)))
        h = ops.relu(h).sum(axis=(2, 3))
        out = self.linear(h).squeeze(-1)
        if self.embed is not None:
            out = out + (self.embed(y) * h).sum(-1)
        return out
