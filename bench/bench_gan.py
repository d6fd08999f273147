"""GAN iteration cost: separate jit calls vs the multi-step engine, and a PyTorch eager reference.

    python bench/bench_gan.py [--iters 300] [--record]

One iteration = one D step + one G step + the EMA update (Adam, betas (0.5, 0.999)).
  ring8:  MLP 2-128-128-1 / z16-128-128-2, batch 256
  dcgan:  the project's DCGAN at 32x32x3, width 64, z 64, batch 64
Per model it prints ms per iteration, compile time (first call), peak RSS, the share of a
single-step iteration spent outside the compiled calls (host draws, driver, dict building), and,
when torch is importable, the same architectures in PyTorch eager on the same threads.
"""
import argparse
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START = time.perf_counter()

import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402

from bench import record  # noqa: E402
from loops import lift_isa_cap  # noqa: E402
from loops.driver import MultiStep, Phase, run_iteration  # noqa: E402
from loops.ema import EMA  # noqa: E402
from gan.models import build_models
from gan.steps import make_gan_steps  # noqa: E402
from loops.optim import make_optimizer  # noqa: E402

SETUPS = {
    "ring8": dict(arch="mlp", shape=(2,), width=128, z=16, batch=256),
    "dcgan": dict(arch="dcgan", shape=(3, 32, 32), width=64, z=64, batch=64),
}


def adam(params, prefix):
    return make_optimizer("adam", params, 2e-4, prefix, (0.5, 0.999))


def build(name, amp="O0", optimizer=adam):
    """The phases of one iteration (D, G, EMA) for a SETUPS entry; `optimizer(params, prefix)`."""
    s = SETUPS[name]
    G, D, E = build_models(s["arch"], s["z"], s["shape"], s["width"])
    if amp != "O0":
        G, D, E = (ms.amp.auto_mixed_precision(net, amp) for net in (G, D, E))
    opt_g, opt_d = optimizer(G.trainable_params(), "g."), optimizer(D.trainable_params(), "d.")
    d_step, g_step = make_gan_steps(G, D, "ns", opt_g, opt_d)
    ema = EMA(G, E, 0.999)
    rng = np.random.default_rng(0)
    real = rng.uniform(-1, 1, (8 * s["batch"],) + s["shape"]).astype(np.float32)

    def d_draw(step):
        return (real[rng.integers(0, len(real), s["batch"])],
                rng.standard_normal((s["batch"], s["z"]), dtype=np.float32))

    def d_body(x, z):
        out = d_step.body(x, z)
        return out[0], out[2]

    def g_body(z):
        out = g_step.body(z)
        return out[0], out[2]

    def ema_body():
        return (ema.body(ema.decay),)
    return [Phase("d", d_draw, d_body, ("loss/d", "gn/d")),
            Phase("g", lambda step: (rng.standard_normal((s["batch"], s["z"]), dtype=np.float32),), g_body,
                  ("loss/g", "gn/g")),
            Phase("ema", lambda step: (), ema_body, ("ema",))]


def time_single(phases, iters):
    """ms per iteration at one call per phase (Phase.run: its Pace sleeps, then reads each slow call),
    compile time, and the share of an iteration outside the calls and their waits (host work)."""
    t0 = time.perf_counter()
    run_iteration(phases, 0)
    compile_s = time.perf_counter() - t0
    busy0 = sum(p.pace.busy_s for p in phases)
    t0 = time.perf_counter()
    for _ in range(iters):
        out = run_iteration(phases, 0)
    out["loss/d"].asnumpy()
    total = time.perf_counter() - t0
    inside = sum(p.pace.busy_s for p in phases) - busy0
    return total / iters, compile_s, 1 - inside / total


