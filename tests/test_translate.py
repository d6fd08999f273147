"""train_translate.py: pix2pix's and CycleGAN's losses against float64 numpy references of the
reference implementation's formulas, each phase moves only its own models, the image pool samples as
the reference's and resumes, the learning-rate schedule, the picture rows, bad input is one line, a
tiny run resumes bit for bit after SIGKILL, and pix2pix learns on the fixture (slow)."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from mindspore import Tensor

from conftest import ROOT, assert_refused, assert_same_arrays, checkpoint_arrays, cli_error, error_lines, run_script
from fixtures import write_idx


@pytest.fixture(scope="module")
def fashion(tmp_path_factory):
    """Fashion-MNIST-format gzip IDX files: 200 training and 60 held-out images of 10 classes."""
    directory = tmp_path_factory.mktemp("fashion")
    write_idx(directory, n=200, gzip=True)
    write_idx(directory, n=60, seed=1, gzip=True, split="test")
    return str(directory)


def tiny(tmp_path, fashion, model, *extra):
    """The trainer train_translate.py builds for these flags, on the fixture data."""
    from gan import translator
    from gan.translation import make_source
    from loops.config import parse_config
    from loops.run import Run
    recipe = translator(model)
    task = {"pix2pix": "edges2fashion", "cyclegan": "sneaker2boot"}[model]
    argv = ["--model", model, "--task", task, "--data-dir", fashion, "--run-dir", str(tmp_path / "run"), "--batch-size", "2",
            "--ngf", "4", "--ndf", "4", "--eval-images", "8", *map(str, extra)]
    cfg = parse_config(recipe.Config, argv, "")
    run = Run(cfg, convolutions=True, recipe=recipe.__name__)
    return recipe.TRAINER(cfg, run, make_source(cfg)), run


def f64(t):
    return t.asnumpy().astype(np.float64)


def bce(logits, target):  # the reference's vanilla GANLoss: BCEWithLogits against all-ones / all-zeros
    return np.mean(np.logaddexp(0, -logits) if target else np.logaddexp(0, logits))


def test_pix2pix_losses_are_the_reference_formulas(graph_mode, tmp_path, fashion):
    from mindspore import ops
    trainer, run = tiny(tmp_path, fashion, "pix2pix", "--lambda-l1", 7.0)
    a, b = (Tensor.from_numpy(x) for x in trainer.source.next())
    G, D = trainer.g.net, trainer.d.net
    fake = G(a)
    real_logits, fake_logits = f64(D(ops.concat((a, b), 1))), f64(D(ops.concat((a, fake), 1)))
    loss_d = float(trainer.d_forward(a, b)[0].asnumpy())
    assert loss_d == pytest.approx(0.5 * (bce(real_logits, True) + bce(fake_logits, False)), rel=1e-5)
    loss_g, gan, l1 = (float(x.asnumpy()) for x in trainer.g_forward(a, b))
    l1_expected = np.mean(np.abs(f64(fake) - f64(b)))
    assert gan == pytest.approx(bce(fake_logits, True), rel=1e-5) and l1 == pytest.approx(l1_expected, rel=1e-5)
    assert loss_g == pytest.approx(bce(fake_logits, True) + 7.0 * l1_expected, rel=1e-5)
    run.close()


def test_cyclegan_losses_are_the_reference_formulas(graph_mode, tmp_path, fashion):
    trainer, run = tiny(tmp_path, fashion, "cyclegan", "--lambda-a", 3.0, "--lambda-b", 5.0, "--lambda-identity", 0.5)
    a, b = (Tensor.from_numpy(x) for x in trainer.source.next())
    g, d = trainer.g.net, trainer.d.net
    fake_b, fake_a = g.g_a(a), g.g_b(b)
    an, bn, fbn, fan = f64(a), f64(b), f64(fake_b), f64(fake_a)

    def mse(x, target):  # the reference's lsgan GANLoss
        return np.mean((x - target) ** 2)
    gan = mse(f64(d.d_a(fake_b)), 1) + mse(f64(d.d_b(fake_a)), 1)
    cycle_a = 3.0 * np.mean(np.abs(f64(g.g_b(fake_b)) - an))
    cycle_b = 5.0 * np.mean(np.abs(f64(g.g_a(fake_a)) - bn))
    identity = 0.5 * (5.0 * np.mean(np.abs(f64(g.g_a(b)) - bn)) + 3.0 * np.mean(np.abs(f64(g.g_b(a)) - an)))
    out = [float(x.asnumpy()) for x in trainer.g_loss(a, b)[:5]]
    assert out == pytest.approx([gan + cycle_a + cycle_b + identity, gan, cycle_a, cycle_b, identity], rel=1e-5)
    np.testing.assert_allclose(trainer.g_loss(a, b)[5].asnumpy(), fbn, rtol=1e-6)  # D's fakes: G_A(a)
    # D_A judges domain B (real b vs G_A's fakes), D_B domain A; each (real + fake) / 2, then summed
    pa, pb = fan[::-1].copy(), fbn[::-1].copy()  # any pooled fakes
    loss_a = 0.5 * (mse(f64(d.d_a(b)), 1) + mse(f64(d.d_a(Tensor.from_numpy(pb.astype(np.float32)))), 0))
    loss_b = 0.5 * (mse(f64(d.d_b(a)), 1) + mse(f64(d.d_b(Tensor.from_numpy(pa.astype(np.float32)))), 0))
    d_out = [float(x.asnumpy()) for x in trainer.d_loss(a, b, *(Tensor.from_numpy(p.astype(np.float32)) for p in (pa, pb)))]
    assert d_out == pytest.approx([loss_a + loss_b, loss_a, loss_b], rel=1e-5)
    run.close()


def test_image_pool_follows_the_reference_and_resumes():
    from gan.cyclegan import ImagePool
    rng, shadow = np.random.default_rng(3), np.random.default_rng(3)
    pool = ImagePool(4, (1, 2, 2), "pool_x")
    stored = []
    for k in range(10):
        fakes = np.full((2, 1, 2, 2), k, np.float32) + np.arange(2, dtype=np.float32)[:, None, None, None]
        out = pool.query(fakes, rng)
        for i, image in enumerate(fakes):  # the reference's ImagePool.query, image by image
            if len(stored) < 4:
                stored.append(image.copy())
                expected = image
            elif shadow.uniform() > 0.5:
                j = int(shadow.integers(0, 4))
                expected, stored[j] = stored[j].copy(), image.copy()
            else:
                expected = image
            np.testing.assert_array_equal(out[i], expected)
    np.testing.assert_array_equal(pool.images, np.stack(stored))
    pool.sync_to_parameter()  # what a checkpoint holds, read back into a fresh pool
    again = ImagePool(4, (1, 2, 2), "pool_x")
    again.param.set_data(pool.param.data.copy())
    again.load_from_parameter(pool.count)
    fakes = np.full((2, 1, 2, 2), 99, np.float32)
    np.testing.assert_array_equal(again.query(fakes, np.random.default_rng(5)), pool.query(fakes, np.random.default_rng(5)))
    assert ImagePool(0, (1, 2, 2), "p").query(fakes, rng) is fakes  # size 0: D sees the newest fakes


def test_learning_rate_is_constant_then_linear_to_zero(tmp_path, fashion):
    """The reference's "linear" policy: the base rate for steps - decay_steps iterations, then down by
    an equal amount each step to base / decay_steps at the last step; --lr-d sets D's base alone."""
    trainer, run = tiny(tmp_path, fashion, "cyclegan", "--steps", 10, "--decay-steps", 4, "--lr-d", 1e-3)
    assert [trainer.lr("g", k) for k in range(10)] == pytest.approx([2e-4] * 7 + [1.5e-4, 1e-4, 0.5e-4])
    assert [trainer.lr("d", k) for k in (0, 6, 7, 9)] == pytest.approx([1e-3, 1e-3, 7.5e-4, 2.5e-4])
    run.close()
    constant, run = tiny(tmp_path / "constant", fashion, "pix2pix", "--steps", 10, "--decay-steps", 0)
    assert {constant.lr(m, k) for m in ("g", "d") for k in range(10)} == {2e-4}
    run.close()


