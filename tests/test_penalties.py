"""R1 and WGAN-GP: exact values on a linear critic, and GP pulling the critic's gradient norm to 1."""
import numpy as np
from mindspore import Tensor, nn

from loops.gan import make_gan_steps
from loops.optim import make_optimizer


class LinearCritic(nn.Cell):
    """D(x) = <w, flatten(x)> + b: its input gradient is w for every sample."""

    def __init__(self, features, seed):
        super().__init__()
        w = np.random.default_rng(seed).normal(size=(1, features))
        w = (3.0 * w / np.linalg.norm(w)).astype(np.float32)  # ||w|| = 3: far from GP's target
        self.dense = nn.Dense(features, 1, weight_init=Tensor(w), bias_init="zeros")

    def construct(self, x, y=None):
        return self.dense(x.reshape(x.shape[0], -1)).squeeze(-1)


class ConstantGenerator(nn.Cell):
    def __init__(self, shape):
        super().__init__()
        w = np.random.default_rng(7).normal(size=(int(np.prod(shape)), 2)).astype(np.float32)
        self.dense = nn.Dense(2, int(np.prod(shape)), weight_init=Tensor(w), bias_init="zeros")
        self.shape = shape

    def construct(self, z, y=None):
        return self.dense(z).reshape((z.shape[0],) + self.shape)


def d_loss_value(gp=0.0, r1=0.0, lr=1e-9, seed=0):
    shape = (1, 2, 2)
    G, D = ConstantGenerator(shape), LinearCritic(4, seed)
    G.update_parameters_name(f"g{seed}.")
    D.update_parameters_name(f"d{seed}.")
    opt_g = make_optimizer("sgd", G.trainable_params(), lr, f"g{seed}.")
    opt_d = make_optimizer("sgd", D.trainable_params(), lr, f"d{seed}.")
    d_step, _ = make_gan_steps(G, D, "wgan", opt_g, opt_d, gp=gp, r1=r1)
    rng = np.random.default_rng(seed)
    real = Tensor(rng.normal(size=(8,) + shape).astype(np.float32))
    z = Tensor(rng.normal(size=(8, 2)).astype(np.float32))
    inputs = (real, z, Tensor(rng.uniform(size=8).astype(np.float32))) if gp else (real, z)
    w = D.dense.weight.asnumpy().ravel().copy()
    return float(d_step(*inputs)[0].asnumpy()), w, d_step, inputs, D


def test_penalties_match_the_formulas_on_a_linear_critic(graph_mode):
    base, w, *_ = d_loss_value()
    with_gp, w_gp, *_ = d_loss_value(gp=10.0)
    with_r1, w_r1, *_ = d_loss_value(r1=3.0)
    np.testing.assert_array_equal(w, w_gp)  # same seed, same critic
    np.testing.assert_allclose(with_gp - base, 10.0 * (np.linalg.norm(w) - 1.0) ** 2, rtol=1e-4)
    np.testing.assert_allclose(with_r1 - base, 3.0 / 2 * np.linalg.norm(w) ** 2, rtol=1e-4)


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
    for k in (3, 10):
        assert finals[k].keys() == arrays.keys()
        for name, value in arrays.items():
            np.testing.assert_array_equal(finals[k][name], value, err_msg=f"K={k}: {name}")
