"""Image-to-image networks of pix2pix and CycleGAN (Isola et al. 2017, Zhu et al. 2017), layer for
layer as junyanz/pytorch-CycleGAN-and-pix2pix models/networks.py: ResnetGenerator (with
ResnetBlock), UnetGenerator (with UnetSkipConnectionBlock), NLayerDiscriminator (PatchGAN) and
PixelDiscriminator. Trainable parameter counts and shapes equal the reference's
(tests/test_translate_models.py). Image -> image, so these are NOT in models.ARCHS (noise -> image):
they have their own registries, GENERATORS and DISCRIMINATORS, and make_translation_nets.

Shapes each network accepts (N, C, H, W):
  ResNet generators:         H, W divisible by 4 (two stride-2 convs, two x2 transposed convs).
  U-Net with num_downs d:    H, W divisible by 2^d (unet_128: 128, unet_256: 256, unet_32: 32);
                             d >= 5 by construction, so 28x28 needs padding to 32 first.
  PatchGAN with n layers:    n stride-2 4x4 convs then two stride-1 4x4 convs (pad 1): each side
                             goes s -> s // 2 (n times) -> -1 -> -1; 256 -> 30x30 for n = 3. The
                             receptive field is 70 px for n = 3, 34 for n = 2 (patch_size()).
  PixelDiscriminator:        any size; one logit per pixel.
Outputs are raw logits (the reference's GANLoss applies the sigmoid / least squares).

Norms as the reference's get_norm_layer: "batch" = BatchNorm2d with affine scale and shift and
running statistics (PyTorch momentum 0.1 = MindSpore's 0.9, eps 1e-5); "instance" =
InstanceNorm2d(affine=False, track_running_stats=False): each sample and channel normalised over
H, W by its own mean and biased variance, no parameters, no running statistics, same in training
and eval; "none" = no layer. Convolutions before a norm carry a bias exactly when the norm is
"instance" (the reference's use_bias: BatchNorm's shift makes a bias redundant; with "none" the
reference also drops it). Layers that the reference always gives a bias keep it.

Initialisation as the reference's init_weights(init_type="normal", init_gain=0.02): every conv and
transposed-conv weight N(0, 0.02), biases 0, BatchNorm scale N(1, 0.02) and shift 0. Drawn by
MindSpore's initializers, so ms.set_seed fixes them.
"""
from mindspore import nn, ops
from mindspore.common.initializer import Normal

from models.activations import LeakyReLU
from models.spectral_norm import maybe_sn

NORMS = ("batch", "instance", "none")
INIT_GAIN = 0.02


class InstanceNorm2d(nn.Cell):
    """(x - mean) / sqrt(var + eps) per sample and channel over H, W (biased variance), without
    affine parameters or running statistics: PyTorch's InstanceNorm2d(affine=False,
    track_running_stats=False). Written with ops because MindSpore 2.10's nn.InstanceNorm2d has no
    CPU kernel ("Unsupported op [InstanceNorm] on CPU"), and it always carries gamma / beta.
    The statistics are taken over the last axis of an (N * C, H * W) view: on the CPU, reducing
    axes (2, 3) of the 4-d tensor made this layer 30% of a CycleGAN iteration, the 2-d form costs
    about nothing (bench/bench_profile.py --model cyclegan)."""

    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def construct(self, x):
        n, c, h, w = x.shape
        rows = x.reshape(n * c, h * w)
        centred = rows - rows.mean(axis=1, keep_dims=True)
        var = (centred * centred).mean(axis=1, keep_dims=True)
        return (centred * ops.rsqrt(var + self.eps)).reshape(n, c, h, w)


def reflect_index(side, pad):
    """Indices of a side padded by reflection: -pad .. side + pad - 1 folded back into 0 .. side - 1
    without repeating the edge (numpy's mode="reflect", torch's ReflectionPad2d)."""
    i = ops.arange(-pad, side + pad)
    return (side - 1) - ops.abs((side - 1) - ops.abs(i))


class ReflectionPad2d(nn.Cell):
    """nn.ReflectionPad2d(pad) as two gathers (rows, then columns): the same values and gradients,
    and on the CPU about half the time of MindSpore 2.10's MirrorPad and MirrorPadGrad kernels, which
    took 10% of a CycleGAN iteration (bench/bench_profile.py --model cyclegan)."""

    def __init__(self, pad):
        super().__init__()
        self.pad = pad

    def construct(self, x):
        if self.pad >= x.shape[2] or self.pad >= x.shape[3]:  # shapes are constants in a graph: checked at compile
            raise ValueError(f"reflection padding {self.pad} needs sides larger than it, got {x.shape[2:]}")
        rows = ops.gather(x, reflect_index(x.shape[2], self.pad), 2)
        return ops.gather(rows, reflect_index(x.shape[3], self.pad), 3)


