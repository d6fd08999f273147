"""Linear regression baseline: fit y = 2x + 3 (+ 0.01 noise) with one jit-compiled step.

    python train_regression.py                         # 500 SGD steps, batch 4, lr 0.01
    python train_regression.py --clip-norm 1 --accumulate 4 --run-dir runs/reg
    python train_regression.py --run-dir runs/reg --resume --steps 1000

The same loop primitives as the GAN (a declared Learner, make_step, gradient transforms, the
driver, the run lifecycle, checkpoints, TensorBoard), on the smallest possible problem: the place
to try a new gradient intervention.
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")
if __name__ == "__main__":  # --help or a mistyped flag answers before MindSpore loads (loops/flagcache.py)
    from loops.flagcache import check_flags_early
    check_flags_early(__file__)

import json
from dataclasses import dataclass

import numpy as np
from mindspore import ops

from data.regression import X_RANGE, sample_batch
from loops import distributed
from loops.config import RunConfig, opt, parse_config, run_cli
from loops.driver import Phase
from loops.learner import Learner, all_state, model_flags
from loops.optim import OPTIMIZERS
from loops.run import Run
from models.linear import Linear

# one model, so its flags are unsuffixed: --lr, --optimizer, --clip-norm, --accumulate, ...
RegressionFlags = model_flags(RunConfig, {}, lr=opt(0.01, "learning rate"),
                              optimizer=opt("sgd", "optimizer", sorted(OPTIMIZERS)))


@dataclass
class RegressionConfig(RegressionFlags):
    steps: int = opt(500, "optimizer updates (each takes --accumulate micro-batches)")
    batch_size: int = opt(4, "samples per micro-batch")
    steps_per_call: int = opt(1, "run K updates inside one compiled loop (1: one call per step)")
    distributed: bool = opt(False, "data parallel under msrun: --batch-size per rank, gradients averaged "
                                   "over ranks, rank 0 writes the run dir (needs --run-dir)")

    def owns_run(self, config):  # a run recorded before config.json named its recipe
        return "z_dim" not in config and "algo" not in config

    def validate(self):
        super().validate()
        self.check_positive("batch_size", "steps_per_call", "lr")
        self.check(not self.distributed or self.run_dir, "--distributed needs --run-dir (the same on every rank)")


def main(argv):
    cfg = parse_config(RegressionConfig, argv, __doc__)  # exits after printing under --dry-run
    with Run(cfg, recipe="regression") as run:
        run.open("train_regression", "linear", "mse")
        model = Learner.from_config("model", Linear(), cfg, flags="")

        def forward(x, y):  # mean squared error
            return ops.mean(ops.square(model.net(x) - y))
        step = model.step(forward, grad_reducer=distributed.grad_reducer)  # --distributed: mean over ranks
        state = all_state(model)
        run.restore(state)  # before the first compiled call
        run.begin(state, learners=(model,))

        def draw(i):  # one micro-batch; --distributed: every rank draws the global batch, keeps its slice
            batch = distributed.shard(*sample_batch(run.rng, distributed.global_batch(cfg.batch_size)))
            return step.host_inputs(batch, run.rng)
        fit = Phase("fit", draw, step.scalars, ("loss/train", "grad_norm/model", "grad_norm/model_after"),
                    repeat=cfg.accumulate)
        code = run.train([fit], stop_on_nonfinite=not cfg.skip_nonfinite)
        w, b = (float(p.asnumpy().reshape(())) for p in (model.net.dense.weight, model.net.dense.bias))
        grid = np.linspace(-X_RANGE, X_RANGE, 101)  # noise-free MSE of the fitted line over the data range
        metrics = {"w": w, "b": b, "loss": run.last.get("loss/train"), "steps": cfg.steps,
                   "mse_vs_true_line": float(np.mean((w * grid + b - (2.0 * grid + 3.0)) ** 2)),
                   "skipped_updates": model.skipped(), "device": run.device}
        if code == 0 and distributed.is_main():
            run.logger.text("metrics", cfg.steps, json.dumps(metrics))
        run.finish(metrics if code == 0 else None)
    if code == 0:  # stopped early: the stop line with its resume command stays the last line
        print(f"w={w:.4f} b={b:.4f} (true 2, 3) run dir: {cfg.run_dir}")
    return code


if __name__ == "__main__":
    run_cli(main)
