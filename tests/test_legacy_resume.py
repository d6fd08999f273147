"""Runs started before the multi-model refactor still resume, bit for bit.

tests/legacy_runs/ holds checkpoints written by the code of commit 4b693ca (see its README). Each is
resumed by today's code for as many steps again; the result must equal a fresh run of today's code
over all the steps. That holds only if the checkpoint format (parameter names of models, optimizers
and gradient-transform state; meta; RNG state) AND the training math are unchanged."""
import json
import os
import shutil

import pytest

from conftest import ROOT, assert_same_arrays, checkpoint_arrays, run_script

LEGACY = os.path.join(ROOT, "tests", "legacy_runs")


def flags_of(run):
    """The legacy run's training flags, from its config.json (everything but the runtime keys)."""
    cfg = json.load(open(os.path.join(LEGACY, run, "config.json")))
    skip = {"run_dir", "steps", "resume", "force", "config", "dry_run", "no_progress", "debug", "device",
            "mode", "sample_every"}
    out = []
    for key, value in sorted(cfg.items()):
        if key in skip:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out += [flag] if value else []
        elif value != "":
            out += [flag, value]
    return out


@pytest.mark.parametrize("script, run, steps", [
    ("train_gan.py", "gan_ring8", 10),
    ("train_gan.py", "gan_digits", 4),
    ("train_regression.py", "regression", 10),
])
def test_legacy_checkpoint_resumes_bit_identically(tmp_path, script, run, steps):
    resumed = tmp_path / "resumed"
    shutil.copytree(os.path.join(LEGACY, run), resumed)
    for path in (resumed / "checkpoints").iterdir():
        os.chmod(path, 0o600)
    run_script(script, *flags_of(run), "--run-dir", resumed, "--resume", "--steps", 2 * steps, "--no-progress")
    fresh = tmp_path / "fresh"
    run_script(script, *flags_of(run), "--run-dir", fresh, "--steps", 2 * steps, "--no-progress")
    name = f"step_{2 * steps:08d}.ckpt"
    assert_same_arrays(checkpoint_arrays(resumed / "checkpoints" / name),
                       checkpoint_arrays(fresh / "checkpoints" / name))