@pytest.mark.parametrize("model", ["pix2pix", "cyclegan"])
def test_picture_rows_are_input_output_and_reconstruction_or_target(graph_mode, tmp_path, fashion, model):
    """Each picture row: the held-out input, its translation, then (CycleGAN) the translation back or
    (pix2pix) the paired target, in that order, as the TensorBoard grid and generate.py's .png show."""
    trainer, run = tiny(tmp_path, fashion, model)
    inputs, targets = trainer.test_images("AtoB")
    cells, columns = trainer.rows("AtoB", inputs[:3])
    x = inputs[:3].astype(np.float32) / 127.5 - 1
    out = trainer.translate("AtoB", Tensor(x)).asnumpy()
    third = trainer.translate("BtoA", Tensor(out)).asnumpy() if model == "cyclegan" else targets[:3] / 127.5 - 1
    assert columns == 3 and cells.shape == (9,) + x.shape[1:]
    np.testing.assert_allclose(cells[0::3], x, atol=1e-6)
    np.testing.assert_allclose(cells[1::3], out, atol=1e-5)
    np.testing.assert_allclose(cells[2::3], third, atol=1e-5)
    run.close()


@pytest.mark.parametrize("model", ["pix2pix", "cyclegan"])
def test_each_phase_moves_only_its_own_models_and_ema_follows_g(graph_mode, tmp_path, fashion, model):
    """Each phase of an iteration, in the recipe's order, moves its own models only; with --ema 0.9
    g_ema starts equal to G, after the iteration is 0.9 old + 0.1 new G, pictures and evaluation
    translate with it, and the checkpoint holds it; without --ema G itself translates."""
    from loops.driver import run_iteration
    trainer, run = tiny(tmp_path, fashion, model, "--ema", 0.9)
    trainer.load_host_state(None)  # a fresh run, as train_translate.py starts one: G_ema := G
    g, d = trainer.g.net.trainable_params(), trainer.d.net.trainable_params()
    ema = [p for p in trainer.state if p.name.startswith("g_ema.")]
    assert [p.name.removeprefix("g_ema.") for p in ema] == [p.name.removeprefix("g.") for p in g]
    start = [p.asnumpy().copy() for p in g]
    assert all(np.array_equal(x, p.asnumpy()) for x, p in zip(start, ema))
    phases = trainer.phases()
    assert [p.name for p in phases] == (["d", "g"] if model == "pix2pix" else ["g", "d"]) + ["ema"]
    for phase in phases:  # one iteration, phase by phase
        before = [[p.asnumpy().copy() for p in ps] for ps in (g, d, ema)]
        run_iteration([phase], 0)
        moved = tuple(any(not np.array_equal(x, p.asnumpy()) for x, p in zip(b, ps))
                      for b, ps in zip(before, (g, d, ema)))
        assert moved == (phase.name == "g", phase.name == "d", phase.name == "ema"), phase.name
    for x, p, e in zip(start, g, ema):
        np.testing.assert_allclose(e.asnumpy(), 0.9 * x + 0.1 * p.asnumpy(), rtol=1e-5, atol=1e-7)
    assert not all(np.array_equal(x, p.asnumpy()) for x, p in zip(start, g))
    x = Tensor(trainer.test_images("AtoB")[0][:2].astype(np.float32) / 127.5 - 1)
    g_a = trainer.g.net if model == "pix2pix" else trainer.g.net.g_a
    averaged = trainer.g_eval if model == "pix2pix" else trainer.to_b.net
    assert averaged is not g_a
    averaged.set_train(False)
    np.testing.assert_allclose(trainer.translate("AtoB", x).asnumpy(), averaged(x).asnumpy(), atol=1e-6)
    trainer.without_ema()  # generate.py / python -m metrics --no-ema
    g_a.set_train(False)
    np.testing.assert_allclose(trainer.translate("AtoB", x).asnumpy(), g_a(x).asnumpy(), atol=1e-6)
    run.close()
    plain, run = tiny(tmp_path / "plain", fashion, model)
    assert not any(p.name.startswith("g_ema.") for p in plain.state) and "ema" not in [p.name for p in plain.phases()]
    used, own = (plain.g_eval, plain.g.net) if model == "pix2pix" else (plain.to_b.net, plain.g.net.g_a)
    assert used is own
    run.close()


