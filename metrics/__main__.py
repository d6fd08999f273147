"""Evaluate a run's latest (or a given) checkpoint and write its metrics.json.

    python -m metrics RUN_DIR [flags of the run's recipe]
    python -m metrics RUN_DIR --help            # the flags this run's recipe takes

config.json names the recipe that made the run (`"recipe": "rl.sac"`, a module); the command asks
that module's EVALUATION to evaluate it: the recipe decides its flags and its numbers (GAN runs:
FID, KID, PRDC, IS or mode coverage, see gan/evaluate.py; RL runs: the deterministic policy's
returns and an episode plot, see rl/evaluate.py). metrics/ itself is a library and imports no recipe.
"""
import argparse
import importlib
import json
import os
import sys

os.environ.setdefault("GLOG_v", "4")

# run dirs written before config.json named their recipe: the keys that told them apart
LEGACY_RECIPES = (("algo", "rl.{algo}"), ("z_dim", "gan.trainer"))


def recipe_of(run_dir):
    """The module named in RUN_DIR/config.json ("" when the run names none and is not a legacy run);
    UserError when there is no readable config.json."""
    from loops.config import UserError
    path = os.path.join(run_dir, "config.json")
    if not os.path.isdir(run_dir):
        raise UserError(f"run dir {run_dir} does not exist")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"{path} is missing or unreadable ({getattr(e, 'strerror', None) or e}): not a run directory")
    if not isinstance(config, dict):
        raise UserError(f"{path} is not a run's config (a JSON object)")
    if isinstance(config.get("recipe"), str):
        return config["recipe"]
    for key, recipe in LEGACY_RECIPES:
        if key in config:
            return recipe.format(**{k: config[k] for k in config if isinstance(config[k], str)})
    return ""


def evaluation_of(run_dir):
    """The EVALUATION object of the recipe that made RUN_DIR; UserError when it has none."""
    from loops.config import UserError
    recipe = recipe_of(run_dir)
    try:
        evaluation = getattr(importlib.import_module(recipe), "EVALUATION", None) if recipe else None
    except ImportError:
        evaluation = None
    if evaluation is None:
        made_by = f"recipe {recipe!r}" if recipe else "its script"
        raise UserError(f"{run_dir}: {made_by} defines no evaluation: nothing to evaluate")
    return evaluation


def main(argv):
    from loops.config import CommandLineParser
    first = CommandLineParser(prog="python -m metrics", description=__doc__, add_help=False,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    first.add_argument("run_dir", nargs="?")
    first.add_argument("-h", "--help", action="store_true")
    known, _ = first.parse_known_args(argv)
    if known.run_dir is None:
        if known.help:
            first.print_help()
            return 0
        first.error("the following arguments are required: run_dir")
    evaluation = evaluation_of(known.run_dir)
    parser = CommandLineParser(prog="python -m metrics", description=evaluation.description,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run directory")
    evaluation.add_flags(parser)
    parser.unknown_hint = (f"{known.run_dir} is a run of {recipe_of(known.run_dir)}, whose evaluation takes "
                           f"{', '.join(parser.flag_names())}")
    args = parser.parse_args(argv)
    print(json.dumps(evaluation(args.run_dir, args), indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from loops.config import run_cli
    run_cli(main)
