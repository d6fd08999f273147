"""What one small kernel costs: MindSpore graph mode (CPU) vs PyTorch eager, same shapes, same threads.

    python bench/bench_kernel_cost.py [--record]      # the PyTorch column needs torch importable

Why: after the multi-step engine removed the per-call cost, the toy-GAN iteration (bench_gan.py) is
a few hundred small kernels, so its time is (number of kernels) x (cost per kernel). This measures
the second factor directly. A chain of N dependent ops is timed for two values of N; the slope
(time(N_long) - time(N_short)) / (N_long - N_short) is the marginal cost of one op, free of the
per-call cost. Shapes are those of the toy GAN: a (256, 128) activation (elementwise add, and a
matmul with a 128x128 weight) and a 1-element tensor (pure launch cost). Each framework runs in its
own process (both bring their own OpenMP / oneDNN).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(ROOT))

CASES = {"add (256x128)": ((256, 128), "add"), "matmul (256x128 @ 128x128)": ((256, 128), "matmul"),
         "add (1 element)": ((1,), "add")}
SHORT, LONG = 20, 220


def per_call_s(fn, calls):
    fn()  # compile / warm up
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn()
    _ = out.asnumpy() if hasattr(out, "asnumpy") else out.numpy()
    return (time.perf_counter() - t0) / calls


def mindspore_child(calls):
    import loops  # noqa: F401  (the project's runtime settings, as in training)
    import mindspore as ms
    import numpy as np
    from mindspore import Tensor, ops
    loops.lift_isa_cap()  # no convolutions here: the toy GAN runs uncapped too
    ms.set_context(mode=ms.GRAPH_MODE)
    out = {}
    for label, (shape, op) in CASES.items():
        x = Tensor(np.ones(shape, np.float32) * 1e-3)
        w = Tensor(np.eye(128, dtype=np.float32)) if op == "matmul" else Tensor(np.full(shape, 1e-6, np.float32))
        times = []
        for n in (SHORT, LONG):
            def chain(x, w, n=n):
                for _ in range(n):  # unrolled at compile time: n kernels in one graph
                    x = ops.matmul(x, w) if op == "matmul" else x + w
                return x
            fn = ms.jit(chain)
            times.append(per_call_s(lambda: fn(x, w), calls))
        out[label] = (times[1] - times[0]) / (LONG - SHORT)
    print(json.dumps(out))


def torch_child(calls):
    try:
        import torch
    except ImportError:
        print("null")
        return
    torch.set_num_threads(os.cpu_count())
    out = {}
    for label, (shape, op) in CASES.items():
        x = torch.full(shape, 1e-3)
        w = torch.eye(128) if op == "matmul" else torch.full(shape, 1e-6)
        times = []
        for n in (SHORT, LONG):
            def chain(n=n):
                y = x
                for _ in range(n):
                    y = torch.matmul(y, w) if op == "matmul" else y + w
                return y
            with torch.no_grad():
                times.append(per_call_s(chain, calls))
        out[label] = (times[1] - times[0]) / (LONG - SHORT)
    print(json.dumps(out))


def run_child(which, calls):
    env = dict(os.environ, GLOG_v="3")
    proc = subprocess.run([sys.executable, __file__, "--child", which, "--calls", str(calls)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", choices=["mindspore", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return (mindspore_child if args.child == "mindspore" else torch_child)(args.calls)
    ms_us, torch_us = run_child("mindspore", args.calls), run_child("torch", args.calls)
    lines = ["| op | MindSpore graph, us/op | PyTorch eager, us/op | MindSpore / PyTorch |", "|---|---|---|---|"]
    for label in CASES:
        a = ms_us[label] * 1e6
        b = torch_us[label] * 1e6 if torch_us else None
        lines.append(f"| {label} | {a:.1f} | {'-' if b is None else f'{b:.1f}'} | "
                     f"{'-' if b is None else f'{a / b:.2f}x'} |")
    table = "\n".join(lines) + f"\n\nMarginal cost of one op in a chain ({SHORT} vs {LONG} ops), {os.cpu_count()} threads."
    print(table)
    if args.record:
        from bench import record
        record.append("Cost of one small kernel", f"python bench/bench_kernel_cost.py --calls {args.calls} --record",
                      table)


if __name__ == "__main__":
    main()
