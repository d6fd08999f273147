"""SNGAN / cGAN-PD ResNets (models/resnet.py): shapes at 32/48/64, spectral norm on every D layer,
conditional BatchNorm driven by the label, parameter counts equal to mimicry's, the same function
as the PyTorch twin of bench/bench_arch.py, and one D and one G step that each move their own model."""
import os

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

from gan.models import make_nets
from gan.steps import gan_forwards
from loops.learner import Learner, all_state
from models import ARCHS
from models.resnet import ConditionalBatchNorm2d, SNGANDiscriminator, SNGANGenerator
from models.spectral_norm import SpectralNorm

# Trainable parameter counts of kwotsin/mimicry (commit a7fda06), from its own definitions
# (torch_mimicry/nets/sngan/sngan_{32,48,64}.py, nets/cgan_pd/cgan_pd_32.py, modules/) built in
# PyTorch 2.13 and counted as sum(p.numel() for p in net.parameters()) (all require grad; spectral
# norm's weight_orig counts once, its u / v / sigma are buffers; BatchNorm affine=False has none):
MIMICRY_COUNTS = {
    # (image size, classes): (G, D)
    # SNGANGenerator32(nz=128, ngf=256), SNGANDiscriminator32(ndf=128)
    (32, 0): (4276739, 1053825),
    # SNGANGenerator48(nz=128, ngf=512), SNGANDiscriminator48(ndf=1024)
    (48, 0): (4878083, 10141441),
    # SNGANGenerator64(nz=128, ngf=1024), SNGANDiscriminator64(ndf=1024)
    (64, 0): (12220675, 10141441),
    # CGANPDGenerator32(num_classes=10, nz=128, ngf=256), CGANPDDiscriminator32(num_classes=10, ndf=128)
    (32, 10): (4304387, 1055105),
}


@pytest.fixture
def eager():
    """Forward-only checks run in PyNative mode: no compile per shape (the steps below compile every
    layer kind in graph mode). Graph mode is restored after."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def count(cell):
    return sum(int(np.prod(p.shape)) for p in cell.trainable_params())


def test_registered():
    assert ARCHS["sngan"] == (SNGANGenerator, SNGANDiscriminator)


@pytest.mark.parametrize("size, classes", sorted(MIMICRY_COUNTS))
def test_parameter_counts_equal_mimicry(size, classes):
    """At the default width (128) and z 128, every published size: mimicry's counts. Spectral
    norm's u and the affine-free BatchNorm inside conditional BN are not trainable."""
    G = SNGANGenerator(128, (3, size, size), num_classes=classes)
    D = SNGANDiscriminator((3, size, size), num_classes=classes)
    assert (count(G), count(D)) == MIMICRY_COUNTS[(size, classes)]
    assert all(not p.requires_grad for p in D.get_parameters() if p.name.endswith(".u"))


@pytest.mark.parametrize("size", [32, 48, 64])
@pytest.mark.parametrize("channels", [1, 3])
def test_output_shapes(eager, size, channels):
    G = SNGANGenerator(4, (channels, size, size), width=4)
    D = SNGANDiscriminator((channels, size, size), width=4)
    G.set_train(True)
    D.set_train(True)
    x = G(Tensor(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)))
    assert x.shape == (2, channels, size, size)
    assert np.all(np.abs(x.asnumpy()) <= 1.0 + 1e-5)  # MindSpore's CPU tanh overshoots 1 by ~4e-6
    assert D(x).shape == (2,)


def test_other_sizes_and_packed_inputs(eager):
    """8x8 digits and 28x28 MNIST get the 32x32 layout; D takes C x pack channels."""
    for size in (8, 28):
        G = SNGANGenerator(4, (1, size, size), width=4)
        D = SNGANDiscriminator((2, size, size), width=4)
        x = G(Tensor(np.zeros((2, 4), np.float32)))
        assert x.shape == (2, 1, size, size)
        assert D(x.reshape(1, 2, size, size)).shape == (1,)
    with pytest.raises(ValueError, match="divisible by 4"):
        SNGANGenerator(4, (1, 30, 30), width=4)


@pytest.mark.parametrize("size", [32, 48, 64])
def test_every_discriminator_weight_is_spectrally_normalised(size):
    """Every conv, dense and embedding of D sits inside a SpectralNorm, also when built with
    spectral_norm=False (it is part of the architecture); G has none."""
    for spectral_norm in (False, True):
        D = SNGANDiscriminator((3, size, size), width=4, num_classes=3, spectral_norm=spectral_norm)
        cells = dict(D.cells_and_names())
        weighted = [name for name, c in cells.items() if isinstance(c, (nn.Conv2d, nn.Dense, nn.Embedding))]
        # 32: 3 + 3 + 2 + 2 block convs (the last two blocks keep their size: identity shortcuts);
        # 48, 64: 3 + 4 x 3; plus the head and the class embedding
        assert len(weighted) == {32: 12, 48: 17, 64: 17}[size]
        for name in weighted:
            parent, _, attr = name.rpartition(".")
            assert attr == "layer" and isinstance(cells[parent], SpectralNorm), name
    G = SNGANGenerator(4, (3, size, size), width=4, num_classes=3)
    assert not any(isinstance(c, SpectralNorm) for _, c in G.cells_and_names())


