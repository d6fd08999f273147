"""TensorBoard (tensorboardX) and tqdm: what a run shows while it trains.

Tags are namespaced (`loss/d`, `grad_norm/g`, `perf/steps_per_s`). Values arrive as Tensors and
are synced to the host here, only at the log interval.
"""
import json
import sys

import numpy as np
from tensorboardX import SummaryWriter
from tqdm import tqdm


def to_float(value):
    return float(value.asnumpy()) if hasattr(value, "asnumpy") else float(value)


def config_table(config):
    """The resolved config as a markdown table (TensorBoard's text plugin renders it)."""
    rows = ["| key | value |", "|---|---|"]
    rows += [f"| {k} | `{json.dumps(v)}` |" for k, v in sorted(config.items())]
    return "\n".join(rows)


class RunLogger:
    """TensorBoard writer plus progress bar. `enabled=False` (non-zero ranks) makes it a no-op."""

    def __init__(self, run_dir, config, total_steps, start_step, progress=True, enabled=True):
        self.enabled = enabled
        self.latest = {}  # tag -> last logged float
        self.writer = SummaryWriter(run_dir, flush_secs=30) if enabled else None
        if enabled and start_step == 0:
            self.writer.add_text("config", config_table(config), 0)
        show = progress and enabled and sys.stderr.isatty()
        self.bar = tqdm(total=total_steps, initial=start_step, disable=not show, dynamic_ncols=True,
                        unit="step")

    def scalars(self, step, values):
        """Log a dict of tag -> Tensor/float; returns the host floats (for metrics.json)."""
        floats = {k: to_float(v) for k, v in values.items()}
        self.latest.update(floats)
        if self.enabled:
            for tag, value in floats.items():
                self.writer.add_scalar(tag, value, step)
        short = {k.replace("loss/", "").replace("perf/", ""): f"{v:.4g}" for k, v in floats.items()
                 if k.startswith("loss/") or k == "perf/steps_per_s"}
        self.bar.set_postfix(short, refresh=False)
        return floats

    def image(self, tag, step, hwc_uint8):
        if self.enabled:
            self.writer.add_image(tag, np.ascontiguousarray(hwc_uint8), step, dataformats="HWC")

    def advance(self, n=1):
        self.bar.update(n)

    def close(self):
        self.bar.close()
        if self.enabled:
            self.writer.close()
