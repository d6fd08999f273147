"""Where a toy-GAN iteration's time goes: the multi-step engine (K=10) on parts of the iteration.

    python bench/bench_gan_parts.py [--rounds 2] [--record]

The ring8 MLP GAN of bench/bench_gan.py, each variant in a fresh process, variants alternating:
the full iteration (D, G, EMA with Adam), without the EMA phase, with SGD instead of Adam (no moment
kernels: what packing parameters into flat buffers could save at most on the optimizer side), the D
step alone and the G step alone. Three timings of 600 iterations per process.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402

VARIANTS = {"full": "D, G, EMA (Adam)", "noema": "D, G (no EMA)", "sgd": "D, G, EMA with SGD",
            "donly": "D step alone", "gonly": "G step alone"}


def child(variant):
    import mindspore as ms
    from bench import bench_gan
    from loops.optim import make_optimizer
    bench_gan.lift_isa_cap()
    ms.set_context(mode=ms.GRAPH_MODE)
    opt = bench_gan.adam if variant != "sgd" else (lambda params, prefix: make_optimizer("sgd", params, 2e-4, prefix))
    phases = bench_gan.build("ring8", optimizer=opt)
    phases = {"noema": phases[:2], "donly": phases[:1], "gonly": phases[1:2]}.get(variant, phases)
    times = [bench_gan.time_multi(phases, 600, 10)[0] * 1e3 for _ in range(3)]
    print("RESULT " + " ".join(f"{t:.2f}" for t in times))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    times = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", variant], cwd=ROOT,
                                 capture_output=True, text=True, timeout=900).stdout
            times[variant] += [float(t) for line in out.splitlines() if line.startswith("RESULT ")
                               for t in line.split()[1:]]
    rows = ["| variant | ms / iteration, K=10 (median; all) |", "|---|---|"]
    for variant, label in VARIANTS.items():
        rows.append(f"| {label} | {record.median_cell(times[variant]) if times[variant] else 'failed'} |")
    record.publish("Toy GAN iteration by parts (ring8, K=10)", "\n".join(rows), args.record)


if __name__ == "__main__":
    main()
