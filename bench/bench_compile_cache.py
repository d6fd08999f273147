"""Does MindSpore's compile cache pay, and is it safe? (Measured answer: it pays, and it is NOT safe.)

    python bench/bench_compile_cache.py [--dataset digits] [--steps 20] [--record]

Runs the same short train_gan.py job three times in fresh processes: without a cache, then twice
with MindSpore's compile cache (`set_context(enable_compile_cache=True, compile_cache_path=...)`)
in a directory keyed by a hash of every project .py file, MindSpore's version and the
graph-relevant config (so no stale graph from an edited module can be loaded). The first cached
run writes the cache, the second loads it. Prints each run's wall time and whether its final
checkpoint equals the uncached run's, bit for bit.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
HOST_ONLY = ("run_dir", "steps", "log_every", "ckpt_every", "keep_ckpts", "resume", "force", "config", "dry_run",
             "no_progress", "debug", "sample_every", "eval_every")


def cache_key(config):
    """sha256 of the project's sources, MindSpore's version and the graph-relevant config."""
    import mindspore as ms
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("runs", "__pycache__"))
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(os.path.relpath(os.path.join(folder, name), ROOT).encode() + f.read())
    digest.update(ms.__version__.encode())
    digest.update(json.dumps({k: v for k, v in config.items() if k not in HOST_ONLY}, sort_keys=True).encode())
    return digest.hexdigest()[:20]


def child(cache_dir, argv):
    """train_gan.main(argv), with the compile cache switched on right after the context set-up."""
    import mindspore as ms
    import train_gan
    setup = train_gan.runtime.setup

    def setup_with_cache(cfg, **kw):
        out = setup(cfg, **kw)
        if cache_dir:
            ms.set_context(enable_compile_cache=True,
                           compile_cache_path=os.path.join(cache_dir, cache_key(vars(cfg))))
        return out
    train_gan.runtime.setup = setup_with_cache
    return train_gan.main(argv)


def final_arrays(run_dir, steps):
    import mindspore as ms
    params = ms.load_checkpoint(os.path.join(run_dir, "checkpoints", f"step_{steps:08d}.ckpt"))
    return {k: v.asnumpy() for k, v in params.items() if not isinstance(v, str)}  # skip meta strings


def main():
    if sys.argv[1:2] == ["--child"]:  # --child CACHE_DIR train_gan-flags...
        sys.exit(child(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    import numpy as np
    work = tempfile.mkdtemp()
    cache = os.path.join(work, "cache")
    job = ["--dataset", args.dataset, "--steps", str(args.steps), "--eval-samples", "200", "--no-progress"]
    rows, runs = [], []
    for label, cache_dir in (("no cache", ""), ("cache, first run (writes)", cache), ("cache, second run (loads)", cache)):
        run_dir = os.path.join(work, f"run{len(runs)}")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", cache_dir, *job, "--run-dir", run_dir],
                              capture_output=True, text=True, env=dict(os.environ, GLOG_v="3"))
        seconds = time.perf_counter() - t0
        try:
            runs.append(final_arrays(run_dir, args.steps))
        except ValueError:  # no final checkpoint
            runs.append({})
        differ = sum(not np.array_equal(v, runs[-1].get(k)) for k, v in runs[0].items())
        if proc.returncode:
            error = [l for l in proc.stderr.splitlines() if l.strip()][-1][:120]
            outcome = f"exit {proc.returncode}: `{error}`"
        else:
            outcome = f"FID {json.load(open(os.path.join(run_dir, 'metrics.json'))).get('fid'):.4g}"
        rows.append(f"| {label} | {seconds:.1f} | {differ} of {len(runs[0])} | {outcome} |")
    table = "\n".join(["| run | wall s (whole process) | tensors differing from the uncached run | outcome |",
                       "|---|---|---|---|"] + rows)
    print(table)
    if args.record:
        from bench import record
        record.append("MindSpore compile cache (safe key), train_gan.py",
                      f"python bench/bench_compile_cache.py --dataset {args.dataset} --steps {args.steps} --record", table)


if __name__ == "__main__":
    main()
