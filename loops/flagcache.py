"""Refuse a mistyped flag before MindSpore loads: the command line of each entry script, kept from
its last run.

Building a script's flags needs its registries (losses, models, gradient interventions), and those
live next to the Cells that implement them, so building them imports MindSpore (~2 s, more on a
cold disk). So every run that builds its flags also writes them, as plain JSON, to
`__pycache__/flags-<script>-<key>.json` in the checkout (beside Python's own byte-code caches);
the next run of the same script parses its argv against that file first, and `--help` or a bad
flag answers in a fraction of a second. The key is a hash of every source file of the project and
of the Python version: after any edit the file is not found and the script checks its flags the
slow way, as on a first run. Best effort: a read-only checkout simply never caches.
"""
import hashlib
import json
import os
import sys

from loops.config import parser_from_spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPED_DIRS = {"tests", "bench", "examples"}  # their files never shape an entry script's flags


def source_files():
    """The top-level scripts and every .py file of the project's packages, in a fixed order."""
    files = [os.path.join(ROOT, n) for n in os.listdir(ROOT) if n.endswith(".py")]
    for top in os.listdir(ROOT):
        package = os.path.join(ROOT, top)
        if top in SKIPPED_DIRS or not os.path.isfile(os.path.join(package, "__init__.py")):
            continue
        for folder, dirs, names in os.walk(package):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return sorted(files)


def sources_key():
    digest = hashlib.sha256(sys.version.encode())
    for path in source_files():
        digest.update(os.path.relpath(path, ROOT).encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read() + b"\0")
    return digest.hexdigest()[:16]


def cache_path(script, key, variant=""):
    """variant: the recipe, for a script that runs several (picked by a flag): each keeps its own flags."""
    name = os.path.splitext(os.path.basename(script))[0] + (f"-{variant}" if variant else "")
    return os.path.join(ROOT, "__pycache__", f"flags-{name}-{key}.json")


def save(script, spec, variant=""):
    """Keep `spec` (loops.config.parser_spec) for `script`; drop that script's older files."""
    try:
        key = sources_key()
        path = cache_path(script, key, variant)
        if os.path.exists(path):
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        folder, current = os.path.split(path)
        prefix = current[:-len(key) - len(".json")]  # "flags-<script>-"
        for name in os.listdir(folder):
            if name.startswith(prefix) and not name.startswith(current):  # older sources' files
                os.remove(os.path.join(folder, name))
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        os.replace(tmp, path)  # atomic: a concurrent run reads the whole file or none
    except (OSError, TypeError, ValueError):
        pass


def load(script, variant=""):
    """The kept spec of `script` (its recipe `variant`) for the current sources, or None."""
    try:
        with open(cache_path(script, sources_key(), variant), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def check_flags_early(script, argv=None, variant=""):
    """Parse argv against the kept flags of `script` (its recipe `variant`): a bad flag is one `error:`
    line and exit 2, --help prints and exits 0, anything else returns (the script then parses for real)."""
    spec = load(script, variant)
    if spec is not None:
        parser_from_spec(spec).parse_args(sys.argv[1:] if argv is None else argv)
