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


class NothingToDo(Exception):
    """The command asks for nothing that is not done already (e.g. --resume of a finished run to its
    own --steps): one `note: ...` line, exit status 0, no file touched."""


EXIT_STATUS = {UserError: 2, RunFailure: 3, WriteFailure: 4}


AUTO = "auto"
MAX_SEED = 2**32 - 1  # every seed of the project (numpy's and MindSpore's generators take it)
PRESET_MAX_BYTES = 1 << 20  # presets are small text files; anything bigger is not one


def opt(default, help, choices=None, auto=None):
    """A config field with its help text (and, for strings, the valid choices). `auto`: what the
    script picks when the flag is left out or given as the word `auto` (e.g. "toy 2, images 1"); the
    field then holds its default, a placeholder that the config's validate() replaces. auto=True: the
    word `auto` is accepted and means the default itself (a recipe's own default)."""
    return field(default=default, metadata={"help": help, "choices": choices, "auto": auto})


@dataclass
class RunConfig:
    """Flags every training script has (docs/flags.md)."""
    run_dir: str = opt("", "run directory (default: runs/<script>__<dataset>__<loss>__s<seed>__<time>)")
    steps: int = opt(500, "optimizer steps (iterations) to train for, in total")
    seed: int = opt(0, "seed of the host RNG that draws data, noise and initial weights")
    mode: str = opt("graph", "graph: jit-compiled steps; pynative: eager", ["graph", "pynative"])
    device: str = opt("", "where to run", ["", "CPU", "GPU", "Ascend"], auto="the best one present")
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
    # fields the saved state is shaped by (environments, buffers, data): a resume cannot change them,
    # not even with --force, so it is refused before anything is read into the run or written
    FIXED_ON_RESUME = ()

    def check(self, cond, message):
        if not cond:
            raise UserError(message)

    def _check_each(self, names, ok, requirement):
        for name in names:
            value = getattr(self, name)
            self.check(ok(value), f"--{name.replace('_', '-')} must be {requirement}, got {value}")

    def check_positive(self, *names):
        """Each field is > 0 (and finite, for floats)."""
        for name in names:
            self._check_each([name], lambda v: math.isfinite(v) and v > 0,
                             "a finite number > 0" if isinstance(getattr(self, name), float) else "> 0")

    def check_non_negative(self, *names):
        """Each field is a finite number >= 0."""
        for name in names:
            self._check_each([name], lambda v: math.isfinite(v) and v >= 0,
                             "a finite number >= 0" if isinstance(getattr(self, name), float) else ">= 0")

    def validate(self):
        self.check_positive("steps", "log_every")
        self.check_non_negative("seed", "ckpt_every", "keep_ckpts")
        check_seed(self.seed)
        self.check(not (self.resume and not self.run_dir), "--resume needs --run-dir")
        self.check(self.resume or not self.force, "--force only applies with --resume")

    def owns_run(self, config):
        """Whether a run recorded before config.json named its recipe (`config`: its config.json)
        was made by this config's script; recipes override it with what tells their runs apart."""
        return True

    def canonical(self, config):
        """A saved or current config dict in the form a resume compares: a recipe where two values mean
        the same run overrides this to map one onto the other."""
        return config

    def resume_words(self, key, saved):
        """The flag words that give `key` its value in the `saved` config, where the generic spelling
        (--key value) cannot (a placeholder that only leaving the flag out gives); None: the generic one."""
        return None

    def to_dict(self):
        return dataclasses.asdict(self)

    def model_dict(self):
        """The config minus runtime keys: what must match for a resume to continue the same run."""
        return {k: v for k, v in self.to_dict().items() if k not in self.RUNTIME_KEYS}


def check_seed(seed, flag="--seed"):
    """UserError unless 0 <= seed <= MAX_SEED: the one seed range of every script."""
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"{flag} must be in [0, {MAX_SEED}], got {seed}")


class CommandLineParser(argparse.ArgumentParser):
    """argparse with the project's error contract: one `error: ...` line (with a did-you-mean for a
    near-miss flag or choice) and exit status 2. Every command line of the project uses it."""

    unknown_hint = ""  # appended to an unknown flag's error when no near-miss is found

    def error(self, message):  # one line, exit 2 (argparse prints usage too)
        hint = self.suggestion(message)
        if not hint and message.startswith("unrecognized arguments:") and self.unknown_hint:
            hint = f" ({self.unknown_hint})"
        print(f"error: {message}{hint}", file=sys.stderr)
        sys.exit(2)

    def flag_names(self):
        """Every --flag this parser knows, sorted (without --help)."""
        return sorted(o for a in self._actions for o in a.option_strings if o.startswith("--") and o != "--help")

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
    own = {}  # HELP_GROUPS of every class in the hierarchy, the base's sections first
    for klass in reversed(cls.__mro__):
        for title, names in vars(klass).get("HELP_GROUPS", {}).items():
            own.setdefault(title, []).extend(n for n in names if n not in own.get(title, ()))
    groups = {title: list(names) for title, names in own.items()}
    for title, names in list(getattr(cls, "FLAG_GROUPS", {}).items()) + [("run", [f.name for f in dataclasses.fields(RunConfig)])]:
        groups.pop(title, None)  # keep its place after the script's own sections, its names first
        groups[title] = list(names) + list(own.get(title, ()))
    placed = {n for names in groups.values() for n in names}
    groups["other"] = [f.name for f in dataclasses.fields(cls) if f.name not in placed]
    return groups


