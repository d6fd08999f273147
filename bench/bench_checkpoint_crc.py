"""What MindSpore's checkpoint CRC costs: save and load times with and without crc_check, on the
state of a DCGAN 32x32 run (width 64: G, D, G_ema, both Adam optimizers) and of the default digits run.

    python bench/bench_checkpoint_crc.py

Alternates with / without in one process, 5 rounds, and prints medians and ratios.
"""
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import loops  # noqa: F401  (the oneDNN cap, before any kernel)
import mindspore as ms  # noqa: E402

from gan.models import make_nets  # noqa: E402
from loops.learner import Learner, all_state, declare  # noqa: E402


def state(width, shape):
    G, D, E = make_nets("dcgan", 32, shape, width)
    return all_state(Learner("g", G), Learner("d", D), declare("g_ema", E))


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    ms.set_context(mode=ms.GRAPH_MODE)
    for label, params in (("DCGAN 32x32, width 64", state(64, (3, 32, 32))), ("digits default", state(32, (1, 8, 8)))):
        items = [{"name": p.name, "data": p} for p in params]
        times = {(op, crc): [] for op in ("save", "load") for crc in (False, True)}
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(5):
                for crc in (False, True):
                    path = os.path.join(tmp, f"x{int(crc)}.ckpt")
                    times["save", crc].append(timed(lambda: ms.save_checkpoint(items, path, crc_check=crc)))
                    times["load", crc].append(timed(lambda: ms.load_checkpoint(path, crc_check=crc)))
            size = os.path.getsize(os.path.join(tmp, "x1.ckpt"))
        print(f"{label}: {size / 2**20:.1f} MiB")
        for op in ("save", "load"):
            plain, crc = (statistics.median(times[op, c]) * 1000 for c in (False, True))
            print(f"  {op}: {plain:.1f} ms without CRC, {crc:.1f} ms with (x{crc / plain:.2f})")


if __name__ == "__main__":
    main()