def test_spectral_norm_flag_normalises_d_and_its_vectors_are_checkpointed(graph_mode, tmp_path, fashion):
    """--spectral-norm reaches D's four convs (the small PatchGAN); D's step advances their power
    iteration; the vectors are in the checkpointed state."""
    from loops.driver import run_iteration
    trainer, run = tiny(tmp_path, fashion, "pix2pix", "--spectral-norm")
    u = [p for p in trainer.state if p.name.startswith("d.") and p.name.endswith(".u")]
    assert len(u) == 4
    before = [p.asnumpy().copy() for p in u]
    run_iteration([p for p in trainer.phases() if p.name == "d"], 0)
    moved = [not np.array_equal(x, p.asnumpy()) for x, p in zip(before, u)]
    assert moved == [True, True, True, False]  # the last conv has one output channel: its u is +-1 for good
    run.close()


def test_identity_loss_needs_domains_of_one_shape(graph_mode, tmp_path):
    from data.translate import TranslationSource
    from gan import translator
    from loops.config import UserError, parse_config
    from loops.run import Run
    recipe = translator("cyclegan")
    cfg = parse_config(recipe.Config, ["--run-dir", str(tmp_path / "run"), "--data-dir", str(tmp_path)], "")
    grey, rgb = np.zeros((4, 1, 8, 8), np.uint8), np.zeros((4, 3, 8, 8), np.uint8)
    source = TranslationSource("folder", grey, rgb, grey, rgb, 2, 0, paired=False)
    with pytest.raises(UserError, match=r"--lambda-identity needs domains of one shape; A is \(1, 8, 8\), B is \(3"):
        recipe.TRAINER(cfg, Run(cfg, convolutions=True), source)


