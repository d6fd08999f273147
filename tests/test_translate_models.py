"""pix2pix / CycleGAN networks (models/translate.py): trainable parameter counts and shapes equal to
the reference's (junyanz/pytorch-CycleGAN-and-pix2pix models/networks.py), output shapes (256x256
and the small 28/32 px variants), tanh range, instance norm and transposed conv against numpy,
initialisation, registries, one graph-mode forward + backward through each small variant, and
BatchNorm running statistics that move only in training."""
import collections

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

from models.translate import (DISCRIMINATORS, GENERATORS, ConvTranspose2d, InstanceNorm2d, NLayerDiscriminator,
                              PixelDiscriminator, ReflectionPad2d, ResnetBlock, ResnetGenerator, UnetGenerator,
                              UnetSkipConnectionBlock,
                              d_output_size, make_translation_nets, patch_size, size_multiple)

# Trainable parameter counts of the reference's networks, sum(p.numel() for p in net.parameters()
# if p.requires_grad), built in PyTorch 2.13.0 (CPU) in a separate venv:
#   python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0
#   /tmp/torchvenv/bin/python /tmp/cyclegan_ref/count.py
# where /tmp/cyclegan_ref/networks.py holds the reference's ResnetGenerator, ResnetBlock,
# UnetGenerator, UnetSkipConnectionBlock, NLayerDiscriminator and PixelDiscriminator verbatim
# (stored upstream version, commit 78913853ab4a4f5eba717af8433809300c99f0bb; the layer code is
# unchanged on master) and get_norm_layer as on master (instance: affine=False,
# track_running_stats=False; none: Identity), and count.py prints
#   define_G(3, 3, 64, name, norm=norm) and define_D(input_nc, 64, name, n_layers_D=5, norm=norm)
# plus the small variants: ResnetGenerator(nc, nc, 16, norm_layer, n_blocks=3),
# UnetGenerator(nc, nc, 5, 16, norm_layer), NLayerDiscriminator(nc, 16, 2, norm_layer).
# (resnet_9blocks / instance = 11.378 M and basic D = 2.765 M, unet_256 / batch = 54.414 M: the
# numbers the reference prints when it starts CycleGAN and pix2pix.)
REFERENCE_G = {
    # (name, in/out channels, ngf, norm): count
    ("resnet_9blocks", 3, 64, "instance"): 11378179,
    ("resnet_9blocks", 3, 64, "batch"): 11383427,
    ("resnet_6blocks", 3, 64, "instance"): 7837699,
    ("unet_128", 3, 64, "batch"): 41828995,
    ("unet_128", 3, 64, "instance"): 41825667,
    ("unet_256", 3, 64, "batch"): 54413955,
    ("unet_256", 3, 64, "instance"): 54409603,
    ("resnet_small", 1, 16, "instance"): 269377,
    ("resnet_small", 3, 16, "instance"): 272515,
    ("resnet_small", 1, 16, "batch"): 269921,
    ("resnet_small", 1, 16, "none"): 268833,
    ("unet_32", 1, 16, "batch"): 1042081,
    ("unet_32", 3, 16, "batch"): 1043619,
    ("unet_32", 3, 16, "instance"): 1043299,
    ("unet_32", 1, 16, "none"): 1041153,
}
REFERENCE_D = {
    # (name, input channels (3: CycleGAN, 6: pix2pix's input|output), ndf, norm): count;
    # "n_layers" with n_layers_D = 5
    ("basic", 3, 64, "batch"): 2765633,
    ("basic", 3, 64, "instance"): 2764737,
    ("basic", 6, 64, "batch"): 2768705,
    ("basic", 6, 64, "instance"): 2767809,
    ("n_layers", 3, 64, "batch"): 11156289,
    ("n_layers", 6, 64, "batch"): 11159361,
    ("n_layers", 6, 64, "instance"): 11157441,
    ("pixel", 3, 64, "batch"): 8832,
    ("pixel", 3, 64, "instance"): 8705,
    ("pixel", 6, 64, "batch"): 9024,
    ("pixel", 6, 64, "none"): 8768,
    ("small", 1, 16, "batch"): 42449,
    ("small", 2, 16, "batch"): 42705,
    ("small", 1, 16, "instance"): 42353,
    ("small", 3, 16, "instance"): 42865,
    ("small", 6, 16, "none"): 43537,
}
# The reference's trainable parameter shapes, {shape: how many}, printed in the same venv by
# /tmp/cyclegan_ref/shapes.py (collections.Counter of tuple(p.shape) over net.parameters()).
# Transposed-conv weights are (in, out, k, k) in both frameworks.
REFERENCE_SHAPES = {
    ("G", "resnet_9blocks", 3, 64, "instance"): {
        (3,): 1, (3, 64, 7, 7): 1, (64,): 2, (64, 3, 7, 7): 1, (128,): 2, (128, 64, 3, 3): 2, (256,): 19,
        (256, 128, 3, 3): 2, (256, 256, 3, 3): 18},
    ("G", "unet_256", 3, 64, "batch"): {
        (3,): 1, (64,): 2, (64, 3, 4, 4): 1, (128,): 4, (128, 3, 4, 4): 1, (128, 64, 4, 4): 1, (256,): 4,
        (256, 64, 4, 4): 1, (256, 128, 4, 4): 1, (512,): 16, (512, 128, 4, 4): 1, (512, 256, 4, 4): 1,
        (512, 512, 4, 4): 5, (1024, 256, 4, 4): 1, (1024, 512, 4, 4): 3},
    ("D", "basic", 6, 64, "batch"): {
        (1,): 1, (1, 512, 4, 4): 1, (64,): 1, (64, 6, 4, 4): 1, (128,): 2, (128, 64, 4, 4): 1, (256,): 2,
        (256, 128, 4, 4): 1, (512,): 2, (512, 256, 4, 4): 1},
    ("D", "pixel", 3, 64, "batch"): {
        (1, 128, 1, 1): 1, (64,): 1, (64, 3, 1, 1): 1, (128,): 2, (128, 64, 1, 1): 1},
}


