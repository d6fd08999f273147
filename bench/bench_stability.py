"""Run-to-run stability of whole training processes, alone and beside one busy neighbour process.

    python bench/bench_stability.py [--jobs regression,ring8,digits] [--runs 10] [--alone-only] [--record]

Each job runs `--runs` times back to back, ours and its PyTorch eager twin (bench/torch_twin.py)
alternating, first with the machine otherwise idle, then with one neighbour process spinning a
Python busy loop (one core of work, as another user's job would take). Reported per job and
framework: median and max of the whole-process wall times, max / median (the spread a user meets
from run to run), and the neighbour's slowdown (median beside it / median alone). The digits job
has no twin. Torch is hidden from our scripts as on a fresh install (bench_process.py `ours`).
"""
import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402
from bench.bench_process import FRAMEWORKS, ours, twin  # noqa: E402

JOBS = {  # name: (our script's arguments, steps, twin job or None)
    "regression": (["train_regression.py", "--log-every", "100"], 20500, "regression"),
    "ring8": (["train_gan.py", "--dataset", "ring8", "--log-every", "100", "--eval-samples", "500"], 1000, "ring8"),
    "digits": (["train_gan.py", "--log-every", "100", "--eval-samples", "500"], 500, None),
}


class Neighbour:
    """One process spinning on the CPU for as long as the `with` lasts."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def measure(name, runs, tmp, conditions):
    args, steps, job = JOBS[name]
    runners = {"ours": lambda: ours(args, steps, tmp)[0]}
    if job:
        runners["torch"] = lambda: twin(job, steps)[0]
    walls = {(who, busy): [] for who in runners for busy in conditions}
    for busy in conditions:
        with Neighbour() if busy else contextlib.nullcontext():
            for _ in range(runs):
                for who, run in runners.items():
                    walls[who, busy].append(run())
    return walls


def table(results):
    rows = ["| job | framework | alone: median s (max) | max / median | beside a busy process: median s (max) | "
            "max / median | slowdown (median beside / alone) |", "|---|---|---|---|---|---|---|"]
    for name, walls in results.items():
        for who, label in FRAMEWORKS:
            if (who, False) not in walls:
                continue
            medians = {busy: statistics.median(walls[who, busy]) for busy in (False, True) if (who, busy) in walls}
            cells = []
            for busy in (False, True):
                if busy not in medians:
                    cells += ["-", "-"]
                    continue
                med, top = medians[busy], max(walls[who, busy])
                cells += [f"{med:.2f} ({top:.2f})", f"{top / med:.2f}"]
            slowdown = f"{medians[True] / medians[False]:.2f}x" if True in medians else "-"
            rows.append(f"| {name} | {label} | {' | '.join(cells)} | {slowdown} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default="regression,ring8,digits")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--alone-only", action="store_true", help="skip the runs beside a busy process")
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for name in args.jobs.split(","):
            results[name] = measure(name, args.runs, tmp, (False,) if args.alone_only else (False, True))
            for key, values in results[name].items():
                print(name, *key, " ".join(f"{v:.2f}" for v in values), flush=True)
    record.publish("Run-to-run stability, alone and beside a busy process", table(results), args.record)


if __name__ == "__main__":
    main()