@pytest.mark.parametrize("args, message", [
    (["--model", "pix2pix", "--task", "sneaker2boot"], "--task sneaker2boot is unpaired; --model pix2pix takes paired"),
    (["--model", "cyclegan", "--task", "edges2fashion"], "is paired; --model cyclegan takes unpaired data"),
    (["--model", "cyclegan", "--task", "sneaker2boot", "--steps-per-call", "2"], "--steps-per-call must be 1 for cyclegan"),
    (["--model", "pix2pix", "--task", "edges2fashion", "--image-size", "28"], "unet_32 needs H and W divisible by 32"),
    (["--model", "pix2pix", "--lambda-a", "3"], "unrecognized arguments: --lambda-a 3"),
    (["--model", "cyclegan", "--lambda-l1", "3"], "unrecognized arguments: --lambda-l1 3"),
    (["--model", "pix2px"], "did you mean 'pix2pix'?"),
    (["--model", "cyclegan", "--ema", "1"], "--ema must be in [0, 1) (0: off), got 1.0"),
    (["--model", "cyclegan", "--data-dir", "/nonexistent"], "/nonexistent"),
])
def test_bad_translate_input_exits_2_and_writes_nothing(tmp_path, capsys, fashion, args, message):
    import train_translate
    if "--task" in args:
        args = args + ["--data-dir", fashion]
    assert_refused(train_translate.main, args, capsys, tmp_path / "run", message)


