"""Optimizer implementation cost on the toy GAN iteration (ring8 MLP, batch 256): which Adam?

    python bench/bench_optimizers.py [--iters 300] [--record]

Three implementations of the same Adam update (betas 0.5, 0.999), each in the D and the G step:
  experimental  mindspore.experimental.optim.Adam (the project's default: loops/optim.py)
  nn.Adam       mindspore.nn.Adam (the classic Cell optimizer; fused ApplyAdam kernel per parameter)
  fused         loops/optim.py FusedAdam: ops.Adam (one kernel per parameter), no extra state
Per implementation: ms per iteration as separate jit calls and in the multi-step engine (K=10).
That the three compute the same update is tested in tests/test_step.py (FusedAdam vs the
experimental Adam).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402
from mindspore import nn  # noqa: E402

from bench import record  # noqa: E402
from loops import lift_isa_cap  # noqa: E402
from bench.bench_gan import adam, build, time_multi, time_single  # noqa: E402
from loops.optim import FusedAdam  # noqa: E402


def prefixed(opt, params, prefix):
    model = {id(p) for p in params}
    for p in opt.get_parameters():
        if id(p) not in model:
            p.name = prefix + "opt." + p.name
    return opt


def nn_adam(params, prefix):
    params = list(params)
    return prefixed(nn.Adam(params, 2e-4, beta1=0.5, beta2=0.999), params, prefix)


def fused_adam(params, prefix):
    params = list(params)
    return prefixed(FusedAdam(params, 2e-4, (0.5, 0.999)), params, prefix)


IMPLEMENTATIONS = {"experimental": adam, "nn.Adam": nn_adam, "fused": fused_adam}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    lift_isa_cap()  # no convolutions here, as in train_regression.py / toy train_gan.py runs
    ms.set_context(mode=ms.GRAPH_MODE)
    lines = ["| Adam implementation | separate calls, ms/iter | multi-step K=10, ms/iter | K=10 vs experimental |",
             "|---|---|---|---|"]
    base = None
    for name, make in IMPLEMENTATIONS.items():
        single = time_single(build("ring8", optimizer=make), args.iters)[0] * 1e3
        multi = time_multi(build("ring8", optimizer=make), args.iters, 10)[0] * 1e3
        base = base or multi
        lines.append(f"| {name} | {single:.2f} | {multi:.2f} | {base / multi:.2f}x faster |")
    table = "\n".join(lines)
    print(table)
    if args.record:
        record.append("Adam implementations, toy GAN (ring8 MLP, batch 256)",
                      f"python bench/bench_optimizers.py --iters {args.iters} --record", table)


if __name__ == "__main__":
    main()
