"""Reliability: NaN stops the run without saving NaN state, SIGTERM saves and exits, checkpoint
rotation, and no pickle anywhere in a run dir."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import loops
from conftest import ROOT, assert_same_arrays, checkpoint_arrays, error_lines, run_script
from loops.checkpoint import list_checkpoints
from loops.driver import HostSync, InFlight, NonFinite, Pace, Phase, train


def test_nan_loss_stops_with_one_line_and_keeps_good_checkpoints(tmp_path):
    run = tmp_path / "nan"
    proc = run_script("train_regression.py", "--run-dir", run, "--lr", 10, "--steps", 200, "--ckpt-every", 5,
                      check=False)
    assert proc.returncode == 3
    lines = error_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("error: loss/train") and "at step 15" in lines[0], proc.stderr
    names = sorted(os.listdir(run / "checkpoints"))
    assert names == ["step_00000005.ckpt", "step_00000010.ckpt"]
    for name in names:  # every checkpoint left behind is loadable and finite
        assert all(np.isfinite(v).all() for v in checkpoint_arrays(run / "checkpoints" / name).values())
    assert not (run / "metrics.json").exists()


def test_skip_nonfinite_keeps_going_and_counts(tmp_path):
    run = tmp_path / "skip"
    run_script("train_regression.py", "--run-dir", run, "--lr", 10, "--steps", 40, "--skip-nonfinite")
    m = json.loads((run / "metrics.json").read_text())
    assert m["skipped_updates"] > 0 and np.isfinite(m["w"]) and np.isfinite(m["b"])


def test_nonfinite_names_the_model():
    assert "of model 'd' " in str(NonFinite("loss/d", 3, 3)) and "at step 3" in str(NonFinite("loss/d", 3, 3))
    assert "of model 'g' " in str(NonFinite("loss/g", 1, 10)) and "steps 1-10" in str(NonFinite("loss/g", 1, 10))


class CountedLoss:
    """A device-loss stand-in that records when it is read (each read is a sync in MindSpore)."""
    reads, now = [], 0  # (step of the loss, driver's step when read)

    def __init__(self, value, step):
        self.value, self.step = value, step

    def asnumpy(self):
        CountedLoss.reads.append((self.step, CountedLoss.now))
        return np.float32(self.value)


class QuietLogger:
    def note(self, text):
        pass

    def advance(self, n):
        pass

    def scalars(self, step, values):
        return {k: float(v.asnumpy()) if hasattr(v, "asnumpy") else v for k, v in values.items()}


def run_fake_losses(monkeypatch, fast_s):
    """100 steps of a phase whose step-37 loss is NaN, logging every 25, checkpoints every 40; its
    calls take no time, and count as tiny when faster than `fast_s`."""
    monkeypatch.setattr(Pace, "FAST_S", fast_s)
    values = [1.0] * 36 + [float("nan")] + [1.0] * 100
    phase = Phase("fit", lambda step: (), lambda: None, ("loss/train",))

    def run(step):
        CountedLoss.now = step + 1
        phase.pace.wait((), time.perf_counter())  # what Phase.run does after a call (no device outputs here)
        return {"loss/train": CountedLoss(values[step], step + 1)}
    phase.run = run
    saved = []
    CountedLoss.reads = []
    with pytest.raises(NonFinite, match="at step 37"):
        train([phase], start_step=0, steps=100, log_every=25, logger=QuietLogger(),
              save=lambda step, final: saved.append(step), ckpt_every=40, hooks=[])
    assert saved == []  # nothing of the NaN state (nor after it) written
    return {loss_step: read_at for loss_step, read_at in CountedLoss.reads}


def test_tiny_calls_are_read_only_at_log_hook_and_checkpoint_points(monkeypatch):
    """Once calls are fast, no host sync per call: losses wait until something reads or saves the
    state, and the error still names the exact step."""
    read_at = run_fake_losses(monkeypatch, fast_s=float("inf"))
    # the first call (compile) is not timed; after FAST_CALLS fast ones the phase proves tiny, and the
    # losses of that last waited-for call already wait for the next read point
    deferred_from = Pace.FAST_CALLS + 1
    assert all(read_at[s] == s for s in range(1, deferred_from))
    assert all(read_at[s] == 25 for s in range(deferred_from, 26))  # the log line at step 25
    assert all(read_at[s] == 40 for s in range(26, 38))  # the checkpoint at 40 (oldest first: stops at 37)
    assert max(read_at) == 37


def test_slow_calls_are_read_after_every_call(monkeypatch):
    read_at = run_fake_losses(monkeypatch, fast_s=0.0)
    assert all(read_at[s] == s for s in range(1, 38)) and max(read_at) == 37


def test_host_sync_bounds_the_pending_calls_and_checks_host_floats_at_once():
    phase = Phase("fit", lambda step: (), lambda: None, ("loss/x",))
    phase.pace.waits = False  # measured tiny
    sync = HostSync(True, [phase])
    CountedLoss.reads = []
    for step in range(1, HostSync.MAX_PENDING):
        sync.add({"loss/x": CountedLoss(1.0, step), "other": CountedLoss(float("nan"), step)}, step, step)
    assert CountedLoss.reads == []  # pending; "other" is not a loss tag: never checked
    sync.add({"loss/x": CountedLoss(1.0, 100)}, 100, 100)
    assert len(CountedLoss.reads) == HostSync.MAX_PENDING and not sync.pending
    with pytest.raises(NonFinite, match="steps 3-5"):
        HostSync(True, [phase]).add({"loss/x": float("inf")}, 3, 5)  # host floats: checked at once


def test_pace_waits_for_each_call_until_calls_prove_tiny(monkeypatch):
    """Each call is read before the next is launched (several graphs in flight are slow), except in
    a phase whose calls are measured to be tiny."""
    for fast_s, waited in ((0.0, 60), (float("inf"), 1 + Pace.FAST_CALLS)):
        monkeypatch.setattr(Pace, "FAST_S", fast_s)
        pace, CountedLoss.reads = Pace(), []
        for step in range(60):
            pace.wait((CountedLoss(1.0, step), "not a device value", CountedLoss(2.0, step)), time.perf_counter())
        # one read per waited call (its last device output); the first call (compile) is not timed
        assert [s for s, _ in CountedLoss.reads] == list(range(waited))


def test_in_flight_keeps_the_inputs_of_the_last_calls():
    ring = InFlight()
    inputs = [(object(),) for _ in range(InFlight.CALLS + 3)]
    for x in inputs:
        assert ring.keep(x) is x
    assert list(ring.recent) == inputs[-InFlight.CALLS:]


def test_sigterm_saves_a_checkpoint_and_resume_finishes(tmp_path):
    run = tmp_path / "term"
    env = dict(os.environ, GLOG_v="3")
    args = ["--dataset", "ring8", "--width", "16", "--batch-size", "32", "--eval-samples", "100"]
    proc = subprocess.Popen([sys.executable, "train_gan.py", "--run-dir", str(run), *args, "--steps", "100000",
                             "--steps-per-call", "1", "--log-every", "20", "--no-progress"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # wait on observed progress: a progress line says it has trained a little
        if line.startswith("step "):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    ckpts = sorted(os.listdir(run / "checkpoints"))
    assert len(ckpts) == 1
    stopped_at = int(ckpts[0][5:13])
    assert 0 < stopped_at < 100000
    run_script("train_gan.py", "--run-dir", run, *args, "--steps", stopped_at + 5, "--resume")
    assert (run / "checkpoints" / f"step_{stopped_at + 5:08d}.ckpt").exists()


def test_keep_ckpts_rotates_and_no_file_is_a_pickle(tmp_path):
    run = tmp_path / "keep"
    run_script("train_regression.py", "--run-dir", run, "--steps", 50, "--ckpt-every", 10, "--keep-ckpts", 2)
    assert sorted(os.listdir(run / "checkpoints")) == ["step_00000040.ckpt", "step_00000050.ckpt"]
    for path in run.rglob("*"):
        if path.is_file():
            head = path.read_bytes()[:2]
            assert not (head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")), path


@pytest.mark.slow
def test_sigkill_anywhere_then_resume_is_bit_identical(tmp_path):
    """SIGKILL at random moments (checkpoints every step, so many kills land inside a save), resume
    each time; the latest checkpoint always loads and the end result equals an uninterrupted run."""
    args = ["--dataset", "ring8", "--width", "16", "--batch-size", "32", "--eval-samples", "100",
            "--steps", "200", "--steps-per-call", "1", "--ckpt-every", "1", "--keep-ckpts", "2", "--no-progress"]
    whole = tmp_path / "whole"
    run_script("train_gan.py", "--run-dir", whole, *args, own_process=True)
    run = tmp_path / "killed"
    rng = np.random.default_rng(0)
    env = loops.child_env(GLOG_v="4")  # the users' numeric path (the test process capped oneDNN for itself)
    targets = (60, 140)  # kill once the run has checkpointed past each of these steps
    for target in targets:
        resume = ["--resume"] if list_checkpoints(run) else []
        proc = subprocess.Popen([sys.executable, "train_gan.py", "--run-dir", str(run), *args, *resume],
                                cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        # Wait on observed progress, not on a clock: each run resumes at or before the previous target,
        # so >= 80 steps (each with a save) lie between it and the next kill, on any machine speed.
        deadline = time.monotonic() + 180
        while latest_step(run) < target:
            assert proc.poll() is None, f"the run ended before step {target}"
            assert time.monotonic() < deadline, f"no checkpoint past step {target} within 180 s"
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.03))  # a random moment: with a save every step, often inside one
        proc.kill()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL  # killed mid-run, not finished
        latest = list_checkpoints(run)  # complete ones only: a kill inside a save leaves a temp file
        checkpoint_arrays(latest[-1])  # loads: never half-written
        assert latest_step(run) < 200
    resume = ["--resume"] if list_checkpoints(run) else []
    run_script("train_gan.py", "--run-dir", run, *args, *resume, own_process=True)
    assert_same_arrays(checkpoint_arrays(whole / "checkpoints/step_00000200.ckpt"),
                       checkpoint_arrays(run / "checkpoints/step_00000200.ckpt"))


def latest_step(run):
    paths = list_checkpoints(run)
    return int(os.path.basename(paths[-1])[5:13]) if paths else -1


def test_unwritable_run_dir_exits_2(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc = run_script("train_regression.py", "--run-dir", blocker / "run", "--steps", 2, check=False)
    assert proc.returncode == 2 and "is not writable" in error_lines(proc)[0]
    assert blocker.read_text() == "not a directory"


def test_checkpoint_of_another_architecture_names_the_parameter(tmp_path):
    run = tmp_path / "arch"
    args = ["--dataset", "ring8", "--batch-size", 32, "--eval-samples", 100]
    run_script("train_gan.py", "--run-dir", run, *args, "--width", 16, "--steps", 3)
    before = (run / "checkpoints" / "step_00000003.ckpt").read_bytes()
    # without --force the changed flag is named (checked before any parameter shape)
    proc = run_script("train_gan.py", "--run-dir", run, *args, "--width", 32, "--steps", 6, "--resume", check=False)
    lines = error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--resume with a different config (width: 16 -> 32); pass --force" in lines[0]
    assert lines[0].endswith("or resume it as it started with: --width 16")  # e.g. after a default changed
    proc = run_script("train_gan.py", "--run-dir", run, *args, "--width", 32, "--steps", 6, "--resume", "--force",
                      check=False)
    lines = error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "parameter 'g.net.0.weight' has shape (16, 16), the model wants (32, 16)" in lines[0]
    assert (run / "checkpoints" / "step_00000003.ckpt").read_bytes() == before


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_last_iterations_hooks_still_stops_the_run(sig):
    """A signal while the final step's hooks run (an end-of-run evaluation) used to be dropped (exit
    0): the last checkpoint is still saved, and the run exits 128 + N like one stopped mid-training."""
    from loops.driver import Hook
    phase = Phase("fit", lambda step: (), lambda: None, ())
    phase.run = lambda step: {}
    saved, evaluated = [], []

    def evaluate(step):
        evaluated.append(step)
        if step == 6:
            os.kill(os.getpid(), sig)
    _, code = train([phase], start_step=0, steps=6, log_every=10, logger=QuietLogger(),
                    save=lambda step, final: saved.append((step, final)), ckpt_every=0, hooks=[Hook(3, evaluate)])
    assert (code, saved, evaluated) == (128 + sig, [(6, True)], [3, 6])


def test_sigterm_during_the_final_rl_evaluation_stops_it_with_the_line_that_says_how_to_evaluate(tmp_path):
    """Training done and saved, then SIGTERM while the end-of-run evaluation runs: no traceback, no
    metrics.json, exit 143, and one line naming the checkpoint and `python -m metrics RUN`."""
    run = tmp_path / "rl"
    proc = subprocess.Popen([sys.executable, "train_rl.py", "--run-dir", str(run), "--steps", "1", "--num-envs", "1",
                             "--num-steps", "8", "--update-epochs", "1", "--hidden", "8", "--eval-episodes", "1000000",
                             "--no-progress"], cwd=ROOT, env=loops.child_env(GLOG_v="3"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stdout:  # wait on observed progress: the evaluation has begun
        lines.append(line)
        if line.startswith("evaluating the trained model"):
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
    last = (lines + out.splitlines())[-1].strip()
    ckpt = run / "checkpoints" / "step_00000001.ckpt"
    assert last == (f"stopped during the final evaluation (signal 15); training is done and its checkpoint saved: "
                    f"{ckpt}; evaluate it with: python -m metrics {run}"), last
    assert ckpt.is_file() and not (run / "metrics.json").exists()