def parser_spec(cls, description):
    """The command line of a config class as plain JSON data: the description and, per --help
    section, each flag's name, type, default, help text and choices. build_parser builds from it,
    and loops/flagcache.py keeps it so that the next run checks its flags before importing MindSpore."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    sections = {}
    for title, names in help_groups(cls).items():
        for name in names:
            if name in fields and not any(name in section for section in sections.values()):
                sections.setdefault(title, set()).add(name)  # the first section that lists a field gets it
    return {"description": description, "sections": [
        [title, [{"name": f.name, "type": _type_name(f), "default": f.default, "help": f.metadata.get("help", ""),
                  "choices": f.metadata.get("choices"), "auto": _auto_text(f)}
                 for f in fields.values() if f.name in names]]
        for title, names in sections.items()]}


def _auto_text(f):
    """What `auto` means for field f: its own text, or (auto=True) the field's default itself."""
    auto = f.metadata.get("auto")
    return str(f.default) if auto is True else auto


def parser_from_spec(spec):
    # allow_abbrev=False: an abbreviated recipe flag must not pass here while the recipe pre-parser
    # (choose_recipe) does not expand it: one spelling per flag, on both
    parser = CommandLineParser(description=spec["description"], argument_default=argparse.SUPPRESS, allow_abbrev=False,
                     formatter_class=argparse.RawDescriptionHelpFormatter)  # keep the docstring's lines
    for title, flags in spec["sections"]:
        group = parser.add_argument_group(title)
        for f in flags:
            if f["type"] == "bool":
                group.add_argument(_flag(f["name"]), action="store_true", help=f["help"])
                # --no-X as well where X is off by default: a command that spells out a default keeps
                # working when a recipe's default changes
                if not f["name"].startswith("no_"):
                    group.add_argument("--no-" + f["name"].replace("_", "-"), dest=f["name"], action="store_false")
                continue
            typ = {"int": int, "float": float, "str": str}[f["type"]]
            # "" is an internal placeholder ("auto", or "take the shared flag"), not a listed choice
            choices = [c for c in f["choices"] if c] if f["choices"] else None
            if f["auto"]:  # one convention for every value the script decides: the word auto
                shown = f" (default: auto = {f['auto']})"
                typ, choices = _or_auto(typ), [AUTO] + choices if choices else None
            else:
                shown = "" if "default" in f["help"] else f" (default: {f['default']!r})"
            group.add_argument(_flag(f["name"]), type=typ, choices=choices, help=f["help"] + shown)
    return parser


def _or_auto(typ):
    """int / float / str that also takes the word auto (kept as the word; parse_config resolves it)."""
    def convert(text):
        return text if text == AUTO else typ(text)
    convert.__name__ = typ.__name__  # argparse's "invalid int value: 'x'"
    return convert


def build_parser(cls, description):
    return parser_from_spec(parser_spec(cls, description))


def read_preset_values(path):
    """A preset file's {key: value}: a JSON object, or `key = value` lines (values parsed as JSON when
    they can be), unchecked against any config."""
    try:
        if not os.path.isfile(path):  # a FIFO or /dev/zero would be read forever
            raise UserError(f"--config {path}: not a regular file" if os.path.exists(path)
                            else f"cannot read --config {path}: No such file or directory")
        if os.path.getsize(path) > PRESET_MAX_BYTES:
            raise UserError(f"--config {path}: {os.path.getsize(path)} bytes; a preset is a small text file "
                            f"(at most {PRESET_MAX_BYTES} bytes)")
        with open(path, encoding="utf-8") as f:
            text = f.read(PRESET_MAX_BYTES + 1)
    except OSError as e:
        raise UserError(f"cannot read --config {path}: {e.strerror}")
    except UnicodeDecodeError:
        raise UserError(f"--config {path}: not a UTF-8 text file (expected JSON or `key = value` lines)")
    try:
        values = json.loads(text)
        if not isinstance(values, dict):
            raise UserError(f"--config {path}: expected a JSON object")
    except (RecursionError, ValueError) as e:  # nested too deep, or an integer of thousands of digits
        if not isinstance(e, json.JSONDecodeError):
            raise UserError(f"--config {path}: not a preset ({type(e).__name__}: {str(e)[:80]})")
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
            except (RecursionError, ValueError):
                values[key.replace("-", "_")] = value
    return values


