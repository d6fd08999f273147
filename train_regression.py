"""Linear regression baseline: fit y = 2x + 3 (+ 0.01 noise) with one jit-compiled step.

    python train_regression.py                         # 500 SGD steps, batch 4, lr 0.01
    python train_regression.py --clip-norm 1 --accumulate 4 --run-dir runs/reg
    python train_regression.py --run-dir runs/reg --resume --steps 1000

The same loop primitives as the GAN (make_step, gradient transforms, driver, checkpoints,
TensorBoard), on the smallest possible problem: the place to try a new gradient intervention.
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")

import json
from dataclasses import dataclass

import numpy as np
from mindspore import ops

from data.regression import X_RANGE, sample_batch
from loops import checkpoint, distributed, rundir, runtime, transforms
from loops.config import RunConfig, opt, parse_config, run_cli
from loops.driver import Phase, train
from loops.logging import RunLogger
from loops.optim import OPTIMIZERS, all_parameters, make_optimizer
from loops.step import make_step
from models.linear import Linear


@dataclass
class RegressionConfig(RunConfig):
    steps: int = opt(500, "optimizer updates (each takes --accumulate micro-batches)")
    batch_size: int = opt(4, "samples per micro-batch")
    lr: float = opt(0.01, "learning rate")
    optimizer: str = opt("sgd", "optimizer", sorted(OPTIMIZERS))
    clip_value: float = opt(0.0, "clip each gradient element to [-V, V] (0: off)")
    clip_norm: float = opt(0.0, "clip the global gradient norm to V (0: off)")
    grad_noise: float = opt(0.0, "add N(0, SIGMA^2) noise to every gradient element (0: off)")
    accumulate: int = opt(1, "average gradients over K micro-batches per update")
    skip_nonfinite: bool = opt(False, "skip (and count) updates whose gradients hold NaN/Inf")
    steps_per_call: int = opt(1, "run K updates inside one compiled loop (1: one call per step)")
    distributed: bool = opt(False, "data parallel under msrun: --batch-size per rank, gradients averaged "
                                   "over ranks, rank 0 writes the run dir (needs --run-dir)")

    def validate(self):
        super().validate()
        self.check_positive("batch_size", "accumulate", "steps_per_call")
        self.check_positive("lr")
        self.check_non_negative("clip_value", "clip_norm", "grad_noise")
        self.check(not self.distributed or self.run_dir, "--distributed needs --run-dir (the same on every rank)")


def main(argv):
    cfg = parse_config(RegressionConfig, argv, __doc__)  # exits after printing under --dry-run
    rng, device = runtime.setup(cfg)  # first: with --distributed, the msrun scheduler process stops in here
    # only rank 0 creates and checks the run dir; the other ranks just find the checkpoint to resume
    resume_from = distributed.prepare_run_dir(cfg, rundir.prepare, "train_regression", "linear", "mse")

    model = Linear()
    model.update_parameters_name("model.")
    optimizer = make_optimizer(cfg.optimizer, model.trainable_params(), cfg.lr, "model.")
    transform = transforms.from_flags(
        optimizer.parameters, "model.", clip_value=cfg.clip_value, clip_norm=cfg.clip_norm,
        grad_noise=cfg.grad_noise, accumulate=cfg.accumulate, skip_nonfinite=cfg.skip_nonfinite)

    def forward(x, y):  # mean squared error
        return ops.mean(ops.square(model(x) - y))

    # --distributed: gradients averaged over ranks (None in a single process)
    step_fn = make_step(forward, optimizer, transform, grad_reducer=distributed.grad_reducer(optimizer.parameters))
    state = all_parameters(model, optimizer, transform)

    start = 0
    if resume_from:
        meta = checkpoint.load_into(resume_from, state,  # before the first compiled call
                                    check=lambda meta: rundir.check_resume_config(cfg, meta))
        rng.bit_generator.state = meta["rng"]
        start = meta["step"]
    if distributed.is_main():  # rank 0 alone writes files
        rundir.write_config(cfg)

    def draw(step):  # host inputs of one micro-batch step
        # --distributed: every rank draws the global batch and keeps its slice (same RNG state everywhere)
        return distributed.shard(*sample_batch(rng, distributed.global_batch(cfg.batch_size))) + step_fn.draw_noise(rng)

    def fit(*inputs):
        loss, _, norm, norm_after = step_fn.body(*inputs)
        return loss, norm, norm_after
    fit_phase = Phase("fit", draw, fit, ("loss/train", "grad_norm/model", "grad_norm/model_after"),
                      repeat=cfg.accumulate)

    def save(step):
        if distributed.is_main():
            checkpoint.save(cfg.run_dir, step, state, {"rng": rng.bit_generator.state, "config": cfg.to_dict()},
                            keep=cfg.keep_ckpts)

    logger = RunLogger(cfg.run_dir, cfg.to_dict(), cfg.steps, start, progress=not cfg.no_progress,
                       enabled=distributed.is_main())
    code = 0
    last = {}
    if start < cfg.steps:
        last, code = train([fit_phase], start_step=start, steps=cfg.steps, log_every=cfg.log_every,
                           logger=logger, save=save, ckpt_every=cfg.ckpt_every, steps_per_call=cfg.steps_per_call,
                           stop_on_nonfinite=not cfg.skip_nonfinite)
    w = float(model.dense.weight.asnumpy().reshape(()))
    b = float(model.dense.bias.asnumpy().reshape(()))
    # noise-free MSE of the fitted line on a fixed grid over the data range
    grid = np.linspace(-X_RANGE, X_RANGE, 101)
    metrics = {"w": w, "b": b, "loss": last.get("loss/train"), "steps": cfg.steps,
               "mse_vs_true_line": float(np.mean((w * grid + b - (2.0 * grid + 3.0)) ** 2)),
               "skipped_updates": transform.skipped_count(), "device": device}
    distributed.report(state)  # --distributed: one digest line per rank (equal: bit-identical ranks)
    if code == 0 and distributed.is_main():
        rundir.write_metrics(cfg.run_dir, metrics)
        logger.writer.add_text("metrics", json.dumps(metrics), cfg.steps)
    logger.close()
    print(f"w={w:.4f} b={b:.4f} (true 2, 3) run dir: {cfg.run_dir}")
    return code


if __name__ == "__main__":
    run_cli(main)
