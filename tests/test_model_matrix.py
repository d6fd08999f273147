"""Architecture x spectral norm x (conditional, pack), every pair of settings at least once, in a tiny
in-process run each: D and G steps compile, give finite losses, and move their own model. (The
--amp levels are tests/test_registries.py's matrix.)"""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from gan.models import build_models
from gan.steps import make_gan_steps
from loops.optim import make_optimizer

# all pairs, not all 12 triples: each case is a compile of ~5 s, and a defect that needs three settings
# at once to show (one architecture, spectral norm, packing) would be a new kind of bug; every pair
# (arch, sn), (arch, cond/pack) and (sn, cond/pack) appears below
CASES = [("mlp", False, False, 1), ("mlp", True, False, 2), ("mlp", False, True, 1),
         ("dcgan", True, False, 1), ("dcgan", False, False, 2), ("dcgan", True, True, 1)]


def tiny_steps(arch, sn=False, cond=False, pack=1):
    shape = (2,) if arch == "mlp" else (1, 8, 8)
    # seeded: with width 8 and 8 samples, an unlucky init leaves a ReLU unit dead for the whole batch,
    # and its weights rightly get no gradient (failed once in the full suite unseeded; seed 0 does it
    # in one case, seeds 1-3 in none)
    ms.set_seed(1)
    G, D, _ = build_models(arch, 4, shape, 8, num_classes=3 if cond else 0, pack_size=pack, spectral_norm=sn)
    opt_g = make_optimizer("adam", G.trainable_params(), 1e-2, "g.", (0.5, 0.999))
    opt_d = make_optimizer("adam", D.trainable_params(), 1e-2, "d.", (0.5, 0.999))
    d_step, g_step = make_gan_steps(G, D, "hinge", opt_g, opt_d, pack_size=pack, conditional=cond)
    rng = np.random.default_rng(0)
    real = Tensor(rng.uniform(-1, 1, (8,) + shape).astype(np.float32))
    z = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = (Tensor(rng.integers(0, 3, 8).astype(np.int32)),) if cond else ()
    return G, D, lambda: d_step(real, z, *(y + y)), lambda: g_step(z, *y)


def weights(cell):
    return [p.asnumpy().copy() for p in cell.trainable_params()]


@pytest.mark.parametrize("arch, sn, cond, pack", CASES)
def test_every_model_combination_trains(graph_mode, arch, sn, cond, pack):
    G, D, d, g = tiny_steps(arch, sn, cond, pack)
    d0, g0 = weights(D), weights(G)
    loss_d = float(d()[0].asnumpy())
    assert all(np.array_equal(a, b) for a, b in zip(g0, weights(G)))
    moved_d = [not np.array_equal(a, b) for a, b in zip(d0, weights(D))]
    loss_g = float(g()[0].asnumpy())
    moved_g = [not np.array_equal(a, b) for a, b in zip(g0, weights(G))]
    assert np.isfinite(loss_d) and np.isfinite(loss_g)
    assert sum(moved_d) >= len(moved_d) - 1 and sum(moved_g) >= len(moved_g) - 1  # Adam moves all but at most one


@pytest.mark.parametrize("arch, shape", [("dcgan", (1, 8, 8)), ("sngan", (3, 32, 32)), ("biggan", (3, 32, 32))])
def test_image_generators_end_in_the_image_range(graph_mode, arch, shape):
    """Images live in [-1, 1] (the data's range): with a huge z the output nears the bounds
    and never passes them (a generator that lost its tanh fails)."""
    from models import ARCHS
    ms.set_seed(0)
    G = ARCHS[arch][0](8, shape, width=8)
    G.set_train(False)
    z = Tensor(100 * np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
    out = G(z).asnumpy()
    # (MindSpore's CPU tanh may overshoot 1 by ~1e-5, docs/traps.md)
    assert out.shape == (4,) + shape and 0.9 < np.abs(out).max() <= 1 + 1e-4, np.abs(out).max()
