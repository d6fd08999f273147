"""python -m tools.ema_probe: extra EMA decays scored beside a run, without changing the run."""
import json
import subprocess
import sys

import loops
from conftest import ROOT, error_lines, run_script

FLAGS = ("--dataset", "digits", "--steps", "40", "--eval-samples", "500", "--seed", "3")


def probe(*args):
    return subprocess.run([sys.executable, "-m", "tools.ema_probe", *map(str, args)], cwd=ROOT,
                          env=loops.child_env(GLOG_v="3"), capture_output=True, text=True, timeout=600)


def test_probes_score_other_decays_and_leave_the_run_as_train_gan_makes_it(tmp_path):
    proc = probe("--decays", "0.99,0.5", "--", *FLAGS, "--run-dir", tmp_path / "probed")
    assert proc.returncode == 0, proc.stderr[-2000:]
    scores = json.loads((tmp_path / "probed" / "ema_probe.json").read_text())
    own, probes = scores["run"], scores["probes"]
    assert own["ema"] == 0.99 and set(probes) == {"0.99", "0.5"}
    # the probe at the run's own decay follows G exactly as the run's G_ema does
    assert {k: probes["0.99"][k] for k in ("fid", "precision", "recall")} == \
           {k: own[k] for k in ("fid", "precision", "recall")}
    assert probes["0.5"]["fid"] != own["fid"]  # another decay is another average
    # training is the plain run's: the same flags through train_gan.py give the same scores
    run_script("train_gan.py", *FLAGS, "--run-dir", tmp_path / "plain")
    plain = json.loads((tmp_path / "plain" / "metrics.json").read_text())
    probed = json.loads((tmp_path / "probed" / "metrics.json").read_text())
    assert plain["fid"] == probed["fid"] == own["fid"]


def test_bad_probe_input_is_one_error_line(tmp_path):
    for args in (("--decays", "1.5", "--", *FLAGS), ("--decays", "x", "--", *FLAGS), ("--decays", "0.9"),
                 ("--decays", "0.9", "--", *FLAGS, "--resume")):
        proc = probe(*args, "--run-dir", tmp_path / "r") if "--" in args else probe(*args)
        assert proc.returncode == 2 and len(error_lines(proc)) == 1, (args, proc.stderr)
        assert not (tmp_path / "r").exists()


def test_table_counts_the_runs_meeting_every_goal_per_decay(tmp_path):
    from tools.ema_probe import table
    from tools.sweep import parse_goal
    runs = []
    for seed, (own, probe_) in enumerate((((0.60, 0.75), (0.70, 0.65)), ((0.54, 0.80), (0.58, 0.72)),
                                          ((0.58, 0.69), (0.62, 0.71)))):
        scores = {"run": {"ema": 0.99, "pixel_precision": own[0], "pixel_recall": own[1]},
                  "probes": {"0.999": {"pixel_precision": probe_[0], "pixel_recall": probe_[1]}}}
        run_dir = tmp_path / f"s{seed}"
        run_dir.mkdir()
        (run_dir / "ema_probe.json").write_text(json.dumps(scores))
        runs.append(str(run_dir))
    text = table(runs, [parse_goal("pixel_precision>=0.55"), parse_goal("pixel_recall>=0.7")])
    rows = {line.split("|")[1].strip(): line for line in text.splitlines()[2:]}
    assert set(rows) == {"0.99", "0.999"}
    assert rows["0.99"].endswith("| 1 of 3 |") and rows["0.999"].endswith("| 2 of 3 |")
    assert "0.573 +- 0.031 (0.540, 0.600); pixel_precision>=0.55: 2" in rows["0.99"]


def test_bad_table_input_is_one_error_line(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    (good / "ema_probe.json").write_text(json.dumps({"run": {"ema": 0.99, "fid": 9.0}, "probes": {"0.999": {"fid": 8.0}}}))
    (bad / "ema_probe.json").write_text('{"run": {"ema": 0.99')  # cut short
    for args in ((tmp_path,), (good, bad), (good, good), (good, "--goal", "fdi<=10"), (good, "--goal"), (good, "--bogus")):
        proc = probe("--table", *args)
        assert proc.returncode == 2 and len(error_lines(proc)) == 1, (args, proc.stderr)
    proc = probe("--table", good, "--goal", "fid<=8.5")
    assert proc.returncode == 0 and "| 0.999 | 1 |" in proc.stdout and proc.stdout.count("1 of 1") == 1