def norm_layer(norm, channels):
    """The reference's norm_layer(channels) as a list of zero or one Cell."""
    if norm == "batch":
        return [nn.BatchNorm2d(channels, eps=1e-5, momentum=0.9, gamma_init=Normal(INIT_GAIN, mean=1.0),
                               beta_init="zeros")]
    if norm == "instance":
        return [InstanceNorm2d()]
    if norm == "none":
        return []
    raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")


def conv(in_channels, out_channels, kernel, stride=1, padding=0, bias=True):
    """PyTorch-style Conv2d (zero padding `padding`), initialised N(0, 0.02), bias 0."""
    pad = dict(pad_mode="pad", padding=padding) if padding else dict(pad_mode="valid")
    return nn.Conv2d(in_channels, out_channels, kernel, stride=stride, has_bias=bias,
                     weight_init=Normal(INIT_GAIN), bias_init="zeros", **pad)


class ConvTranspose2d(nn.Conv2dTranspose):
    """PyTorch's ConvTranspose2d(kernel, stride, padding, output_padding): output side
    (H - 1) * stride - 2 * padding + kernel + output_padding. The full transposed conv cropped by
    `padding` at the top and left and by `padding - output_padding` at the bottom and right, which
    MindSpore's own asymmetric "pad" mode does in the kernel: MindSpore 2.10's output_padding does
    not compute the extra row and column, it appends zeros (measured against torch; ResNet's k3 s2
    p1 op1 upsamplings would lose their last row and column), and cropping a full output by slicing
    cost 10% of a CycleGAN iteration on the CPU (bench/bench_profile.py --model cyclegan)."""

    def __init__(self, in_channels, out_channels, kernel, stride, padding, output_padding=0, bias=True):
        if not 0 <= output_padding <= padding:
            raise ValueError("output_padding must be in [0, padding] (the crop stays inside the full output)")
        end = padding - output_padding
        crop = dict(pad_mode="pad", padding=(padding, end, padding, end)) if padding else dict(pad_mode="valid")
        super().__init__(in_channels, out_channels, kernel, stride=stride, has_bias=bias,
                         weight_init=Normal(INIT_GAIN), bias_init="zeros", **crop)


def _check(norm):
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    return norm == "instance"  # the reference's use_bias


class ResnetBlock(nn.Cell):
    """x + [reflect-pad 1, conv3x3, norm, ReLU, (dropout 0.5), reflect-pad 1, conv3x3, norm](x)."""

    def __init__(self, dim, norm, use_dropout, use_bias):
        super().__init__()
        layers = [ReflectionPad2d(1), conv(dim, dim, 3, bias=use_bias), *norm_layer(norm, dim), nn.ReLU()]
        if use_dropout:
            layers.append(nn.Dropout(p=0.5))
        layers += [ReflectionPad2d(1), conv(dim, dim, 3, bias=use_bias), *norm_layer(norm, dim)]
        self.conv_block = nn.SequentialCell(layers)

    def construct(self, x):
        return x + self.conv_block(x)


