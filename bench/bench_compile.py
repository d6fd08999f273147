"""Where the compile of train_rl.py's fused PPO graph goes, and whether MindSpore's compile switches shorten it.

    python bench/bench_compile.py [--rounds 2] [--record] [-- TRAIN_RL_FLAGS]

Each (switch, round) is a fresh process running `train_rl.py --total-steps 2560` (10 iterations at the
defaults) with one of MindSpore's frontend compile switches (mindspore.graph._parse.compile_config, read
when a graph compiles) and COMPILE_PROFILE=1, which makes MindSpore print the seconds of every compile
pass. Prints, per switch, the first call's time (train_rl.py's "compiled; the first step took" line: the
compile and one iteration) and the evaluation return (a switch must not change the result), then the
defaults' passes that take at least 1% of the compile. Switches alternate within a round, after one
uncounted warm-up process.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402

SWITCHES = {  # name shown -> compile_config settings ("" = MindSpore's defaults)
    "defaults": "",
    "SINGLE_EVAL=1 (type inference on one thread)": "SINGLE_EVAL=1",
    "NOT_WAIT_BRANCH_EVAL=1": "NOT_WAIT_BRANCH_EVAL=1",
    "RECURSIVE_EVAL=1 (recursive type inference)": "RECURSIVE_EVAL=1",
    "TRAVERSE_SUBSTITUTIONS_MODE=1 (one IR pass over all nodes at a time)": "TRAVERSE_SUBSTITUTIONS_MODE=1",
    "GREED_PARSE=1 (decompose getattr etc. while parsing)": "GREED_PARSE=1",
}

CHILD = """
import sys
from mindspore.graph._parse import compile_config
for setting in sys.argv[1].split():
    key, value = setting.split("=")
    setattr(compile_config, key, value)
compile_config.COMPILE_PROFILE = "1"
sys.path.insert(0, {root!r})
import train_rl
from loops.config import run_cli
sys.argv = ["train_rl.py"] + sys.argv[2:]
run_cli(train_rl.main, sys.argv[1:])
"""


def run_child(settings, flags):
    """(first call seconds or None, eval return or None, {pass: seconds} of the first compile's profile)."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        try:  # the fixed flags last: they win over the same flags in FLAGS
            proc = subprocess.run([sys.executable, "-c", CHILD.format(root=ROOT), settings, *flags, "--total-steps",
                                   "2560", "--run-dir", run_dir, "--no-progress"],
                                  cwd=ROOT, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return None, None, {}
        out = proc.stdout + proc.stderr
        took = re.search(r"the first step took ([\d.]+) s", out)
        try:
            with open(os.path.join(run_dir, "metrics.json")) as f:
                ret = json.load(f).get("eval_return_mean")
        except (OSError, ValueError):
            ret = None
    return (float(took.group(1)) if took and proc.returncode == 0 else None, ret, passes(out))


def passes(out):
    """The largest 'Sums' block of COMPILE_PROFILE's output (one per compiled graph; the largest is the
    training iteration's): {pass: seconds}."""
    blocks = []
    for block in out.split("Sums")[1:]:
        found = {}
        for line in block.splitlines()[1:]:
            match = re.match(r"\s+(\S+)\s+:\s+([\d.]+)s\s+:", line)
            if not match:
                break
            found[match.group(1)] = float(match.group(2))
        blocks.append(found)
    return max(blocks, key=lambda found: sum(found.values()), default={})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, 101), metavar="1..100")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("flags", nargs="*", help="train_rl.py flags after --")
    args = parser.parse_args()
    results = {name: [] for name in SWITCHES}
    profile = {}
    run_child("", args.flags)  # warm-up, not counted: the first process also pays for cold files and .pyc
    for _ in range(args.rounds):
        for name, settings in SWITCHES.items():
            took, ret, found = run_child(settings, args.flags)
            results[name].append((took, ret))
            if name == "defaults" and found and not profile:
                profile = found
            print(f"{name}: first call {took} s, eval return {ret}", flush=True)
    rows = ["| compile switch | first call s (median (each)) | eval return |", "|---|---|---|"]
    for name, runs in results.items():
        times = [t for t, _ in runs if t is not None]
        cell = record.median_cell(times, digits=1) if len(times) == len(runs) else "compile failed"
        rows.append(f"| {name} | {cell} | {', '.join(str(r) for _, r in runs)} |")
    total = sum(profile.values()) or 1.0
    rows += ["", f"Compile passes of the defaults' training graph ({total:.2f} s in all; at least 1% shown):", "",
             "| pass | s | share |", "|---|---|---|"]
    for key, seconds in sorted(profile.items(), key=lambda kv: -kv[1]):
        if seconds / total >= 0.01:
            rows.append(f"| {key} | {seconds:.3f} | {100 * seconds / total:.1f}% |")
    record.publish("Compile time of the fused PPO graph", "\n".join(rows), args.record)


if __name__ == "__main__":
    main()
