"""Data parallel under msrun on CPU: 2 workers on 127.0.0.1 (MindSpore's built-in CPU collectives).

- The 2-rank runs end with bit-identical ranks (every rank prints a digest of all its parameters) and
  match one process over the global batch (2 x the per-rank batch) to float tolerance, for the
  regression baseline, the toy GAN and CycleGAN (its image pools included: the fakes are all-gathered,
  so every rank pools the global batch); only rank 0 writes the run dir.
- A killed rank makes `msrun --join=True` exit non-zero within a bounded time.

msrun starts the `python` found on PATH, so the venv's bin goes first. Each msrun job pays for three
MindSpore imports (scheduler + 2 workers) on this 2-core machine, so the regression and the GAN run
in ONE msrun job (a small driver that calls both scripts' main()), and the single-process reference
runs alongside it.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from conftest import ROOT, checkpoint_arrays
from fixtures import write_idx

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("msrun")]  # msrun jobs: one at a time

BIN = os.path.dirname(sys.executable)
REG = ["--steps", 20, "--no-progress"]
TOY = ["--dataset", "ring8", "--width", 16, "--steps", 20, "--eval-samples", 200, "--no-progress"]
# --norm none: with instance norm the conv biases before it get only rounding noise as gradient, which
# Adam scales up to full-size steps, so two exact runs would differ there by design
CYCLE = ["--model", "cyclegan", "--task", "sneaker2boot", "--ngf", 4, "--ndf", 4, "--norm", "none", "--pool-size", 3,
         "--steps", 4, "--decay-steps", 2, "--eval-images", 8, "--no-progress"]
DIGEST = re.compile(r"distributed: rank (\d+) of 2 state sha256 ([0-9a-f]{64})")
PID = re.compile(r"distributed: rank (\d+) of 2 \(pid (\d+)\)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(**extra):
    return dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), PYTHONUNBUFFERED="1",
                GLOG_v="3", **extra)


def msrun(log_dir, script, *args):
    return [os.path.join(BIN, "msrun"), "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1",
            f"--master_port={free_port()}", "--join=True", f"--log_dir={log_dir}", str(script), *map(str, args)]


def driver(path, runs):
    """A script that runs several (module, argv) trainings in one process (one MindSpore import).
    ("wait", file) waits for a file: rank 0 writes its final checkpoint after the others are done,
    and a second msrun job would only start after that."""
    lines = ["import os, sys, time", f"sys.path.insert(0, {ROOT!r})", "import mindspore"]
    for i, (module, args) in enumerate(runs):
        if module == "wait":
            lines += [f"while not os.path.exists({str(args)!r}):", "    time.sleep(0.1)"]
            continue
        if i:  # msrun gave each worker its device id: a second set_device would try to change it
            lines += ["mindspore.set_device = lambda *args, **kwargs: None"]
        lines += [f"import {module}", f"code = {module}.main({[str(a) for a in args]!r})",
                  "if code:", "    sys.exit(code)"]
    path.write_text("\n".join(lines) + "\n")
    return path


def read(path):
    return path.read_text() if path.exists() else ""


def assert_close(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def ckpt(run, step=20):
    return run / "checkpoints" / f"step_{step:08d}.ckpt"


def test_two_ranks_are_identical_and_match_one_process_over_the_global_batch(tmp_path):
    """Also: the 2-rank regression stops at step 11 and resumes (every rank loads rank 0's checkpoint)."""
    dist, single, logs = tmp_path / "dist", tmp_path / "single", tmp_path / "msrun"
    fashion = tmp_path / "fashion"
    write_idx(fashion, n=200, gzip=True)
    write_idx(fashion, n=60, seed=1, gzip=True, split="test")
    reg = ["--distributed", "--run-dir", dist / "reg", "--batch-size", 4, *REG]
    both = driver(tmp_path / "dist.py", [
        ("train_regression", reg + ["--steps", 11]), ("wait", ckpt(dist / "reg", 11)),
        ("train_regression", reg + ["--resume"]),
        ("train_gan", ["--distributed", "--run-dir", dist / "gan", "--batch-size", 32, *TOY]),
        ("train_translate", ["--distributed", "--run-dir", dist / "cycle", "--batch-size", 2, "--data-dir", fashion,
                             *CYCLE])])
    ref = driver(tmp_path / "single.py", [
        ("train_regression", ["--run-dir", single / "reg", "--batch-size", 8, *REG]),
        ("train_gan", ["--run-dir", single / "gan", "--batch-size", 64, *TOY]),
        ("train_translate", ["--run-dir", single / "cycle", "--batch-size", 4, "--data-dir", fashion, *CYCLE])])
    job = subprocess.Popen(msrun(logs, both), cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        one = subprocess.run([sys.executable, str(ref)], cwd=ROOT, env=env(), capture_output=True, text=True,
                             timeout=300)
        out, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
    assert one.returncode == 0, one.stderr[-3000:]
    assert job.returncode == 0, out[-3000:] + read(logs / "worker_0.log")[-3000:] + read(logs / "worker_1.log")[-3000:]

    digests = [[m.group(2) for m in DIGEST.finditer(read(logs / f"worker_{r}.log")) if int(m.group(1)) == r]
               for r in (0, 1)]
    assert len(digests[0]) == 4 and digests[0] == digests[1]  # regression x 2, GAN, CycleGAN: ranks bit-identical

    for name, step in (("reg", 20), ("gan", 20), ("cycle", 4)):
        assert_close(checkpoint_arrays(ckpt(dist / name, step)), checkpoint_arrays(ckpt(single / name, step)))
        # rank 0's files (the other ranks write nothing)
        files = sorted(os.listdir(dist / name))
        assert [f for f in files if f.startswith("events.")], files
        assert {"config.json", "metrics.json", "checkpoints"} <= set(files)
    assert sorted(os.listdir(dist / "gan" / "checkpoints")) == ["step_00000020.ckpt"]
    assert sorted(os.listdir(dist / "reg" / "checkpoints")) == ["step_00000011.ckpt", "step_00000020.ckpt"]


def test_a_killed_rank_ends_the_msrun_job_with_an_error(tmp_path):
    """msrun --join=True sees the dead worker, kills the others at once, and exits non-zero once its
    scheduler has noticed the lost heartbeat (MS_NODE_TIMEOUT, default 30 s; 5 s here)."""
    logs = tmp_path / "msrun"
    job = subprocess.Popen(msrun(logs, "train_regression.py", "--distributed", "--run-dir", tmp_path / "run",
                                 "--steps", 10 ** 8, "--no-progress"),
                           cwd=ROOT, env=env(MS_NODE_TIMEOUT="5"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True)
    pids = {}
    try:
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.5)
            for r in (0, 1):
                m = PID.search(read(logs / f"worker_{r}.log"))
                if m:
                    pids[int(m.group(1))] = int(m.group(2))
        assert len(pids) == 2, f"workers did not start: {read(logs / 'worker_0.log')[-2000:]}"
        time.sleep(1)  # both ranks joined the cluster; rank 0 will wait on rank 1's all-reduce
        os.kill(pids[1], signal.SIGKILL)
        killed = time.monotonic()
        out, _ = job.communicate(timeout=90)
        took = time.monotonic() - killed
        print(f"msrun exited {job.returncode} {took:.1f} s after rank 1 was killed")
        assert job.returncode != 0, out[-2000:]  # and it did give up: communicate's timeout guards a hang
        assert "exit with exception" in out  # msrun names the dead worker and its exit code
        assert gone(pids[0])  # rank 0 did not hang on
    finally:
        for pid in pids.values():  # never leave one of our workers behind (they run in their own sessions)
            try:
                if "--distributed" in psutil.Process(pid).cmdline():
                    os.kill(pid, signal.SIGKILL)
            except (psutil.Error, ProcessLookupError):
                pass
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)  # msrun and its scheduler
            job.wait()
