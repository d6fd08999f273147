"""Hostile inputs and planted files: each is one `error:` line and exit 2, nothing outside the run dir
(nor inside it) is written through a link, and no input makes a script read forever."""
import json
import os

import pytest

from conftest import error_lines, run_script
from loops.config import MAX_SEED, PRESET_MAX_BYTES, UserError, parse_config


def regression_config():
    import train_regression
    return train_regression.RegressionConfig


@pytest.mark.parametrize("text, message", [
    ("[" * 200_000 + "]" * 200_000, "not a preset (RecursionError"),
    ('{"steps": ' + "9" * 5000 + "}", "not a preset (ValueError"),
    ('{"lr": ' + "1" + "0" * 400 + "}", "lr = 1000000000000000000000000000000000000000 is out of range for a float"),
    ('{"lr": 1e400}', "lr = inf is out of range for a float"),
    ('{"steps": 100000000000000000000}', "steps = 100000000000000000000 is out of range for a int"),
    ("steps = " + "9" * 5000, "is not a int"),
])
def test_presets_that_python_cannot_hold_are_one_line(tmp_path, text, message):
    preset = tmp_path / "preset.json"
    preset.write_text(text)
    with pytest.raises(UserError, match="^--config ") as e:
        parse_config(regression_config(), ["--config", str(preset)], "")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_preset_naming_a_recipe_by_a_non_string_is_one_line(tmp_path):
    from loops.config import choose_recipe
    preset = tmp_path / "preset.json"
    preset.write_text(json.dumps({"algo": ["sac"]}))
    with pytest.raises(UserError, match=r"algo must be one of \['ppo', 'sac'\], got \['sac'\]"):
        choose_recipe(["--config", str(preset)], "algo", {"ppo": "", "sac": ""}, "ppo")


def test_a_preset_is_a_small_regular_file(tmp_path):
    with pytest.raises(UserError, match="not a regular file"):
        parse_config(regression_config(), ["--config", "/dev/zero"], "")  # read forever before
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        parse_config(regression_config(), ["--config", str(fifo)], "")
    big = tmp_path / "big.json"
    big.write_text(" " * (PRESET_MAX_BYTES + 1) + "{}")
    with pytest.raises(UserError, match="a preset is a small text file"):
        parse_config(regression_config(), ["--config", str(big)], "")
    with pytest.raises(UserError, match="No such file"):
        parse_config(regression_config(), ["--config", str(tmp_path / "missing.json")], "")


