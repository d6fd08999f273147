"""Where the time of one GAN (or PPO) iteration goes, kernel by kernel: MindSpore's profiler vs PyTorch's.

    python bench/bench_profile.py [--model ring8|dcgan|pix2pix|cyclegan|ppo|fashion] [--iters 300] [--record]

The iteration of bench/bench_gan.py (D step, G step, EMA; Adam), MindSpore in the multi-step
engine (K=10) and the PyTorch eager twin, each in its own process, each timed first without a
profiler (ms per iteration), then profiled over the same number of iterations. The table groups
kernel time per iteration by kind: matrix products (MatMul / aten::mm, addmm; convolutions and their
gradients for the DCGAN), the optimizer, copies, and everything else. Why: after the per-call cost
was removed, the question left is whether the gap to PyTorch is in kernels we launch too many of
(ours to fix) or in kernels both frameworks run equally often but MindSpore runs slower (its own).
pix2pix and CycleGAN: train_translate.py's own driver iteration at its defaults (one compiled call
per model and phase) against bench/bench_translate.py's PyTorch twins; normalisation kernels are a
kind of their own there. ppo: train_rl.py's PPO at its defaults on the in-graph CartPole (one compiled
call per iteration: rollout, GAE and 20 epochs of actor and critic updates) against bench/bench_rl.py's
CleanRL-style PyTorch twin (gymnasium's CartPole on the host, whose Python time is in its wall time
but not in its kernels). Wall time minus kernel time, over the kernels, is the runtime's cost per kernel.
fashion: train_gan.py's default run on the real Fashion-MNIST (needs /usr/share/datasets/fashion-mnist),
ours only.
"""
import argparse
import csv
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench import record  # noqa: E402

KINDS = ("matrix products", "normalisation", "optimizer", "copies", "other")
TRANSLATION = ("pix2pix", "cyclegan")


def kind_of(op):
    """The kind of a MindSpore op type or a PyTorch aten op name."""
    name = op.lower().removeprefix("aten::")
    if name.startswith(("matmul", "mm", "addmm", "bmm", "conv", "convolution", "mkldnn_conv", "dense",
                        "_convolution", "slow_conv", "thnn_conv")) or "backpropfilter" in name or "backpropinput" in name:
        return "matrix products"
    if name.startswith(("layernorm", "layer_norm", "native_layer_norm", "instance_norm", "batch_norm",
                        "native_batch_norm", "batchnorm", "_batch_norm")):
        return "normalisation"
    if name.startswith(("adam", "_fused_adam", "_foreach")):
        return "optimizer"
    if name in ("tensormove", "copy_", "clone", "contiguous", "to", "_to_copy"):
        return "copies"
    return "other"


def summarise(per_op, iters):
    """{op: (calls, ms)} over `iters` iterations -> per kind (calls / iteration, ms / iteration), top ops."""
    kinds = {k: [0.0, 0.0] for k in KINDS}
    for op, (calls, ms) in per_op.items():
        kinds[kind_of(op)][0] += calls / iters
        kinds[kind_of(op)][1] += ms / iters
    top = sorted(per_op.items(), key=lambda kv: -kv[1][1])[:10]
    return kinds, [(op, calls / iters, ms / iters) for op, (calls, ms) in top]


def ppo_iteration():
    """train_rl.py's PPO at its defaults on the in-graph CartPole: one fused call per iteration (rollout,
    GAE, 20 epochs of actor and critic updates), as a function of nothing (the step counts on)."""
    from loops.config import parse_config
    from loops.driver import MultiStep
    from loops.run import Run
    from rl import algorithm
    recipe = algorithm("ppo")
    cfg = parse_config(recipe.Config, ["--run-dir", tempfile.mkdtemp(), "--env-backend", "mindspore"], "")
    agent = recipe.AGENT(cfg, Run(cfg, recipe=recipe.__name__))
    engine, step = MultiStep(agent.phases(), 1), [0]

    def call():
        engine.run(step[0])
        step[0] += 1
    return call


def fashion_iteration():
    """train_gan.py's default Fashion-MNIST run (the real data, /usr/share/datasets/fashion-mnist): its
    multi-step engine, K iterations per call, as a function of nothing. Returns (call, K)."""
    import train_gan
    from data import SOURCES
    from gan.trainer import GANTrainer, nets_for
    from loops import distributed
    from loops.config import parse_config
    from loops.driver import MultiStep
    from loops.run import Run
    cfg = parse_config(train_gan.GANConfig, ["--dataset", "fashion-mnist", "--run-dir", tempfile.mkdtemp()], "")
    run = Run(cfg, convolutions=True, recipe="gan.trainer")
    source = SOURCES[cfg.dataset](distributed.with_global_batch(cfg))
    run.open("train_gan", cfg.dataset, cfg.loss)
    gan = GANTrainer(cfg, run, source, nets_for(cfg, source))
    gan.ema.copy()
    engine, step = MultiStep(gan.phases(), cfg.steps_per_call), [0]

    def call():
        engine.run(step[0])
        step[0] += cfg.steps_per_call
    return call, cfg.steps_per_call


