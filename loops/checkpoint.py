"""Checkpoints: every Parameter of the run (models, optimizers, gradient-transform state, EMA),
plus step, host RNG state and config as JSON strings, in MindSpore's protobuf .ckpt format
(no pickle anywhere).

Each file carries MindSpore's CRC (save_checkpoint(crc_check=True)), verified on every load: a
flipped byte anywhere is refused instead of resuming from silently changed weights. Files written
before the CRC was added still load. Written atomically: to a temp file, fsync, then os.replace, so a kill during a save never leaves
`checkpoints/step_XXXXXXXX.ckpt` half-written. Loading must happen BEFORE the first call of any
compiled step: the compiled graph ignores data loaded into its Parameters afterwards.
"""
import contextlib
import glob
import json
import logging
import os
import re
import stat
import sys

import mindspore as ms

from loops.config import UserError
from loops.files import failure, remove_quietly

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


@contextlib.contextmanager
def quiet_mindspore_log():
    """MindSpore's Python logger (named ME.mindspore.log.<pid>) switched off for a moment."""
    log = logging.getLogger(f"ME.mindspore.log.{os.getpid()}")
    disabled, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = disabled


def estimated_size(params, meta=None):
    """About how many bytes a checkpoint of `params` and `meta` takes: the tensors, the meta JSON,
    and an allowance for names and protobuf framing (measured: ~155 bytes per parameter)."""
    return sum(p.nbytes for p in params) + 256 * len(params) + len(json.dumps(meta or {})) + 4096


def save(run_dir, step, params, meta, keep=0):
    """Write params (a list of Parameters with unique names) and meta (a JSON-able dict).
    On a write error (full disk, I/O error, run dir gone) the partial files are removed, earlier
    checkpoints are left as they are, and WriteFailure says what and how much space is free."""
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise RuntimeError(f"duplicate parameter names in checkpoint: {dup[:5]}")
    final = path_for(run_dir, step)
    tmp = final[:-len(".ckpt")] + f".tmp{os.getpid()}.ckpt"  # MindSpore appends .ckpt if missing
    meta = dict(meta, step=step)
    try:
        os.makedirs(os.path.dirname(final), exist_ok=True)
        with quiet_mindspore_log():  # its CRITICAL line would duplicate our one-line report
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
    except OSError as e:
        # MindSpore writes <tmp minus .ckpt>.tmp first, then renames it to tmp: remove whichever exists
        remove_quietly(tmp, tmp[:-len(".ckpt")] + ".tmp")
        raise failure("checkpoint", final, e, estimated_size(params)) from e
    if keep > 0:
        for old in list_checkpoints(run_dir)[:-keep]:
            remove_quietly(old)
    return final


def has_checksum(path):
    """Whether the file ends with MindSpore's CRC record (b"crc_num" + 10 bytes), which
    save_checkpoint(crc_check=True) appends; files written before checksums were added have none."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 17))
            return f.read(7) == b"crc_num"
    except OSError:
        return False


class CorruptCheckpoint(UserError):
    """A checkpoint whose checksum or format does not match its contents."""


_UNVERIFIED_NOTED = set()


def read(path):
    """(params dict, meta dict) of a checkpoint file; CorruptCheckpoint (a UserError) if it is
    damaged or not one of ours. A file without a checksum (older code) loads unverified, with a
    one-line note on stderr (once per file and process)."""
    if not os.path.lexists(path):
        raise UserError(f"checkpoint {path} does not exist")
    if not os.path.isfile(path):  # a directory, FIFO, device or dangling link in its place: damage, so a
        kind = ("a dangling link" if not os.path.exists(path) else "a directory" if os.path.isdir(path)
                else "a FIFO" if stat.S_ISFIFO(os.stat(path).st_mode) else "not a regular file")
        raise CorruptCheckpoint(f"checkpoint {path} is {kind}, not a checkpoint file")  # resume falls back
    try:
        with quiet_mindspore_log():  # its own ERROR line would duplicate ours
            data = ms.load_checkpoint(path, crc_check=True)
        meta = json.loads(data.pop("meta_json"))
    except (ValueError, KeyError, TypeError, RuntimeError, json.JSONDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if reason.startswith("Failed to read the checkpoint file"):  # MindSpore's words for a CRC or parse failure
            reason = "its checksum or format does not match its contents"
        raise CorruptCheckpoint(f"checkpoint {path} is corrupt or not one of ours ({reason[:120]})")
    if not has_checksum(path) and path not in _UNVERIFIED_NOTED:  # it parsed, but nothing vouches for it
        _UNVERIFIED_NOTED.add(path)
        print(f"note: checkpoint {path} carries no checksum (written before checksums were added): "
              "loaded unverified", file=sys.stderr)
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
