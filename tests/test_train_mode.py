"""Models train in training mode and sample in eval mode: BatchNorm uses (and updates) batch statistics
in the steps, spectral norm advances its power iteration, the compiled sampler uses running statistics."""
import mindspore as ms
import numpy as np
from mindspore import Tensor

from gan.models import make_nets, make_sampler
from gan.steps import gan_forwards
from loops.learner import Learner, declare
from models.spectral_norm import SpectralNorm


def digits_gan(spectral_norm, num_classes=0, lr=2e-4):
    """G and D declared as train_gan declares them (Learners), G_ema as its EMA copy."""
    ms.set_seed(0)  # the same initial weights whichever tests ran before in this process
    G, D, E = make_nets("dcgan", 8, (1, 8, 8), 8, num_classes=num_classes, spectral_norm=spectral_norm)
    g, d = Learner("g", G, lr=lr, betas=(0.5, 0.999)), Learner("d", D, lr=lr, betas=(0.5, 0.999))
    d_forward, g_forward, _, _ = gan_forwards(g.net, d.net, "hinge", conditional=num_classes > 0)
    return g.net, d.net, declare("g_ema", E), d.step(d_forward, has_aux=True), g.step(g_forward)


def train(d_step, g_step, steps, labels=False, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        real = Tensor(rng.uniform(-1, 1, (16, 1, 8, 8)).astype(np.float32))
        z = Tensor(rng.standard_normal((16, 8)).astype(np.float32))
        y = (Tensor(rng.integers(0, 10, 16).astype(np.int32)),) if labels else ()
        d_step(real, z, *(y + y))
        g_step(z, *y)


def test_batchnorm_running_statistics_move_and_outputs_are_batch_normalised(graph_mode):
    G, _, _, d_step, g_step = digits_gan(spectral_norm=False)
    stats = {p.name: p.asnumpy().copy() for p in G.get_parameters() if "moving" in p.name}
    assert len(stats) == 6  # 3 BatchNorms x (mean, variance)
    train(d_step, g_step, 3)
    for p in G.get_parameters():
        if p.name in stats:  # moving_mean starts at 0, moving_variance at 1: both must have moved
            assert not np.allclose(p.asnumpy(), stats[p.name]), p.name
    # in training mode bn0 normalises with the batch's own statistics: per-channel mean ~0, var ~1
    z = Tensor(np.random.default_rng(5).standard_normal((64, 8)).astype(np.float32))
    h = G.project(z).reshape(64, G.base, G.start, G.start)
    out = G.bn0(h).asnumpy()
    gamma, beta = G.bn0.gamma.asnumpy(), G.bn0.beta.asnumpy()
    normalised = (out - beta[None, :, None, None]) / gamma[None, :, None, None]
    np.testing.assert_allclose(normalised.mean(axis=(0, 2, 3)), 0, atol=1e-4)
    np.testing.assert_allclose(normalised.var(axis=(0, 2, 3)), 1, atol=1e-2)


def sn_layers(cell):
    return [c for _, c in cell.cells_and_names() if isinstance(c, SpectralNorm)]


def test_spectral_norm_u_moves_and_sigma_tracks_the_svd_of_the_trained_weight(graph_mode):
    _, D, _, d_step, g_step = digits_gan(spectral_norm=True, num_classes=10)
    layers = sn_layers(D)
    assert len(layers) == 5  # 3 convs, the head, and the projection embedding (Miyato & Koyama)
    u0 = [layer.u.asnumpy().copy() for layer in layers]
    train(d_step, g_step, 40, labels=True)
    for layer, before in zip(layers, u0):
        w = layer.weight().asnumpy()
        w = w.reshape(w.shape[0], -1)
        if w.shape[0] > 1:  # a one-row weight (the head) has u = +-1 always
            assert not np.allclose(layer.u.asnumpy(), before), layer.u.name
        # sigma from the persistent u (what a forward pass uses) vs the trained weight's true norm
        u = layer.u.asnumpy()
        sigma = np.linalg.norm(u @ w)
        top = np.linalg.svd(w, compute_uv=False)[0]
        assert abs(sigma - top) / top < 1e-2, (layer.u.name, sigma, top)


def test_sampler_runs_in_eval_mode(graph_mode):
    """The sampler's BatchNorms use running statistics: a sample does not depend on its batch-mates."""
    G, _, E, d_step, g_step = digits_gan(spectral_norm=False)
    train(d_step, g_step, 2)
    sample = make_sampler(G)
    z = np.random.default_rng(3).standard_normal((32, 8)).astype(np.float32)
    whole = sample(Tensor(z)).asnumpy()
    half = sample(Tensor(z[:16].copy())).asnumpy()
    np.testing.assert_allclose(half, whole[:16], rtol=1e-5, atol=1e-6)