def test_conditional_bn_uses_the_label(eager):
    """cGAN-PD's G: every block's BatchNorm is conditional; same z with another label gives another
    image, and the gradient reaches exactly the label's rows of the gamma and beta tables."""
    G = SNGANGenerator(4, (3, 32, 32), width=4, num_classes=3)
    cbn = [c for _, c in G.cells_and_names() if isinstance(c, ConditionalBatchNorm2d)]
    assert len(cbn) == 6  # 3 blocks x 2
    G.set_train(False)  # running statistics: each sample's output depends on its own z and y only
    z = Tensor(np.tile(np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32), (2, 1)))
    out = G(z, Tensor(np.array([0, 1], np.int32))).asnumpy()
    assert np.abs(out[0] - out[1]).max() > 1e-5
    G.set_train(True)
    tables = [t for c in cbn for t in (c.gamma.embedding_table, c.beta.embedding_table)]
    r = Tensor(np.random.default_rng(1).standard_normal((4, 3, 32, 32)).astype(np.float32))

    def forward(z, y):
        return (G(z, y) * r).sum()
    z = Tensor(np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32))
    grads = ms.grad(forward, grad_position=None, weights=tables)(z, Tensor(np.array([0, 2, 0, 2], np.int32)))
    for g in grads:
        g = np.abs(g.asnumpy())
        assert g[0].max() > 0 and g[2].max() > 0 and g[1].max() == 0  # label 1 is not in the batch


RULES = [(".moving_mean", ".running_mean"), (".moving_variance", ".running_var"),
         (".layer.embedding_table", ".weight_orig"), (".embedding_table", ".weight"), (".layer.weight", ".weight_orig"),
         (".layer.bias", ".bias"), (".u", ".weight_u"), (".gamma", ".weight"), (".beta", ".bias")]


def copy_into_torch(net, twin):
    """Our parameters (and spectral norm's u) into the PyTorch twin, by name."""
    import torch
    state, done = twin.state_dict(), set()
    for p in net.get_parameters():
        name = next((p.name[:-len(a)] + b for a, b in RULES if p.name.endswith(a)), p.name)
        if name not in state:  # the affine-free BatchNorm's fixed gamma / beta
            assert not p.requires_grad, p.name
            continue
        state[name].copy_(torch.from_numpy(p.asnumpy()).reshape(state[name].shape))
        done.add(name)
    assert all(k.endswith(("weight_v", "num_batches_tracked")) for k in set(state) - done)


TWIN_CASES = [(32, 0), (48, 3), (64, 0), (32, 3)]
TWIN_OUTPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "twin_outputs", "sngan_twin.npz")


def seeded_sngan(size, classes):
    """Width-4 G and D with every parameter drawn from a numpy Generator (the same on every machine),
    in training mode, and the inputs of one forward."""
    G = SNGANGenerator(6, (3, size, size), width=4, num_classes=classes)
    D = SNGANDiscriminator((3, size, size), width=4, num_classes=classes)
    rng = np.random.default_rng([size, classes])
    for net in (G, D):
        for p in net.get_parameters():
            if p.requires_grad or p.name.endswith(".u"):  # fixed BatchNorm gamma / beta and moving stats stay
                p.set_data(Tensor(0.2 * rng.standard_normal(p.shape).astype(np.float32)))
        net.set_train(True)
    rng = np.random.default_rng(0)
    z = rng.standard_normal((4, 6)).astype(np.float32)
    y = rng.integers(0, max(classes, 1), 4).astype(np.int32)
    return G, D, z, y


def ours_forward(size, classes):
    G, D, z, y = seeded_sngan(size, classes)
    label = Tensor(y) if classes else None
    x = G(Tensor(z), label).asnumpy()
    return x, D(Tensor(x), label).asnumpy()


def twin_forward(size, classes):
    """The same forward in bench/bench_arch.py's PyTorch twin (itself checked, when written, to give
    bit-identical outputs to mimicry's modules), on our weights and u."""
    import torch
    from bench.bench_arch import sngan_twin
    G, D, z, y = seeded_sngan(size, classes)
    tG, tD = sngan_twin(6, (3, size, size), 4, classes)
    copy_into_torch(G, tG)
    copy_into_torch(D, tD)
    label = torch.from_numpy(y).long() if classes else None
    with torch.no_grad():
        x = tG(torch.from_numpy(z), label).numpy()
        return x, tD(torch.from_numpy(x), label).numpy()


@pytest.mark.parametrize("size, classes", TWIN_CASES)
def test_same_function_as_the_pytorch_twin(eager, size, classes):
    """One training-mode forward (batch statistics, one power iteration) of G and of D gives the
    PyTorch twin's outputs, stored in tests/twin_outputs/ (written by `PYTHONPATH=. python tests/test_sngan.py`
    where torch is installed), so the check runs without torch: the speed comparison times the same
    network. D is fed the twin's images, so each model is compared on its own."""
    stored = np.load(TWIN_OUTPUTS)
    x, _ = ours_forward(size, classes)
    np.testing.assert_allclose(x, stored[f"x_{size}_{classes}"], atol=1e-3)
    G, D, z, y = seeded_sngan(size, classes)
    logits = D(Tensor(stored[f"x_{size}_{classes}"]), Tensor(y) if classes else None).asnumpy()
    np.testing.assert_allclose(logits, stored[f"logits_{size}_{classes}"], rtol=1e-4, atol=1e-4)


