"""train_regression.py end to end: convergence, exact resume, TensorBoard tags, CLI errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import loops
import train_regression
from conftest import ROOT, assert_same_arrays, checkpoint_arrays, cli_error, error_lines, run_script, scalar_tags


def test_converges_to_true_line_and_logs(tmp_path):
    run = tmp_path / "reg"
    run_script("train_regression.py", "--run-dir", run, "--log-every", 100)
    m = json.loads((run / "metrics.json").read_text())
    assert abs(m["w"] - 2.0) < 0.01 and abs(m["b"] - 3.0) < 0.01, m
    assert m["steps"] == 500 and m["loss"] < 1e-3
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["lr"] == 0.01 and cfg["batch_size"] == 4 and cfg["optimizer"] == "sgd"
    acc = scalar_tags(run)
    tags = acc.Tags()
    assert {"loss/train", "grad_norm/model", "grad_norm/model_after", "perf/steps_per_s"} <= set(tags["scalars"])
    assert [e.step for e in acc.Scalars("loss/train")] == [100, 200, 300, 400, 500]
    losses = [e.value for e in acc.Scalars("loss/train")]
    assert losses[-1] < losses[0]
    assert "config/text_summary" in tags["tensors"]
    assert os.listdir(run / "checkpoints") == ["step_00000500.ckpt"]


def test_host_blocking_default_and_both_host_modes_train_the_same_bits(tmp_path):
    """loops sets MS_DEV_HOST_BLOCKING_RUN=1 below 4 cores unless the user set it; runs in either host
    mode give the same weights (it moves where calls run, not what they compute)."""
    probe = "import os; os.sched_setaffinity(0, {0}); import loops; print(os.environ.get('MS_DEV_HOST_BLOCKING_RUN'))"
    for user, seen in ((None, "1"), ("0", "0")):
        env = loops.child_env()
        env.pop("MS_DEV_HOST_BLOCKING_RUN", None)  # also one the user running the tests set
        env.update({"MS_DEV_HOST_BLOCKING_RUN": user} if user else {})
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True)
        assert out.stdout.split() == [seen], (user, out.stdout, out.stderr[-500:])
    runs = {mode: tmp_path / f"host{mode}" for mode in "01"}
    for mode, run in runs.items():
        run_script("train_regression.py", "--run-dir", run, "--steps", 300, "--optimizer", "adam",
                   env={"MS_DEV_HOST_BLOCKING_RUN": mode})
    assert_same_arrays(checkpoint_arrays(runs["0"] / "checkpoints/step_00000300.ckpt"),
                       checkpoint_arrays(runs["1"] / "checkpoints/step_00000300.ckpt"))


def test_resume_is_bit_identical(tmp_path):
    flags = ["--grad-noise", "0.01", "--accumulate", "3", "--clip-norm", "5", "--optimizer", "adam",
             "--skip-nonfinite", "--steps-per-call", "4"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    common = ["--steps", 60, "--log-every", 10, *flags]
    run_script("train_regression.py", "--run-dir", whole, *common)
    run_script("train_regression.py", "--run-dir", parts, *common[:1], 25, *common[2:])
    run_script("train_regression.py", "--run-dir", parts, "--resume", *common)
    assert_same_arrays(checkpoint_arrays(whole / "checkpoints/step_00000060.ckpt"),
                       checkpoint_arrays(parts / "checkpoints/step_00000060.ckpt"))


def test_clip_value_really_bounds_each_update(tmp_path):
    # lr 1 and clip 0.001: each SGD update moves w and b by at most 0.001, so 20 steps <= 0.02
    run = tmp_path / "clip"
    run_script("train_regression.py", "--run-dir", run, "--steps", 20, "--lr", 1.0, "--clip-value", 0.001)
    m = json.loads((run / "metrics.json").read_text())
    assert 0.0 < abs(m["w"]) <= 0.02 + 1e-6 and 0.0 < abs(m["b"]) <= 0.02 + 1e-6


@pytest.mark.parametrize("args, message", [
    (["--lr", "-1"], "--lr must be"),
    (["--steps", "0"], "--steps must be > 0"),
    (["--accumulate", "0"], "--accumulate must be > 0"),
    (["--device", "TPU"], "invalid choice"),
    (["--clip-norm", "nan"], "--clip-norm must be"),
    (["--steps", "ten"], "invalid int value"),
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_flags_exit_2_with_one_line(tmp_path, capsys, args, message):
    code, lines = cli_error(train_regression.main, ["--run-dir", tmp_path / "r", *args], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "r").exists()


def test_resume_without_checkpoint_is_refused(tmp_path):
    proc = run_script("train_regression.py", "--run-dir", tmp_path / "empty", "--resume", check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: --resume: no checkpoint in {tmp_path / 'empty' / 'checkpoints'}"]


@pytest.mark.parametrize("damage", ["truncate", "zero", "random"])
def test_corrupt_checkpoint_is_refused_and_left_alone(tmp_path, damage):
    run = tmp_path / "run"
    run_script("train_regression.py", "--run-dir", run, "--steps", 10)
    ckpt = run / "checkpoints/step_00000010.ckpt"
    data = ckpt.read_bytes()
    bad = {"truncate": data[: len(data) // 2], "zero": b"",
           "random": np.random.default_rng(0).bytes(len(data))}[damage]
    ckpt.write_bytes(bad)
    before = sorted(os.listdir(run)), (run / "config.json").read_text()
    proc = run_script("train_regression.py", "--run-dir", run, "--resume", "--steps", 20, check=False)
    assert proc.returncode == 2
    lines = error_lines(proc)  # the corrupt file named, then: nothing intact to fall back to
    assert len(lines) == 2 and "is corrupt" in lines[0] and "step_00000010.ckpt" in lines[0], proc.stderr
    assert lines[1].startswith("error: --resume: no intact checkpoint")
    assert ckpt.read_bytes() == bad
    assert (sorted(os.listdir(run)), (run / "config.json").read_text()) == before


def test_every_single_byte_flip_in_a_checkpoint_is_refused(tmp_path):
    """40 one-byte flips at random offsets, headers and float data alike: each is refused on load
    (the CRC), none loads silently changed values."""
    from loops import checkpoint
    from loops.config import UserError
    run = tmp_path / "run"
    run_script("train_regression.py", "--run-dir", run, "--steps", 10)
    ckpt = run / "checkpoints/step_00000010.ckpt"
    data = ckpt.read_bytes()
    checkpoint.read(str(ckpt))  # the intact file loads
    flipped = tmp_path / "flipped.ckpt"
    for offset in np.random.default_rng(0).choice(len(data), 40, replace=False):
        bad = bytearray(data)
        bad[offset] ^= 0x5A
        flipped.write_bytes(bytes(bad))
        with pytest.raises(UserError, match="is corrupt"):
            checkpoint.read(str(flipped))


def test_fresh_run_refuses_a_dir_with_checkpoints(tmp_path):
    run = tmp_path / "run"
    run_script("train_regression.py", "--run-dir", run, "--steps", 5)
    stamp = (run / "checkpoints/step_00000005.ckpt").read_bytes()
    proc = run_script("train_regression.py", "--run-dir", run, "--steps", 5, check=False)
    assert proc.returncode == 2 and "already holds checkpoints" in error_lines(proc)[0]
    assert (run / "checkpoints/step_00000005.ckpt").read_bytes() == stamp


def test_resume_with_changed_model_flags_needs_force(tmp_path):
    run = tmp_path / "run"
    run_script("train_regression.py", "--run-dir", run, "--steps", 5)
    proc = run_script("train_regression.py", "--run-dir", run, "--resume", "--steps", 8, "--lr", 0.1, check=False)
    assert proc.returncode == 2 and "lr: 0.01 -> 0.1" in error_lines(proc)[0]
    run_script("train_regression.py", "--run-dir", run, "--resume", "--steps", 8, "--lr", 0.1, "--force")
    assert json.loads((run / "metrics.json").read_text())["steps"] == 8


def test_preset_file_and_dry_run(tmp_path):
    preset = tmp_path / "p.cfg"
    preset.write_text("lr = 0.05\nbatch-size = 8  # comment\n")
    proc = run_script("train_regression.py", "--config", preset, "--batch-size", 16, "--dry-run")
    cfg = json.loads(proc.stdout)
    assert cfg["lr"] == 0.05 and cfg["batch_size"] == 16  # command line wins over the preset
    preset.write_text('{"lr": "fast"}')
    proc = run_script("train_regression.py", "--config", preset, "--dry-run", check=False)
    assert proc.returncode == 2 and "lr = 'fast' is not a float" in error_lines(proc)[0]
