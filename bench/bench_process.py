"""Whole training processes, as a user meets them: ours vs a PyTorch eager twin (bench/torch_twin.py).

    python bench/bench_process.py [--jobs regression,ring8] [--rounds 3] [--record]

For each job, both scripts run at two step counts, alternating frameworks, `--rounds` times. The
marginal cost per step is (wall at the long count - wall at the short count) / (difference in
steps): start-up, compile and the final evaluation cancel. Time to first step is the wall time until
the process reports its first step done (ours: the driver's "compiled; the first ..." line; at K > 1
that first call holds K steps). Medians over rounds. Logging every 100 steps, no checkpoints. Our
scripts run with torch hidden, as on a fresh install (see `ours`). The digits job has no twin: it
measures the time to first step of the main job only.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402
from loops import child_env  # noqa: E402

JOBS = {  # name: (our command, step counts, PyTorch twin job or None: time to first step only)
    "regression": (["train_regression.py", "--log-every", "100"], (500, 20500), "regression"),
    "ring8": (["train_gan.py", "--dataset", "ring8", "--log-every", "100", "--eval-samples", "500"],
              (500, 2500), "ring8"),
    "digits": (["train_gan.py", "--log-every", "100", "--eval-samples", "500"], (20, 20), None),
}
FRAMEWORKS = (("ours", "this project"), ("torch", "PyTorch eager twin"))  # table rows: key, label
FIRST_STEP_MARKERS = ("compiled; the first", "first step done")


def timed(cmd, env_extra=None):
    """(wall seconds, seconds until the first-step marker) of one process; raises on failure."""
    start = time.perf_counter()
    first, lines = None, []
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(**(env_extra or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        lines.append(line)
        if first is None and any(m in line for m in FIRST_STEP_MARKERS):
            first = time.perf_counter() - start
    code = proc.wait()
    wall = time.perf_counter() - start
    if code != 0 or first is None:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{''.join(lines[-20:])}")
    return wall, first


def ours(args, steps, tmp):
    """Our script as on a fresh install: torch (a bench-only extra here) hidden, because tensorboardX
    imports it when it is there (+1.2 s of start-up)."""
    run_dir = os.path.join(tmp, f"run{time.monotonic_ns()}")
    hide = os.path.join(tmp, "no_torch")
    os.makedirs(os.path.join(hide, "torch"), exist_ok=True)
    with open(os.path.join(hide, "torch", "__init__.py"), "w") as f:
        f.write("raise ModuleNotFoundError('torch hidden by bench_process.py', name='torch')\n")
    return timed([sys.executable] + args + ["--steps", str(steps), "--ckpt-every", "0", "--no-progress",
                                            "--run-dir", run_dir], env_extra={"PYTHONPATH": hide})


def twin(job, steps):
    return timed([sys.executable, os.path.join("bench", "torch_twin.py"), job, "--steps", str(steps)])


def measure(name, rounds):
    args, (short, long), job = JOBS[name]
    runners = [("ours", lambda n: ours(args, n, tmp))] + ([("torch", lambda n: twin(job, n))] if job else [])
    walls = {who: {short: [], long: []} for who, _ in runners}
    firsts = {who: [] for who, _ in runners}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for steps in sorted({short, long}):
                for who, run in runners:
                    wall, first = run(steps)
                    walls[who][steps].append(wall)
                    firsts[who].append(first)
    out = {}
    for who in walls:
        per_step = [(b - a) / (long - short) for a, b in zip(walls[who][short], walls[who][long])] if long > short else []
        out[who] = (statistics.median(per_step) if per_step else None, per_step, statistics.median(firsts[who]),
                    statistics.median(walls[who][short]))
    return out


def table(results):
    rows = ["| job | framework | marginal ms / step (median; all) | vs PyTorch | time to first step, s (median) | "
            "whole process at the short count, s |", "|---|---|---|---|---|---|"]
    for name, out in results.items():
        base = out["torch"][0] if "torch" in out else None
        for who, label in FRAMEWORKS:
            if who not in out:
                continue
            med, all_, first, wall = out[who]
            marginal = f"{med * 1e3:.3f} ({', '.join(f'{v * 1e3:.3f}' for v in all_)})" if med is not None else "-"
            ratio = f"{med / base:.2f}x" if med is not None and base else "-"
            rows.append(f"| {name} | {label} | {marginal} | {ratio} | {first:.1f} | {wall:.1f} |")
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", default="regression,ring8,digits")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    results = {name: measure(name, args.rounds) for name in args.jobs.split(",")}
    text = table(results)
    print(text)
    if args.record:
        record.append("Whole training processes vs PyTorch eager twins",
                      "python bench/bench_process.py " + " ".join(sys.argv[1:]), text)


if __name__ == "__main__":
    main()
