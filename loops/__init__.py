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
"""
import os

USER_ISA = "DNNL_MAX_CPU_ISA" in os.environ
os.environ.setdefault("DNNL_MAX_CPU_ISA", "AVX2")


def lift_isa_cap():
    """No convolutions in this process: let oneDNN use every instruction set (before any kernel)."""
    if not USER_ISA:
        os.environ["DNNL_MAX_CPU_ISA"] = "ALL"


def child_env(**extra):
    """os.environ (plus `extra`) for a child process that should decide the cap itself, as when a user
    starts it: without the cap this process set for itself (one the user set is kept)."""
    env = dict(os.environ, **extra)
    if not USER_ISA:
        env.pop("DNNL_MAX_CPU_ISA", None)
    return env
