"""Memory pre-flight: refuse, in one line, a run or a command whose own arrays cannot fit in the
memory this machine has free, before it creates anything (a run dir, a checkpoint) or starts to swap.

Estimates are lower bounds from the sizes a command is asked for (samples x bytes per sample,
environments x bytes per environment, ...): what is refused surely cannot fit; what passes may still
need more (compiled graphs, framework pools), as a disk pre-flight cannot promise a full run either.
"""
from loops.config import UserError
from loops.files import human

FLOAT = 4  # bytes per float32


def _meminfo_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_available():
    """What a cgroup v2 memory limit leaves (a container's limit can be far below the host's memory).
    memory.current counts the page cache, which the kernel reclaims on demand and which in a
    long-lived container sits near the limit: its inactive file pages count as available."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as f:
            current = int(f.read().strip())
        with open("/sys/fs/cgroup/memory.stat") as f:
            stat = dict(line.split() for line in f if len(line.split()) == 2)
        return max(0, int(limit) - current + int(stat.get("inactive_file", 0)))
    except (OSError, ValueError):
        return None


def available_bytes():
    """Bytes this process can still take without swapping: MemAvailable, capped by a cgroup limit;
    None where neither can be read (then nothing is refused)."""
    known = [b for b in (_meminfo_available(), _cgroup_available()) if b is not None]
    return min(known) if known else None


def check_fits(parts, available=None):
    """parts: [(what, bytes)], e.g. [("--eval-samples 1000000000 (the samples)", 3.1e12)]. UserError
    naming the largest part when their sum exceeds the available memory."""
    available = available_bytes() if available is None else available
    need = sum(b for _, b in parts)
    if available is None or need <= available:
        return
    what, largest = max(parts, key=lambda p: p[1])
    raise UserError(f"{what} needs at least {human(largest)} of memory"
                    + (f" ({human(need)} with the rest)" if need > 1.1 * largest else "")
                    + f"; this machine has {human(available)} available")

