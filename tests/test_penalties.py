"""R1, WGAN-GP and weight clipping against their formulas: exact values on linear and nonlinear critics
(numpy references), per packed D input under PacGAN, lazy R1 through DiffAugment; D's loss on the
right logits."""
import numpy as np
import pytest
from mindspore import Tensor, nn, ops

from gan.steps import make_gan_steps
from loops.optim import make_optimizer


class LinearCritic(nn.Cell):
    """D(x) = <w, flatten(x)> + b: its input gradient is w for every sample."""

    def __init__(self, features, seed, norm=3.0):
        super().__init__()
        w = np.random.default_rng(seed).normal(size=(1, features))
        w = (norm * w / np.linalg.norm(w)).astype(np.float32)  # ||w|| = 3 by default: far from GP's target
        self.dense = nn.Dense(features, 1, weight_init=Tensor(w), bias_init="zeros")

    def construct(self, x, y=None):
        return self.dense(x.reshape(x.shape[0], -1)).squeeze(-1)


class TanhCritic(nn.Cell):
    """D(x) = <v, tanh(W flatten(x) + c)>: its input gradient W^T (v * (1 - tanh^2)) varies with x,
    so a penalty taken at the wrong points (reals vs interpolates vs fakes) gives another value."""

    def __init__(self, features, seed, hidden=6):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.w = rng.normal(size=(hidden, features)).astype(np.float32)
        self.c = rng.normal(size=(hidden,)).astype(np.float32)
        self.v = rng.normal(size=(1, hidden)).astype(np.float32)
        self.hidden = nn.Dense(features, hidden, weight_init=Tensor(self.w), bias_init=Tensor(self.c))
        self.out = nn.Dense(hidden, 1, weight_init=Tensor(self.v), bias_init="zeros", has_bias=False)

    def construct(self, x, y=None):
        return self.out(ops.tanh(self.hidden(x.reshape(x.shape[0], -1)))).squeeze(-1)

    def numpy_input_grad(self, x):
        """d D / d x per row of the (n, features) array x."""
        pre = x @ self.w.T + self.c
        return (self.v * (1 - np.tanh(pre) ** 2)) @ self.w


class ConstantGenerator(nn.Cell):
    def __init__(self, shape):
        super().__init__()
        w = np.random.default_rng(7).normal(size=(int(np.prod(shape)), 2)).astype(np.float32)
        self.dense = nn.Dense(2, int(np.prod(shape)), weight_init=Tensor(w), bias_init="zeros")
        self.shape = shape

    def construct(self, z, y=None):
        return self.dense(z).reshape((z.shape[0],) + self.shape)


SHAPE = (1, 2, 2)


