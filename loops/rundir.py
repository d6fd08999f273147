"""The run directory: config.json, metrics.json, checkpoints/, TensorBoard events.

Nothing here overwrites an existing run by accident: a fresh run refuses a directory that
already holds checkpoints, and --resume refuses a config that changed what is trained.
"""
import glob
import json
import os

from loops import checkpoint
from loops.files import atomic_write
from loops.config import UserError, default_run_dir


def write_json(path, obj):
    """Atomic JSON write (temp + rename): a reader never sees half a file; WriteFailure on OSError."""
    text = json.dumps(obj, indent=2, sort_keys=True) + "\n"

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    atomic_write(path, write, os.path.basename(path), len(text))


RUN_FOLDERS = ("checkpoints", "samples")  # the folders a run writes into


def prepare(cfg, script, dataset, loss):
    """Resolve and check cfg.run_dir. Returns the checkpoint to resume from (or None)."""
    if not cfg.run_dir:
        cfg.run_dir = default_run_dir(script, dataset, loss, cfg.seed)
    run_dir = cfg.run_dir
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise UserError(f"--run-dir {run_dir} exists and is not a directory")
    for folder in RUN_FOLDERS:  # a planted link would send checkpoints or pictures (and deletions) elsewhere
        path = os.path.join(run_dir, folder)
        if os.path.islink(path):
            raise UserError(f"{path} is a symbolic link: a run writes only inside its run dir; replace the link "
                            "with the folder itself")
    resume_from = None
    for stale in glob.glob(os.path.join(run_dir, "checkpoints", "*.tmp*")):
        os.remove(stale)  # a save killed half-way: never renamed, never loadable, safe to drop
    if cfg.resume:
        resume_from = checkpoint.latest(run_dir)
        if resume_from is None:
            raise UserError(f"--resume: no checkpoint in {os.path.join(run_dir, 'checkpoints')}")
    elif checkpoint.list_checkpoints(run_dir):
        raise UserError(f"{run_dir} already holds checkpoints: pass --resume to continue it, "
                        "or choose another --run-dir")
    try:
        os.makedirs(run_dir, exist_ok=True)
        probe = os.path.join(run_dir, f".write_test{os.getpid()}")
        if os.path.lexists(probe):  # a planted link (never written through), or left by a killed run with
            os.remove(probe)      # this pid: the run dir is locked, so nothing else uses the name
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        os.remove(probe)
    except OSError as e:
        raise UserError(f"--run-dir {run_dir} is not writable ({e.strerror})")
    return resume_from


def made_by_text(recipe, script=""):
    """ "regression (train_regression.py)": the recipe module, and the script that ran it where recorded."""
    return f"{recipe} ({script})" if recipe and script else recipe or script


def recorded_recipe(run_dir):
    """The recipe RUN_DIR/config.json names, or "" (none recorded, or no readable config.json)."""
    try:
        with open(os.path.join(run_dir, "config.json")) as f:
            recipe = json.load(f).get("recipe", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return recipe if isinstance(recipe, str) else ""


def check_resume_config(cfg, meta, recipe=""):
    """Refuse to resume another recipe's run, or with changed model/data flags unless --force; name
    the keys that differ. Only this config's own keys are compared: a checkpoint written before the
    recipes had configs of their own (one config for every algorithm) holds other recipes' keys too."""
    saved_recipe = meta.get("recipe", "")
    if (saved_recipe and saved_recipe != recipe) or not (saved_recipe or cfg.owns_run(meta.get("config", {}))):
        made_by = made_by_text(saved_recipe, meta.get("script", ""))
        run_recipe = recorded_recipe(cfg.run_dir)
        if saved_recipe and run_recipe and run_recipe != saved_recipe:  # a checkpoint copied in from elsewhere
            raise UserError(f"--resume: the latest checkpoint in {cfg.run_dir} is of {made_by}, but its config.json "
                            f"says the run is of {run_recipe}: that checkpoint does not belong to this run")
        made_by = f"a run of {made_by}" if made_by else "a run of another script or algorithm"
        raise UserError(f"--resume: {cfg.run_dir} is {made_by}" + (f", not of {recipe}" if recipe else "") +
                        ": resume it with the command that started it")
    fields = type(cfg).__dataclass_fields__
    # a flag added after the checkpoint was written counts as its default there (older runs resume)
    saved = {k: f.default for k, f in fields.items()} | {k: v for k, v in meta.get("config", {}).items() if k in fields}
    saved, now = cfg.canonical(saved), cfg.canonical(cfg.model_dict())
    differ = sorted(k for k in now if saved.get(k) != now.get(k))
    fixed = [k for k in differ if k in cfg.FIXED_ON_RESUME]

    def words(keys):  # the flags that give `keys` their saved values (a default changed since: these continue it)
        return " ".join(w for k in keys if (w := cfg.resume_words(k, saved) or flag_words(k, saved[k], fields[k].default)))
    if fixed:  # --force cannot help: the saved state does not fit another value
        detail = ", ".join(f"{k}: {saved.get(k)!r} -> {now.get(k)!r}" for k in fixed)
        # without --force the other differences would stop the next try: name their words too
        as_started = words(fixed if cfg.force else differ)
        raise UserError(f"--resume: {detail} cannot change on resume (the checkpoint's state is shaped by it), "
                        f"not even with --force" + (f"; resume with {as_started}" if as_started else ""))
    if differ and not cfg.force:
        detail = ", ".join(f"{k}: {saved.get(k)!r} -> {now.get(k)!r}" for k in differ[:4])
        as_started = words(differ)
        raise UserError(f"--resume with a different config ({detail}); pass --force to accept"
                        + (f", or resume it as it started with: {as_started}" if as_started else ""))


def flag_words(key, value, default):
    """('width', 64) -> '--width 64'; a boolean as its flag, or its --no- form where the default is on
    ("" when no flag gives the value: a default-off boolean is off by leaving its flag out)."""
    flag = "--" + key.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else (f"--no-{key.replace('_', '-')}" if default is True else "")
    return f"{flag} {value}" if value != "" else f"{flag} ''"


def write_config(cfg, extra=None):
    """config.json: the resolved config, plus `extra` facts of the run (e.g. model sizes)."""
    write_json(os.path.join(cfg.run_dir, "config.json"), {**cfg.to_dict(), **(extra or {})})


def read_metrics(run_dir):
    """RUN_DIR/metrics.json as a dict to update; {} (with a warning) when it is missing or unreadable:
    an evaluation then writes a fresh one rather than failing on a damaged file."""
    path = os.path.join(run_dir, "metrics.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path) as f:
            metrics = json.load(f)
        if isinstance(metrics, dict):
            return metrics
    except (OSError, ValueError):
        pass
    import sys
    print(f"warning: {path} is unreadable or not a JSON object; it is rewritten with this evaluation",
          file=sys.stderr, flush=True)
    return {}


def write_metrics(run_dir, metrics):
    write_json(os.path.join(run_dir, "metrics.json"), metrics)
