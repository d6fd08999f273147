"""The layout rules that keep the recipes open: loops/ names no algorithm, metrics/ is a library that
imports no recipe family, no library module imports an entry script, no private name crosses a
package, and every algorithm in a registry is one module that brings what its entry script needs."""
import ast
import glob
import os
import re

import pytest

from conftest import ROOT

ENTRY_SCRIPTS = {os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(ROOT, "*.py"))}
LIBRARIES = ("loops", "gan", "rl", "models", "data", "metrics", "tools")
ALGORITHM_WORDS = re.compile(r"\b(gan|gans|generator|discriminator|critic|actor|dcgan|pacgan|r1|ppo|sac|dqn|td3|"
                             r"ddpg|pix2pix|cyclegan|policy|reward)\b", re.I)


def imports_of(path):
    """[(module imported, names imported from it)] of one file, relative imports resolved."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    package = os.path.relpath(os.path.dirname(path), ROOT).replace(os.sep, ".")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([module] if module else []))
            out.append((module, tuple(alias.name for alias in node.names)))
    return out


def library_files(*packages):
    return [p for package in packages for p in glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True)]


def test_the_core_names_no_algorithm():
    for path in library_files("loops"):
        lines = [line for line in open(path, encoding="utf-8").read().splitlines()
                 if ALGORITHM_WORDS.search(line) and "Generator" not in line]  # numpy's random Generator
        assert not lines, (path, lines[:3])


def test_metrics_is_a_library_that_imports_no_recipe_family():
    for path in library_files("metrics"):
        families = [m for m, _ in imports_of(path) if m.split(".")[0] in ("gan", "rl")]
        assert not families, (path, families)


def test_no_library_module_imports_an_entry_script():
    for path in library_files(*LIBRARIES):
        scripts = [m for m, _ in imports_of(path) if m.split(".")[0] in ENTRY_SCRIPTS]
        assert not scripts, (path, scripts)


def test_no_private_name_crosses_a_package():
    for path in library_files(*LIBRARIES) + glob.glob(os.path.join(ROOT, "*.py")):
        own = os.path.relpath(path, ROOT).split(os.sep)[0]
        for module, names in imports_of(path):
            top = module.split(".")[0]
            if top in LIBRARIES and top != own:
                private = [n for n in names if n.startswith("_")] + [m for m in module.split(".") if m.startswith("_")]
                assert not private, (path, module, private)


def test_models_import_no_core_and_the_core_imports_no_family():
    for path in library_files("models"):
        assert not [m for m, _ in imports_of(path) if m.split(".")[0] == "loops"], path
    for path in library_files("loops"):
        assert not [m for m, _ in imports_of(path) if m.split(".")[0] in ("gan", "rl", "models", "data", "metrics")], path


@pytest.mark.parametrize("name", sorted(__import__("gan").TRANSLATORS))
def test_every_registered_translator_is_one_module_with_config_trainer_and_evaluation(name):
    from gan import translator
    from gan.translation import Translator
    module = translator(name)
    assert module.Config.__dataclass_fields__["model"].default == name
    assert issubclass(module.TRAINER, Translator) and module.EVALUATION is not None
    assert set(module.Config.MODELS) == set(module.MODELS)


@pytest.mark.parametrize("name", sorted(__import__("rl").ALGORITHMS))
def test_every_registered_algorithm_is_one_module_with_config_agent_and_evaluation(name):
    """What train_rl.py, rl/evaluate.py and `python -m metrics` need of an algorithm, all in its module:
    a Config of its own (its --algo default is its name), an AGENT, the models that learn, an EVALUATION."""
    from rl import algorithm
    from rl.agent import Agent
    module = algorithm(name)
    assert module.Config.__dataclass_fields__["algo"].default == name
    assert issubclass(module.AGENT, Agent) and module.EVALUATION is not None
    assert set(module.Config.MODELS) == set(module.MODELS)  # per-model flags come from its own models
