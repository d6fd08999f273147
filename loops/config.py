"""Config dataclasses -> command line, presets, validation, and the `error: ...` exit contract.

Each entry script declares ONE flat dataclass (subclassing RunConfig for the flags every training
script shares). Each field's `help` metadata is its docstring and its --flag help. Precedence:
field defaults < `--config FILE` (JSON or `key = value` lines) < flags given on the command line.
"""
import argparse
import dataclasses
import datetime
import difflib
import json
import math
import os
import sys
import traceback
from dataclasses import dataclass, field


class UserError(Exception):
    """Bad input from the user: reported as one `error: ...` line, exit status 2."""


class RunFailure(Exception):
    """Training cannot go on (e.g. a loss became NaN): one `error: ...` line, exit status 3."""


class WriteFailure(Exception):
    """A file of the run could not be written (a full disk, an I/O error, the run dir removed or made
    read-only): one `error: ...` line, exit status 4. Earlier files are left intact."""


EXIT_STATUS = {UserError: 2, RunFailure: 3, WriteFailure: 4}


def opt(default, help, choices=None):
    """A config field with its help text (and, for strings, the valid choices)."""
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass
class RunConfig:
    """Flags every training script has (README: Flags every training script has)."""
    run_dir: str = opt("", "run directory (default: runs/<script>__<dataset>__<loss>__s<seed>__<time>)")
    steps: int = opt(500, "optimizer steps (iterations) to train for, in total")
    seed: int = opt(0, "seed of the host RNG that draws data, noise and initial weights")
    mode: str = opt("graph", "graph: jit-compiled steps; pynative: eager", ["graph", "pynative"])
    device: str = opt("", "CPU, GPU or Ascend (default: the best one present)", ["", "CPU", "GPU", "Ascend"])
    log_every: int = opt(50, "log scalars to TensorBoard and the progress bar every N steps")
    ckpt_every: int = opt(0, "checkpoint every N steps (0: only at the end)")
    keep_ckpts: int = opt(3, "keep the last N checkpoints (0: keep all)")
    resume: bool = opt(False, "continue from the latest checkpoint in --run-dir")
    force: bool = opt(False, "with --resume: accept a config that differs from the checkpoint's")
    config: str = opt("", "preset file (JSON object or `key = value` lines); command-line flags win")
    dry_run: bool = opt(False, "print the resolved config as JSON and exit")
    no_progress: bool = opt(False, "no tqdm progress bar (also off when stderr is not a TTY)")
    debug: bool = opt(False, "show the full traceback on errors")

    # fields that describe how to run, not what is trained: they may change on --resume
    RUNTIME_KEYS = ("run_dir", "steps", "mode", "device", "log_every", "ckpt_every", "keep_ckpts",
                    "resume", "force", "config", "dry_run", "no_progress", "debug", "steps_per_call",
                    "sample_every", "eval_every", "eval_samples")

    def check(self, cond, message):
        if not cond:
            raise UserError(message)

    def _check_each(self, names, ok, requirement):
        for name in names:
            value = getattr(self, name)
            self.check(ok(value), f"--{name.replace('_', '-')} must be {requirement}, got {value}")

    def check_positive(self, *names):
        """Each field is > 0 (and finite, for floats)."""
        self._check_each(names, lambda v: math.isfinite(v) and v > 0, "a finite number > 0"
                         if any(isinstance(getattr(self, n), float) for n in names) else "> 0")

    def check_non_negative(self, *names):
        """Each field is a finite number >= 0."""
        self._check_each(names, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0"
                         if any(isinstance(getattr(self, n), float) for n in names) else ">= 0")

    def validate(self):
        self.check_positive("steps", "log_every")
        self.check_non_negative("seed", "ckpt_every", "keep_ckpts")
        self.check(not (self.resume and not self.run_dir), "--resume needs --run-dir")

    def to_dict(self):
        return dataclasses.asdict(self)

    def model_dict(self):
        """The config minus runtime keys: what must match for a resume to continue the same run."""
        return {k: v for k, v in self.to_dict().items() if k not in self.RUNTIME_KEYS}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage too)
        print(f"error: {message}{self.suggestion(message)}", file=sys.stderr)
        sys.exit(2)

    def suggestion(self, message):
        """"; did you mean --dataset?" for a near-miss flag or choice ("" when nothing is close)."""
        if message.startswith("unrecognized arguments:"):
            flags = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            guesses = [(word, difflib.get_close_matches(word.split("=")[0], flags, n=1, cutoff=0.7))
                       for word in message.split(":", 1)[1].split() if word.startswith("-")]
            hints = [f"{match[0]} (for {word})" if len(guesses) > 1 else match[0] for word, match in guesses if match]
            return f"; did you mean {', '.join(hints)}?" if hints else ""
        if "invalid choice:" in message:
            flag = message.split(":", 1)[0].replace("argument ", "").split("/")[0].strip()  # "argument --loss: ..."
            action = next((a for a in self._actions if a.choices and flag in a.option_strings), None)
            word = message.split("invalid choice:", 1)[1].split("(")[0].strip().strip("'\"")
            match = difflib.get_close_matches(word, [str(c) for c in action.choices], n=1, cutoff=0.6) if action else []
            return f"; did you mean {match[0]!r}?" if match else ""
        return ""


def _type_name(f):
    return f.type if isinstance(f.type, str) else f.type.__name__


def _flag(name):
    return "--" + name.replace("_", "-")


