"""python -m tools.sweep (alias python -m metrics.sweep): many seeds of one command, the summary's arithmetic, continuing, bad input."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from loops.config import UserError
from tools.sweep import markdown, parse_goal, parse_seeds, seed_text, summarize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sweep(*args):
    return subprocess.run([sys.executable, "-m", "tools.sweep", *args], cwd=ROOT, capture_output=True, text=True)


def test_seed_specs_and_goals():
    assert parse_seeds("3") == [0, 1, 2]
    assert parse_seeds("5-7") == [5, 6, 7]
    assert parse_seeds("0,3,7-9,3") == [0, 3, 7, 8, 9]
    assert seed_text([0, 3, 7, 8, 9]) == "0, 3, 7-9" and seed_text(parse_seeds("10")) == "0-9"
    for bad in ("", "3-1", "a", "1,,2"):
        with pytest.raises(UserError):
            parse_seeds(bad)
    assert parse_goal("modes>=24") == ("modes", ">=", 24.0)
    assert parse_goal("fid < 1e-3") == ("fid", "<", 1e-3)
    with pytest.raises(UserError):
        parse_goal("modes=>24")


def test_summary_is_sample_mean_and_std_over_finished_runs():
    runs = [{"seed": s, "status": 0, "metrics": {"fid": f, "modes": m, "step": 100, "params_g": 9, "mode_counts": [1]}}
            for s, f, m in ((0, 10.0, 25), (1, 14.0, 24), (2, 12.5, 20))]
    runs.append({"seed": 3, "status": 3, "metrics": {}, "log": "s3.log"})  # a NaN stop: reported, not averaged
    table = summarize(runs, [parse_goal("modes>=24"), parse_goal("fid<=12.5")])
    assert list(table)[:2] == ["modes", "fid"] and set(table) == {"modes", "fid"}  # goals first; no bookkeeping
    fid = table["fid"]
    assert fid["n"] == 3 and fid["mean"] == pytest.approx(np.mean([10, 14, 12.5]))
    assert fid["std"] == pytest.approx(np.std([10, 14, 12.5], ddof=1))
    assert (fid["min"], fid["max"], fid["max_over_min"]) == (10.0, 14.0, 1.4)
    assert table["modes"]["goals"] == [{"goal": "modes>=24", "met": 2}]
    assert fid["goals"] == [{"goal": "fid<=12.5", "met": 2}]
    text = markdown({"command": "python -m metrics.sweep -- x", "runs": runs, "summary": table})
    assert "| fid | 12.17 +- 2.021 | 10 | 14 | 1.4 | 10 14 12.5 | fid<=12.5: 2/3 |" in text
    assert "seed 3 (exit 3, s3.log)" in text


@pytest.mark.slow
def test_sweep_runs_each_seed_summarizes_and_continues(tmp_path):
    out = str(tmp_path / "sw")
    command = ["--", "train_regression.py", "--steps", "20", "--log-every", "10"]
    first = sweep("--seeds", "0-1", "--goal", "w>=1", "--out", out, *command)
    assert first.returncode == 0, first.stderr
    result = json.load(open(os.path.join(out, "sweep.json")))
    per_seed = [json.load(open(os.path.join(out, f"s{s}", "metrics.json"))) for s in (0, 1)]
    assert [r["seed"] for r in result["runs"]] == [0, 1]
    assert per_seed[0]["w"] != per_seed[1]["w"]  # the seed reached the run
    w = result["summary"]["w"]
    assert w["mean"] == pytest.approx(np.mean([m["w"] for m in per_seed]))
    assert w["std"] == pytest.approx(np.std([m["w"] for m in per_seed], ddof=1))
    assert w["goals"][0]["met"] == sum(m["w"] >= 1 for m in per_seed)
    assert result["summary"]["wall_s"]["n"] == 2 and result["summary"]["wall_s"]["min"] > 0
    assert open(os.path.join(out, "sweep.md")).read() in first.stdout
    assert first.stdout.strip().splitlines()[-1].startswith("sweep: 2/2 seeds finished")

    kept = os.path.getmtime(os.path.join(out, "s0", "metrics.json"))
    more = sweep("--seeds", "0-2", "--goal", "w>=1", "--out", out, *command)  # same command, one more seed
    assert more.returncode == 0, more.stderr
    assert "seed 0: kept" in more.stdout and "seed 1: kept" in more.stdout
    assert os.path.getmtime(os.path.join(out, "s0", "metrics.json")) == kept  # not rerun
    assert [r["seed"] for r in json.load(open(os.path.join(out, "sweep.json")))["runs"]] == [0, 1, 2]

    before = open(os.path.join(out, "sweep.json")).read()
    other = sweep("--seeds", "2", "--out", out, "--", "train_regression.py", "--steps", "30")
    assert other.returncode == 2 and "holds a sweep of another command" in other.stderr
    assert open(os.path.join(out, "sweep.json")).read() == before  # an existing sweep is never damaged


@pytest.mark.parametrize("args, message", [
    (["--", "--dataset", "ring8", "--seed", "3"], "--seed: the sweep sets it"),
    (["--", "train_regression.py", "--run-dir=x"], "--run-dir: the sweep sets it"),
    (["--", "--datset", "ring8"], "did you mean --dataset"),
    (["--", "no_such_script.py"], "no such training script"),
    (["--seeds", "4-2", "--", "train_regression.py"], "--seeds '4-2'"),
    (["--goal", "w=2", "--", "train_regression.py"], "--goal 'w=2'"),
])
def test_bad_input_is_one_error_line_and_creates_nothing(tmp_path, args, message):
    out = str(tmp_path / "sw")
    proc = sweep("--out", out, *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert not os.path.exists(out)


FAKE_TRAINER = '''
import json, os, signal, sys, time
args = sys.argv[1:]
if "--dry-run" in args:
    sys.exit(0)
run, seed = args[args.index("--run-dir") + 1], int(args[args.index("--seed") + 1])
os.makedirs(os.path.join(run, "checkpoints"), exist_ok=True)
with open(os.path.join(run, "argv.jsonl"), "a") as f:
    f.write(json.dumps(args) + "\\n")
with open(os.path.join(run, "isa.txt"), "w") as f:
    f.write(os.environ.get("DNNL_MAX_CPU_ISA", "unset"))
if seed == 0 and "--resume" not in args:  # the first run waits to be stopped, then "saves"
    got = []
    signal.signal(signal.SIGINT, lambda *a: got.append(1))
    open(os.path.join(run, "ready"), "w").close()
    while not got:
        time.sleep(0.01)
    time.sleep(0.3)  # room for a second signal, which must not come
    open(os.path.join(run, "checkpoints", "step_00000001.ckpt"), "w").write(str(len(got)))
    sys.exit(130)
json.dump({"score": 2.0 * seed}, open(os.path.join(run, "metrics.json"), "w"))
'''


def test_a_stopped_sweep_stops_its_run_once_and_a_rerun_resumes_it(tmp_path):
    """SIGTERM to the sweep: the running training gets exactly one SIGINT (it saves and exits), the
    sweep exits 130 and says how to continue; the same command again passes --resume to that seed."""
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAINER)
    out = tmp_path / "sw"
    args = [sys.executable, "-m", "metrics.sweep", "--seeds", "2", "--out", str(out), "--", str(fake)]
    env = {k: v for k, v in os.environ.items() if k != "DNNL_MAX_CPU_ISA"}  # as a user's shell has it
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while not (out / "s0" / "ready").exists():  # wait on observed progress
        assert proc.poll() is None, proc.communicate()
    proc.terminate()
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "run the same command with --out" in stderr, stderr
    assert (out / "s0" / "checkpoints" / "step_00000001.ckpt").read_text() == "1"  # one signal, then it saved
    assert not (out / "s1").exists()
    # the run gets the user's environment, not the sweep's own oneDNN cap (a toy run lifts it itself)
    assert (out / "s0" / "isa.txt").read_text() == "unset"
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    calls = [json.loads(line) for line in (out / "s0" / "argv.jsonl").read_text().splitlines()]
    assert "--resume" not in calls[0] and "--resume" in calls[1]
    summary = json.load(open(out / "sweep.json"))["summary"]["score"]
    assert (summary["n"], summary["mean"], summary["min"], summary["max"]) == (2, 1.0, 0.0, 2.0)


def test_a_seed_resumes_only_from_a_complete_checkpoint(tmp_path):
    """A save killed half-way leaves only a temp file: the rerun starts that seed afresh (the
    training script would refuse --resume with no checkpoint); a complete one is resumed."""
    from tools.sweep import run_seed
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAINER)
    ckpts = tmp_path / "s1" / "checkpoints"
    ckpts.mkdir(parents=True)
    (ckpts / "step_00000001.ckpt.tmp4242").write_text("")
    first = run_seed(str(fake), [], 1, str(tmp_path))
    (ckpts / "step_00000002.ckpt").write_text("")
    second = run_seed(str(fake), [], 1, str(tmp_path))
    calls = [json.loads(line) for line in (tmp_path / "s1" / "argv.jsonl").read_text().splitlines()]
    assert (first["status"], first["resumed"], "--resume" in calls[0]) == (0, False, False)
    assert (second["status"], second["resumed"], "--resume" in calls[1]) == (0, True, True)
    assert first["metrics"]["score"] == 2.0 and first["metrics"]["wall_s"] == first["seconds"]


def test_a_goal_on_a_metric_the_runs_do_not_write_is_an_error_with_did_you_mean(tmp_path):
    """A mistyped --goal key used to be dropped without a row or a word; now the first finished run
    shows it: one error line naming the close key, exit 2, and the finished seed kept for the rerun."""
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAINER)
    out = tmp_path / "sw"
    base = [sys.executable, "-m", "metrics.sweep", "--seeds", "1-2", "--out", str(out)]
    proc = subprocess.run(base + ["--goal", "scroe>=1", "--", str(fake)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "--goal scroe>=1" in proc.stderr and "did you mean 'score'?" in proc.stderr
    assert not (out / "s2").exists()  # stopped after the first finished seed
    fixed = subprocess.run(base + ["--goal", "score>=1", "--", str(fake)], cwd=ROOT, capture_output=True, text=True)
    assert fixed.returncode == 0 and "seed 1: kept" in fixed.stdout, fixed.stderr
    assert json.load(open(out / "sweep.json"))["summary"]["score"]["goals"] == [{"goal": "score>=1", "met": 2}]
