"""Which recipe made a run directory, and what that recipe offers for it.

config.json names the module that made the run (`"recipe": "rl.sac"`); `python -m metrics` asks that
module's EVALUATION, generate.py its GENERATION. The modules are imported by name: this library
imports no recipe family itself.
"""
import importlib
import json
import os

from loops.config import UserError

# run dirs written before config.json named their recipe: the keys that told them apart
LEGACY_RECIPES = (("algo", "rl.{algo}"), ("z_dim", "gan.trainer"))


def recipe_of(run_dir):
    """The module named in RUN_DIR/config.json ("" when the run names none and is not a legacy run);
    UserError when there is no readable config.json."""
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
    recipe = recipe_of(run_dir)
    try:
        evaluation = getattr(importlib.import_module(recipe), "EVALUATION", None) if recipe else None
    except ImportError:
        evaluation = None
    if evaluation is None:
        made_by = f"recipe {recipe!r}" if recipe else "its script"
        raise UserError(f"{run_dir}: {made_by} defines no evaluation: nothing to evaluate")
    return evaluation


def generation_of(run_dir):
    """The GENERATION function of the recipe that made RUN_DIR (generate.py); UserError when it has none."""
    recipe = recipe_of(run_dir) or "gan.trainer"  # generate.py's runs before any recipe was recorded
    try:
        generation = getattr(importlib.import_module(recipe), "GENERATION", None)
    except ImportError:
        generation = None
    if generation is None:
        raise UserError(f"{run_dir}: recipe {recipe!r} defines no generation: generate.py samples train_gan.py "
                        "and train_translate.py runs")
    return generation
