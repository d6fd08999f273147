"""What D's activation costs: MindSpore's nn.LeakyReLU vs models.activations.LeakyReLU (a mask).

    python bench/bench_activation.py [--rounds 3] [--models ring8,dcgan] [--record]

The iteration of bench/bench_gan.py (D, G, EMA; Adam) in the multi-step engine (K=10), built once
with each activation, each in a fresh process, alternating; three timings per process.
nn.LeakyReLU is maximum(a x, x): its gradient is a comparison, two selects and a sum per use;
the mask version's gradient is one multiplication.
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402

VARIANTS = {"nn": "nn.LeakyReLU (maximum(a x, x))", "mask": "models.activations.LeakyReLU (x * mask)"}
ITERS = {"ring8": 600, "dcgan": 30}


def child(model, variant):
    import mindspore as ms
    from mindspore import nn
    import models.dcgan
    import models.mlp
    from bench import bench_gan
    if variant == "nn":  # the model modules look the name up when they build a discriminator
        models.mlp.LeakyReLU = models.dcgan.LeakyReLU = nn.LeakyReLU
    if model == "ring8":
        bench_gan.lift_isa_cap()  # as train_gan.py does for MLP runs
    ms.set_context(mode=ms.GRAPH_MODE)
    phases = bench_gan.build(model)
    times = [bench_gan.time_multi(phases, ITERS[model], 10)[0] * 1e3 for _ in range(3)]
    print("RESULT " + " ".join(f"{t:.2f}" for t in times))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="ring8,dcgan")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    rows = ["| model | activation | ms / iteration, K=10 (median; all) | vs nn.LeakyReLU |", "|---|---|---|---|"]
    for model in args.models.split(","):
        times = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for variant in VARIANTS:
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", model, variant], cwd=ROOT,
                                     capture_output=True, text=True, timeout=1800).stdout
                times[variant] += [float(t) for line in out.splitlines() if line.startswith("RESULT ")
                                   for t in line.split()[1:]]
        base = statistics.median(times["nn"]) if times["nn"] else None
        for variant, label in VARIANTS.items():
            ts = times[variant]
            ratio = f"{base / statistics.median(ts):.2f}x faster" if ts and base else ""
            rows.append(f"| {model} | {label} | {record.median_cell(ts) if ts else 'failed'} | {ratio} |")
    record.publish("D's activation: nn.LeakyReLU vs a mask (K=10)", "\n".join(rows), args.record)


if __name__ == "__main__":
    main()