def make_d_step(critic, gp=0.0, r1=0.0, lr=1e-9, seed=0, pack=1, loss="wgan", name=""):
    """(d_step, inputs, D, G) for a critic class on batches of 8 samples of SHAPE."""
    G, D = ConstantGenerator(SHAPE), critic(4 * pack, seed)
    G.update_parameters_name(f"g{name}{seed}.")
    D.update_parameters_name(f"d{name}{seed}.")
    opt_g = make_optimizer("sgd", G.trainable_params(), lr, f"g{name}{seed}.")
    opt_d = make_optimizer("sgd", D.trainable_params(), lr, f"d{name}{seed}.")
    d_step, _ = make_gan_steps(G, D, loss, opt_g, opt_d, gp=gp, r1=r1, pack_size=pack)
    rng = np.random.default_rng(seed)
    real = Tensor(rng.normal(size=(8,) + SHAPE).astype(np.float32))
    z = Tensor(rng.normal(size=(8, 2)).astype(np.float32))
    inputs = (real, z, Tensor(rng.uniform(size=8 // pack).astype(np.float32))) if gp else (real, z)
    return d_step, inputs, D, G


def d_loss_value(gp=0.0, r1=0.0, lr=1e-9, seed=0):
    d_step, inputs, D, _ = make_d_step(LinearCritic, gp, r1, lr, seed, name="lin")
    w = D.dense.weight.asnumpy().ravel().copy()
    return float(d_step(*inputs)[0].asnumpy()), w, d_step, inputs, D


def test_penalties_match_the_formulas_on_a_linear_critic(graph_mode):
    base, w, *_ = d_loss_value()
    with_gp, w_gp, *_ = d_loss_value(gp=10.0)
    with_r1, w_r1, *_ = d_loss_value(r1=3.0)
    np.testing.assert_array_equal(w, w_gp)  # same seed, same critic
    np.testing.assert_allclose(with_gp - base, 10.0 * (np.linalg.norm(w) - 1.0) ** 2, rtol=1e-4)
    np.testing.assert_allclose(with_r1 - base, 3.0 / 2 * np.linalg.norm(w) ** 2, rtol=1e-4)


@pytest.mark.parametrize("loss", ["wgan", "ns", "hinge"])
def test_d_loss_takes_real_and_fake_logits_in_their_places(graph_mode, loss):
    """The D step's loss equals the formula on D(real) and D(G(z)) computed here (a swap of real and
    fake logits inside the step changes it for every loss)."""
    d_step, (real, z), D, G = make_d_step(TanhCritic, seed=3, loss=loss, name=loss)
    real_logits = D(real).asnumpy().astype(np.float64)
    fake_logits = D(G(z)).asnumpy().astype(np.float64)

    def sp(x):
        return np.log1p(np.exp(x))
    expected = {"wgan": fake_logits.mean() - real_logits.mean(),
                "ns": sp(-real_logits).mean() + sp(fake_logits).mean(),
                "hinge": np.maximum(0, 1 - real_logits).mean() + np.maximum(0, 1 + fake_logits).mean()}[loss]
    out = d_step(real, z)
    np.testing.assert_allclose(float(out[0].asnumpy()), expected, rtol=1e-5)
    np.testing.assert_allclose(float(out[1][0].asnumpy()), real_logits.mean(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(out[1][1].asnumpy()), fake_logits.mean(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("pack", [1, 2])
def test_penalties_match_a_numpy_reference_on_a_nonlinear_critic(graph_mode, pack):
    """GP at the interpolates (one weight per D input), R1 at the reals, norms per D input (PacGAN:
    per packed input of `pack` samples), against the critic's input gradient written out in numpy."""
    base_step, inputs, D, G = make_d_step(TanhCritic, seed=4, pack=pack, name="base")
    base = float(base_step(*inputs)[0].asnumpy())
    real = inputs[0].asnumpy().reshape(8 // pack, -1)  # packed D inputs, flattened
    fake = G(inputs[1]).asnumpy().reshape(8 // pack, -1)

    gp_step, gp_inputs, *_ = make_d_step(TanhCritic, gp=10.0, seed=4, pack=pack, name="gp")
    a = gp_inputs[2].asnumpy()[:, None]
    x_hat = a * real + (1 - a) * fake
    norms = np.linalg.norm(D.numpy_input_grad(x_hat), axis=1)
    np.testing.assert_allclose(float(gp_step(*gp_inputs)[0].asnumpy()) - base,
                               10.0 * np.mean((norms - 1) ** 2), rtol=1e-4)

    r1_step, r1_inputs, *_ = make_d_step(TanhCritic, r1=3.0, seed=4, pack=pack, name="r1")
    norms = np.linalg.norm(D.numpy_input_grad(real), axis=1)
    np.testing.assert_allclose(float(r1_step(*r1_inputs)[0].asnumpy()) - base,
                               3.0 / 2 * np.mean(norms ** 2), rtol=1e-4)


def test_packed_penalties_see_the_packed_input(graph_mode):
    """A linear critic with ||w|| = 1 on the PACKED input is exactly 1-Lipschitz there: GP is 0 and R1
    is gamma / 2 (measured per unpacked sample they would be 1 and gamma / 4)."""
    def unit_critic(features, seed):
        return LinearCritic(features, seed, norm=1.0)
    base_step, inputs, *_ = make_d_step(unit_critic, pack=2, name="ubase")
    base = float(base_step(*inputs)[0].asnumpy())
    gp_step, gp_inputs, *_ = make_d_step(unit_critic, gp=10.0, pack=2, name="ugp")
    r1_step, r1_inputs, *_ = make_d_step(unit_critic, r1=2.0, pack=2, name="ur1")
    np.testing.assert_allclose(float(gp_step(*gp_inputs)[0].asnumpy()) - base, 0.0, atol=1e-5)
    np.testing.assert_allclose(float(r1_step(*r1_inputs)[0].asnumpy()) - base, 1.0, rtol=1e-5)


def test_gp_pulls_the_critic_gradient_norm_to_one(graph_mode):
    # the critic starts at ||w|| = 3; GP pulls its input-gradient norm to ~1, plain WGAN does not
    norms = {}
    for gp in (0.0, 10.0):
        _, _, d_step, inputs, D = d_loss_value(gp=gp, lr=0.01, seed=1)
        for _ in range(300):
            d_step(*inputs)
        norms[gp] = np.linalg.norm(D.dense.weight.asnumpy())
    assert abs(norms[10.0] - 1.0) < 0.1, norms
    assert norms[0.0] > 2.0, norms


def test_weight_clipping_keeps_every_critic_parameter_in_range(graph_mode):
    G, D = ConstantGenerator(SHAPE), TanhCritic(4, 5)
    G.update_parameters_name("gclip.")
    D.update_parameters_name("dclip.")
    opt_g = make_optimizer("sgd", G.trainable_params(), 0.1, "gclip.")
    opt_d = make_optimizer("sgd", D.trainable_params(), 0.1, "dclip.")
    d_step, _ = make_gan_steps(G, D, "wgan", opt_g, opt_d, weight_clip=0.05)
    assert max(np.abs(p.asnumpy()).max() for p in D.trainable_params()) > 0.5  # starts far outside
    rng = np.random.default_rng(0)
    d_step(Tensor(rng.normal(size=(8,) + SHAPE).astype(np.float32)), Tensor(rng.normal(size=(8, 2)).astype(np.float32)))
    values = np.concatenate([p.asnumpy().ravel() for p in D.trainable_params()])
    assert np.abs(values).max() <= 0.05 + 1e-7
    assert np.isclose(np.abs(values), 0.05).mean() > 0.5  # most were clipped to the bound


def test_lazy_r1_goes_through_diffaugment_and_scales_by_its_interval(graph_mode):
    """Lazy R1's step (every k) equals k times the in-step R1 term for the same augmentation draws;
    the augmentation changes it (so it is really applied)."""
    from gan import augment
    from gan.steps import make_lazy_r1_step
    policies = ("color", "translation", "cutout")
    shape = (3, 8, 8)
    G, D = ConstantGenerator(shape), TanhCritic(3 * 64, 6)
    G.update_parameters_name("glazy.")
    D.update_parameters_name("dlazy.")
    opt_g = make_optimizer("sgd", G.trainable_params(), 1e-9, "glazy.")
    opt_d = make_optimizer("sgd", D.trainable_params(), 1e-9, "dlazy.")
    arity = augment.arity(policies, shape)
    plain, _ = make_gan_steps(G, D, "wgan", opt_g, opt_d, augment_policies=policies, augment_arity=arity)
    with_r1, _ = make_gan_steps(G, D, "wgan", opt_g, opt_d, r1=2.0, augment_policies=policies, augment_arity=arity)
    lazy = make_lazy_r1_step(D, opt_d, 2.0, 4, augment_policies=policies)
    rng = np.random.default_rng(0)
    real = Tensor(rng.normal(size=(8,) + shape).astype(np.float32))
    z = Tensor(rng.normal(size=(8, 2)).astype(np.float32))
    aug_real = tuple(Tensor(a) for a in augment.draw(rng, policies, 8, shape))
    aug_fake = tuple(Tensor(a) for a in augment.draw(rng, policies, 8, shape))
    in_step = float(with_r1(real, z, *aug_real, *aug_fake)[0].asnumpy()) - float(plain(real, z, *aug_real, *aug_fake)[0].asnumpy())
    lazy_value = float(lazy(real, *aug_real)[0].asnumpy())
    np.testing.assert_allclose(lazy_value, 4 * in_step, rtol=1e-4)
    other = tuple(Tensor(a) for a in augment.draw(np.random.default_rng(9), policies, 8, shape))
    assert abs(float(lazy(real, *other)[0].asnumpy()) - lazy_value) > 1e-3 * abs(lazy_value)


def test_lazy_r1_is_its_own_phase_every_k_steps(tmp_path):
    """R1 runs at iterations 0, 4, ... as its own D step, identically one call per iteration and inside
    the multi-step engine (K=3 and K=10: windows with 0, 1 and 3 R1 steps; a resume at step 5 into a
    window with no R1 step)."""
    from conftest import checkpoint_arrays, run_script, scalar_tags
    tiny = ["--dataset", "ring8", "--width", 16, "--batch-size", 32, "--eval-samples", 100, "--r1", 1.0,
            "--r1-every", 4, "--log-every", 4]
    finals = {}
    for k in (1, 3, 10):
        run = tmp_path / f"k{k}"
        if k == 3:  # 5 steps, then resume to 21
            run_script("train_gan.py", "--run-dir", run, *tiny, "--steps", 5, "--steps-per-call", k)
            run_script("train_gan.py", "--run-dir", run, *tiny, "--steps", 21, "--steps-per-call", k, "--resume")
        else:
            run_script("train_gan.py", "--run-dir", run, *tiny, "--steps", 21, "--steps-per-call", k)
        finals[k] = checkpoint_arrays(run / "checkpoints" / "step_00000021.ckpt")
        r1 = [e.value for e in scalar_tags(run).Scalars("loss/r1")]
        assert r1 and all(v > 0 for v in r1), r1
    arrays = finals[1]
    assert int(arrays["d.opt.state_step"]) == 21 + 6  # 21 D steps + R1 steps at iterations 0, 4, ..., 20
    assert int(arrays["g.opt.state_step"]) == 21
    # StyleGAN2's lazy-regularisation adjustment: lr x k/(k+1) (toy lr 1e-3, k = 4); betas ** (k/(k+1))
    assert float(arrays["d.opt.learning_rate_group_0"]) == pytest.approx(1e-3 * 4 / 5, rel=1e-6)
    assert float(arrays["g.opt.learning_rate_group_0"]) == pytest.approx(1e-3, rel=1e-6)
    import train_gan
    from gan.trainer import lazy_r1_adjusted
    cfg = train_gan.parse_config(train_gan.GANConfig, ["--dataset", "ring8", "--r1", "1", "--r1-every", "4"], "")
    lr, betas = lazy_r1_adjusted(cfg)
    assert lr == pytest.approx(8e-4) and betas == pytest.approx((0.5 ** 0.8, 0.999 ** 0.8))
    for k in (3, 10):
        assert finals[k].keys() == arrays.keys()
        for name, value in arrays.items():
            np.testing.assert_array_equal(finals[k][name], value, err_msg=f"K={k}: {name}")


@pytest.mark.parametrize("arch, spectral_norm", [("mlp", False), ("mlp", True), ("dcgan", False), ("dcgan", True)])
def test_penalised_d_step_is_the_same_in_graph_and_pynative_mode(graph_mode, arch, spectral_norm):
    """R1 and GP (both on) move every D weight identically in both modes, spectral norm's u included
    (PyNative once dropped the penalties' gradient for the DCGAN head and every spectral-norm layer)."""
    import mindspore as ms
    from gan.models import build_models
    shape = (2,) if arch == "mlp" else (1, 8, 8)
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(8,) + shape).astype(np.float32), rng.normal(size=(8, 4)).astype(np.float32),
                rng.uniform(size=8).astype(np.float32)) for _ in range(2)]
    results, init = [], None
    for mode in (ms.GRAPH_MODE, ms.PYNATIVE_MODE):
        ms.set_context(mode=mode)
        G, D, _ = build_models(arch, 4, shape, 8, spectral_norm=spectral_norm)
        if init is None:
            init = {p.name: p.asnumpy().copy() for p in list(G.get_parameters()) + list(D.get_parameters())}
        for p in list(G.get_parameters()) + list(D.get_parameters()):
            p.set_data(Tensor(init[p.name]))  # same start (before the first compile)
        opt_g = make_optimizer("sgd", G.trainable_params(), 0.1, "g.")
        opt_d = make_optimizer("sgd", D.trainable_params(), 0.1, "d.")
        d_step, _ = make_gan_steps(G, D, "ns", opt_g, opt_d, r1=1.0, gp=1.0)
        for batch in batches:
            d_step(*(Tensor(a) for a in batch))
        results.append({p.name: p.asnumpy().copy() for p in D.get_parameters()})
    graph, pynative = results
    for name, value in graph.items():
        assert not np.array_equal(value, init[name]) or name.endswith(".u") or "bias" in name, name  # it moved
        np.testing.assert_allclose(pynative[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
