"""Long-run memory, event-file growth, and the data path's cost per batch.

    python bench/bench_memory_data.py [--iters 10000] [--record]

1. Resident memory (VmRSS) of a toy-GAN run (MLP, batch 256, multi-step K=10, logging scalars to
   TensorBoard every 50 iterations as train_gan.py does) after 1k iterations and at the end, and
   the TensorBoard event file's bytes per logged step (it grows per log, never per iteration).
2. Host cost of one image batch (ArraySource.next: index + uint8 -> float32) for MNIST- and
   CIFAR-10-sized arrays, next to the DCGAN step it feeds: the step never waits on data.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402

from bench import record  # noqa: E402
from bench.bench_gan import build, time_multi  # noqa: E402
from data.arrays import ArraySource  # noqa: E402
from loops.driver import MultiStep  # noqa: E402
from loops.logging import RunLogger  # noqa: E402


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory(iters):
    multi = MultiStep(build("ring8"), 10)
    run_dir = tempfile.mkdtemp()
    logger = RunLogger(run_dir, {"bench": True}, iters, 0, progress=False)
    marks = {}
    for i in range(0, iters, 10):
        out = multi.run(i)
        if (i + 10) % 50 == 0:
            logger.scalars(i + 10, out)
        if i + 10 in (1000, iters):
            marks[i + 10] = rss_mib()
    logger.close()
    events = [os.path.join(run_dir, f) for f in os.listdir(run_dir) if f.startswith("events")]
    size = sum(os.path.getsize(f) for f in events)
    return marks, size / (iters // 50)


def data_cost():
    rows = []
    for name, shape, n in (("MNIST 28x28x1", (1, 28, 28), 60000), ("CIFAR-10 32x32x3", (3, 32, 32), 50000)):
        images = np.random.default_rng(0).integers(0, 256, (n,) + shape, dtype=np.uint8)
        source = ArraySource(images, np.zeros(n, np.int32), 64, 0, 10)
        source.next()
        t0 = time.perf_counter()
        for _ in range(500):
            source.next()
        rows.append((name, (time.perf_counter() - t0) / 500))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=10000)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    ms.set_context(mode=ms.GRAPH_MODE)
    marks, per_log = memory(args.iters)
    step_ms, _ = time_multi(build("dcgan"), 40, 10)
    lines = [f"| toy GAN RSS after {k} iterations | {v:.0f} MiB |" for k, v in sorted(marks.items())]
    lines.append(f"| TensorBoard event bytes per logged step (8 scalars) | {per_log:.0f} B |")
    for name, t in data_cost():
        lines.append(f"| one batch of 64 from {name} (host) | {t * 1e3:.3f} ms ({t / step_ms:.1%} of a DCGAN 32x32 iteration, {step_ms * 1e3:.0f} ms) |")
    table = "| measurement | value |\n|---|---|\n" + "\n".join(lines)
    print(table)
    if args.record:
        record.append("Memory over a long run, and the data path",
                      f"python bench/bench_memory_data.py --iters {args.iters} --record", table)


if __name__ == "__main__":
    main()
