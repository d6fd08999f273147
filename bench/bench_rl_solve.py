"""Wall-clock time to solve CartPole-v1: seconds from process start (imports and compilation included)
until the mean return of the last 20 finished training episodes first reaches 475, for train_rl.py's PPO
on both environment backends and for CleanRL's ppo.py in PyTorch (bench/torch_ppo_cleanrl.py), the
same seeds, one process at a time, side by side in this run.

    PYTHONPATH=<torch site-packages> python bench/bench_rl_solve.py [--seeds 3] [--record]

train_rl.py is read from its progress lines (`--log-every 1`: the mean of the last 20 episodes after
every iteration, as a user watching it sees it) and stopped once solved; the PyTorch script stops
itself. A run that never reaches 475 counts as its whole length and is marked. torch is not a project
dependency: without it, only train_rl.py's rows are printed.
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from bench import record  # noqa: E402
from loops import child_env  # noqa: E402

MEAN20 = re.compile(r"step (\d+)/\d+ .*charts/episodic_return_mean20=([0-9.]+)")
TARGET = 475.0


def solve_ours(seed, extra):
    """(seconds from process start to solved or to the end, solved?) of one train_rl.py run."""
    import tempfile
    with tempfile.TemporaryDirectory() as run_dir:
        argv = [sys.executable, "train_rl.py", "--seed", str(seed), "--run-dir", run_dir, "--log-every", "1",
                "--eval-episodes", "1", "--no-progress", *extra]
        start = time.time()
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=child_env(PYTHONUNBUFFERED="1"))
        for line in proc.stdout:
            found = MEAN20.search(line)
            if found and float(found.group(2)) >= TARGET:
                took = time.time() - start
                proc.kill()
                proc.wait()
                return took, True
        proc.wait()
        return time.time() - start, False


def solve_torch(seed):
    start = time.time()
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "torch_ppo_cleanrl.py"), "--seed", str(seed),
                          "--target", str(TARGET)], capture_output=True, text=True, env=child_env())
    words = out.stdout.split()
    if out.returncode != 0 or not words:
        sys.exit(f"error: bench/torch_ppo_cleanrl.py failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return float(words[-2]) if words[0] == "solved" else time.time() - start, words[0] == "solved"


def summary(results):
    times = np.array([t for t, _ in results])
    solved = sum(ok for _, ok in results)
    each = " ".join(f"{t:.1f}" + ("" if ok else "*") for t, ok in results)
    return f"{np.median(times):.1f} | {times.mean():.1f} +- {times.std(ddof=1) if len(times) > 1 else 0:.1f} | {solved}/{len(results)} | {each}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    rows = {"train_rl.py (PPO defaults, --env-backend gymnasium)": lambda s: solve_ours(s, ["--env-backend", "gymnasium"]),
            "train_rl.py (PPO defaults, --env-backend mindspore)": lambda s: solve_ours(s, ["--env-backend", "mindspore"])}
    if have_torch:
        rows["CleanRL ppo.py in PyTorch (its CartPole defaults)"] = solve_torch
    results = {name: [] for name in rows}
    for seed in range(args.seeds):  # interleaved: a drift of the machine's speed hits every row alike
        for name, solve in rows.items():
            results[name].append(solve(seed))
            print(f"seed {seed}: {name}: {results[name][-1][0]:.1f} s", flush=True)
    lines = ["| implementation | median s | mean +- std s | solved | per seed (s; * = not solved, whole run) |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {summary(res)} |" for name, res in results.items()]
    record.publish("Time to solve CartPole-v1 (last-20 mean >= 475), process start to solved",
                   "\n".join(lines), args.record)


if __name__ == "__main__":
    main()