def time_multi(phases, iters, k):
    multi = MultiStep(phases, k)
    t0 = time.perf_counter()
    multi.run(0)
    compile_s = time.perf_counter() - t0
    calls = max(1, iters // k)
    t0 = time.perf_counter()
    for i in range(calls):
        out = multi.run(i * k)  # host floats: each call ends synced
    return (time.perf_counter() - t0) / (calls * k), compile_s


def torch_iteration(name):
    """One iteration of the same GAN in PyTorch eager, as a function (import torch first)."""
    import torch
    from torch import nn
    torch.manual_seed(0)
    s = SETUPS[name]
    if s["arch"] == "mlp":
        G = nn.Sequential(nn.Linear(s["z"], 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))
        D = nn.Sequential(nn.Linear(2, 128), nn.LeakyReLU(0.2), nn.Linear(128, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
    else:
        w = s["width"]
        G = nn.Sequential(nn.Linear(s["z"], 2 * w * 64), nn.Unflatten(1, (2 * w, 8, 8)), nn.BatchNorm2d(2 * w), nn.ReLU(),
                          nn.ConvTranspose2d(2 * w, w, 4, 2, 1), nn.BatchNorm2d(w), nn.ReLU(),
                          nn.ConvTranspose2d(w, w // 2, 4, 2, 1), nn.BatchNorm2d(w // 2), nn.ReLU(),
                          nn.Conv2d(w // 2, 3, 3, 1, 1), nn.Tanh())
        D = nn.Sequential(nn.Conv2d(3, w // 2, 3, 1, 1), nn.LeakyReLU(0.2), nn.Conv2d(w // 2, w, 4, 2, 1), nn.LeakyReLU(0.2),
                          nn.Conv2d(w, 2 * w, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(2 * w * 64, 1))
    E = [p.detach().clone() for p in G.parameters()]
    opt_g = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), 2e-4, betas=(0.5, 0.999))
    rng = np.random.default_rng(0)
    real = torch.from_numpy(rng.uniform(-1, 1, (8 * s["batch"],) + s["shape"]).astype(np.float32))
    sp = torch.nn.functional.softplus

    def iteration():
        x = real[torch.from_numpy(rng.integers(0, len(real), s["batch"]))]
        z = torch.from_numpy(rng.standard_normal((s["batch"], s["z"]), dtype=np.float32))
        with torch.no_grad():
            fake = G(z)
        loss_d = sp(-D(x)).mean() + sp(D(fake)).mean()
        opt_d.zero_grad()
        loss_d.backward()
        torch.nn.utils.clip_grad_norm_(D.parameters(), float("inf"))  # the grad norm we log too
        opt_d.step()
        z = torch.from_numpy(rng.standard_normal((s["batch"], s["z"]), dtype=np.float32))
        loss_g = sp(-D(G(z))).mean()
        opt_g.zero_grad()
        loss_g.backward()
        torch.nn.utils.clip_grad_norm_(G.parameters(), float("inf"))
        opt_g.step()
        with torch.no_grad():
            for e, p in zip(E, G.parameters()):
                e.mul_(0.999).add_(p, alpha=0.001)
    return iteration


def torch_reference(name, iters):
    """(s per iteration, threads) of the same iteration in PyTorch eager, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    iteration = torch_iteration(name)
    for _ in range(5):
        iteration()
    t0 = time.perf_counter()
    for _ in range(iters):
        iteration()
    return (time.perf_counter() - t0) / iters, torch.get_num_threads()


def measure(name, iters):
    """Table rows for one model, measured in this process; returns (rows, time to first step)."""
    if name == "ring8":
        lift_isa_cap()  # as train_gan.py does for MLP runs (loops/__init__.py)
    ms.set_context(mode=ms.GRAPH_MODE)
    rows = []
    iters = iters if name == "ring8" else max(20, iters // 10)
    single, compile_s, host = time_single(build(name), iters)
    first_step = time.perf_counter() - START
    rows.append(f"| {name} | separate jit calls (D, G, EMA) | {single * 1e3:.2f} | 1.00x | {compile_s:.1f} | {host:.1%} |")
    for k in (10, 50):
        t, c = time_multi(build(name), iters, k)
        rows.append(f"| {name} | multi-step K={k} | {t * 1e3:.2f} | {single / t:.2f}x faster | {c:.1f} | |")
    if name == "dcgan":  # float16 on CPU: mindspore.amp O2, same multi-step engine
        t, c = time_multi(build(name, "O2"), iters, 10)
        rows.append(f"| {name} | multi-step K=10, --amp O2 (float16) | {t * 1e3:.2f} | {single / t:.2f}x faster | {c:.1f} | |")
    ref = torch_reference(name, iters)
    if ref:
        rows.append(f"| {name} | PyTorch eager ({ref[1]} threads) | {ref[0] * 1e3:.2f} | {single / ref[0]:.2f}x faster | | |")
    else:
        rows.append(f"| {name} | PyTorch eager | not installed | | | |")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return rows, f"{name}: time to first step (imports + build + compile) {first_step:.1f} s, peak RSS {rss:.0f} MiB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--models", default="ring8,dcgan")
    args = parser.parse_args()
    names = args.models.split(",")
    if len(names) == 1:
        rows, footer = measure(names[0], args.iters)
        print("\n".join(rows) + "\n" + footer)
        return
    # one process per model: oneDNN's instruction-set cap (loops/__init__.py) is fixed per process
    lines = ["| model | variant | ms/iter | vs separate calls | compile s | host share |", "|---|---|---|---|---|---|"]
    footers = []
    for name in names:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--models", name, "--iters", str(args.iters)],
                             capture_output=True, text=True, check=True, env=dict(os.environ, GLOG_v="3")).stdout
        lines += [l for l in out.splitlines() if l.startswith(f"| {name} ")]
        footers += [l for l in out.splitlines() if l.startswith(f"{name}: time to first step")]
    table = "\n".join(lines) + "\n\n" + "; ".join(footers) + "."
    print(table)
    if args.record:
        record.append(f"GAN iteration (MindSpore {ms.__version__})",
                      f"python bench/bench_gan.py --iters {args.iters} --record", table)


if __name__ == "__main__":
    main()
