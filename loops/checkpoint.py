"""Checkpoints: every Parameter of the run (models, optimizers, gradient-transform state, EMA),
plus step, host RNG state and config as JSON strings, in MindSpore's protobuf .ckpt format
(no pickle anywhere).

Each file carries MindSpore's CRC (save_checkpoint(crc_check=True)), verified on every load: a
flipped byte anywhere is refused instead of resuming from silently changed weights. Files written
before the CRC was added still load. Written atomically: to a temp file, fsync, then os.replace, so a kill during a save never leaves
`checkpoints/step_XXXXXXXX.ckpt` half-written. Loading must happen BEFORE the first call of any
compiled step: the compiled graph ignores data loaded into its Parameters afterwards.
"""
import glob
import json
import os
import re

import mindspore as ms

from loops.config import UserError

PATTERN = re.compile(r"step_(\d{8})\.ckpt$")


def path_for(run_dir, step):
    return os.path.join(run_dir, "checkpoints", f"step_{step:08d}.ckpt")


def list_checkpoints(run_dir):
    """Complete checkpoints in the run dir, oldest first (temp files never match)."""
    paths = glob.glob(os.path.join(run_dir, "checkpoints", "step_*.ckpt"))
    return sorted(p for p in paths if PATTERN.search(p))


def latest(run_dir):
    paths = list_checkpoints(run_dir)
    return paths[-1] if paths else None


def save(run_dir, step, params, meta, keep=0):
    """Write params (a list of Parameters with unique names) and meta (a JSON-able dict)."""
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"duplicate parameter names in checkpoint: {dup[:5]}")
    final = path_for(run_dir, step)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = final[:-len(".ckpt")] + f".tmp{os.getpid()}.ckpt"  # MindSpore appends .ckpt if missing
    meta = dict(meta, step=step)
    ms.save_checkpoint([{"name": p.name, "data": p} for p in params], tmp,
                       append_dict={"meta_json": json.dumps(meta)}, crc_check=True)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    dir_fd = os.open(os.path.dirname(final), os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
    if keep > 0:
        for old in list_checkpoints(run_dir)[:-keep]:
            os.remove(old)
    return final


def read(path):
    """(params dict, meta dict) of a checkpoint file; UserError if it is unreadable."""
    if not os.path.isfile(path):
        raise UserError(f"checkpoint {path} does not exist")
    try:
        data = ms.load_checkpoint(path, crc_check=True)
        meta = json.loads(data.pop("meta_json"))
    except (ValueError, KeyError, TypeError, RuntimeError, json.JSONDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if reason.startswith("Failed to read the checkpoint file"):  # MindSpore's words for a CRC or parse failure
            reason = "its checksum or format does not match its contents"
        raise UserError(f"checkpoint {path} is corrupt or not one of ours ({reason[:120]})")
    return data, meta


def load_into(path, params, check=None):
    """Copy a checkpoint into `params` (call before the first compiled step). Returns its meta.

    `check(meta)` runs first (e.g. the resume config check, whose error names the changed flags
    rather than the first parameter whose shape they changed). Every parameter must be present
    with the same shape: the error names the first mismatch.
    """
    params = list(params)
    data, meta = read(path)
    if check is not None:
        check(meta)
    for p in params:
        if p.name not in data:
            raise UserError(f"checkpoint {path} has no parameter {p.name!r}: was it made with another model?")
        value = data[p.name]
        if tuple(value.shape) != tuple(p.shape):
            raise UserError(f"checkpoint {path}: parameter {p.name!r} has shape {tuple(value.shape)}, "
                            f"the model wants {tuple(p.shape)}: was it made with another model?")
    for p in params:
        p.set_data(data[p.name].astype(p.dtype))
    return meta
