"""MindSpore's speed knobs on the toy GAN: operator fusion and runtime settings, each in a fresh process.

    python bench/bench_knobs.py [--rounds 3] [--only O1,threads1] [--record]

One process per (knob, round), knobs alternating, each timing the multi-step engine (K=10) on the
ring8 MLP GAN of bench/bench_gan.py for 600 iterations after compiling. A knob is kept only if it is
faster AND trains the same weights (the hash of G's parameters after the run; the engine's exact
resume depends on bit-identical results).
"""
import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402

KNOBS = {
    "none (default)": "",
    "jit_level O1 (fusion passes)": "O1",
    "graph-kernel fusion (MS_DEV_GRAPH_KERNEL_FLAGS=--opt_level=1)": "graph_kernel",
    "runtime.dispatch_threads_num(1)": "dispatch1",
    "runtime.set_cpu_affinity(True)": "affinity",
    "runtime.launch_blocking()": "blocking",
    "set_context(runtime_num_threads=1)": "threads1",
}


def child(knob):
    """Runs in the child process: apply the knob, time K=10, print 'ms hash'."""
    if knob == "graph_kernel":
        os.environ["MS_DEV_GRAPH_KERNEL_FLAGS"] = "--opt_level=1"
    import mindspore as ms
    import loops.driver
    import loops.step
    if knob == "O1":
        loops.step.maybe_jit = loops.driver.maybe_jit = lambda fn: ms.jit(fn, jit_level="O1")
    from bench import bench_gan
    bench_gan.lift_isa_cap()  # as train_gan.py does for MLP runs
    ms.set_context(mode=ms.GRAPH_MODE)
    if knob == "dispatch1":
        ms.runtime.dispatch_threads_num(1)
    elif knob == "affinity":
        ms.runtime.set_cpu_affinity(True)
    elif knob == "blocking":
        ms.runtime.launch_blocking()
    elif knob == "threads1":
        ms.set_context(runtime_num_threads=1)
    ms.set_seed(0)
    captured = {}
    build_models = bench_gan.build_models

    def capture(*args, **kwargs):
        captured["nets"] = build_models(*args, **kwargs)
        return captured["nets"]
    bench_gan.build_models = capture
    seconds, _ = bench_gan.time_multi(bench_gan.build("ring8"), 600, 10)
    digest = hashlib.sha1(b"".join(p.asnumpy().tobytes() for p in captured["nets"][0].trainable_params()))
    print(f"RESULT {seconds * 1e3:.3f} {digest.hexdigest()[:10]}")


def run_child(knob):
    with tempfile.TemporaryDirectory() as scratch:  # graph-kernel fusion writes logs into its cwd
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", knob], cwd=scratch,
                              capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            ms_iter, digest = line.split()[1:]
            return float(ms_iter), digest
    tail = [l for l in proc.stderr.splitlines() if "Error" in l]
    return None, (tail[-1] if tail else f"exit {proc.returncode}")[:120]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated knob codes (e.g. O1,threads1); default: all")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        return child(args.child)
    if args.only:
        keep = set(args.only.split(",")) | {""}
        for name in [n for n, code in KNOBS.items() if code not in keep]:
            del KNOBS[name]
    times = {name: [] for name in KNOBS}
    digests = {name: set() for name in KNOBS}
    for _ in range(args.rounds):
        for name, knob in KNOBS.items():
            t, digest = run_child(knob)
            if t is not None:
                times[name].append(t)
            digests[name].add(digest)
    base = statistics.median(times["none (default)"])
    base_digest = digests["none (default)"]
    rows = ["| knob | ms / iteration, K=10 (median; all) | vs default | same weights as default |",
            "|---|---|---|---|"]
    for name in KNOBS:
        if not times[name]:
            rows.append(f"| {name} | failed: `{sorted(digests[name])[0]}` | | |")
            continue
        med = statistics.median(times[name])
        same = "yes" if digests[name] == base_digest else "NO"
        rows.append(f"| {name} | {record.median_cell(times[name])} | {base / med:.2f}x faster | {same} |")
    record.publish("MindSpore speed knobs, toy GAN (ring8, K=10)", "\n".join(rows), args.record)


if __name__ == "__main__":
    main()