def test_stored_twin_outputs_are_what_the_live_twin_computes(eager):
    """Where torch is installed (CI installs none), the stored outputs equal a fresh twin run."""
    pytest.importorskip("torch")
    stored = np.load(TWIN_OUTPUTS)
    for size, classes in TWIN_CASES:
        x, logits = twin_forward(size, classes)
        np.testing.assert_allclose(x, stored[f"x_{size}_{classes}"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(logits, stored[f"logits_{size}_{classes}"], rtol=1e-5, atol=1e-5)


def weights(cell):
    return {p.name: p.asnumpy().copy() for p in cell.trainable_params()}


@pytest.mark.parametrize("classes, amp", [(0, "O0"), (3, "O1")])
def test_one_d_step_and_one_g_step_move_their_own_model(graph_mode, classes, amp):
    """Declared and compiled as the trainer does (Learner, gan_forwards), at 8x8: the 32x32 layout with
    one G block instead of three, the same layer kinds, a shorter compile (~5 s per step on CPU). The
    conditional case runs at --amp O1 (float16 casts per op): SNGAN's row of test_registries' amp matrix."""
    size = 8
    ms.set_seed(0)  # the same initial weights whichever tests ran before in this process (a dead ReLU
    # channel in D's last block would leave its conv bias with an exactly zero gradient)
    G, D, _ = make_nets("sngan", 4, (3, size, size), 4, num_classes=classes)
    g = Learner("g", G, lr=2e-4, betas=(0.0, 0.9), amp=amp)
    d = Learner("d", D, lr=2e-4, betas=(0.0, 0.9), amp=amp)
    G, D = g.net, d.net
    d_forward, g_forward, _, _ = gan_forwards(G, D, "hinge", conditional=classes > 0)
    d_step, g_step = d.step(d_forward, has_aux=True), g.step(g_forward)
    names = [p.name for p in all_state(g, d)]
    assert len(names) == len(set(names)) and all(n.split(".")[0] in ("g", "d") for n in names)
    rng = np.random.default_rng(0)
    real = Tensor(rng.uniform(-1, 1, (4, 3, size, size)).astype(np.float32))
    z = Tensor(rng.standard_normal((4, 4)).astype(np.float32))
    y = (Tensor(rng.integers(0, 3, 4).astype(np.int32)),) if classes else ()
    g0, d0 = weights(G), weights(D)
    u0 = [p.asnumpy().copy() for p in D.get_parameters() if p.name.endswith(".u")]
    loss_d = float(d_step(real, z, *(y + y))[0].asnumpy())
    g1, d1 = weights(G), weights(D)
    loss_g = float(g_step(z, *y)[0].asnumpy())
    g2, d2 = weights(G), weights(D)
    assert np.isfinite(loss_d) and np.isfinite(loss_g)
    assert all(np.array_equal(g0[k], g1[k]) for k in g0) and all(np.array_equal(d1[k], d2[k]) for k in d1)
    # every D weight moves, but maybe the head's bias: its hinge gradient, frac(fake > -1) - frac(real < 1),
    # is exactly 0 while every logit is inside the margin (at the start, all are)
    # and a conv bias may stay put too when its channel is dead after the ReLU for this whole tiny batch;
    # every weight matrix must move, and most biases
    stuck_d = [k for k in d0 if np.array_equal(d0[k], d1[k])]
    assert all(k.endswith(".bias") for k in stuck_d) and len(stuck_d) <= 2, stuck_d
    # every G weight moves but the biases of convs right before a BatchNorm (their gradient is ~0)
    stuck = [k for k in g1 if np.array_equal(g1[k], g2[k])]
    assert all(k.endswith("c1.bias") for k in stuck), stuck
    # spectral norm's power iteration ran (training mode; the head's u has one entry: always 1)
    u1 = [p.asnumpy() for p in D.get_parameters() if p.name.endswith(".u")]
    assert all(not np.array_equal(a, b) for a, b in zip(u0, u1) if a.size > 1)
    assert all(p.dtype == ms.float32 for p in G.trainable_params() + D.trainable_params())  # master weights


if __name__ == "__main__":  # write the PyTorch twin's outputs (needs torch): PYTHONPATH=. python tests/test_sngan.py
    ms.set_context(mode=ms.PYNATIVE_MODE)
    arrays = {}
    for size, classes in TWIN_CASES:
        arrays[f"x_{size}_{classes}"], arrays[f"logits_{size}_{classes}"] = twin_forward(size, classes)
    os.makedirs(os.path.dirname(TWIN_OUTPUTS), exist_ok=True)
    np.savez_compressed(TWIN_OUTPUTS, **arrays)
    print(f"wrote {TWIN_OUTPUTS}: {sorted(arrays)}")
