"""The multi-model core (loops/): named step inputs, declared models and their flags, the run-dir
lock, the three-model example of docs/core.md, and the layout rules that keep loops/ model-agnostic."""
import ast
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from conftest import ROOT, checkpoint_arrays, run_script
from loops.config import RunConfig, UserError, build_parser, parse_config
from loops.learner import model_flags, settings
from loops.run import lock_run_dir
from loops.step import StepInputs


def test_step_inputs_pack_and_split_by_name(graph_mode):
    layout = StepInputs(real=True, labels=False, aug=2, z=True)
    a, b, c, d = (np.full(2, v, np.float32) for v in range(4))
    flat = layout.pack(z=d, real=a, aug=(b, c))  # any keyword order: the layout fixes the order
    assert [x[0] for x in flat] == [0, 1, 2, 3]

    def body(*inputs):
        real, labels, aug, z = layout.split(inputs)
        assert labels is None
        return real + 10 * aug[0] + 100 * aug[1] + 1000 * z
    out = ms.jit(body)(*map(Tensor.from_numpy, flat)).asnumpy()
    np.testing.assert_array_equal(out, [3210, 3210])
    with pytest.raises(ValueError, match="'z' is missing"):
        layout.pack(real=a, aug=(b, c))
    with pytest.raises(ValueError, match="declared absent"):
        layout.pack(real=a, aug=(b, c), z=d, labels=a)
    with pytest.raises(ValueError, match="1 arrays, the layout wants 2"):
        layout.pack(real=a, aug=(b,), z=d)
    with pytest.raises(ValueError, match="unknown step input"):
        layout.pack(real=a, aug=(b, c), z=d, alpha=a)


def test_model_flags_fall_back_to_the_shared_ones():
    Config = model_flags(RunConfig, {"actor": "the actor", "critic": "the critic"}, optimizer="adam", lr=3e-4)
    cfg = parse_config(Config, ["--clip-norm", "1", "--clip-norm-critic", "5", "--lr-actor", "1e-3",
                                "--accumulate-critic", "2", "--optimizer-critic", "sgd"], "")
    actor, critic = settings(cfg, "actor"), settings(cfg, "critic")
    assert (actor["clip_norm"], critic["clip_norm"]) == (1.0, 5.0)
    assert (actor["lr"], critic["lr"]) == (1e-3, 3e-4)
    assert (actor["accumulate"], critic["accumulate"]) == (1, 2)
    assert (actor["optimizer"], critic["optimizer"]) == ("adam", "sgd")


def test_shared_lr_reaches_every_model_and_a_missing_one_is_an_error():
    import train_gan
    from mindspore import nn
    from loops.learner import Learner
    cfg = parse_config(train_gan.GANConfig, ["--lr", "5e-4", "--lr-d", "1e-3"], "")
    assert (cfg.lr_g, cfg.lr_d) == (5e-4, 1e-3)  # --lr beats the auto value, --lr-d beats --lr
    assert parse_config(train_gan.GANConfig, [], "").lr_g == 2e-4  # neither given: the auto value
    Config = model_flags(RunConfig, {"a": "A"})
    with pytest.raises(UserError, match="no learning rate for a: pass --lr or --lr-a"):
        Learner.from_config("a", nn.Dense(1, 1), parse_config(Config, [], ""))


def test_every_gan_flag_spelling_of_before_still_parses():
    import train_gan
    old = ["--lr-g", "1e-3", "--lr-d", "1e-3", "--optimizer", "adam", "--optimizer-g", "adamw", "--optimizer-d", "sgd",
           "--beta1", "0.4", "--beta2", "0.9", "--beta1-g", "0.3", "--beta1-d", "0.2", "--beta2-g", "0.8",
           "--beta2-d", "0.7", "--weight-decay", "0.1", "--clip-norm-d", "1", "--clip-norm-g", "2",
           "--clip-value-d", "3", "--clip-value-g", "4", "--grad-noise-d", "0.1", "--grad-noise-g", "0.2",
           "--accumulate-d", "2", "--accumulate-g", "3", "--skip-nonfinite", "--loss-scale", "static"]
    cfg = parse_config(train_gan.GANConfig, old + ["--dataset", "ring8"], "")
    g, d = settings(cfg, "g"), settings(cfg, "d")
    assert (g["optimizer"], d["optimizer"], g["beta1"], d["beta2"]) == ("adamw", "sgd", 0.3, 0.7)
    assert (g["clip_norm"], d["clip_value"], g["grad_noise"], d["accumulate"]) == (2.0, 3.0, 0.2, 2)
    assert g["skip_nonfinite"] and d["loss_scale"] == "static"


