"""--help and a mistyped flag answer before MindSpore loads (from the flags kept by the last run), and
a kept flag list is never used once a source file changed."""
import importlib
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from loops import flagcache
from loops.config import build_parser

SCRIPTS = {"train_gan.py": "GANConfig", "train_rl.py": "rl.ppo", "train_rl.py --algo sac": "rl.sac",
           "train_translate.py": "gan.pix2pix", "train_translate.py --model cyclegan": "gan.cyclegan",
           "train_regression.py": "RegressionConfig"}


def run_without_mindspore(tmp_path, script, *args):
    """Run `script args` where `import mindspore` fails loudly: only what runs before the import answers."""
    shim = tmp_path / "shim" / "mindspore"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "__init__.py").write_text("raise ImportError('mindspore was imported')\n")
    env = dict(os.environ, PYTHONPATH=str(shim.parent), COLUMNS="100")
    return subprocess.run([sys.executable, script, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_and_bad_flags_answer_without_importing_mindspore(tmp_path, monkeypatch, script):
    script, *recipe = script.split()  # train_rl.py --algo sac: each algorithm keeps its own flags
    # a first run builds the flags the slow way and keeps them (--dry-run: parse, print, exit)
    first = subprocess.run([sys.executable, script, *recipe, "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]

    typo = run_without_mindspore(tmp_path, script, *recipe, "--seeed", "3")
    assert typo.returncode == 2
    assert typo.stderr.strip() == "error: unrecognized arguments: --seeed 3; did you mean --seed?"

    bad_choice = run_without_mindspore(tmp_path, script, *recipe, "--mode", "graf")
    assert bad_choice.returncode == 2 and "did you mean 'graph'?" in bad_choice.stderr
    assert "Traceback" not in bad_choice.stderr

    helped = run_without_mindspore(tmp_path, script, *recipe, "--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    # the same text as the parser built from the config class itself
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setattr(sys, "argv", [script])  # argparse's program name
    module = importlib.import_module(script[:-3])
    name = SCRIPTS[" ".join([script, *recipe])]
    config = importlib.import_module(name).Config if "." in name else getattr(module, name)
    expected = build_parser(config, module.__doc__).format_help()
    assert helped.stdout == expected
    if recipe:  # another recipe's flag is an unknown flag, before MindSpore loads too
        flag = "--clip-coef" if script == "train_rl.py" else "--lambda-l1"
        other = run_without_mindspore(tmp_path, script, *recipe, flag, "0.1")
        assert other.returncode == 2 and other.stderr.startswith(f"error: unrecognized arguments: {flag}")

    # valid flags pass the early check and reach the real parse (which needs MindSpore here)
    valid = run_without_mindspore(tmp_path, script, *recipe, "--seed", "3", "--dry-run")
    assert valid.returncode != 0 and "mindspore was imported" in valid.stderr


def test_an_edited_source_file_invalidates_the_kept_flags(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "losses.py").write_text("LOSSES = {'a': 1}\n")
    (tmp_path / "script.py").write_text("")
    monkeypatch.setattr(flagcache, "ROOT", str(tmp_path))
    spec = {"description": "", "sections": [["run", [{"name": "seed", "type": "int", "default": 0, "help": "",
                                                       "choices": None}]]]}
    flagcache.save("script.py", spec)
    assert flagcache.load("script.py") == spec
    (tmp_path / "pkg" / "losses.py").write_text("LOSSES = {'a': 1, 'b': 2}\n")  # a new loss: new choices
    assert flagcache.load("script.py") is None
    flagcache.save("script.py", spec)  # the next full run keeps the new list and drops the old one
    kept = [n for n in os.listdir(tmp_path / "__pycache__") if n.startswith("flags-script-")]
    assert len(kept) == 1 and flagcache.load("script.py") == spec
    (tmp_path / "script.py").write_text("# a new flag\n")  # an entry script's own edit counts too
    assert flagcache.load("script.py") is None
    flagcache.save("script.py", spec)
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")  # byte code and repr may differ
    assert flagcache.load("script.py") is None
    flagcache.save("script.py", spec, variant="sac")  # a recipe of the script keeps its own file
    assert flagcache.load("script.py", variant="sac") == spec and flagcache.load("script.py") is None
