"""Run one training command over many seeds and report every metric as mean +- std (min, max).

    python -m tools.sweep --seeds 10 -- --dataset grid25            # train_gan.py, seeds 0..9
    python -m tools.sweep --seeds 0-4 --goal "fid<=10" -- train_gan.py --loss hinge
    python -m tools.sweep --seeds 3 -- train_rl.py --algo sac

Everything after `--` is the training command: an optional script (default train_gan.py) and its
flags, without --seed and --run-dir (the sweep sets them). The runs are sequential (one at a time,
so each gets the machine's cores) into OUT/s<seed>, each with its output in OUT/s<seed>.log.
OUT/sweep.json holds the command, every run's metrics.json and the summary; OUT/sweep.md the table,
ready for a README. Interrupted (Ctrl-C, a reboot)? Run the same command with the same --out: the
finished seeds are kept, an unfinished one resumes from its last checkpoint.
--goal KEY>=X (also <=, >, <, ==; repeatable) counts the seeds that meet it: "modes>=24: 9/10 seeds".
wall_s is each run's whole-process wall time (start-up, compiling and evaluation included).
std is the sample standard deviation (ddof 1), as in published mean +- std tables.
Exit status 0 when every seed finished, 1 when some run failed (the table covers the others), 2 on
bad input.
"""
import argparse
import datetime
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time

SEED_BYTES = 100  # a Python int in the seed list and the de-duplicating dict, about
SKIPPED_KEYS = ("step", "steps", "seed")  # bookkeeping, not results
GOAL = re.compile(r"^\s*([A-Za-z_][\w/]*)\s*(>=|<=|==|>|<)\s*(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*$")
COMPARE = {">=": float.__ge__, "<=": float.__le__, ">": float.__gt__, "<": float.__lt__, "==": float.__eq__}