def mindspore_child(model, iters):
    import mindspore as ms
    from mindspore.profiler import Profiler, ProfilerActivity
    from bench import bench_gan
    from loops.driver import MultiStep
    if model == "ring8":
        bench_gan.lift_isa_cap()  # as train_gan.py does for MLP runs
    ms.set_context(mode=ms.GRAPH_MODE)
    if model == "ppo":
        call, per_call = ppo_iteration(), 1
    elif model == "fashion":
        call, per_call = fashion_iteration()
    elif model in TRANSLATION:
        from bench import bench_translate
        call, per_call = bench_translate.our_iteration(model)[0], 1
    else:
        multi, per_call = MultiStep(bench_gan.build(model), 10), 10
        call = lambda: multi.run(0)  # noqa: E731  (the step index only picks hooks; none here)
    calls = max(1, iters // per_call)
    for _ in range(calls):  # compile and warm up
        call()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    wall = (time.perf_counter() - t0) / (calls * per_call)
    out = tempfile.mkdtemp(prefix="msprof_")
    prof = Profiler(output_path=out, activities=[ProfilerActivity.CPU])
    for _ in range(calls):
        call()
    prof.analyse()
    per_op = {}
    for path in glob.glob(os.path.join(out, "**", "cpu_op_type_info_*.csv"), recursive=True):
        for row in csv.DictReader(open(path)):
            calls_, ms_ = per_op.get(row["op_type"], (0, 0.0))
            per_op[row["op_type"]] = (calls_ + int(row["type_occurrences"]), ms_ + float(row["total_compute_time"]))
    print("RESULT " + json.dumps({"wall_ms": wall * 1e3, "per_op": per_op, "iters": calls * per_call}))


def torch_child(model, iters):
    if model == "fashion":  # no PyTorch twin of this recipe here (bench/bench_fashion_dcgan.py trains the tutorial's)
        print("RESULT null")
        return
    try:
        import torch
    except ImportError:
        print("RESULT null")
        return
    from bench import bench_gan, bench_translate
    if model == "ppo":
        from bench import bench_rl
        update, step = bench_rl.torch_ppo_iteration(), [0]

        def iteration():
            update(step[0])
            step[0] += 1
    else:
        iteration = (getattr(bench_translate, f"torch_{model}_iteration")() if model in TRANSLATION
                     else bench_gan.torch_iteration(model))
    for _ in range(iters):
        iteration()
    t0 = time.perf_counter()
    for _ in range(iters):
        iteration()
    wall = (time.perf_counter() - t0) / iters
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(iters):
            iteration()
    per_op = {e.key: (e.count, e.self_cpu_time_total / 1e3) for e in prof.key_averages()
              if e.key.startswith("aten::") and e.self_cpu_time_total > 0}
    print("RESULT " + json.dumps({"wall_ms": wall * 1e3, "per_op": per_op, "iters": iters,
                                  "threads": torch.get_num_threads()}))


def run_child(framework, model, iters):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", framework, "--model", model,
                          "--iters", str(iters)], cwd=ROOT, capture_output=True, text=True, timeout=1800,
                         env=dict(os.environ, GLOG_v="3"))
    lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    if not lines:
        raise SystemExit(f"error: the {framework} child failed:\n{out.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="ring8", choices=("ring8", "dcgan", "ppo", "fashion") + TRANSLATION)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--child", choices=("mindspore", "torch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return (mindspore_child if args.child == "mindspore" else torch_child)(args.model, args.iters)
    ours = ("MindSpore (graph, one call per phase)" if args.model in TRANSLATION else
            "MindSpore (graph, one call per iteration)" if args.model == "ppo" else
            "MindSpore (train_gan.py's engine)" if args.model == "fashion" else "MindSpore (graph, K=10)")
    results = {ours: run_child("mindspore", args.model, args.iters),
               "PyTorch eager": run_child("torch", args.model, args.iters)}
    results = {k: v for k, v in results.items() if v}
    summaries = {k: summarise({op: tuple(v) for op, v in r["per_op"].items()}, r["iters"]) for k, r in results.items()}
    names = list(results)
    rows = ["| | " + " | ".join(f"{n}: kernels / iter | {n}: ms / iter" for n in names) + " |",
            "|---|" + "---|---|" * len(names)]
    for kind in KINDS:
        rows.append(f"| {kind} | " + " | ".join(f"{summaries[n][0][kind][0]:.0f} | {summaries[n][0][kind][1]:.2f}"
                                                 for n in names) + " |")
    rows.append("| all kernels (profiled) | " + " | ".join(
        f"{sum(v[0] for v in summaries[n][0].values()):.0f} | {sum(v[1] for v in summaries[n][0].values()):.2f}"
        for n in names) + " |")
    rows.append("| wall time per iteration, unprofiled | " + " | ".join(f"| {results[n]['wall_ms']:.2f}" for n in names) + " |")
    top = ["", "Largest ops per iteration (calls, ms):"] + [
        f"- {n}: " + "; ".join(f"{op} {c:.0f}x {t:.3f}" for op, c, t in summaries[n][1]) for n in names]
    kind = "PPO" if args.model == "ppo" else "GAN"
    record.publish(f"One {kind} iteration kernel by kernel ({args.model})", "\n".join(rows + top), args.record)


if __name__ == "__main__":
    main()