# facts a run's config.json records next to its flags (model sizes, the recipe and script that made it): a run's
# config.json is a valid preset, so these keys are skipped, not refused
RECORDED_FACTS = ("params_", "recipe", "script")


def _representable(value, tname):
    """An int fits 64 bits; a float (or an int given for one) is a finite double."""
    if tname == "int":
        return -2**63 <= value < 2**63
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def read_preset(path, cls):
    """A preset file, checked against the fields of `cls` (names, types, choices)."""
    values = read_preset_values(path)
    known = {f.name: f for f in dataclasses.fields(cls)}
    values = {k: v for k, v in values.items() if not k.startswith(RECORDED_FACTS)}
    for key, value in values.items():
        if key not in known:
            raise UserError(f"--config {path}: unknown key {key!r}")
        tname = _type_name(known[key])
        if value == AUTO and known[key].metadata.get("auto"):
            continue
        expected = {"int": int, "float": (int, float), "str": str, "bool": bool}[tname]
        if not isinstance(value, expected) or (tname != "bool" and isinstance(value, bool)):
            raise UserError(f"--config {path}: {key} = {str(value)[:40]!r} is not a {tname}")
        if tname in ("int", "float") and not _representable(value, tname):
            raise UserError(f"--config {path}: {key} = {str(value)[:40]} is out of range for a {tname}")
        choices = known[key].metadata.get("choices")
        if choices and value not in choices:
            raise UserError(f"--config {path}: {key} must be one of {choices}, got {value!r}")
    return values


def parse_config(cls, argv, description, cache=None):
    """Defaults < preset < command line; then validate. Raises UserError on bad input.
    cache: (script path, variant) of an entry script run as a program: its flags are kept for the
    next run's early check (loops/flagcache.py); by default, when `cls` is defined in __main__."""
    spec = parser_spec(cls, description)
    args = vars(parser_from_spec(spec).parse_args(argv))
    if cache is None and cls.__module__ == "__main__":
        cache = (sys.modules["__main__"].__file__, "")
    if cache:
        from loops import flagcache
        flagcache.save(cache[0], spec, cache[1])
    fields = cls.__dataclass_fields__
    for name, value in args.items():  # the placeholder typed out (--steps 0) is not "auto": only the word is
        auto = fields[name].metadata.get("auto") if name in fields else None
        if auto and auto is not True and value != AUTO and value == fields[name].default:
            shown = repr(value) if isinstance(value, str) else value
            raise UserError(f"--{name.replace('_', '-')} {shown} is not a value of this flag: leave it out or pass "
                            f"auto for the script's choice ({auto})")
    values = {}
    if args.get("config"):
        values.update(read_preset(args["config"], cls))
    values.update(args)
    values.update({k: fields[k].default for k, v in values.items() if v == AUTO and fields[k].metadata.get("auto")})
    cfg = cls(**{k: (float(v) if _type_name(fields[k]) == "float" else v) for k, v in values.items()})
    cfg.validate()
    if cfg.dry_run:  # print the resolved config and stop: the same for every entry script
        print(json.dumps(cfg.to_dict(), indent=2))
        raise SystemExit(0)
    return cfg


def choose_recipe(argv, flag, registry, default):
    """The recipe an entry script runs: `--<flag> NAME` (or `--<flag>=NAME`) on the command line, else
    the preset's `<flag>` key (`--config FILE`), else `default`. A name not in `registry` is one
    `error:` line with a did-you-mean. Cheap: no MindSpore, nothing built."""
    parser = CommandLineParser(add_help=False, allow_abbrev=False)  # --mode is not an abbreviation of --model
    parser.add_argument("--" + flag, choices=sorted(registry), default=None)
    parser.add_argument("--config", default="")
    known, _ = parser.parse_known_args([a for a in argv if a not in ("-h", "--help")])
    name = getattr(known, flag.replace("-", "_"))
    if name is None and known.config:
        values = read_preset_values(known.config)
        name = values.get(flag.replace("-", "_"), default)
        if not isinstance(name, str) or name not in registry:
            raise UserError(f"--config {known.config}: {flag} must be one of {sorted(registry)}, got {name!r}")
    return name or default


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
    except NothingToDo as e:
        print(f"note: {e}")
        code = 0
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