def help_groups(cls):
    """{section title: field names} for --help: the script's HELP_GROUPS (data, model, ...), then
    model_flags' optimisation and gradient-intervention flags, then RunConfig's as "run", then the rest."""
    groups = {title: list(names) for title, names in getattr(cls, "HELP_GROUPS", {}).items()}
    for title, names in list(getattr(cls, "FLAG_GROUPS", {}).items()) + [("run", [f.name for f in dataclasses.fields(RunConfig)])]:
        groups.pop(title, None)  # keep its place after the script's own sections, its names first
        groups[title] = list(names) + list(getattr(cls, "HELP_GROUPS", {}).get(title, ()))
    placed = {n for names in groups.values() for n in names}
    groups["other"] = [f.name for f in dataclasses.fields(cls) if f.name not in placed]
    return groups


def build_parser(cls, description):
    parser = _Parser(description=description, argument_default=argparse.SUPPRESS,
                     formatter_class=argparse.RawDescriptionHelpFormatter)  # keep the docstring's lines
    fields = {f.name: f for f in dataclasses.fields(cls)}
    titles, sections = list(help_groups(cls).items()), {}
    for title, names in titles:
        for name in names:
            if name in fields and name not in sections:
                sections[name] = title  # the first section that lists a field gets it
    order = [title for title, _ in titles]
    groups = {}
    for f in sorted(fields.values(), key=lambda f: order.index(sections[f.name])):
        if sections[f.name] not in groups:
            groups[sections[f.name]] = parser.add_argument_group(sections[f.name])
        group = groups[sections[f.name]]
        help_text = f.metadata.get("help", "")
        # the help text already explains an "auto" default ("default: ...", "0: auto", "-1: auto")
        shown = "" if "default" in help_text or "auto" in help_text else f" (default: {f.default!r})"
        if _type_name(f) == "bool":
            group.add_argument(_flag(f.name), action="store_true", help=help_text)
            if f.default is True:
                group.add_argument("--no-" + f.name.replace("_", "-"), dest=f.name, action="store_false")
            continue
        typ = {"int": int, "float": float, "str": str}[_type_name(f)]
        choices = f.metadata.get("choices")
        # "" is the internal "auto" value: reachable by leaving the flag out, so not a listed choice
        group.add_argument(_flag(f.name), type=typ, choices=[c for c in choices if c] if choices else None,
                            help=help_text + shown)
    return parser


def read_preset(path, cls):
    """A preset file: a JSON object, or `key = value` lines (values parsed as JSON when they can be)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UserError(f"cannot read --config {path}: {e.strerror}")
    except UnicodeDecodeError:
        raise UserError(f"--config {path}: not a UTF-8 text file (expected JSON or `key = value` lines)")
    try:
        values = json.loads(text)
        if not isinstance(values, dict):
            raise UserError(f"--config {path}: expected a JSON object")
    except json.JSONDecodeError:
        values = {}
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if "=" not in line:
                raise UserError(f"--config {path}:{n}: expected `key = value`, got {line!r}")
            key, value = (s.strip() for s in line.split("=", 1))
            try:
                values[key.replace("-", "_")] = json.loads(value)
            except json.JSONDecodeError:
                values[key.replace("-", "_")] = value
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in values.items():
        if key not in known:
            raise UserError(f"--config {path}: unknown key {key!r}")
        tname = _type_name(known[key])
        expected = {"int": int, "float": (int, float), "str": str, "bool": bool}[tname]
        if not isinstance(value, expected) or (tname != "bool" and isinstance(value, bool)):
            raise UserError(f"--config {path}: {key} = {value!r} is not a {tname}")
        choices = known[key].metadata.get("choices")
        if choices and value not in choices:
            raise UserError(f"--config {path}: {key} must be one of {choices}, got {value!r}")
    return values


def parse_config(cls, argv, description):
    """Defaults < preset < command line; then validate. Raises UserError on bad input."""
    args = vars(build_parser(cls, description).parse_args(argv))
    values = {}
    if args.get("config"):
        values.update(read_preset(args["config"], cls))
    values.update(args)
    fields = cls.__dataclass_fields__
    cfg = cls(**{k: (float(v) if _type_name(fields[k]) == "float" else v) for k, v in values.items()})
    cfg.validate()
    if cfg.dry_run:  # print the resolved config and stop: the same for every entry script
        print(json.dumps(cfg.to_dict(), indent=2))
        raise SystemExit(0)
    return cfg


def default_run_dir(script, dataset, loss, seed):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{script}__{dataset}__{loss}__s{seed}__{stamp}")


def run_cli(main, argv=None):
    """Run `main(argv)`; turn UserError / RunFailure / WriteFailure into `error: ...` and exit status
    2 / 3 / 4 (the traceback only with --debug)."""
    argv = sys.argv[1:] if argv is None else argv
    debris = not os.path.exists(MINDSPORE_DEBRIS)
    try:
        code = main(argv)
    except tuple(EXIT_STATUS) as e:
        if "--debug" in argv:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        sys.exit(next(code for cls, code in EXIT_STATUS.items() if isinstance(e, cls)))
    finally:
        if debris:
            move_debris("--debug" in argv)
    sys.exit(code or 0)


# MindSpore writes a failed compile's IR (rank_0/om/analyze_fail.ir) into the working directory,
# whatever save_graphs_path or MS_DEV_SAVE_GRAPHS_PATH say (2.10): not the place for it
MINDSPORE_DEBRIS = "rank_0"


def move_debris(say):
    """Move a rank_0/ this process left in the working directory into a temp dir."""
    if not os.path.isdir(MINDSPORE_DEBRIS):
        return
    import shutil
    import tempfile
    target = tempfile.mkdtemp(prefix="mindspore-ir-")
    try:
        shutil.move(MINDSPORE_DEBRIS, target)
    except OSError:
        return
    if say:
        print(f"note: MindSpore's compile IR moved to {os.path.join(target, MINDSPORE_DEBRIS)}", file=sys.stderr)
