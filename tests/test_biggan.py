"""BigGAN (models/biggan.py): shapes, spectral norm everywhere StudioGAN has it, class-conditional BN,
hierarchical latent, orthogonal init, parameter counts equal to PyTorch-StudioGAN's, and one D and one
G step at --amp O1 that each move only their own model."""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

from gan.models import make_nets
from gan.steps import gan_forwards
from loops.ema import EMA
from loops.learner import Learner, all_state, declare
from models.biggan import BigGANDiscriminator, BigGANGenerator
from models.spectral_norm import SpectralNorm

# Trainable parameter counts of PyTorch-StudioGAN's BigGAN for CIFAR-10 (commit 947b35e9, src/configs/
# CIFAR10/BigGAN.yaml over src/config.py defaults: img_size 32, z_dim 80, g_shared_dim 128, g_conv_dim =
# d_conv_dim = 96, apply_g_sn, apply_d_sn, attn_g_loc [2], attn_d_loc [1], g_cond_mtd cBN, d_cond_mtd PD,
# g_init = d_init ortho). Obtained by building src/models/big_resnet.py's Generator and Discriminator with
# src/utils/ops.py in PyTorch 2.13 (modules as Configurations.define_modules picks them, utils.misc stubbed)
# and summing p.numel() over parameters() with requires_grad (spectral norm's u, v and BN statistics are
# buffers there). The unconditional pair: the same with g_cond_mtd = d_cond_mtd = "W/O".
STUDIOGAN_G_PARAMS = 9_416_196       # num_classes 10
STUDIOGAN_D_PARAMS = 2_415_170       # num_classes 10
STUDIOGAN_G_PARAMS_UNCOND = 8_825_092
STUDIOGAN_D_PARAMS_UNCOND = 2_413_250

Z, WIDTH, SHAPE = 8, 8, (3, 32, 32)  # tiny: 32 G channels, 16 D channels, z in 4 chunks of 2


def count(cell):
    return sum(int(np.prod(p.shape)) for p in cell.trainable_params())


def inputs(n=4, z_dim=Z, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, z_dim)).astype(np.float32), rng.integers(0, classes, n).astype(np.int32)


def orthonormality_error(weight):
    """max |W W^T - I| (or W^T W, the smaller side) for W = weight flattened to (out, -1)."""
    w = weight.asnumpy().reshape(weight.shape[0], -1).astype(np.float64)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    return np.abs(gram - np.eye(gram.shape[0])).max()


@pytest.fixture(scope="module")
def generators():
    """{classes: G}: a 3-channel conditional and a 1-channel unconditional G, shared by the tests below
    so that each compiles its forward graph once."""
    return {3: BigGANGenerator(Z, (3, 32, 32), width=WIDTH, num_classes=3),
            0: BigGANGenerator(Z, (1, 32, 32), width=WIDTH, num_classes=0)}


def generate(G, z, y=None):
    return G(Tensor(z), None if y is None else Tensor(y)).asnumpy()


