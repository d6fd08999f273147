"""TensorBoard (tensorboardX's event format) and tqdm: what a run shows while it trains.

Tags are namespaced (`loss/d`, `grad_norm/g`, `perf/steps_per_s`). Values arrive as Tensors and
are synced to the host here, only at the log interval.

Events are written synchronously, in this thread, with tensorboardX's EventsWriter (not its
SummaryWriter, whose background thread dies on a write error and then blocks training once its
queue fills). A failed event write (full disk, I/O error) is reported once in one line and turns
event logging off; it never stops a run that can still save its state.
"""
import glob
import json
import os
import sys
import time

import numpy as np
from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto import event_pb2
from tensorboardX.summary import image, scalar, text
from tqdm import tqdm


class EventLog:
    """An events.out.tfevents.* file in `logdir`; `add(summary, step)`, `flush()`, `close()`.
    After the first OSError it warns once and ignores every later write."""

    def __init__(self, logdir, flush_secs=30):
        self.flush_secs, self.last_flush, self.broken, self.writer = flush_secs, time.monotonic(), False, None
        # tensorboardX opens events.out.tfevents.<time>.<host> with a plain open(): a link planted at that
        # (predictable) name would be written through. A run's own events files are never links: drop any.
        for planted in glob.glob(os.path.join(glob.escape(logdir), "events.out.tfevents.*")):
            if os.path.islink(planted):
                os.remove(planted)
        self.guard(lambda: setattr(self, "writer", EventsWriter(os.path.join(logdir, "events"))))

    def guard(self, write):
        if self.broken:
            return
        try:
            write()
        except OSError as e:
            self.broken = True
            print(f"warning: TensorBoard events stopped: could not write to the run dir "
                  f"({e.strerror or e}); training goes on", file=sys.stderr, flush=True)

    def add(self, summary, step):
        if self.writer is None:
            return
        self.guard(lambda: self.writer.write_event(event_pb2.Event(summary=summary, step=int(step),
                                                                   wall_time=time.time())))
        if time.monotonic() - self.last_flush > self.flush_secs:
            self.flush()

    def flush(self):
        self.last_flush = time.monotonic()
        if self.writer is not None:
            self.guard(self.writer.flush)

    def close(self):
        if self.writer is not None:
            self.guard(self.writer.close)
            self.writer = None


def to_float(value):
    return float(value.asnumpy()) if hasattr(value, "asnumpy") else float(value)


def config_table(config):
    """The resolved config as a markdown table (TensorBoard's text plugin renders it)."""
    rows = ["| key | value |", "|---|---|"]
    rows += [f"| {k} | `{json.dumps(v)}` |" for k, v in sorted(config.items())]
    return "\n".join(rows)


def is_loss_tag(tag):
    return tag.startswith(("loss/", "losses/"))


LINE_EVERY_S = 10.0  # plain progress lines: at most one per this many seconds, and the last step


def format_seconds(seconds):
    if seconds == float("inf"):
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{secs:02d}s"


class RunLogger:
    """TensorBoard writer plus progress bar. `enabled=False` (non-zero ranks) makes it a no-op."""

    def __init__(self, run_dir, config, total_steps, start_step, progress=True, enabled=True):
        self.enabled = enabled
        self.progress_tags = ["perf/steps_per_s"]  # shown on the progress bar besides every loss/<model>
        self.latest = {}  # tag -> last logged float
        self.writer = EventLog(run_dir) if enabled else None
        if enabled and start_step == 0:
            self.text("config", 0, config_table(config))
        show = progress and enabled and sys.stderr.isatty()
        self.bar = tqdm(total=total_steps, initial=start_step, disable=not show, dynamic_ncols=True,
                        unit="step")
        # without a bar (output redirected, --no-progress): plain lines, at most one per LINE_EVERY_S
        self.lines = enabled and not show
        self.total, self.start, self.started = total_steps, start_step, time.monotonic()
        self.last_line, self.last_step = None, None
        self.run_dir, self.history = run_dir, {}  # loss tag -> [(step, value)], drawn into losses.png at close

    def note(self, message):
        """One status line on stdout (rank 0), clear of the progress bar."""
        if self.enabled:
            self.bar.write(message, file=sys.stdout)
            sys.stdout.flush()

    def progress_line(self, step):
        now = time.monotonic()
        if not self.lines or step == self.last_step or (self.last_line is not None and step < self.total
                                                        and now - self.last_line < LINE_EVERY_S):
            return
        self.last_line, self.last_step = now, step
        rate = (step - self.start) / max(now - self.started, 1e-9)
        eta = (self.total - step) / rate if rate > 0 else float("inf")
        shown = " ".join(f"{k}={v:.4g}" for k, v in self.latest.items()
                         if k.startswith("loss/") or k in self.progress_tags[1:])
        self.note(f"step {step}/{self.total} ({100 * step / max(1, self.total):.0f}%) {rate:.3g} steps/s "
                  f"ETA {format_seconds(eta)} {shown}".rstrip())

    def scalars(self, step, values):
        """Log a dict of tag -> Tensor/float; returns the host floats (for metrics.json)."""
        floats = {k: to_float(v) for k, v in values.items()}
        self.latest.update(floats)
        for tag, value in floats.items():
            if is_loss_tag(tag):
                self.history.setdefault(tag, []).append((step, value))
        if self.enabled:
            for tag, value in floats.items():
                self.writer.add(scalar(tag, value), step)
            self.writer.flush()  # once per log interval: a reader sees every logged step
        short = {k.split("/")[-1]: f"{v:.4g}" for k, v in floats.items()
                 if k.startswith("loss/") or k in self.progress_tags}
        if short:  # a hook's own values (e.g. episode returns) must not wipe the losses shown
            self.bar.set_postfix(short, refresh=False)
            self.progress_line(step)
        return floats

    def points(self, series):
        """{tag: [(x, value), ...]}: scalars at x-values of the caller's own (e.g. environment steps
        rather than iterations); not shown on the progress line."""
        if self.enabled:
            for tag, values in series.items():
                for x, value in values:
                    self.writer.add(scalar(tag, float(value)), int(x))
            self.writer.flush()

    def image(self, tag, step, hwc_uint8):
        if self.enabled:
            self.writer.add(image(tag, np.ascontiguousarray(hwc_uint8), dataformats="HWC"), step)

    def text(self, tag, step, markdown):
        if self.enabled:
            self.writer.add(text(tag, markdown), step)

    def advance(self, n=1):
        self.bar.update(n)

    def close(self):
        self.bar.close()
        if self.enabled:
            self.writer.close()
            self.save_loss_curves()

    def save_loss_curves(self):
        """losses.png in the run dir: every loss over the steps logged in this process, one panel each
        (for a look without TensorBoard; a resumed run draws its own part)."""
        if not self.history:
            return
        from PIL import Image
        from loops.files import WriteFailure, atomic_write
        from loops.plots import panels
        rows = [(tag, [s for s, _ in points], [v for _, v in points]) for tag, points in sorted(self.history.items())]
        picture = Image.fromarray(panels(f"losses vs step, {self.run_dir}", rows))
        try:
            atomic_write(os.path.join(self.run_dir, "losses.png"), lambda tmp: picture.save(tmp, format="PNG"),
                         "loss curves")
        except WriteFailure as e:
            print(f"warning: {e}", file=sys.stderr, flush=True)
