"""Wall-clock time to solve CartPole-v1: seconds from process start (imports and compilation included)
until the mean return of the last 20 finished training episodes first reaches 475, for train_rl.py's PPO
on both environment backends and for CleanRL's ppo.py in PyTorch (bench/torch_ppo_cleanrl.py), the
same seeds, one process at a time, side by side in this run.

    PYTHONPATH=<torch site-packages> python bench/bench_rl_solve.py [--seeds 3] [--record] [--extra "FLAGS"]
    PYTHONPATH=<torch site-packages> python bench/bench_rl_solve.py --num-seeds 10 [--record]

train_rl.py runs to its end with `--log-every 1` (the mean of the last 20 episodes logged after every
iteration) and is timed by the wall time of the first logged mean >= 475 in its TensorBoard events.
Its plain progress lines come at most every 10 s, so timing by them (as this bench did before
2026-12-07 evening) added up to 10 s. The PyTorch script stops itself when solved. A run that never reaches 475 counts as its whole length and is marked. torch is not a project
dependency: without it, only train_rl.py's rows are printed.

--num-seeds K instead times ONE train_rl.py process training K seeds together (`--env-backend
mindspore --num-seeds K`, run to its end): seconds from its start until every seed's last-20 mean has
reached 475 (read from each seed's TensorBoard events, RUN/seed<S>/) and until the process ends; beside
it one whole CleanRL run (500k steps, not stopped when solved) and CleanRL's time to solve, seed 0.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from bench import record  # noqa: E402
from loops import child_env  # noqa: E402

TARGET = 475.0


def ours_env():
    """child_env() for a train_rl.py process, without the PYTHONPATH entries that hold torch: the project's
    own environment, as a user runs it. With torch importable, tensorboardX imports it (~1.3 s of start-up
    on this machine, measured 2026-12-07: 2.8 s vs 1.45 s to import mindspore, gymnasium and tensorboardX),
    which added that much to our runs' start-up before 2026-12-07 night."""
    env = child_env()
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not os.path.isdir(os.path.join(p, "torch"))]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        env.pop("PYTHONPATH", None)
    return env


def first_solved(run_dir, start):
    """Seconds from `start` to the first logged last-20 mean >= 475 in run_dir's TensorBoard events (the
    moment the iteration's logging wrote it, which is when a user could see it), or None."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    hits = [e.wall_time for e in events.Scalars("charts/episodic_return_mean20") if e.value >= TARGET]
    return hits[0] - start if hits else None


def solve_ours(seed, extra):
    """(seconds from process start to solved or to the end, solved?) of one train_rl.py run, run to its end."""
    import tempfile
    with tempfile.TemporaryDirectory() as run_dir:
        argv = [sys.executable, "train_rl.py", "--seed", str(seed), "--run-dir", run_dir, "--log-every", "1",
                "--eval-episodes", "1", "--no-progress", *extra]
        start = time.time()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, env=ours_env())
        took = time.time() - start
        solved = first_solved(run_dir, start)
        return (solved, True) if solved is not None else (took, False)


def solve_torch(seed):
    start = time.time()
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "torch_ppo_cleanrl.py"), "--seed", str(seed),
                          "--target", str(TARGET)], capture_output=True, text=True, env=child_env())
    words = out.stdout.split()
    if out.returncode != 0 or not words:
        sys.exit(f"error: bench/torch_ppo_cleanrl.py failed: {(out.stderr.strip().splitlines() or ['no output'])[-1]}")
    return float(words[-2]) if words[0] == "solved" else time.time() - start, words[0] == "solved"


def solve_group(seeds):
    """(seconds to every seed solved or None, seconds of the whole process, seeds solved, seeds whose
    final evaluation is >= 475) of one train_rl.py process training `seeds` seeds together."""
    import json
    import tempfile
    with tempfile.TemporaryDirectory() as run_dir:
        start = time.time()
        subprocess.run([sys.executable, "train_rl.py", "--env-backend", "mindspore", "--num-seeds", str(seeds),
                        "--run-dir", run_dir, "--log-every", "1", "--no-progress"], cwd=ROOT, check=True,
                       capture_output=True, env=ours_env())
        took = time.time() - start
        solved_at = [t for t in (first_solved(os.path.join(run_dir, f"seed{seed}"), start) for seed in range(seeds))
                     if t is not None]
        with open(os.path.join(run_dir, "metrics.json")) as f:
            evaluated = sum(s["eval_return_mean"] >= TARGET for s in json.load(f)["seeds"])
    return (max(solved_at) if len(solved_at) == seeds else None), took, len(solved_at), evaluated


def torch_whole_run(seed):
    """Seconds of one whole CleanRL ppo.py process at its defaults (500k steps, not stopped when solved)."""
    start = time.time()
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "torch_ppo_cleanrl.py"), "--seed", str(seed),
                    "--target", "1e9"], check=True, capture_output=True, env=child_env())
    return time.time() - start


def group_main(seeds, publish):
    solved, took, n_solved, evaluated = solve_group(seeds)
    print(f"{seeds} seeds in one process: all solved at {solved} s, process {took:.1f} s", flush=True)
    lines = ["| run | seconds until solved | seconds, whole process | seeds |", "|---|---|---|---|",
             f"| train_rl.py --env-backend mindspore --num-seeds {seeds} (one process) | "
             f"{'%.1f' % solved if solved else 'not all'} (every seed) | {took:.1f} | last-20 >= 475: "
             f"{n_solved}/{seeds}; final evaluation >= 475: {evaluated}/{seeds} |"]
    try:
        import torch  # noqa: F401
        cleanrl_solve, ok = solve_torch(0)
        whole = torch_whole_run(0)
        lines.append(f"| CleanRL ppo.py in PyTorch, seed 0 (its CartPole defaults) | "
                     f"{cleanrl_solve:.1f}{'' if ok else '*'} | {whole:.1f} (500k steps) | 1 |")
    except ImportError:
        pass
    record.publish(f"{seeds} seeds of PPO on CartPole-v1 in one process", "\n".join(lines), publish)


def summary(results):
    times = np.array([t for t, _ in results])
    solved = sum(ok for _, ok in results)
    each = " ".join(f"{t:.1f}" + ("" if ok else "*") for t, ok in results)
    return f"{np.median(times):.1f} | {times.mean():.1f} +- {times.std(ddof=1) if len(times) > 1 else 0:.1f} | {solved}/{len(results)} | {each}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--num-seeds", type=int, default=0, help="time one process training this many seeds instead")
    parser.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    parser.add_argument("--extra", default="", help="one more train_rl.py row with these flags, e.g. "
                                                   "\"--num-envs 32 --num-steps 8\"")
    args = parser.parse_args()
    if args.num_seeds:
        return group_main(args.num_seeds, args.record)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    rows = {"train_rl.py (PPO defaults, --env-backend gymnasium)": lambda s: solve_ours(s, ["--env-backend", "gymnasium"]),
            "train_rl.py (PPO defaults, --env-backend mindspore)": lambda s: solve_ours(s, ["--env-backend", "mindspore"])}
    if args.extra:
        rows[f"train_rl.py {args.extra}"] = lambda s: solve_ours(s, args.extra.split())
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