def test_bad_translate_input_from_the_command_line(tmp_path, fashion):
    """The process-level path of the cases above (run_cli, exit status, stderr), once."""
    proc = run_script("train_translate.py", "--run-dir", tmp_path / "run", "--model", "pix2pix", "--task",
                      "sneaker2boot", "--data-dir", fashion, check=False)
    assert proc.returncode == 2 and error_lines(proc) == [
        "error: --task sneaker2boot is unpaired; --model pix2pix takes paired data: edges2fashion"], proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_cyclegan_resume_after_sigkill_is_bit_identical_and_the_run_is_evaluated(tmp_path, fashion):
    """The image pools, EMA generators, data position, optimizers and RNG are in each checkpoint: a run killed after
    its step-2 checkpoint and resumed ends with the weights of an uninterrupted one; generate.py and
    python -m metrics read the run back."""
    args = ["--model", "cyclegan", "--task", "sneaker2boot", "--data-dir", fashion, "--batch-size", 2, "--ngf", 4, "--ndf", 4,
            "--pool-size", 3, "--steps", 4, "--decay-steps", 2, "--eval-images", 8, "--ema", 0.9, "--no-progress"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    run_script("train_translate.py", "--run-dir", whole, *args, own_process=True)
    env = dict(os.environ, GLOG_v="4")
    proc = subprocess.Popen([sys.executable, "train_translate.py", "--run-dir", str(killed), *map(str, args),
                             "--ckpt-every", "2", "--steps", "1000"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while not (killed / "checkpoints" / "step_00000002.ckpt").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for extra in sorted((killed / "checkpoints").iterdir())[1:]:  # resume from step 2 exactly
        extra.unlink()
    run_script("train_translate.py", "--run-dir", killed, *args, "--resume", own_process=True)
    name = "step_00000004.ckpt"
    a, b = checkpoint_arrays(whole / "checkpoints" / name), checkpoint_arrays(killed / "checkpoints" / name)
    assert any(k.startswith("pool_a.") for k in a) and any(k.startswith("g.g_b.") for k in a)
    assert any(k.startswith("g_ema.g_a.") for k in a)  # --ema: the averaged generators resume too
    assert_same_arrays(a, b)
    m = json.loads((whole / "metrics.json").read_text())
    assert {"success_AtoB", "success_BtoA", "fid_AtoB", "cycle_l1_A", "cycle_l1_B"} <= set(m)
    assert json.loads((whole / "config.json").read_text())["recipe"] == "gan.cyclegan"
    again = json.loads(run_script("-m", "metrics", whole).stdout)
    assert again["cycle_l1_A"] == m["cycle_l1_A"] and again["step"] == 4
    run_script("generate.py", whole, "--num", 5, "--out", tmp_path / "b2a.npy", "--direction", "BtoA")
    out = np.load(tmp_path / "b2a.npy")
    assert out.shape == (5, 1, 28, 28) and out.min() >= -1 and out.max() <= 1
    run_script("generate.py", whole, "--num", 5, "--out", tmp_path / "raw.npy", "--direction", "BtoA", "--no-ema")
    assert not np.array_equal(np.load(tmp_path / "raw.npy"), out)  # G_B itself, not its average


def png_size(path):
    """(width, height) from a PNG's IHDR chunk."""
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.mark.slow
def test_pix2pix_learns_to_invert_edges_and_the_run_reads_back(tmp_path, fashion, capsys):
    """400 iterations on the fixture's edge maps: the outputs' L1 to the held-out targets beats the best
    image that ignores the input (the training targets' per-pixel median) by a wide margin (measured:
    0.098-0.106 against 0.195 on seeds 0-2; 0.318 after 150 iterations). The run reads back:
    python -m metrics gives the same numbers, generate.py writes the same translations twice and a
    .png of input | output | target rows."""
    from data.translate import task_source
    run = tmp_path / "run"
    run_script("train_translate.py", "--model", "pix2pix", "--task", "edges2fashion", "--data-dir", fashion,
               "--run-dir", run, "--batch-size", 8, "--ngf", 8, "--ndf", 8, "--steps", 400, "--eval-images", 60,
               "--no-progress")
    m = json.loads((run / "metrics.json").read_text())
    assert {"l1", "psnr", "fid_AtoB", "class_preservation", "class_accuracy_real"} <= set(m)
    size = json.loads((run / "config.json").read_text())["image_size"]  # unet_32's input: 32
    source = task_source("edges2fashion", fashion, size, 8, 0)
    median = np.median(source.train_b / 127.5 - 1, axis=0)
    constant_l1 = np.abs(source.test_b / 127.5 - 1 - median).mean()
    assert m["l1"] < 0.7 * constant_l1, (m["l1"], constant_l1)
    again = json.loads(run_script("-m", "metrics", run).stdout)
    assert again["l1"] == m["l1"] and again["psnr"] == m["psnr"] and again["step"] == 400
    for name in ("first.npy", "second.npy"):
        run_script("generate.py", run, "--num", 5, "--out", tmp_path / name)
    first = np.load(tmp_path / "first.npy")
    assert first.shape == (5, 1, size, size) and np.array_equal(first, np.load(tmp_path / "second.npy"))
    run_script("generate.py", run, "--num", 5, "--out", tmp_path / "rows.png")
    cell = size * 2 + 2  # image_grid upscales 32 px to 64 and leaves 2-pixel gaps
    assert png_size(tmp_path / "rows.png") == (3 * cell + 2, 5 * cell + 2)  # input | output | target, 5 rows
    import generate
    import train_translate
    code, lines = cli_error(generate.main, [run, "--num", 5, "--out", tmp_path / "x.npy", "--no-ema"], capsys)
    assert code == 2 and lines == ["error: --no-ema: this run was trained without --ema; its generators are the "
                                   "only ones"]
    before = sorted(os.listdir(run / "checkpoints"))
    code, lines = cli_error(train_translate.main, ["--run-dir", run, "--resume", "--force", "--spectral-norm",
                                                   "--steps", 500], capsys)
    assert code == 2 and len(lines) == 1 and "spectral_norm: False -> True cannot change on resume" in lines[0]
    assert sorted(os.listdir(run / "checkpoints")) == before
