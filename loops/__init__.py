"""Training-loop primitives: steps, gradient transforms, the driver, checkpoints (see docs/core.md).

On CPUs with AVX-512, MindSpore 2.10's CPU backend runs oneDNN's AVX-512 forward convolutions
tens of times slower than its AVX2 ones (a 64->128 4x4 stride-2 conv on a 64x64x16x16 batch:
653 ms vs 7.6 ms; a 32x32 conv-net training iteration: 21.4 s vs 0.77 s; `python bench/bench_cpu_isa.py`).
So oneDNN is capped at AVX2 by default. oneDNN reads the cap once, at its first kernel, so it is
set here, at import, before any MindSpore op can run (models/ and metrics/ import this package
first). Processes without convolutions (toy MLPs, regression) lift the cap in runtime.setup:
the MLP iteration takes 0.86x its capped time uncapped (bench/RESULTS.md). A cap the user set
(DNNL_MAX_CPU_ISA) is never touched.
No effect on GPU/Ascend kernels or on CPUs without AVX-512.

MindSpore hands each compiled call to a host worker thread that spins while it waits for work, and
the Python thread spins while it waits for a result. With fewer free cores than spinning threads
(a 2-core machine with one other busy process), each hand-over costs a scheduler time slice: a
tiny step (the linear-regression script's) took 3-4x its time beside one busy process, where
PyTorch did not slow at all. MS_DEV_HOST_BLOCKING_RUN=1 runs the calls on the Python thread instead
(same kernels, same results to the bit): beside a busy process tiny steps run 3x faster, alone 1.4x
slower (no host work overlaps a call any more), larger models' runs alone the same
(bench/RESULTS.md, "Run-to-run stability"). So it is the default where fewer than
HOST_BLOCKING_BELOW_CORES cores are ours; it must be set before the first compiled call, so here.
A value the user set (0 or 1) is never touched.
"""
import os

USER_ISA = "DNNL_MAX_CPU_ISA" in os.environ
os.environ.setdefault("DNNL_MAX_CPU_ISA", "AVX2")

HOST_BLOCKING_BELOW_CORES = 4
USER_HOST_BLOCKING = "MS_DEV_HOST_BLOCKING_RUN" in os.environ
if not USER_HOST_BLOCKING and len(os.sched_getaffinity(0)) < HOST_BLOCKING_BELOW_CORES:
    os.environ["MS_DEV_HOST_BLOCKING_RUN"] = "1"


def lift_isa_cap():
    """No convolutions in this process: let oneDNN use every instruction set (before any kernel)."""
    if not USER_ISA:
        os.environ["DNNL_MAX_CPU_ISA"] = "ALL"


def child_env(**extra):
    """os.environ (plus `extra`) for a child process that should decide the cap and the host mode
    itself, as when a user starts it: without what this process set for itself (the user's are kept)."""
    env = dict(os.environ)
    if not USER_ISA:
        env.pop("DNNL_MAX_CPU_ISA", None)
    if not USER_HOST_BLOCKING:
        env.pop("MS_DEV_HOST_BLOCKING_RUN", None)
    env.update(extra)
    return env
