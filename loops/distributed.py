r"""Data parallel training under MindSpore's `msrun`: rank, group size, the gradient all-reduce,
and the host-batch slicing that keeps every rank's host RNG in step.

    msrun --worker_num=2 --local_worker_num=2 --master_addr=127.0.0.1 --master_port=8118 --join=True \
        --log_dir=runs/reg/msrun train_regression.py --distributed --run-dir runs/reg

How it stays exact:
- Every rank seeds MindSpore and the host numpy Generator identically, so the initial weights and
  the host RNG state are the same everywhere.
- Every rank draws the GLOBAL batch (per-rank batch x group size) from that Generator and keeps its
  own slice [rank*B:(rank+1)*B] (`shard`). The RNG states therefore stay identical on all ranks,
  rank 0's checkpoint (which holds that state) resumes every rank, and the union of the slices is
  exactly the batch a single process with the global batch size would draw.
- Gradients are averaged over ranks (`nn.DistributedGradReducer`: an all-reduce in the step graph)
  right after value_and_grad, before the gradient transform: clipping and noise act on the averaged
  gradient, and the host-drawn noise is the same on every rank. Weights stay bit-identical.
- BatchNorm statistics are per rank (not synchronised): that is why `--distributed` is a model key.

Outside `--distributed` everything here is the identity (rank 0 of 1), so single-process code paths
are unchanged. The msrun scheduler process also runs the entry script: it never returns from
`init()`, so nothing before `runtime.setup` may write files.
"""
import dataclasses
import hashlib
import os

import numpy as np

from loops.config import UserError

_STATE = {"rank": 0, "size": 1, "active": False}


def init():
    """Join the msrun cluster (mindspore.communication.init) and record rank and group size.

    Call after `mindspore.set_device` (the backend follows the device: mccl on CPU, nccl on GPU,
    hccl on Ascend) and before any model is built. A process joins once: later calls (several
    trainings in one process) keep the cluster it joined.
    """
    if _STATE["active"]:
        return
    if not (os.environ.get("MS_WORKER_NUM") and os.environ.get("MS_ROLE")):
        raise UserError("--distributed runs under msrun, e.g. msrun --worker_num=2 --local_worker_num=2 "
                        "--master_addr=127.0.0.1 --master_port=8118 --join=True SCRIPT --distributed "
                        "--run-dir DIR (no MS_WORKER_NUM / MS_ROLE in the environment)")
    from mindspore import communication
    communication.init()  # the scheduler process (MS_ROLE=MS_SCHED) exits inside this call
    _STATE.update(rank=communication.get_rank(), size=communication.get_group_size(), active=True)
    print(f"distributed: rank {_STATE['rank']} of {_STATE['size']} (pid {os.getpid()})", flush=True)


def active():
    return _STATE["active"]


def rank():
    return _STATE["rank"]


def size():
    return _STATE["size"]


def is_main():
    """True on rank 0 (and in a single process): the one rank that writes files."""
    return _STATE["rank"] == 0


def global_batch(per_rank):
    """The batch every rank draws from the host RNG: per-rank batch x group size."""
    return per_rank * _STATE["size"]


def with_global_batch(cfg):
    """`cfg` with batch_size = the global batch, for data sources built from the config (a copy;
    `cfg` itself when there is one rank)."""
    if _STATE["size"] == 1:
        return cfg
    return dataclasses.replace(cfg, batch_size=global_batch(cfg.batch_size))


def shard(*arrays):
    """This rank's slice [rank*B:(rank+1)*B] (axis 0) of each global host array; B = len / size.

    `shard(x, y) -> (x_r, y_r)`. The identity in a single process.
    """
    n, r = _STATE["size"], _STATE["rank"]
    if n == 1:
        return arrays
    out = []
    for a in arrays:
        if len(a) % n:
            raise ValueError(f"a global batch of {len(a)} does not split over {n} ranks")
        b = len(a) // n
        out.append(a[r * b:(r + 1) * b])
    return tuple(out)


def grad_reducer(parameters):
    """grads -> mean of grads over all ranks, for the gradients of `parameters` (an optimizer's
    parameters, in the same order); None in a single process (make_step then skips it)."""
    if not _STATE["active"]:
        return None
    from mindspore import nn
    return nn.DistributedGradReducer(parameters, mean=True, degree=_STATE["size"])


def prepare_run_dir(cfg, prepare, *args):
    """Rank 0 (or a single process): `prepare(cfg, *args)` (rundir.prepare: checks, creates and
    probes the run dir; returns the checkpoint to resume from). Other ranks write nothing: they only
    find the checkpoint rank 0 resumes from, so they need the run dir at the same path (a shared file
    system, or the checkpoint copied there) only with --resume."""
    if is_main():
        return prepare(cfg, *args)
    if not cfg.resume:
        return None
    from loops import checkpoint
    path = checkpoint.latest(cfg.run_dir)
    if path is None:
        raise UserError(f"--resume (rank {rank()}): no checkpoint in {os.path.join(cfg.run_dir, 'checkpoints')}")
    return path


def report(params):
    """Print one line per rank with a digest of every parameter (models, optimizers, transforms):
    equal digests mean bit-identical ranks. Nothing in a single process."""
    if not _STATE["active"]:
        return
    h = hashlib.sha256()
    for p in sorted(params, key=lambda p: p.name):
        h.update(p.name.encode())
        h.update(np.ascontiguousarray(p.asnumpy()).tobytes())
    print(f"distributed: rank {rank()} of {size()} state sha256 {h.hexdigest()}", flush=True)