@pytest.mark.parametrize("classes, pack", [(3, 1), (0, 2)])
def test_output_shapes(graph_mode, generators, classes, pack):
    G = generators[classes]
    channels = 3 if classes else 1
    D = BigGANDiscriminator((channels * pack, 32, 32), width=WIDTH, num_classes=classes)  # PacGAN packing
    z, y = inputs()
    x = generate(G, z, y if classes else None)
    assert x.shape == (4, channels, 32, 32) and np.abs(x).max() <= 1.0
    packed = Tensor(x.reshape(4 // pack, channels * pack, 32, 32))
    assert D(packed, Tensor(y[:4 // pack]) if classes else None).shape == (4 // pack,)


def test_refuses_other_sizes_and_indivisible_latents():
    with pytest.raises(ValueError, match="32x32"):
        BigGANGenerator(Z, (1, 28, 28), width=WIDTH)
    with pytest.raises(ValueError, match="32x32"):
        BigGANDiscriminator((1, 8, 8), width=WIDTH)
    with pytest.raises(ValueError, match="multiple of 4"):
        BigGANGenerator(10, SHAPE, width=WIDTH)


@pytest.mark.parametrize("net", ["g", "d"])
def test_spectral_norm_on_every_weight_layer(net):
    """Every conv, dense and embedding sits inside a SpectralNorm, except G's shared class embedding
    (StudioGAN builds it with ops.embedding, not sn_embedding). spectral_norm=False does not turn it off."""
    cell = (BigGANGenerator(Z, SHAPE, width=WIDTH, num_classes=3) if net == "g"
            else BigGANDiscriminator(SHAPE, width=WIDTH, num_classes=3, spectral_norm=False))
    cells = dict(cell.cells_and_names())
    layers = [name for name, c in cells.items() if isinstance(c, (nn.Conv2d, nn.Dense, nn.Embedding))]
    plain = [name for name in layers
             if not (name.endswith(".layer") and isinstance(cells[name[:-len(".layer")]], SpectralNorm))]
    assert plain == (["shared"] if net == "g" else [])
    # G: linear0, 3 blocks x (3 convs + 2 cBNs x (gain, bias)), 4 attention convs, conv_out, shared;
    # D: 3 + 3 + 2 + 2 block convs, 4 attention convs, linear, embedding
    assert len(layers) == (28 if net == "g" else 16)


def test_class_label_changes_the_image_through_conditional_bn(graph_mode, generators):
    G = generators[3]
    z, _ = inputs()
    a = generate(G, z, np.zeros(4, np.int32))
    b = generate(G, z, np.ones(4, np.int32))
    assert np.abs(a - b).mean() > 1e-3
    np.testing.assert_array_equal(a, generate(G, z, np.zeros(4, np.int32)))


@pytest.mark.parametrize("classes", [0, 3])
def test_every_latent_chunk_changes_the_image(graph_mode, generators, classes):
    """Chunk 0 feeds the first dense layer, chunk k (k = 1..3) only block k-1's conditional BNs."""
    G = generators[classes]
    z, y = inputs()
    y = y if classes else None
    base = generate(G, z, y)
    chunk = Z // 4
    for k in range(4):
        moved = z.copy()
        moved[:, k * chunk:(k + 1) * chunk] += 1.0
        assert np.abs(generate(G, moved, y) - base).mean() > 1e-4, f"chunk {k}"
    assert G.linear0.layer.weight.shape[1] == chunk
    assert G.block2.bn1.gain.layer.weight.shape[1] == chunk + (128 if classes else 0)


def test_orthogonal_initialisation():
    G = BigGANGenerator(Z, SHAPE, width=WIDTH, num_classes=3)
    D = BigGANDiscriminator(SHAPE, width=WIDTH, num_classes=3)
    weights = [G.linear0.layer.weight, G.block0.conv1.layer.weight, G.block1.skip.layer.weight,
               G.block2.bn2.gain.layer.weight, G.attention.g.layer.weight, G.conv_out.layer.weight,
               G.shared.embedding_table, D.block0.conv1.layer.weight, D.block3.conv2.layer.weight,
               D.attention.theta.layer.weight, D.linear.layer.weight, D.embed.layer.embedding_table]
    for w in weights:
        assert orthonormality_error(w) < 1e-4, w.name
    assert not G.block0.conv1.layer.bias.asnumpy().any() and not D.linear.layer.bias.asnumpy().any()


def test_parameter_counts_equal_studiogan():
    assert count(BigGANGenerator(80, (3, 32, 32), width=96, num_classes=10)) == STUDIOGAN_G_PARAMS
    assert count(BigGANDiscriminator((3, 32, 32), width=96, num_classes=10)) == STUDIOGAN_D_PARAMS
    assert count(BigGANGenerator(80, (3, 32, 32), width=96)) == STUDIOGAN_G_PARAMS_UNCOND
    assert count(BigGANDiscriminator((3, 32, 32), width=96)) == STUDIOGAN_D_PARAMS_UNCOND


def snapshot(cell):
    return {p.name: p.asnumpy().copy() for p in cell.trainable_params()}


def moved(before, cell):
    return {name for name, value in snapshot(cell).items() if not np.array_equal(value, before[name])}


def test_d_step_and_g_step_move_only_their_own_model_at_amp_o1(graph_mode):
    """Declared as the trainer declares them (Learner, the g_ema copy, gan_forwards) at --amp O1, so
    every BigGAN layer kind (self-attention, the shared class embedding, conditional BN) also runs
    under float16 casts: this is BigGAN's row of test_registries' amp matrix too (the level that once
    had its own bug, a name clash between G and its EMA copy). Each step moves its own model only,
    float32 master weights."""
    G, D, E = make_nets("biggan", Z, SHAPE, WIDTH, num_classes=3)
    g = Learner("g", G, lr=1e-2, betas=(0.5, 0.999), amp="O1")
    d = Learner("d", D, lr=1e-2, betas=(0.5, 0.999), amp="O1")
    g_ema = declare("g_ema", E, amp="O1")
    EMA(g.net, g_ema, 0.9).copy()
    d_forward, g_forward, d_layout, g_layout = gan_forwards(g.net, d.net, "hinge", conditional=True)
    d_step, g_step = d.step(d_forward, has_aux=True), g.step(g_forward)
    names = [p.name for p in all_state(g, d, g_ema)]
    assert len(names) == len(set(names)) and all(n.split(".")[0] in ("g", "d", "g_ema") for n in names)
    # O1 casts per op: the names (and so checkpoints) are those of float32 training
    assert [p.name for p in g_ema.get_parameters()] == [p.name for p in declare("g_ema", make_nets(
        "biggan", Z, SHAPE, WIDTH, num_classes=3)[2]).get_parameters()]
    rng = np.random.default_rng(0)
    real = rng.uniform(-1, 1, (4,) + SHAPE).astype(np.float32)
    z, y = inputs()
    # sigma = 0 gates self-attention at the start: its four 1x1 convs get exactly zero gradient in the
    # first step (only sigma moves), as in StudioGAN. D's output bias has hinge gradient
    # (#fakes with D > -1 - #reals with D < 1) / N, zero when the counts tie. Everything else moves.
    gated = {f"{net}.attention.{conv}.layer.weight" for net in ("g", "d") for conv in ("theta", "phi", "g", "out")}
    gated.add("d.linear.layer.bias")
    G, D = g.net, d.net
    g0, d0 = snapshot(G), snapshot(D)
    bn_mean = G.block0.bn1.bn.moving_mean.asnumpy().copy()
    loss_d = float(d_step(*map(Tensor.from_numpy, d_layout.pack(real=real, z=z, y_real=y, y_fake=y)))[0].asnumpy())
    assert not moved(g0, G)
    assert set(d0) - gated <= moved(d0, D)
    d1 = snapshot(D)
    loss_g = float(g_step(*map(Tensor.from_numpy, g_layout.pack(z=z, y_fake=y)))[0].asnumpy())
    assert not moved(d1, D)
    assert moved(g0, G) == set(g0) - gated
    assert np.isfinite(loss_d) and np.isfinite(loss_g)
    # float32 master weights and optimizer moments (Adam's step counter is int32)
    assert all(p.dtype == ms.float32 for p in all_state(g, d, g_ema) if p.name.split(".")[-1] != "state_step")
    assert not np.array_equal(bn_mean, G.block0.bn1.bn.moving_mean.asnumpy())  # G ran in training mode