def count(net):
    return sum(int(np.prod(p.shape)) for p in net.trainable_params())


def shapes(net):
    return dict(collections.Counter(tuple(p.shape) for p in net.trainable_params()))


def build(kind, name, channels, width, norm):
    if kind == "G":
        return GENERATORS[name](channels, channels, width, norm)
    return DISCRIMINATORS[name](channels, width, norm, n_layers=5)


@pytest.fixture
def eager():
    """Forward-only checks in PyNative mode (no compile per shape); graph mode restored after."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def rand(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("key", sorted(REFERENCE_G), ids=str)
def test_generator_parameter_counts_equal_reference(key):
    name, channels, ngf, norm = key
    assert count(build("G", name, channels, ngf, norm)) == REFERENCE_G[key]


@pytest.mark.parametrize("key", sorted(REFERENCE_D), ids=str)
def test_discriminator_parameter_counts_equal_reference(key):
    name, channels, ndf, norm = key
    assert count(build("D", name, channels, ndf, norm)) == REFERENCE_D[key]


@pytest.mark.parametrize("key", sorted(REFERENCE_SHAPES), ids=str)
def test_parameter_shapes_equal_reference(key):
    assert shapes(build(*key)) == REFERENCE_SHAPES[key]


def test_small_variants_default_widths():
    """ngf / ndf None take the name's width: 64 for the reference's names, 16 for the small ones."""
    assert count(GENERATORS["resnet_small"](1, 1, None, "instance")) == REFERENCE_G[("resnet_small", 1, 16, "instance")]
    assert count(GENERATORS["unet_32"](3, 3, None, "batch")) == REFERENCE_G[("unet_32", 3, 16, "batch")]
    assert count(DISCRIMINATORS["small"](2, None, "batch")) == REFERENCE_D[("small", 2, 16, "batch")]
    assert count(DISCRIMINATORS["pixel"](3, None, "instance")) == REFERENCE_D[("pixel", 3, 64, "instance")]


def in_tanh_range(x):
    return np.all(np.abs(x.asnumpy()) <= 1.0 + 1e-5)  # MindSpore's CPU tanh overshoots 1 by ~4e-6


def test_full_size_forwards_at_256(eager):
    """Once each at 256x256, batch 1: resnet_9blocks (CycleGAN) and unet_256 (pix2pix) keep the
    size and stay in [-1, 1]; the 70x70 PatchGAN gives 30x30 logits, as the reference."""
    x = rand(1, 3, 256, 256)
    y = ResnetGenerator(3, 3, 64, "instance", n_blocks=9)(x)
    assert y.shape == (1, 3, 256, 256) and in_tanh_range(y)
    y = UnetGenerator(3, 3, 8, 64, "batch")(x)
    assert y.shape == (1, 3, 256, 256) and in_tanh_range(y)
    assert NLayerDiscriminator(6, 64, 3, "batch")(rand(1, 6, 256, 256)).shape == (1, 1, 30, 30)
    assert d_output_size("basic", 256) == 30 and patch_size(3) == 70 and patch_size(2) == 34


@pytest.mark.parametrize("channels, size", [(1, 28), (1, 32), (3, 32)])
def test_small_variants_shapes(eager, channels, size):
    x = rand(2, channels, size, size)
    for norm in ("instance", "batch"):
        y = GENERATORS["resnet_small"](channels, channels, None, norm)(x)
        assert y.shape == (2, channels, size, size) and in_tanh_range(y)
    if size == 32:
        y = GENERATORS["unet_32"](channels, channels, None, "batch")(x)
        assert y.shape == (2, channels, size, size) and in_tanh_range(y)
    side = d_output_size("small", size)
    assert side == {28: 5, 32: 6}[size]
    assert DISCRIMINATORS["small"](2 * channels, None, "batch")(rand(2, 2 * channels, size, size)).shape == \
        (2, 1, side, side)
    assert DISCRIMINATORS["pixel"](channels, None, "instance")(x).shape == (2, 1, size, size)


def test_instance_norm_equals_numpy(graph_mode):
    """Per sample and channel over H, W, biased variance, eps 1e-5; no parameters."""
    x = rand(3, 4, 5, 7).asnumpy() * 3 + 1
    norm = InstanceNorm2d()
    assert not list(norm.get_parameters())
    got = norm(Tensor(x)).asnumpy()
    mean = x.mean(axis=(2, 3), keepdims=True)
    inv_std = 1 / np.sqrt(x.var(axis=(2, 3), keepdims=True) + 1e-5)
    want = (x - mean) * inv_std
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # The gradient of sum(norm(x) * u): inv_std * (u - mean(u) - x_hat * mean(u * x_hat)) per sample and channel.
    u = rand(3, 4, 5, 7, seed=1).asnumpy()

    def weighted_sum(t):
        return (norm(t) * Tensor(u)).sum()
    grad = ms.grad(weighted_sum)(Tensor(x)).asnumpy()
    want_grad = inv_std * (u - u.mean(axis=(2, 3), keepdims=True)
                           - want * (u * want).mean(axis=(2, 3), keepdims=True))
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["eager", "graph_mode"])
@pytest.mark.parametrize("pad", [1, 3])
def test_reflection_pad_equals_numpy(request, mode, pad):
    """Values as np.pad(mode="reflect") (torch's ReflectionPad2d); each input pixel's gradient is the
    sum of the upstream gradient over every output pixel that copied it."""
    request.getfixturevalue(mode)
    x = rand(2, 3, 5, 7).asnumpy()
    layer = ReflectionPad2d(pad)
    got = layer(Tensor(x)).asnumpy()
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="reflect"))
    u = rand(*got.shape, seed=3).asnumpy()

    def weighted_sum(t):
        return (layer(t) * Tensor(u)).sum()
    grad = ms.grad(weighted_sum)(Tensor(x)).asnumpy()
    rows = [abs(i) if i < 5 else 8 - i for i in range(-pad, 5 + pad)]
    cols = [abs(j) if j < 7 else 12 - j for j in range(-pad, 7 + pad)]
    want = np.zeros(x.shape)
    for a, i in enumerate(rows):
        for b, j in enumerate(cols):
            want[:, :, i, j] += u[:, :, a, b]
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="needs sides larger than it"):  # gather would wrap around silently
        layer(Tensor(x[:, :, :pad, :]))


def conv_transpose_numpy(x, w, stride, padding, output_padding):
    """PyTorch's conv_transpose2d (no bias) by scatter-add: full output, then [padding : padding + side]."""
    n, cin, h, wd = x.shape
    k = w.shape[2]
    full = np.zeros((n, w.shape[1], (h - 1) * stride + k, (wd - 1) * stride + k), np.float64)
    for i in range(h):
        for j in range(wd):
            patch = np.einsum("nc,cokl->nokl", x[:, :, i, j], w)
            full[:, :, i * stride:i * stride + k, j * stride:j * stride + k] += patch
    side_h = (h - 1) * stride - 2 * padding + k + output_padding
    side_w = (wd - 1) * stride - 2 * padding + k + output_padding
    return full[:, :, padding:padding + side_h, padding:padding + side_w]


@pytest.mark.parametrize("mode", ["eager", "graph_mode"])
@pytest.mark.parametrize("kernel, padding, output_padding", [(3, 1, 1), (4, 1, 0)])
def test_conv_transpose_equals_pytorch_semantics(request, mode, kernel, padding, output_padding):
    """ResNet's k3 s2 p1 output_padding 1 (7 -> 14) and U-Net's k4 s2 p1, output and input gradient,
    in both modes. MindSpore's own output_padding appends zeros instead of computing the last row and
    column."""
    request.getfixturevalue(mode)
    x = rand(2, 3, 7, 5).asnumpy()
    layer = ConvTranspose2d(3, 4, kernel, 2, padding, output_padding=output_padding, bias=False)
    w = np.random.default_rng(1).standard_normal(layer.weight.shape).astype(np.float32)
    layer.weight.set_data(Tensor(w))
    got = layer(Tensor(x)).asnumpy()
    want = conv_transpose_numpy(x, w, 2, padding, output_padding)
    assert got.shape == want.shape == (2, 4, 14, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # The input gradient of sum(u * layer(x)) is the adjoint: u placed back into the full output,
    # each input pixel collecting its kernel window.
    u = rand(2, 4, 14, 10, seed=2).asnumpy()

    def weighted_sum(t):
        return (layer(t) * Tensor(u)).sum()
    grad = ms.grad(weighted_sum)(Tensor(x)).asnumpy()
    full = np.zeros((2, 4, 6 * 2 + kernel, 4 * 2 + kernel))
    full[:, :, padding:padding + 14, padding:padding + 10] = u
    want_grad = np.zeros(x.shape)
    for i in range(7):
        for j in range(5):
            want_grad[:, :, i, j] = np.einsum("nokl,cokl->nc", full[:, :, 2 * i:2 * i + kernel, 2 * j:2 * j + kernel], w)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-4)


def test_initialisation_and_determinism():
    """init_weights(normal, 0.02): conv weights N(0, 0.02), BatchNorm scale N(1, 0.02), biases and
    shifts 0; the same ms.set_seed gives the same weights."""
    ms.set_seed(3)
    a = GENERATORS["unet_32"](3, 3, None, "batch")
    ms.set_seed(3)
    b = GENERATORS["unet_32"](3, 3, None, "batch")
    ms.set_seed(4)
    c = GENERATORS["unet_32"](3, 3, None, "batch")
    pa, pb, pc = (list(n.trainable_params()) for n in (a, b, c))
    assert [p.name for p in pa] == [p.name for p in pb]
    assert len({p.name for p in pa}) == len(pa)
    for x, y in zip(pa, pb):
        np.testing.assert_array_equal(x.asnumpy(), y.asnumpy())
    assert any(not np.array_equal(x.asnumpy(), y.asnumpy()) for x, y in zip(pa, pc))
    weights = np.concatenate([p.asnumpy().ravel() for p in pa if len(p.shape) == 4])
    assert abs(weights.mean()) < 1e-3 and abs(weights.std() - 0.02) < 1e-3
    gammas = np.concatenate([p.asnumpy() for p in pa if p.name.endswith(".gamma")])
    assert abs(gammas.mean() - 1.0) < 5e-3 and abs(gammas.std() - 0.02) < 5e-3
    zeros = [p for p in pa if p.name.endswith((".beta", ".bias"))]
    assert zeros and all(not p.asnumpy().any() for p in zeros)


def test_structure_follows_reference():
    """Biases exactly where the reference's use_bias puts them, dropout where it puts it."""
    def biases(net):
        return sum(p.name.endswith(".bias") for p in net.trainable_params())
    # ResNet: with instance norm every conv has a bias (3 + 2 n_blocks + 2 + 1); otherwise only the last conv
    assert biases(ResnetGenerator(1, 1, 2, "instance", n_blocks=3)) == 12
    assert biases(ResnetGenerator(1, 1, 2, "batch", n_blocks=3)) == 1
    # U-Net: batch norm -> only the outermost transposed conv
    assert biases(UnetGenerator(1, 1, 7, 2, "batch")) == 1
    assert biases(NLayerDiscriminator(1, 2, 3, "batch")) == 2
    assert biases(NLayerDiscriminator(1, 2, 3, "instance")) == 5
    assert biases(PixelDiscriminator(1, 2, "batch")) == 1
    assert biases(PixelDiscriminator(1, 2, "instance")) == 3

    def dropouts(net):
        return sum(isinstance(c, nn.Dropout) for _, c in net.cells_and_names())
    assert dropouts(UnetGenerator(1, 1, 8, 2, "batch", use_dropout=True)) == 3  # num_downs - 5
    assert dropouts(UnetGenerator(1, 1, 5, 2, "batch", use_dropout=True)) == 0
    assert dropouts(ResnetGenerator(1, 1, 2, "instance", use_dropout=True, n_blocks=4)) == 4
    assert dropouts(ResnetGenerator(1, 1, 2, "instance", n_blocks=4)) == 0
    with pytest.raises(ValueError, match="norm"):
        ResnetGenerator(1, 1, 2, "layer")
    with pytest.raises(ValueError, match="num_downs"):
        UnetGenerator(1, 1, 4, 2)


@pytest.mark.parametrize("name, convs", [("small", 4), ("basic", 5), ("pixel", 3)])
def test_spectral_norm_wraps_every_conv_of_d_and_adds_no_trainable_weight(name, convs):
    """--spectral-norm: each of D's convs inside a SpectralNorm (one non-trainable u each), the
    trainable parameters exactly the reference's."""
    from models.spectral_norm import SpectralNorm
    plain = DISCRIMINATORS[name](2, None, "instance")
    normed = DISCRIMINATORS[name](2, None, "instance", spectral_norm=True)
    wrapped = [c for _, c in normed.cells_and_names() if isinstance(c, SpectralNorm)]
    assert len(wrapped) == convs == sum(isinstance(c, nn.Conv2d) for _, c in plain.cells_and_names())
    assert count(normed) == count(plain)
    assert [p.name.rsplit(".", 1)[1] for p in normed.get_parameters() if not p.requires_grad] == ["u"] * convs
    x = rand(2, 2, 32, 32)
    assert normed(x).shape == plain(x).shape


def test_make_translation_nets_and_size_checks():
    g, d = make_translation_nets("resnet_small", "small", 1, 1, norm="instance", image_size=28)
    assert count(g) == REFERENCE_G[("resnet_small", 1, 16, "instance")]
    assert count(d) == REFERENCE_D[("small", 1, 16, "instance")]  # D judges output_nc channels by default
    g, d = make_translation_nets("unet_32", "small", 1, 1, norm="batch", d_input_nc=2, image_size=(32, 32))
    assert count(g) == REFERENCE_G[("unet_32", 1, 16, "batch")] and count(d) == REFERENCE_D[("small", 2, 16, "batch")]
    assert size_multiple("resnet_9blocks") == 4 and size_multiple("unet_256") == 256 and size_multiple("unet_32") == 32
    with pytest.raises(ValueError, match="divisible by 32"):
        make_translation_nets("unet_32", "small", 1, 1, image_size=28)
    with pytest.raises(ValueError, match="divisible by 4"):
        make_translation_nets("resnet_small", "small", 1, 1, image_size=30)
    with pytest.raises(ValueError, match="no logits"):
        make_translation_nets("resnet_small", "n_layers", 1, 1, n_layers_d=5, image_size=28)
    with pytest.raises(ValueError, match="unknown generator"):
        make_translation_nets("unet_64", "basic", 3, 3)
    with pytest.raises(ValueError, match="unknown discriminator"):
        make_translation_nets("unet_256", "patch", 3, 3)


SMALL = [("resnet_small", "G", 1, 28, "instance"), ("resnet_small", "G", 3, 32, "batch"),
         ("unet_32", "G", 3, 32, "batch"),
         ("unet_32", "G", 1, 32, "instance"), ("small", "D", 2, 28, "batch"), ("pixel", "D", 6, 32, "instance")]


@pytest.mark.parametrize("name, kind, channels, size, norm", SMALL)
def test_graph_mode_forward_backward(graph_mode, name, kind, channels, size, norm):
    """One compiled value_and_grad over every trainable parameter: finite loss and gradients, and
    every weight gets a nonzero one (conv biases right before an instance norm have none: the
    norm's mean subtraction cancels them, in the reference too)."""
    if kind == "G":
        net = GENERATORS[name](channels, channels, None, norm)
    else:
        net = DISCRIMINATORS[name](channels, None, norm)
    net.set_train(True)
    params = net.trainable_params()
    side = size if kind == "G" else d_output_size(name, size)
    x, target = rand(2, channels, size, size), rand(2, channels if kind == "G" else 1, side, side, seed=1)

    def loss_fn(x):
        return ((net(x) - target) ** 2).mean()
    loss, grads = ms.jit(ms.value_and_grad(loss_fn, None, params))(x)
    assert np.isfinite(float(loss.asnumpy()))
    assert len(grads) == len(params)
    for p, g in zip(params, grads):
        g = g.asnumpy()
        assert g.shape == p.shape and np.all(np.isfinite(g)), p.name
        if len(p.shape) == 4:
            assert np.abs(g).max() > 0, p.name


def test_batchnorm_running_stats_move_only_in_training(graph_mode):
    """set_train(True) before the first compile: BatchNorm uses batch statistics and updates its
    running ones; a separately compiled eval forward leaves them alone."""
    net = GENERATORS["unet_32"](1, 1, None, "batch")
    stats = [p for p in net.get_parameters() if "moving_" in p.name]
    assert len(stats) == 2 * 7  # the innermost block's up norm, down and up norms of the three middle blocks
    before = [p.asnumpy().copy() for p in stats]
    x = rand(4, 1, 32, 32) * 2 + 0.5
    net.set_train(False)

    def forward(x):
        return net(x)
    ms.jit(forward)(x)
    assert all(np.array_equal(b, p.asnumpy()) for b, p in zip(before, stats))
    net.set_train(True)
    params = net.trainable_params()

    def loss_fn(x):
        return net(x).mean()
    ms.jit(ms.value_and_grad(loss_fn, None, params))(x)
    assert all(not np.array_equal(b, p.asnumpy()) for b, p in zip(before, stats))


def test_resnet_and_unet_blocks_keep_their_skip_connections():
    """CycleGAN's ResNet block returns x + branch(x); a U-Net block below the outermost returns
    cat(x, branch(x)) on channels (pix2pix's skips): the parameter counts hold without either."""
    x = Tensor(np.random.default_rng(0).normal(size=(2, 4, 8, 8)).astype(np.float32))
    block = ResnetBlock(4, "instance", use_dropout=False, use_bias=True)
    np.testing.assert_allclose(block(x).asnumpy(), (x + block.conv_block(x)).asnumpy(), rtol=1e-6, atol=1e-6)
    inner = UnetSkipConnectionBlock(4, 8, norm="instance", innermost=True)
    out = inner(x).asnumpy()
    assert out.shape == (2, 8, 8, 8)
    np.testing.assert_array_equal(out[:, :4], x.asnumpy())
    np.testing.assert_allclose(out[:, 4:], inner.model(x).asnumpy(), rtol=1e-6, atol=1e-6)