def parse_seeds(text):
    """"10" -> 0..9; "0-4" -> 0..4; "0,3,7-9" -> [0, 3, 7, 8, 9] (order kept, duplicates dropped)."""
    from loops.config import UserError
    from loops.memory import check_fits
    if re.fullmatch(r"\d+", text.strip()):
        ranges = [(0, int(text))]
    else:
        ranges = []
        for part in text.split(","):
            m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
            if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
                raise UserError(f"--seeds {text!r}: expected a count (10), a range (0-9) or a list (0,3,7-9)")
            ranges.append((int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    from loops.config import MAX_SEED
    if any(b - 1 > MAX_SEED for a, b in ranges):  # else every run would fail on its --seed
        raise UserError(f"--seeds {text.strip()}: seeds must be in [0, {MAX_SEED}]")
    # counted before a list is made: "--seeds 100000000000" would fill the memory before any run
    check_fits([(f"--seeds {text.strip()} (the list of seeds)", sum(b - a for a, b in ranges) * SEED_BYTES)])
    seeds = [s for a, b in ranges for s in range(a, b)]
    if not seeds:
        raise UserError(f"--seeds {text!r} names no seed")
    return list(dict.fromkeys(seeds))


def seed_text(seeds):
    """[0, 1, 2, 5] -> "0-2, 5"."""
    parts, start = [], 0
    for i in range(1, len(seeds) + 1):
        if i == len(seeds) or seeds[i] != seeds[i - 1] + 1:
            first, last = seeds[start], seeds[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ", ".join(parts)


def well_formed(record):
    """A sweep.json this tool wrote: script, flags (a list of strings) and runs (objects with seed, status)."""
    return (isinstance(record, dict) and isinstance(record.get("script"), str)
            and isinstance(record.get("flags"), list) and all(isinstance(f, str) for f in record["flags"])
            and isinstance(record.get("runs", []), list)
            and all(isinstance(r, dict) and isinstance(r.get("seed"), int) and "status" in r
                    for r in record.get("runs", [])))


def parse_goal(text):
    from loops.config import UserError
    m = GOAL.match(text)
    if not m:
        raise UserError(f"--goal {text!r}: expected KEY>=VALUE (or <=, >, <, ==), e.g. modes>=24")
    return m.group(1), m.group(2), float(m.group(3))


def split_command(words):
    """['train_rl.py', '--algo', 'sac'] -> ('train_rl.py', [...]); flags alone -> train_gan.py."""
    from loops.config import UserError
    script, flags = ("train_gan.py", words) if not words or not words[0].endswith(".py") else (words[0], words[1:])
    for flag in flags:
        name = flag.split("=")[0]
        if name in ("--seed", "--run-dir", "--resume"):
            raise UserError(f"{name}: the sweep sets it for each run; leave it out of the command")
    return script, flags


def numeric_metrics(metrics):
    """The scalar results of one metrics.json (no lists, flags, sizes or bookkeeping)."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            and k not in SKIPPED_KEYS and not k.startswith("params_")}


def check_goal_keys(goals, metrics):
    """A goal on a metric the runs do not write is a typo: refuse it (with did-you-mean), not drop it."""
    import difflib
    from loops.config import UserError
    keys = sorted(numeric_metrics(metrics))
    for key, op, x in goals:
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UserError(f"--goal {key}{op}{x:g}: the runs' metrics.json has no numeric {key!r} ({hint}"
                            f"it has {', '.join(keys)}); the finished seeds are kept: fix --goal and run again")


def summarize(runs, goals):
    """{key: {n, mean, std, min, max, [max_over_min], [goal, met]}} over the runs that finished."""
    done = [r for r in runs if r["status"] == 0]
    keys = sorted({k for r in done for k in numeric_metrics(r["metrics"])})
    goal_keys = [g[0] for g in goals]
    keys = [k for k in goal_keys if k in keys] + [k for k in keys if k not in goal_keys]
    table = {}
    for key in keys:
        values = [numeric_metrics(r["metrics"])[key] for r in done if key in numeric_metrics(r["metrics"])]
        n, mean = len(values), sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        row = {"n": n, "mean": mean, "std": std, "min": min(values), "max": max(values)}
        if min(values) > 0:
            row["max_over_min"] = max(values) / min(values)  # spread across seeds, e.g. for FID
        for gk, op, x in goals:
            if gk == key:
                row.setdefault("goals", []).append({"goal": f"{gk}{op}{x:g}",
                                                    "met": sum(COMPARE[op](v, x) for v in values)})
        table[key] = row
    return table


def fmt(v):
    return f"{v:.0f}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.4g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


def markdown(sweep):
    """The summary as a Markdown table, with the command and per-seed values."""
    done = [r for r in sweep["runs"] if r["status"] == 0]
    seeds = seed_text([r["seed"] for r in done])
    lines = [f"`{sweep['command']}` ({len(done)} seeds: {seeds})", "",
             "| metric | mean +- std | min | max | max/min | per seed | goals |", "|---|---|---|---|---|---|---|"]
    for key, row in sweep["summary"].items():
        per_seed = " ".join(fmt(numeric_metrics(r["metrics"]).get(key, float("nan"))) for r in done)
        goals = "; ".join(f"{g['goal']}: {g['met']}/{row['n']}" for g in row.get("goals", []))
        ratio = fmt(row["max_over_min"]) if "max_over_min" in row else ""
        lines.append(f"| {key} | {fmt(row['mean'])} +- {fmt(row['std'])} | {fmt(row['min'])} | {fmt(row['max'])} "
                     f"| {ratio} | {per_seed} | {goals} |")
    failed = [r for r in sweep["runs"] if r["status"] != 0]
    if failed:
        lines += ["", "Failed: " + ", ".join(f"seed {r['seed']} (exit {r['status']}, {r['log']})" for r in failed)]
    return "\n".join(lines) + "\n"


def write_json(path, obj):
    """Temp file + rename (loops/files.py): a reader or an interrupted sweep never sees half a file, and
    a full disk is one `error:` line (exit 4). Not loops.rundir's: that one loads MindSpore."""
    from loops.files import atomic_write
    text = json.dumps(obj, indent=2) + "\n"

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    atomic_write(path, write, os.path.basename(path), len(text))


def run_seed(script, flags, seed, out):
    """One training run; returns its record (status = the exit code)."""
    run_dir = os.path.join(out, f"s{seed}")
    log = run_dir + ".log"
    ckpt_dir = os.path.join(run_dir, "checkpoints")  # a save killed half-way leaves only a .tmp: no resume
    resume = os.path.isdir(ckpt_dir) and any(name.endswith(".ckpt") for name in os.listdir(ckpt_dir))
    cmd = [sys.executable, script, *flags, "--seed", str(seed), "--run-dir", run_dir, "--no-progress"]
    cmd += ["--resume"] if resume else []
    start = time.time()
    with open(log, "a") as f:
        f.write("$ " + shlex.join(cmd) + "\n")
        f.flush()
        # its own session: a Ctrl-C reaches the sweep only, which then stops the run exactly once, so
        # the run saves a checkpoint and a rerun of the sweep resumes it
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=user_env())
        try:
            status = proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            proc.wait()
            raise
    record = {"seed": seed, "run_dir": run_dir, "log": log, "status": status,
              "seconds": round(time.time() - start, 1), "resumed": bool(resume), "metrics": {}}
    metrics_path = os.path.join(run_dir, "metrics.json")
    if status == 0 and os.path.isfile(metrics_path):
        with open(metrics_path) as f:
            record["metrics"] = json.load(f)
        record["metrics"]["wall_s"] = record["seconds"]  # the whole process: start-up, compile, evaluation
    elif status == 0:
        record["status"] = -1  # finished without metrics: nothing to summarize
    return record


def user_env():
    """The environment the user started the sweep with: importing loops capped oneDNN at AVX2 for
    this process (loops/__init__.py); a run must decide that itself, as when started directly."""
    from loops import child_env
    return child_env()


def last_line(path):
    try:
        with open(path) as f:
            return last_line_of(f.read())
    except OSError:
        return ""


def check_command(script, flags):
    """--dry-run once before the first run: a typo fails now, not after hours of seeds."""
    from loops.config import UserError
    if not os.path.isfile(script):
        raise UserError(f"{script}: no such training script")
    proc = subprocess.run([sys.executable, script, *flags, "--seed", "0", "--dry-run"],
                          capture_output=True, text=True, env=user_env())
    if proc.returncode != 0:
        message = last_line_of(proc.stderr) or f"exit status {proc.returncode}"
        raise UserError(f"{shlex.join([script, *flags])}: {message.removeprefix('error: ')}")


def last_line_of(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def main(argv):
    from loops.config import CommandLineParser, UserError
    if "--" in argv:
        own, command = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    else:
        own, command = argv, []
    parser = CommandLineParser(prog="python -m tools.sweep", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="10", help="a count (10: seeds 0..9), a range (0-9) or a list (0,3,7-9)")
    parser.add_argument("--out", default="", help="sweep directory (default: runs/sweep__<script>__<time>); "
                                                  "an existing sweep of the same command continues")
    parser.add_argument("--goal", action="append", default=[], help="KEY>=X (or <=, >, <, ==): count the seeds "
                                                                    "that meet it; repeatable")
    args = parser.parse_args(own)
    seeds = parse_seeds(args.seeds)
    goals = [parse_goal(g) for g in args.goal]
    script, flags = split_command(command)
    shown = shlex.join(["python", "-m", "tools.sweep", "--seeds", args.seeds,
                        *[w for g in args.goal for w in ("--goal", g)], "--", script, *flags])
    out = args.out or os.path.join(
        "runs", f"sweep__{os.path.splitext(os.path.basename(script))[0]}__"
                f"{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}")
    sweep_path = os.path.join(out, "sweep.json")
    previous = {}
    if os.path.isfile(sweep_path):
        try:
            with open(sweep_path) as f:
                old = json.load(f)
        except (OSError, ValueError) as e:
            raise UserError(f"{sweep_path} is unreadable ({e}); choose another --out")
        if not well_formed(old):
            raise UserError(f"{sweep_path} is not a sweep record (a JSON object with script, flags and runs); "
                            "choose another --out")
        if [old.get("script"), old.get("flags")] != [script, flags]:
            raise UserError(f"{out} holds a sweep of another command ({shlex.join([old.get('script', '?'), *old.get('flags', [])])}); "
                            "choose another --out")
        previous = {r["seed"]: r for r in old.get("runs", []) if r["status"] == 0}
    elif os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise UserError(f"--out {out} exists and is not a sweep directory; choose another --out")
    check_command(script, flags)
    os.makedirs(out, exist_ok=True)
    sweep = {"command": shown, "script": script, "flags": flags, "seeds": seeds, "runs": [], "summary": {}}
    write_json(sweep_path, {**sweep, "runs": list(previous.values())})  # from now on --out is this sweep's
    print(f"sweep: {shlex.join([script, *flags])} over seeds {seed_text(seeds)} ({len(seeds)} runs), into {out}", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops the sweep like Ctrl-C
    try:
        for i, seed in enumerate(seeds):
            if seed in previous:
                record = previous[seed]
                print(f"[{i + 1}/{len(seeds)}] seed {seed}: kept from the earlier sweep", flush=True)
            else:
                print(f"[{i + 1}/{len(seeds)}] seed {seed}: running, log {os.path.join(out, f's{seed}.log')}",
                      flush=True)
                record = run_seed(script, flags, seed, out)
                if record["status"] == 0:
                    keys = [g[0] for g in goals] or list(numeric_metrics(record["metrics"]))[:4]
                    values = numeric_metrics(record["metrics"])
                    result = ", ".join(f"{k} {fmt(values[k])}" for k in keys if k in values)
                    print(f"    done in {record['seconds']:.0f} s: {result}", flush=True)
                else:
                    print(f"    failed (exit {record['status']}): {last_line(record['log'])}", flush=True)
            sweep["runs"].append(record)
            sweep["summary"] = summarize(sweep["runs"], goals)
            write_json(sweep_path, sweep)
            if record["status"] == 0:
                check_goal_keys(goals, record["metrics"])
    except KeyboardInterrupt:
        print(f"stopped; run the same command with --out {out} to continue", file=sys.stderr)
        return 130
    table = markdown(sweep)
    with open(os.path.join(out, "sweep.md"), "w") as f:
        f.write(table)
    print(table, end="")
    failed = sum(r["status"] != 0 for r in sweep["runs"])
    print(f"sweep: {len(seeds) - failed}/{len(seeds)} seeds finished; table {os.path.join(out, 'sweep.md')}, "
          f"all runs {sweep_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from loops.config import run_cli
    run_cli(main)
