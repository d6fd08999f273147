"""Resident memory of a whole train_rl.py run, sampled while it trains: does it stay flat once the
replay buffer is full? (A compiled call that leaks per call grows memory with every iteration.)

    python bench/bench_memory_rl.py [--algo dqn] [--total-steps 100000] [--record] [-- EXTRA FLAGS]

The run is a child process (as a user starts it); its VmRSS is read every --every seconds beside the
environment step its last progress line reported. Reported: RSS at the first sample, when the buffer
fills (the smaller of --buffer-size and the run), at the quarters of the run after that, and the slope after the buffer is
full, in MiB per 10k environment steps (a leak of one small tensor per call shows as a steady slope).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from bench import record  # noqa: E402
from loops import child_env  # noqa: E402

PROGRESS = re.compile(r"step (\d+)/(\d+)")


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def sample_run(argv, every):
    """Run `python train_rl.py argv`; returns [(iteration, iterations, rss MiB)] and the exit status."""
    proc = subprocess.Popen([sys.executable, "train_rl.py", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=child_env(PYTHONUNBUFFERED="1"))
    last = [0, 0]

    def read():
        for line in proc.stdout:
            found = PROGRESS.findall(line)
            if found:
                last[:] = map(int, found[-1])
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    samples = []
    while proc.poll() is None:
        rss = rss_mib(proc.pid)
        if rss is not None and last[1]:
            samples.append((last[0], last[1], rss))
        time.sleep(every)
    reader.join()
    return samples, proc.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="dqn")
    parser.add_argument("--total-steps", type=int, default=100_000)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    parser.add_argument("extra", nargs="*", help="more train_rl.py flags (after --)")
    args = parser.parse_args()
    from loops.config import parse_config
    from rl import algorithm
    with tempfile.TemporaryDirectory() as run_dir:
        argv = ["--algo", args.algo, "--total-steps", str(args.total_steps), "--run-dir", run_dir,
                "--log-every", "50", "--eval-episodes", "1", *args.extra]
        cfg = parse_config(algorithm(args.algo).Config, argv, "")  # the run's own warm-up and buffer size
        start = time.time()
        samples, status = sample_run(argv, args.every)
        wall = time.time() - start
    if status != 0 or len(samples) < 8:
        sys.exit(f"error: the run exited {status} with {len(samples)} samples")
    its = np.array([s[0] for s in samples], float)
    warm = getattr(cfg, "learning_starts", 0)  # iterations are spread evenly over the steps after the warm-up
    env_steps = warm + its / samples[-1][1] * (args.total_steps - warm)
    rss = np.array([s[2] for s in samples])
    full = min(getattr(cfg, "buffer_size", 0), args.total_steps)
    after = env_steps >= full
    rows = [("first sample", env_steps[0]), ("buffer full", full)] + [(f"{q}% of the run", args.total_steps * q // 100)
                                                          for q in (25, 50, 75, 100) if args.total_steps * q // 100 > full]
    lines = ["| point | env step (sampled) | RSS MiB |", "|---|---|---|"]
    for name, step in rows:
        i = int(np.argmin(np.abs(env_steps - step)))
        lines.append(f"| {name} | {env_steps[i]:.0f} | {rss[i]:.0f} |")
    slope = np.polyfit(env_steps[after], rss[after], 1)[0] * 10_000 if after.sum() >= 4 else float("nan")
    lines.append(f"| slope after the buffer is full | {int(after.sum())} samples | {slope:+.2f} MiB per 10k steps |")
    lines.append(f"| peak | | {rss.max():.0f} |")
    lines.append(f"\n{len(samples)} samples over {wall:.0f} s; buffer {getattr(cfg, 'buffer_size', 'none')} transitions.")
    record.publish(f"Memory of a whole {args.algo} run", "\n".join(lines), args.record)


if __name__ == "__main__":
    main()
