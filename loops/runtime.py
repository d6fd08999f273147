"""MindSpore context set-up from the shared run flags: mode, device, seeds."""
import os

import mindspore as ms
import numpy as np

from loops import distributed, lift_isa_cap
from loops.config import UserError


def best_device():
    """GPU or Ascend when MindSpore finds one, else CPU. A backend is probed only where its driver
    is installed: MindSpore's probe prints library-loading noise on machines without one."""
    candidates = []
    if os.environ.get("ASCEND_HOME_PATH") or os.path.isdir("/usr/local/Ascend"):
        candidates.append("Ascend")
    if os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0"):
        candidates.append("GPU")
    for name in candidates:
        try:
            if ms.hal.is_available(name):
                return name
        except Exception:  # a backend that cannot even be probed is not present
            pass
    return "CPU"


def setup(cfg, convolutions=False):
    """Set mode and device, seed MindSpore's initializers, and return the host numpy Generator.

    All randomness of the training loop (data order, latent noise, gradient noise) comes from this
    Generator; its state goes into every checkpoint, which is what makes resume exact.
    With cfg.distributed (under msrun) it also joins the cluster; rank and group size are then in
    loops.distributed (rank(), size(), is_main()). Every rank gets the same seed: identical initial
    weights and host RNG streams.
    Without `convolutions`, oneDNN's AVX2 cap is lifted (see loops/__init__.py); call this before any
    MindSpore op runs.
    """
    if not convolutions:
        lift_isa_cap()
    device = cfg.device or best_device()
    if cfg.device and device != "CPU":
        try:
            available = ms.hal.is_available(device)
        except Exception:
            available = False
        if not available:
            raise UserError(f"--device {device}: MindSpore finds no {device} on this machine")
    mode = ms.GRAPH_MODE if cfg.mode == "graph" else ms.PYNATIVE_MODE
    ms.set_context(mode=mode)
    if ms.get_context("device_target") != device:  # set once per process: MindSpore refuses a second call
        ms.set_device(device)
    if getattr(cfg, "distributed", False):  # data parallel: join the msrun cluster (after set_device)
        distributed.init()
    ms.set_seed(cfg.seed)
    return np.random.default_rng(cfg.seed), device
