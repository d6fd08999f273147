"""Writing a run's files so that a failed write (a full disk, an I/O error, the run dir removed or
made read-only) never leaves a partial file behind and is reported in one line.

Every file is written to a temp name and renamed into place (a reader never sees half a file); on
OSError the temp file is removed and WriteFailure (exit status 4) says what could not be written,
how big it was and how much space is free.
"""
import os
import shutil

from loops.config import WriteFailure


def human(n):
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024


def free_bytes(path):
    """Free bytes on the file system holding `path` (or its nearest existing parent); None if unknown."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def failure(what, path, error, size=None):
    """WriteFailure for `error` (an OSError) while writing `what` to `path`."""
    free = free_bytes(path)
    size_text = f" ({human(size)})" if size else ""
    free_text = f"; {human(free)} free on its file system" if free is not None else ""
    reason = error.strerror or str(error) or type(error).__name__
    return WriteFailure(f"could not write {what} {path}{size_text}: {reason}{free_text}")


def remove_quietly(*paths):
    for path in paths:
        try:
            os.remove(path)
        except OSError:
            pass


def atomic_write(path, write, what, size=None):
    """`write(tmp_path)` then rename to `path`; on OSError remove the temp file, raise WriteFailure."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        if os.path.islink(tmp):  # planted: writing would go through it (the rename below replaces, never follows)
            os.remove(tmp)
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        remove_quietly(tmp)
        raise failure(what, path, e, size) from e