@pytest.mark.parametrize("argv, message", [
    (["--seed", str(MAX_SEED + 1)], f"--seed must be in [0, {MAX_SEED}], got {MAX_SEED + 1}"),
    (["--seed", "99999999999999999999999"], "--seed must be in [0,"),
    (["--force"], "--force only applies with --resume"),
])
def test_one_seed_range_and_force_needs_resume(argv, message):
    with pytest.raises(UserError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_config(regression_config(), argv, "")
    assert parse_config(regression_config(), ["--seed", str(MAX_SEED)], "").seed == MAX_SEED


def test_a_planted_lock_symlink_is_refused_and_its_target_untouched(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (run / ".lock").symlink_to(victim)
    proc = run_script("train_regression.py", "--run-dir", run, "--steps", 3, check=False)
    assert proc.returncode == 2 and len(error_lines(proc)) == 1 and "is a symbolic link" in error_lines(proc)[0]
    assert victim.read_text() == "precious" and not (run / "checkpoints").exists()


def test_a_planted_temp_name_symlink_is_not_written_through(tmp_path):
    from loops.files import atomic_write
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    target = tmp_path / "config.json"
    os.symlink(victim, f"{target}.tmp{os.getpid()}")

    def write(tmp):
        with open(tmp, "w") as f:
            f.write("{}")
    atomic_write(str(target), write, "config.json")
    assert victim.read_text() == "precious" and target.read_text() == "{}"


def test_sampling_a_run_that_is_not_a_gan_run_is_one_line(tmp_path):
    run = tmp_path / "regression"
    run_script("train_regression.py", "--run-dir", run, "--steps", 3)
    proc = run_script("generate.py", run, "--num", 4, "--out", tmp_path / "x.npy", check=False)
    assert proc.returncode == 2 and error_lines(proc) == [  # generate.py asks the recipe that made the run
        f"error: {run}: recipe 'regression' defines no generation: generate.py samples train_gan.py and "
        "train_translate.py runs"]
    gan = tmp_path / "gan"  # a GAN run's evaluation pointed at another script's checkpoint
    gan.mkdir()
    (gan / "config.json").write_text(json.dumps({"z_dim": 2, "dataset": "ring8", "recipe": "gan.trainer"}))
    regression_ckpt = run / "checkpoints" / "step_00000003.ckpt"
    proc = run_script("-m", "metrics", gan, "--checkpoint", regression_ckpt, check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: {regression_ckpt} is not a checkpoint of a train_gan.py run (it is of regression): nothing to sample"]
    proc = run_script("generate.py", gan, "--num", 4, "--out", tmp_path / "x.npy", "--checkpoint", regression_ckpt,
                      check=False)
    assert proc.returncode == 2 and "is not a checkpoint of a train_gan.py run" in error_lines(proc)[0]
    assert not (tmp_path / "x.npy").exists()


def test_resume_never_rewrites_the_record_of_a_longer_run(tmp_path):
    run = tmp_path / "run"
    run_script("train_regression.py", "--run-dir", run, "--steps", 6)
    files = {name: (run / name).read_bytes() for name in ("config.json", "metrics.json")}
    checkpoints = sorted(p.name for p in (run / "checkpoints").iterdir())
    shorter = run_script("train_regression.py", "--run-dir", run, "--steps", 3, "--resume", check=False)
    assert shorter.returncode == 2 and error_lines(shorter) == [
        f"error: --resume: {run / 'checkpoints' / 'step_00000006.ckpt'} is at step 6, beyond --steps 3; pass "
        "--steps above 6 to train on (the run is left as it is)"]
    same = run_script("train_regression.py", "--run-dir", run, "--steps", 6, "--resume")
    assert same.stdout.strip() == (f"note: {run} is already trained to step 6 (--steps 6): nothing to do; its files "
                                   "are left as they are")
    assert {name: (run / name).read_bytes() for name in files} == files
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == checkpoints


@pytest.mark.parametrize("goal", ["fid<=1.2.3", "fid<=.", "fid<=", "<=3"])
def test_malformed_sweep_goals_are_one_line(goal):
    from tools.sweep import parse_goal
    with pytest.raises(UserError, match="expected KEY>=VALUE"):
        parse_goal(goal)


@pytest.mark.parametrize("record", [[], {"script": "train_gan.py"}, {"script": "x.py", "flags": 5, "runs": []},
                                    {"script": "x.py", "flags": [], "runs": [{"seed": 0}]}])
def test_a_damaged_sweep_record_is_one_line(tmp_path, record):
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps(record))
    proc = run_script("-m", "tools.sweep", "--seeds", 1, "--out", out, "--", "train_regression.py", check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: {out / 'sweep.json'} is not a sweep record (a JSON object with script, flags and runs); "
        "choose another --out"]


def test_an_environment_module_that_does_not_import_is_one_line(tmp_path):
    proc = run_script("train_rl.py", "--env", "nonexistent_mod:Foo-v0", "--run-dir", tmp_path / "run", check=False)
    assert proc.returncode == 2 and error_lines(proc)[0].startswith(
        "error: --env nonexistent_mod:Foo-v0: No module named 'nonexistent_mod'")
    assert len(error_lines(proc)) == 1 and not (tmp_path / "run").exists()


def test_force_cannot_resume_with_a_state_shaped_by_another_value(tmp_path):
    """`--resume --force --num-envs 4` on an 8-env run used to rewrite config.json, then die with a
    shape traceback: the environments' saved state fits 8. Keys the state is shaped by are refused
    before anything is written, even with --force; --force still accepts what can continue."""
    run = tmp_path / "run"
    tiny = ["--num-steps", 8, "--update-epochs", 1, "--eval-episodes", 1]
    started = {"--num-envs": 2, "--hidden": 8, "--env": "CartPole-v1"}
    run_script("train_rl.py", "--run-dir", run, *tiny, *[w for kv in started.items() for w in kv], "--steps", 1)
    def files():  # every file of the run but the lock, which holds the pid of whoever locked it last
        return {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    before = files()
    for flag, value, words in (("--num-envs", 4, "num_envs: 2 -> 4"), ("--hidden", 16, "hidden: 8 -> 16"),
                               ("--env", "Acrobot-v1", "env: 'CartPole-v1' -> 'Acrobot-v1'")):
        argv = [w for kv in {**started, flag: value}.items() for w in kv]
        proc = run_script("train_rl.py", "--run-dir", run, *tiny, *argv, "--steps", 2, "--resume", "--force", check=False)
        assert proc.returncode == 2 and error_lines(proc) == [
            f"error: --resume: {words} cannot change on resume (the checkpoint's state is shaped by it), not even "
            f"with --force; resume with {flag} {started[flag]}"], proc.stderr
    assert files() == before
    argv = [w for kv in started.items() for w in kv]  # a changed clip range can continue: --force accepts it
    run_script("train_rl.py", "--run-dir", run, *tiny, *argv, "--clip-coef", 0.1, "--steps", 2, "--resume", "--force")
    assert json.loads((run / "config.json").read_text())["clip_coef"] == 0.1


@pytest.mark.parametrize("script, argv, message", [
    ("train_gan.py", ["--steps", "0"], "--steps 0 is not a value of this flag: leave it out or pass auto for the "
                                       "script's choice (toy 20000, images 2000"),
    ("train_gan.py", ["--lr", "0"], "--lr 0.0 is not a value of this flag"),
    ("train_gan.py", ["--r1", "-1"], "--r1 -1.0 is not a value of this flag"),
    ("train_gan.py", ["--sample-every", "0"], "--sample-every 0 is not a value of this flag"),
    ("train_rl.py", ["--steps", "0"], "--steps 0 is not a value of this flag: leave it out or pass auto for the "
                                      "script's choice (from --total-steps)"),
    ("train_translate.py", ["--ngf", "0"], "--ngf 0 is not a value of this flag"),
    ("train_rl.py", ["--env", ""], "--env must name a gymnasium environment (leave it out or pass auto"),
])
def test_a_typed_out_auto_placeholder_is_refused_and_the_word_auto_is_not(script, argv, message, capsys):
    """`--steps 0` used to mean the script's choice silently (20000 toy steps); only the word auto,
    or leaving the flag out, means that now."""
    import importlib
    from conftest import cli_error
    main = importlib.import_module(script[:-3]).main
    status, lines = cli_error(main, argv + ["--dry-run"], capsys)
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: " + message), lines
    auto = [argv[0], "auto", "--dry-run"]
    with pytest.raises(SystemExit) as done:
        from loops.config import run_cli
        run_cli(main, auto)
    assert done.value.code in (0, None)  # the word auto: the resolved config, exit 0


def test_the_memory_preflight_refuses_what_cannot_fit_and_names_the_largest_part():
    from loops.memory import check_fits
    parts = [("--batch-size 9 (activations)", 600 * 2 ** 20), ("--eval-samples 9 (samples)", 300 * 2 ** 20)]
    check_fits(parts, available=2 ** 30)  # 900 MB fit in 1 GB
    with pytest.raises(UserError) as refused:
        check_fits(parts, available=512 * 2 ** 20)
    assert str(refused.value) == ("--batch-size 9 (activations) needs at least 600.0 MB of memory (900.0 MB with the "
                                  "rest); this machine has 512.0 MB available")


@pytest.mark.parametrize("main, argv, message", [
    ("train_rl", ["--hidden", "100000"], "error: --hidden 100000 (the networks' weights) needs at least 149.0 GB"),
    ("train_rl", ["--algo", "sac", "--buffer-size", "100000000000"], "error: --buffer-size 100000000000 (the replay "
                                                                      "buffer) needs at least 1862.6 GB"),
    ("train_rl", ["--num-envs", "100000000", "--total-steps", "10000000000"],
     "error: --num-envs 100000000 (the environments) needs at least"),
    ("tools.sweep", ["--seeds", "4000000000", "--", "--dataset", "ring8"],
     "error: --seeds 4000000000 (the list of seeds) needs at least 372.5 GB"),
])
def test_sizes_that_cannot_fit_in_memory_are_one_line_before_anything_starts(main, argv, message, capsys):
    """These used to swap for minutes or die in a numpy allocation; the run dir is never made."""
    import importlib
    from conftest import cli_error
    status, lines = cli_error(importlib.import_module(main).main, argv + (["--dry-run"] if main != "tools.sweep"
                                                                          else []), capsys)
    assert status == 2 and len(lines) == 1 and lines[0].startswith(message), lines
    assert " of memory" in lines[0] and "; this machine has " in lines[0]


def test_a_gan_run_that_cannot_fit_in_memory_leaves_no_run_dir(tmp_path):
    for argv, message in ((["--dataset", "ring8", "--batch-size", 100000000], "--batch-size 100000000 (a training "
                                                                              "step's activations) needs at least"),
                          (["--eval-samples", 1000000000], "--eval-samples 1000000000 (the evaluation's samples, real "
                                                           "images and features) needs at least 1110.1 GB")):
        proc = run_script("train_gan.py", *argv, "--run-dir", tmp_path / "run", check=False)
        assert proc.returncode == 2 and len(error_lines(proc)) == 1, proc.stderr
        assert error_lines(proc)[0].startswith("error: " + message), proc.stderr
        assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("seeds", ["4294967296-4294967297", "100000000000"])
def test_sweep_seeds_beyond_the_seed_range_are_one_line(seeds, capsys):
    """Every run of such a sweep used to fail on its own --seed, one after another."""
    from conftest import cli_error
    from tools.sweep import main
    status, lines = cli_error(main, ["--seeds", seeds, "--", "--dataset", "ring8"], capsys)
    assert status == 2 and lines == [f"error: --seeds {seeds}: seeds must be in [0, {MAX_SEED}]"]


def test_planted_links_at_events_files_and_run_folders_are_never_written_through(tmp_path):
    """tensorboardX opens events.out.tfevents.<time>.<host> with a plain open(); a planted
    checkpoints/ or samples/ link sent checkpoints elsewhere and let the stale-file cleanup delete there."""
    import socket
    import time
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    now = int(time.time())
    for t in range(now - 5, now + 300):  # every name the events file can take while this test runs
        (run / f"events.out.tfevents.{t}.{socket.gethostname()}").symlink_to(victim)
    run_script("train_regression.py", "--run-dir", run, "--steps", 3)
    assert victim.read_text() == "keep me"
    assert [p for p in run.iterdir() if p.name.startswith("events.") and not p.is_symlink()]  # its own, real file
    for folder in ("checkpoints", "samples"):
        outside = tmp_path / f"outside_{folder}"
        outside.mkdir()
        (outside / "notes.tmp.txt").write_text("keep me too")
        planted = tmp_path / f"planted_{folder}"
        planted.mkdir()
        (planted / folder).symlink_to(outside)
        proc = run_script("train_regression.py", "--run-dir", planted, "--steps", 3, check=False)
        assert proc.returncode == 2 and error_lines(proc) == [
            f"error: {planted / folder} is a symbolic link: a run writes only inside its run dir; replace the link "
            "with the folder itself"], proc.stderr
        assert [p.name for p in outside.iterdir()] == ["notes.tmp.txt"]


def test_resuming_another_scripts_run_names_the_script_and_a_foreign_checkpoint_is_blamed(tmp_path):
    regression = tmp_path / "regression"
    run_script("train_regression.py", "--run-dir", regression, "--steps", 3)
    assert json.loads((regression / "config.json").read_text())["script"] == "train_regression.py"
    proc = run_script("train_gan.py", "--run-dir", regression, "--resume", "--dataset", "ring8", check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: --resume: {regression} is a run of regression (train_regression.py), not of gan.trainer: resume it "
        "with the command that started it"]
    assert "as it started with" not in proc.stderr  # no flag suggestions built from another script's config
    gan = tmp_path / "gan"  # a GAN run holding a checkpoint copied in from the regression run
    (gan / "checkpoints").mkdir(parents=True)
    (gan / "config.json").write_text(json.dumps({"recipe": "gan.trainer", "z_dim": 2, "dataset": "ring8"}))
    ckpt = regression / "checkpoints" / "step_00000003.ckpt"
    (gan / "checkpoints" / ckpt.name).write_bytes(ckpt.read_bytes())
    proc = run_script("train_gan.py", "--run-dir", gan, "--resume", "--dataset", "ring8", check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: --resume: the latest checkpoint in {gan} is of regression (train_regression.py), but its "
        "config.json says the run is of gan.trainer: that checkpoint does not belong to this run"]
    rl = tmp_path / "rl"  # python -m metrics on an RL run pointed at another script's checkpoint
    rl.mkdir()
    (rl / "config.json").write_text(json.dumps({"recipe": "rl.ppo", "algo": "ppo"}))
    proc = run_script("-m", "metrics", rl, "--checkpoint", ckpt, check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        f"error: {ckpt} is not a checkpoint of a train_rl.py run (it is of regression (train_regression.py))"]


@pytest.mark.parametrize("argv, message", [
    (["train_regression.py", "--accumulate", "0"], "error: --accumulate must be > 0, got 0"),
    (["train_gan.py", "--steps", "ten"], "error: argument --steps: invalid int value: 'ten'"),
    (["train_rl.py", "--algo", "sac", "--update-epochs", "3"], "error: unrecognized arguments: --update-epochs 3"),
    (["train_translate.py", "--model", "pix2pix", "--lambda-cycle", "5"], "error: unrecognized arguments"),
    (["generate.py", "RUN", "--num", "4", "--out", "x.npy"], "error: run dir RUN does not exist"),
    (["-m", "metrics", "RUN"], "error: run dir RUN does not exist"),
])
def test_bad_input_in_a_real_process_is_one_line_and_exit_2(tmp_path, argv, message):
    """The rest of the suite runs the entry scripts in its own process (conftest.run_in_process): here each
    one runs as a user starts it, so nothing printed at start-up or at exit can hide in the worker."""
    run = tmp_path / "r"
    argv = [str(run) if a == "RUN" else a for a in argv]
    extra = ["--run-dir", run] if argv[0].startswith("train_") else []
    proc = run_script(*argv, *extra, check=False, own_process=True)
    assert proc.returncode == 2 and len(error_lines(proc)) == 1, proc.stderr
    assert error_lines(proc)[0].startswith(message.replace("RUN", str(run))), proc.stderr
    assert "Traceback" not in proc.stderr and not run.exists()
