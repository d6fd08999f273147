"""oneDNN's instruction-set cap on this CPU: why loops/__init__.py sets DNNL_MAX_CPU_ISA=AVX2.

    python bench/bench_cpu_isa.py [--iters 3] [--record]

MindSpore's CPU backend runs convolutions through oneDNN, which picks the widest instruction set
the CPU has. On AVX-512 machines its AVX-512 forward convolutions in MindSpore 2.10 were measured
here to be tens of times slower than the AVX2 ones. Each setting runs in its own process (oneDNN
reads the cap once, at its first kernel): ALL (no cap: oneDNN's own choice) and AVX2 (this
project's default). Per setting: one 4x4 stride-2 conv (64 -> 128 channels, batch 64, 16x16)
forward and its weight gradient, a DCGAN 32x32 iteration (bench_gan.py's setup: D + G + EMA as
separate jit calls) and a toy-GAN iteration (ring8 MLP, multi-step K=10).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def avg_ms(fn, n):
    fn()  # compile / warm up
    t0 = time.perf_counter()
    for _ in range(n):
        out = fn()
    out.asnumpy()
    return (time.perf_counter() - t0) / n * 1e3


def child(iters):
    """Measure in this process under the DNNL_MAX_CPU_ISA set by the parent; print one JSON line."""
    import mindspore as ms
    import numpy as np
    from mindspore import Tensor, nn

    from bench.bench_gan import build, time_multi
    from loops.driver import run_iteration
    ms.set_context(mode=ms.GRAPH_MODE)
    conv = nn.Conv2d(64, 128, 4, 2, pad_mode="pad", padding=1)
    x = Tensor(np.random.default_rng(0).standard_normal((64, 64, 16, 16), dtype=np.float32))

    def forward(x):
        return conv(x)

    def loss(x):
        return conv(x).sum()
    fwd, grad = ms.jit(forward), ms.jit(ms.grad(loss, None, conv.trainable_params()))
    result = {"conv_fwd": avg_ms(lambda: fwd(x), 10), "conv_grad": avg_ms(lambda: grad(x)[0], 10)}
    phases = build("dcgan")
    result["dcgan"] = avg_ms(lambda: run_iteration(phases, 0)["loss/d"], iters)
    result["toy"] = time_multi(build("ring8"), 300, 10)[0] * 1e3
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=3, help="DCGAN iterations per setting")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.iters)
    flags = open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split() if os.path.exists("/proc/cpuinfo") else []
    results = {}
    for isa in ("ALL", "AVX2"):
        env = dict(os.environ, DNNL_MAX_CPU_ISA=isa, GLOG_v="3")
        out = subprocess.run([sys.executable, __file__, "--child", "--iters", str(args.iters)], env=env,
                             capture_output=True, text=True, check=True).stdout
        results[isa] = json.loads(out.strip().splitlines()[-1])
    rows = [("conv 64->128, 4x4/2, batch 64 @16x16: forward", "conv_fwd"),
            ("same conv: weight gradient", "conv_grad"),
            ("DCGAN 32x32 iteration (separate jit calls)", "dcgan"),
            ("toy-GAN iteration (multi-step K=10)", "toy")]
    lines = ["| measurement | ms, no cap (ALL) | ms, AVX2 cap | no cap / AVX2 |", "|---|---|---|---|"]
    for label, key in rows:
        a, b = results["ALL"][key], results["AVX2"][key]
        lines.append(f"| {label} | {a:.2f} | {b:.2f} | {a / b:.2f}x |")
    table = "\n".join(lines) + f"\n\nCPU has AVX-512: {'avx512f' in flags}."
    print(table)
    if args.record:
        from bench import record
        record.append("oneDNN instruction-set cap (DNNL_MAX_CPU_ISA)",
                      f"python bench/bench_cpu_isa.py --iters {args.iters} --record", table)


if __name__ == "__main__":
    main()