class ResnetGenerator(nn.Cell):
    """Johnson et al.'s transformation network, CycleGAN's generator: reflect-pad 3, conv7x7 (ngf),
    two stride-2 conv3x3 (2 ngf, 4 ngf), n_blocks ResnetBlocks at 4 ngf, two stride-2 transposed
    conv3x3 with output_padding 1 (2 ngf, ngf), reflect-pad 3, conv7x7 (with bias), tanh.
    H and W must be divisible by 4."""

    def __init__(self, input_nc, output_nc, ngf=64, norm="instance", use_dropout=False, n_blocks=9):
        super().__init__()
        if n_blocks < 0:
            raise ValueError(f"n_blocks must be >= 0, got {n_blocks}")
        use_bias = _check(norm)
        layers = [ReflectionPad2d(3), conv(input_nc, ngf, 7, bias=use_bias), *norm_layer(norm, ngf), nn.ReLU()]
        for i in range(2):
            mult = 2 ** i
            layers += [conv(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1, bias=use_bias),
                       *norm_layer(norm, ngf * mult * 2), nn.ReLU()]
        layers += [ResnetBlock(ngf * 4, norm, use_dropout, use_bias) for _ in range(n_blocks)]
        for i in range(2):
            mult = 2 ** (2 - i)
            layers += [ConvTranspose2d(ngf * mult, ngf * mult // 2, 3, 2, 1, output_padding=1, bias=use_bias),
                       *norm_layer(norm, ngf * mult // 2), nn.ReLU()]
        layers += [ReflectionPad2d(3), conv(ngf, output_nc, 7), nn.Tanh()]
        self.model = nn.SequentialCell(layers)

    def construct(self, x):
        return self.model(x)


class UnetSkipConnectionBlock(nn.Cell):
    """x -> cat(x, up(submodule(down(x)))) on channels; the outermost block returns up(...) alone.
    down: LeakyReLU 0.2, conv4x4 stride 2, norm (the outermost has only the conv; the innermost no
    norm). up: ReLU, transposed conv4x4 stride 2, norm (the outermost: tanh instead of a norm, and a
    bias on its transposed conv); dropout 0.5 after up in the middle blocks when use_dropout."""

    def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False, innermost=False,
                 norm="batch", use_dropout=False):
        super().__init__()
        self.outermost = outermost
        use_bias = _check(norm)
        if input_nc is None:
            input_nc = outer_nc
        downconv = conv(input_nc, inner_nc, 4, stride=2, padding=1, bias=use_bias)
        if outermost:
            layers = [downconv, submodule, nn.ReLU(), ConvTranspose2d(inner_nc * 2, outer_nc, 4, 2, 1), nn.Tanh()]
        elif innermost:
            layers = [LeakyReLU(0.2), downconv,
                      nn.ReLU(), ConvTranspose2d(inner_nc, outer_nc, 4, 2, 1, bias=use_bias),
                      *norm_layer(norm, outer_nc)]
        else:
            layers = [LeakyReLU(0.2), downconv, *norm_layer(norm, inner_nc), submodule,
                      nn.ReLU(), ConvTranspose2d(inner_nc * 2, outer_nc, 4, 2, 1, bias=use_bias),
                      *norm_layer(norm, outer_nc)]
            if use_dropout:
                layers.append(nn.Dropout(p=0.5))
        self.model = nn.SequentialCell(layers)

    def construct(self, x):
        if self.outermost:
            return self.model(x)
        return ops.cat((x, self.model(x)), 1)


class UnetGenerator(nn.Cell):
    """pix2pix's U-Net: num_downs stride-2 levels (ngf, 2 ngf, 4 ngf, then 8 ngf down to a 1x1
    bottleneck), mirrored by transposed convs with skip connections; tanh output. H and W must be
    divisible by 2^num_downs; num_downs >= 5. Dropout (use_dropout) only in the num_downs - 5
    8 ngf blocks between the innermost and the 4 ngf one, as the reference."""

    def __init__(self, input_nc, output_nc, num_downs, ngf=64, norm="batch", use_dropout=False):
        super().__init__()
        if num_downs < 5:
            raise ValueError(f"num_downs must be >= 5 (the reference's fixed outer four levels plus the "
                             f"innermost), got {num_downs}")
        _check(norm)
        block = UnetSkipConnectionBlock(ngf * 8, ngf * 8, innermost=True, norm=norm)
        for _ in range(num_downs - 5):
            block = UnetSkipConnectionBlock(ngf * 8, ngf * 8, submodule=block, norm=norm, use_dropout=use_dropout)
        block = UnetSkipConnectionBlock(ngf * 4, ngf * 8, submodule=block, norm=norm)
        block = UnetSkipConnectionBlock(ngf * 2, ngf * 4, submodule=block, norm=norm)
        block = UnetSkipConnectionBlock(ngf, ngf * 2, submodule=block, norm=norm)
        self.model = UnetSkipConnectionBlock(output_nc, ngf, input_nc=input_nc, submodule=block, outermost=True,
                                             norm=norm)

    def construct(self, x):
        return self.model(x)


class NLayerDiscriminator(nn.Cell):
    """PatchGAN: conv4x4 stride 2 (ndf, bias, no norm), LeakyReLU 0.2; n_layers - 1 x [conv4x4
    stride 2 (ndf * min(2^n, 8)), norm, LeakyReLU]; conv4x4 stride 1 (ndf * min(2^n_layers, 8)),
    norm, LeakyReLU; conv4x4 stride 1 to one channel (bias). All pad 1. n_layers = 3 is the
    70x70 PatchGAN: 256x256 in, 30x30 logits out."""

    def __init__(self, input_nc, ndf=64, n_layers=3, norm="batch", spectral_norm=False):
        super().__init__()
        use_bias = _check(norm)

        def sn_conv(*args, **kwargs):  # --spectral-norm (Miyato et al. 2018): every conv; not in the reference
            return maybe_sn(conv(*args, **kwargs), spectral_norm)
        layers = [sn_conv(input_nc, ndf, 4, stride=2, padding=1), LeakyReLU(0.2)]
        mult = 1
        for n in range(1, n_layers):
            prev, mult = mult, min(2 ** n, 8)
            layers += [sn_conv(ndf * prev, ndf * mult, 4, stride=2, padding=1, bias=use_bias),
                       *norm_layer(norm, ndf * mult), LeakyReLU(0.2)]
        prev, mult = mult, min(2 ** n_layers, 8)
        layers += [sn_conv(ndf * prev, ndf * mult, 4, stride=1, padding=1, bias=use_bias),
                   *norm_layer(norm, ndf * mult), LeakyReLU(0.2),
                   sn_conv(ndf * mult, 1, 4, stride=1, padding=1)]
        self.model = nn.SequentialCell(layers)

    def construct(self, x):
        return self.model(x)


class PixelDiscriminator(nn.Cell):
    """1x1 PatchGAN: conv1x1 (ndf, bias), LeakyReLU 0.2, conv1x1 (2 ndf), norm, LeakyReLU,
    conv1x1 to one channel (bias only with instance norm, as the reference). One logit per pixel."""

    def __init__(self, input_nc, ndf=64, norm="batch", spectral_norm=False):
        super().__init__()
        use_bias = _check(norm)
        self.net = nn.SequentialCell([
            maybe_sn(conv(input_nc, ndf, 1), spectral_norm), LeakyReLU(0.2),
            maybe_sn(conv(ndf, ndf * 2, 1, bias=use_bias), spectral_norm), *norm_layer(norm, ndf * 2), LeakyReLU(0.2),
            maybe_sn(conv(ndf * 2, 1, 1, bias=use_bias), spectral_norm),
        ])

    def construct(self, x):
        return self.net(x)


# ---- registries -------------------------------------------------------------------------------
# name -> (builder, default width, size multiple H and W must divide by). The reference's names
# keep its defaults (ngf 64); the "small" ones are CPU-sized variants for 28x28 / 32x32 data.

def _resnet(n_blocks):
    def build(input_nc, output_nc, ngf, norm, use_dropout):
        return ResnetGenerator(input_nc, output_nc, ngf, norm, use_dropout, n_blocks)
    return build


def _unet(num_downs):
    def build(input_nc, output_nc, ngf, norm, use_dropout):
        return UnetGenerator(input_nc, output_nc, num_downs, ngf, norm, use_dropout)
    return build


def _nlayer(fixed_layers):
    def build(input_nc, ndf, norm, n_layers, spectral_norm):
        return NLayerDiscriminator(input_nc, ndf, n_layers if fixed_layers is None else fixed_layers, norm,
                                   spectral_norm)
    return build


def _pixel(input_nc, ndf, norm, n_layers, spectral_norm):
    return PixelDiscriminator(input_nc, ndf, norm, spectral_norm)


GENERATOR_SPECS = {
    "resnet_9blocks": (_resnet(9), 64, 4),
    "resnet_6blocks": (_resnet(6), 64, 4),
    "unet_128": (_unet(7), 64, 2 ** 7),
    "unet_256": (_unet(8), 64, 2 ** 8),
    "resnet_small": (_resnet(3), 16, 4),  # 28x28 (-> 7x7 in the blocks) and 32x32
    "unet_32": (_unet(5), 16, 2 ** 5),    # 32x32 -> 1x1 bottleneck; no dropout blocks (num_downs - 5 = 0)
}
DISCRIMINATOR_SPECS = {
    "basic": (_nlayer(3), 64),     # 70x70 PatchGAN
    "n_layers": (_nlayer(None), 64),  # n_layers from the caller (the reference's --n_layers_D)
    "pixel": (_pixel, 64),         # 1x1 PatchGAN
    "small": (_nlayer(2), 16),     # 34x34 PatchGAN: 32 -> 6x6 logits, 28 -> 5x5
}


def _generator(name):
    def build(input_nc, output_nc, ngf=None, norm="instance", use_dropout=False):
        builder, default_ngf, _ = GENERATOR_SPECS[name]
        return builder(input_nc, output_nc, default_ngf if ngf is None else ngf, norm, use_dropout)
    build.__doc__ = f"{name}: (input_nc, output_nc, ngf=None ({GENERATOR_SPECS[name][1]}), norm, use_dropout)"
    return build


def _discriminator(name):
    def build(input_nc, ndf=None, norm="batch", n_layers=3, spectral_norm=False):
        builder, default_ndf = DISCRIMINATOR_SPECS[name]
        return builder(input_nc, default_ndf if ndf is None else ndf, norm, n_layers, spectral_norm)
    build.__doc__ = (f"{name}: (input_nc, ndf=None ({DISCRIMINATOR_SPECS[name][1]}), norm, n_layers=3, "
                     "spectral_norm=False)")
    return build


GENERATORS = {name: _generator(name) for name in GENERATOR_SPECS}
"""name -> constructor(input_nc, output_nc, ngf=None, norm="instance", use_dropout=False);
ngf None = the name's default width."""
DISCRIMINATORS = {name: _discriminator(name) for name in DISCRIMINATOR_SPECS}
"""name -> constructor(input_nc, ndf=None, norm="batch", n_layers=3, spectral_norm=False); n_layers is read
only by "n_layers"; spectral_norm wraps every conv (models/spectral_norm.py)."""


def size_multiple(g_name):
    """H and W of a generator's input must be multiples of this (4 for ResNets, 2^num_downs for U-Nets)."""
    return GENERATOR_SPECS[g_name][2]


def d_layers(d_name, n_layers=3):
    """Number of stride-2 convs of a PatchGAN by registry name (None for "pixel")."""
    return {"basic": 3, "small": 2, "n_layers": n_layers}.get(d_name)


def d_output_size(d_name, size, n_layers=3):
    """Side of D's logit map for an input side `size`: pixel keeps it; a PatchGAN halves it (floor)
    per stride-2 conv, then loses 1 per stride-1 4x4 conv (two of them)."""
    layers = d_layers(d_name, n_layers)
    if layers is None:
        return size
    for _ in range(layers):
        size = (size + 2 - 4) // 2 + 1
    return size - 2


def patch_size(n_layers):
    """Receptive field (pixels) of one PatchGAN logit: 70 for n_layers 3, 34 for 2, 16 for 1."""
    field = 4 + 3  # the two stride-1 4x4 convs, walked back from one logit
    for _ in range(n_layers):  # a stride-2 4x4 conv below a field f sees (f - 1) * 2 + 4 pixels
        field = 2 * field + 2
    return field


def make_translation_nets(g_name, d_name, input_nc, output_nc, ngf=None, ndf=None, norm="instance",
                          use_dropout=False, d_input_nc=None, n_layers_d=3, image_size=None, spectral_norm=False):
    """(generator, discriminator) by registry name, as the reference's define_G / define_D with the
    same norm for both; spectral_norm: D's convs spectrally normalised (not in the reference).
    d_input_nc: channels D sees; default output_nc (CycleGAN: D judges an image of the target
    domain); pix2pix's conditional D sees cat(input, output): d_input_nc = input_nc + output_nc.
    ngf / ndf None take the name's default width.

    Accepted shapes: ResNet generators need H, W divisible by 4 (resnet_9blocks, resnet_6blocks,
    resnet_small: 28x28 and 32x32 work); U-Nets with num_downs d need H, W divisible by 2^d
    (unet_128: 128, unet_256: 256, unet_32: 32; no U-Net takes 28x28). D's logit map side is
    d_output_size(d_name, side). With image_size (an int or (H, W)), both are checked here and a
    ValueError names the problem instead of a shape error at the first compile."""
    if g_name not in GENERATORS:
        raise ValueError(f"unknown generator {g_name!r}; choose from {sorted(GENERATORS)}")
    if d_name not in DISCRIMINATORS:
        raise ValueError(f"unknown discriminator {d_name!r}; choose from {sorted(DISCRIMINATORS)}")
    if image_size is not None:
        sides = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        multiple = size_multiple(g_name)
        if any(side % multiple for side in sides):
            raise ValueError(f"generator {g_name} needs H and W divisible by {multiple}, got {sides}")
        if any(d_output_size(d_name, side, n_layers_d) < 1 for side in sides):
            raise ValueError(f"discriminator {d_name} leaves no logits for images of {sides}; use a smaller "
                             f"PatchGAN (\"small\" or n_layers)")
    generator = GENERATORS[g_name](input_nc, output_nc, ngf, norm, use_dropout)
    discriminator = DISCRIMINATORS[d_name](output_nc if d_input_nc is None else d_input_nc, ndf, norm, n_layers_d,
                                           spectral_norm)
    return generator, discriminator
