"""GAE inside the graph: the closed form (rl/ppo_native.py: gae_in_closed_form) against the backward loop,
each as one compiled call, for rollouts of T steps x N environment rows. Why: the closed form trades
the loop's ~10 kernel launches a step for (T, T, N) arithmetic and memory; rl/ppo_native.py picks the
closed form up to CLOSED_FORM_MAX_ROWS (T x N) and the loop above it.

    python bench/bench_gae.py [--sizes 32x8,128x400] [--calls 5] [--record]
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402
from mindspore import Parameter, Tensor, ops  # noqa: E402

from bench import record  # noqa: E402
from rl.ppo_native import CLOSED_FORM_MAX_ROWS, gae_discounts, gae_in_a_loop, gae_in_closed_form  # noqa: E402

GAMMA, LAM = 0.99, 0.95


def time_both(T, N, calls):
    """(loop ms, closed-form ms, max |difference|) per call for one (T, N)."""
    rng = np.random.default_rng(0)
    rows = np.stack([rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.random((T, N)) < 0.01], 2)
    stored = Parameter(Tensor(rows.astype(np.float32)), name="rows", requires_grad=False)
    targets = Parameter(Tensor(np.zeros((T, N, 2), np.float32)), name="targets", requires_grad=False)
    next_value = Tensor(rng.normal(size=N).astype(np.float32))
    discounts = gae_discounts(T, GAMMA * LAM)
    rewards, values, dones = stored[..., 0], stored[..., 1], stored[..., 2]

    @ms.jit
    def loop(next_value):
        return gae_in_a_loop(rewards, values, dones, next_value, GAMMA, LAM, targets)

    @ms.jit
    def closed(next_value):
        advantages = gae_in_closed_form(rewards, values, dones, next_value, GAMMA, discounts)
        return ops.depend(next_value, ops.assign(targets, ops.stack([advantages, advantages + values], 2)))

    out, times = [], []
    for fn in (loop, closed):
        fn(next_value).asnumpy()  # compile
        start = time.perf_counter()
        for _ in range(calls):
            fn(next_value).asnumpy()
        times.append((time.perf_counter() - start) / calls * 1e3)
        out.append(targets.asnumpy().copy())
    return times[0], times[1], float(np.abs(out[0] - out[1]).max())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="32x8,32x80,32x400,32x800,128x4,128x40,128x400", help="TxN,TxN,...")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    ms.set_context(mode=ms.GRAPH_MODE)
    lines = ["| T x N | T x T x N | loop ms | closed form ms | loop / closed | max abs difference "
             "| rl/ppo_native.py runs |",
             "|---|---|---|---|---|---|---|"]
    for size in args.sizes.split(","):
        T, N = (int(v) for v in size.split("x"))
        loop_ms, closed_ms, diff = time_both(T, N, args.calls)
        runs = "closed form" if T * N <= CLOSED_FORM_MAX_ROWS else "loop"
        lines.append(f"| {T} x {N} | {T * T * N} | {loop_ms:.2f} | {closed_ms:.2f} | {loop_ms / closed_ms:.2f} | "
                     f"{diff:.1e} | {runs} |")
        print(lines[-1], flush=True)
    record.publish("GAE inside the graph: closed form vs backward loop", "\n".join(lines), args.record)


if __name__ == "__main__":
    main()
