"""The D and G steps move only their own model; n_critic, phase order and EMA behave as specified."""
import mindspore as ms
import numpy as np
from mindspore import Tensor

from loops.driver import Phase, run_iteration
from loops.ema import EMA
from gan.models import build_models
from gan.steps import make_gan_steps
from loops.optim import all_parameters, make_optimizer


def setup(arch, shape, loss="ns"):
    G, D, E = build_models(arch, 8, shape, 8 if arch == "mlp" else 8)
    opt_g = make_optimizer("adam", G.trainable_params(), 1e-2, "g.", (0.5, 0.999))
    opt_d = make_optimizer("adam", D.trainable_params(), 1e-2, "d.", (0.5, 0.999))
    d_step, g_step = make_gan_steps(G, D, loss, opt_g, opt_d)
    return G, D, E, opt_g, opt_d, d_step, g_step


def snapshot(cell):
    return {p.name: p.asnumpy().copy() for p in cell.trainable_params()}


def changed(before, cell):
    return [p.name for p in cell.trainable_params() if not np.array_equal(before[p.name], p.asnumpy())]


def test_d_step_moves_only_d_and_g_step_moves_only_g(graph_mode):
    G, D, _, _, _, d_step, g_step = setup("dcgan", (1, 8, 8))
    rng = np.random.default_rng(0)
    real = Tensor(rng.uniform(-1, 1, (4, 1, 8, 8)).astype(np.float32))
    z = Tensor(rng.standard_normal((4, 8)).astype(np.float32))
    g0, d0 = snapshot(G), snapshot(D)
    d_step(real, z)
    assert changed(g0, G) == []  # trainable weights bit-identical (BatchNorm running stats may move)
    assert len(changed(d0, D)) == len(d0)
    g1, d1 = snapshot(G), snapshot(D)
    g_step(z)
    assert changed(d1, D) == []
    assert len(changed(g1, G)) > 0


def test_parameter_names_never_clash(graph_mode):
    G, D, E, opt_g, opt_d, _, _ = setup("dcgan", (3, 32, 32))
    names = [p.name for p in all_parameters(G, D, E, opt_g, opt_d)]
    assert len(names) == len(set(names))
    assert {n.split(".")[0] for n in names} == {"g", "d", "g_ema"}


def recorder(calls, name, every=1, repeat=1):
    """A phase whose 'compiled' function only records that it ran (no graph needed)."""
    return Phase(name, lambda step: (), None, every=every, repeat=repeat, compiled=lambda: calls.append(name) or ())


def test_n_critic_and_phase_order():
    calls = []
    phases = [recorder(calls, "d", repeat=3), recorder(calls, "g"), recorder(calls, "r", every=2)]
    for step in range(2):
        run_iteration(phases, step)
    assert calls == ["d", "d", "d", "g", "r", "d", "d", "d", "g"]
    calls.clear()
    run_iteration([phases[1], phases[0]], 0)
    assert calls == ["g", "d", "d", "d"]


def test_optimizer_counts_follow_n_critic(graph_mode):
    G, D, _, opt_g, opt_d, d_step, g_step = setup("mlp", (2,))
    rng = np.random.default_rng(1)

    def d_draw(step):
        return rng.normal(size=(16, 2)).astype(np.float32), rng.normal(size=(16, 8)).astype(np.float32)

    def d_body(real, z):
        return d_step.body(real, z)[:1]

    def g_body(z):
        return g_step.body(z)[:1]
    phases = [Phase("d", d_draw, d_body, ("loss/d",), repeat=5),
              Phase("g", lambda step: (rng.normal(size=(16, 8)).astype(np.float32),), g_body, ("loss/g",))]
    for step in range(4):
        run_iteration(phases, step)
    assert int(opt_d.state_step.asnumpy()) == 20 and int(opt_g.state_step.asnumpy()) == 4


def test_ema_is_the_exponential_average(graph_mode):
    G, _, E, _, _, _, g_step = setup("mlp", (2,))
    ema = EMA(G, E, 0.9)
    ema.copy()
    w0 = snapshot(G)
    z = Tensor(np.random.default_rng(2).normal(size=(16, 8)).astype(np.float32))
    g_step(z)
    ema.update()
    w1 = snapshot(G)
    g_step(z)
    ema.update()
    w2 = snapshot(G)
    for p in E.trainable_params():
        name = "g." + p.name[len("g_ema."):]
        expected = 0.9 * (0.9 * w0[name] + 0.1 * w1[name]) + 0.1 * w2[name]
        np.testing.assert_allclose(p.asnumpy(), expected, rtol=1e-5, atol=1e-7)
    assert changed(w0, G)  # G moved, so the check above is not trivially true


def test_multi_step_logs_are_means_over_the_iterations_that_ran(graph_mode):
    """K=5 iterations in one call: each tag is the mean of its phase's outputs (a repeated phase: over
    every repeat; an interval phase: over the iterations that ran it), as one call per iteration logs."""
    from loops.driver import MultiStep
    draws = []

    def counter(step):
        draws.append(float(len(draws)))
        return (np.float32(draws[-1]),)

    def echo(x):
        return (x * 1.0,)
    phases = [Phase("a", lambda step: (np.float32(step),), echo, ("a",)),
              Phase("b", counter, echo, ("b",), repeat=2),
              Phase("c", lambda step: (np.float32(10 * step),), echo, ("c",), every=2)]
    out = MultiStep(phases, 5).run(0)
    assert out["a"] == np.mean([0, 1, 2, 3, 4])
    assert out["b"] == np.mean(draws)  # 10 draws: 2 per iteration
    assert len(draws) == 10
    assert out["c"] == np.mean([0, 20, 40])  # iterations 0, 2, 4 only