def test_run_dir_lock_refuses_a_second_holder_until_released(tmp_path):
    fd = lock_run_dir(str(tmp_path / "run"), resume=False)
    with pytest.raises(UserError, match=rf"in use by another training process \(pid {os.getpid()}\)"):
        lock_run_dir(str(tmp_path / "run"), resume=True)
    os.close(fd)
    os.close(lock_run_dir(str(tmp_path / "run"), resume=True))


def test_second_process_on_a_training_run_dir_refuses_with_one_line(tmp_path):
    """A fresh run and a --resume started on the run dir of a training process both refuse, and
    leave its files alone; once it stops (SIGTERM: it saves), --resume works."""
    run = tmp_path / "run"
    env = dict(os.environ, GLOG_v="3")
    env.pop("DNNL_MAX_CPU_ISA", None)
    first = subprocess.Popen([sys.executable, "train_regression.py", "--run-dir", str(run), "--steps", "10000000",
                              "--log-every", "10"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not glob.glob(str(run / "events.out.tfevents.*")):  # it holds the lock and trains
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.2)
        for extra in ([], ["--resume"]):
            proc = run_script("train_regression.py", "--run-dir", run, "--steps", 5, *extra, check=False)
            lines = [l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("[WARNING")]
            assert proc.returncode == 2 and len(lines) == 1, proc.stderr
            assert f"in use by another training process (pid {first.pid})" in lines[0]
        assert not (run / "checkpoints").exists()  # nothing of the refused processes' was written
    finally:
        first.send_signal(signal.SIGTERM)
        out = first.communicate(timeout=300)[0].decode()
    assert first.returncode == 128 + signal.SIGTERM
    # it says so, and how to continue: the exact command, run dir and --resume added
    stop_line = out.strip().splitlines()[-1]
    [(step, path)] = re.findall(r"^stopped at step (\d+) \(signal 15\), checkpoint saved: (\S+);", stop_line)
    assert path.endswith(f"step_{int(step):08d}.ckpt") and stop_line.endswith(
        f"resume with: python train_regression.py --run-dir {run} --steps 10000000 --log-every 10 --resume"), out
    [stopped] = list((run / "checkpoints").iterdir())  # the first run's own, saved at SIGTERM
    step = int(stopped.name[len("step_"):-len(".ckpt")])
    run_script("train_regression.py", "--run-dir", run, "--resume", "--steps", step + 2)
    assert (run / "checkpoints" / f"step_{step + 2:08d}.ckpt").exists()


def readme_example():  # the guide moved from README.md to docs/core.md ("Write your own multi-model trainer")
    text = open(os.path.join(ROOT, "docs", "core.md"), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return [b for b in blocks if "three models that learn" in b.lower()]


def test_readme_guide_is_the_example_file_and_it_trains_three_models(tmp_path):
    source = open(os.path.join(ROOT, "examples", "distill.py"), encoding="utf-8").read()
    assert readme_example() == [source]  # docs/core.md shows exactly the file the test runs
    assert "from loops" in source and not re.search(r"^from (gan|models|data|metrics)[. ]|^import (gan|models|data|metrics)\b",
                                                    source, flags=re.M)
    run = tmp_path / "distill"
    run_script("examples/distill.py", "--run-dir", run, "--steps", 400, "--lr-student", 0.02, "--no-progress")
    m = json.loads((run / "metrics.json").read_text())
    # sin(3x) on [-1, 1] has mean square 0.52: each model learned it, through the chain of teachers
    assert m["mse_teacher"] < 0.05 and m["mse_assistant"] < 0.15 and m["mse_student"] < 0.25, m
    names = checkpoint_arrays(run / "checkpoints" / "step_00000400.ckpt")
    assert {n.split(".")[0] for n in names} == {"teacher", "assistant", "student"}
    assert json.loads((run / "config.json").read_text())["lr_student"] == 0.02
    tags = set(__import__("conftest").scalar_tags(run).Tags()["scalars"])
    assert {"loss/teacher", "loss/assistant", "loss/student", "grad_norm/student"} <= tags


@pytest.mark.parametrize("script, max_lines", [("train_gan.py", 250), ("train_regression.py", 100)])
def test_entry_scripts_stay_short_compositions(script, max_lines):
    text = open(os.path.join(ROOT, script), encoding="utf-8").read()
    assert len(text.splitlines()) < max_lines
    for path in (script, "gan/trainer.py", "loops/run.py", "loops/learner.py"):
        tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno - node.lineno < 60, (path, node.name)


def test_redirected_output_shows_start_compile_progress_and_ends_with_the_summary(tmp_path):
    """Output to a file or pipe (no TTY, no bar): a start line, the compile line, plain progress
    lines with steps/s and ETA, the TensorBoard hint, and the script's result as the last line."""
    run = tmp_path / "run"
    proc = run_script("train_regression.py", "--run-dir", run, "--steps", 200, "--log-every", 50)
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == f"start: train_regression.py linear mse on CPU, 200 steps, seed 0, parameters model 2, run dir {run}"
    for name in ("config.json", "metrics.json"):  # w and b: the model's size is recorded with the run
        assert json.loads((run / name).read_text())["params_model"] == 2
    import train_regression  # and a run's config.json is a preset that gives the same config back
    again = parse_config(train_regression.RegressionConfig, ["--config", str(run / "config.json")], "")
    assert {k: v for k, v in again.to_dict().items() if k != "config"} == \
        {k: v for k, v in json.loads((run / "config.json").read_text()).items()
         if k not in ("config", "params_model", "recipe", "script")}
    made = json.loads((run / "config.json").read_text())  # what made the run
    assert (made["recipe"], made["script"]) == ("regression", "train_regression.py")
    assert lines[1].startswith("compiling") and lines[2].startswith("compiled; the first step took")
    progress = [l for l in lines if l.startswith("step ")]
    assert progress[0].startswith("step 50/200 (25%)") and progress[-1].startswith("step 200/200 (100%)")
    assert all("steps/s ETA" in l and "loss/train=" in l for l in progress)
    assert lines[-2] == f"watch it: tensorboard --logdir {tmp_path}"
    assert lines[-1].startswith("w=") and lines[-1].endswith(f"run dir: {run}")


@pytest.mark.parametrize("argv, hint", [
    (["--datset", "ring8"], "did you mean --dataset?"),
    (["--loss", "nss"], "did you mean 'ns'?"),
    (["--stpes", "3", "--datset", "ring8"], "did you mean --steps (for --stpes), --dataset (for --datset)?"),
])
def test_near_miss_flags_and_choices_get_a_suggestion(argv, hint, capsys):
    import train_gan
    with pytest.raises(SystemExit) as e:
        train_gan.parse_config(train_gan.GANConfig, argv, "")
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and err.startswith("error: ") and err.endswith(hint) and "\n" not in err


def test_auto_is_one_word_for_every_value_the_script_decides(tmp_path, capsys):
    import train_gan
    parse = train_gan.parse_config
    left_out = parse(train_gan.GANConfig, [], "")
    given = parse(train_gan.GANConfig, ["--width", "auto", "--r1", "auto", "--arch", "auto", "--loss-scale", "auto"], "")
    preset = tmp_path / "preset.json"
    preset.write_text(json.dumps({"width": "auto", "r1": "auto", "ema": "auto"}))
    from_preset = parse(train_gan.GANConfig, ["--config", str(preset)], "")
    from_preset.config = ""
    assert given == from_preset == left_out and left_out.width == 32 and left_out.r1 == 1.0
    from rl import algorithm
    for algo in ("ppo", "sac"):  # each algorithm's own defaults
        config = algorithm(algo).Config
        assert parse(config, ["--env", "auto", "--gamma", "auto"], "") == parse(config, [], "")
    help_text = build_parser(train_gan.GANConfig, "").format_help()
    assert "-1:" not in help_text and "0: auto" not in help_text and "(default: auto = toy 2, images" in help_text
    with pytest.raises(SystemExit) as e:
        parse(train_gan.GANConfig, ["--width", "autoo"], "")
    assert e.value.code == 2 and "invalid int value: 'autoo'" in capsys.readouterr().err
    preset.write_text(json.dumps({"n_critic": "auto"}))  # a flag without an auto value
    with pytest.raises(UserError, match="n_critic = 'auto' is not a int"):
        parse(train_gan.GANConfig, ["--config", str(preset)], "")


def test_every_switch_takes_both_spellings_whatever_its_default():
    """--X and --no-X for every boolean flag: a command that spells out a default keeps working after
    a recipe changes that default (SAC's --anneal-lr went from on to off)."""
    from rl import algorithm
    for algo, default in (("ppo", True), ("sac", False)):
        config = algorithm(algo).Config
        assert parse_config(config, [], "").anneal_lr is default
        assert parse_config(config, ["--no-anneal-lr"], "").anneal_lr is False
        assert parse_config(config, ["--anneal-lr"], "").anneal_lr is True
    help_text = build_parser(RunConfig, "").format_help()
    assert "--no-progress" in help_text and "--no-no-progress" not in help_text


def test_mindspore_compile_debris_leaves_the_working_directory(tmp_path, monkeypatch, capsys):
    """A failed compile makes MindSpore write rank_0/om/analyze_fail.ir into the working directory;
    run_cli moves it to a temp dir (and says where under --debug); a rank_0 that was there before stays."""
    from loops.config import run_cli
    monkeypatch.chdir(tmp_path)

    def failing_compile(argv):
        os.makedirs("rank_0/om")
        (tmp_path / "rank_0/om/analyze_fail.ir").write_text("ir")
        raise UserError("bad input")
    with pytest.raises(SystemExit) as e:
        run_cli(failing_compile, ["--debug"])
    assert e.value.code == 2 and not (tmp_path / "rank_0").exists()
    moved = re.search(r"compile IR moved to (\S+)", capsys.readouterr().err).group(1)
    assert os.path.isfile(os.path.join(moved, "om", "analyze_fail.ir"))
    os.makedirs("rank_0")  # someone else's: not touched
    with pytest.raises(SystemExit):
        run_cli(lambda argv: 0, [])
    assert (tmp_path / "rank_0").is_dir()


def test_help_is_grouped_into_sections():
    for script, sections in (("train_gan.py", ["data", "model", "loss and penalties", "evaluation and pictures",
                                               "optimisation", "gradient interventions", "run"]),
                             ("train_rl.py", ["algorithm and environment", "PPO", "optimisation",
                                              "gradient interventions", "run"]),
                             ("train_rl.py --algo sac", ["algorithm and environment", "SAC", "optimisation",
                                                         "gradient interventions", "run"])):
        out = run_script(*script.split(), "--help").stdout
        titles = [l.split(" (")[0].rstrip(":") for l in out.splitlines() if l and not l.startswith(" ") and l.endswith(":")]
        assert titles == ["options"] + sections, titles
        assert "other:" not in out  # every flag has its section
        section_of = {}
        for line in out.splitlines():
            if line and not line.startswith(" ") and line.endswith(":"):
                current = line.split(" (")[0].rstrip(":")
            elif line.startswith("  --"):
                section_of[line.split()[0]] = current
        expected = {"--dataset": "data", "--r1": "loss and penalties", "--lr-g": "optimisation",
                    "--clip-norm-d": "gradient interventions", "--resume": "run"} if script == "train_gan.py" else \
            {"--env": "algorithm and environment", "--clip-coef": "PPO", "--lr-critic": "optimisation"} \
            if script == "train_rl.py" else {"--tau": "SAC", "--lr-alpha": "optimisation"}
        if script.startswith("train_rl.py"):  # another algorithm's flags are not there at all
            assert ("--tau" in section_of) == ("sac" in script) and ("--clip-coef" in section_of) != ("sac" in script)
        assert {k: section_of[k] for k in expected} == expected


def test_pictures_are_legible_square_grids_and_labelled_scatter_plots():
    from gan.pictures import image_grid, scatter_plot
    digits = np.random.default_rng(0).uniform(-1, 1, (64, 1, 8, 8)).astype(np.float32)
    grid = image_grid(digits)
    assert grid.shape == (8 * 66 + 2, 8 * 66 + 2, 3)  # 8 x 8 digits, each upscaled 8x to 64 pixels
    assert image_grid(digits[:20]).shape[:2] == (4 * 66 + 2, 5 * 66 + 2)  # ceil(sqrt(20)) = 5 columns
    centers = np.array([[2.0, 0.0], [-2.0, 0.0]])
    bare = scatter_plot(np.zeros((0, 2)), centers, step=None)
    labelled = scatter_plot(np.zeros((0, 2)), centers, step=1234)
    assert bare.shape == labelled.shape and bare.shape[0] > 320  # margins for the axes and caption
    caption = (slice(0, 28), slice(28, None))
    assert (labelled[caption] != bare[caption]).any()  # the step is written in the caption
    assert (bare[caption] < 128).any()  # and the legend is there without it


def test_every_run_leaves_a_loss_curve_picture(tmp_path):
    from PIL import Image
    run = tmp_path / "run"
    run_script("train_regression.py", "--run-dir", run, "--steps", 60, "--log-every", 10)
    picture = np.asarray(Image.open(run / "losses.png"))
    assert picture.shape[1] == 720 and picture.shape[0] > 150
    assert (picture[40:150, 60:710] != 255).any()  # a curve inside the panel


def test_choice_suggestions_match_the_exact_flag(capsys):
    import train_gan
    with pytest.raises(SystemExit):
        train_gan.parse_config(train_gan.GANConfig, ["--loss-scale", "dinamic"], "")
    assert capsys.readouterr().err.strip().endswith("did you mean 'dynamic'?")
