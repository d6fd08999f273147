"""How every score was made: the real-vs-real FID reference in the summary line and metrics.json,
`python -m metrics --protocol paper` (all real images, more generated samples), the `protocol`
object, and the CLI's refusals."""
import json
import re

import numpy as np
import pytest

from conftest import cli_error, run_in_process, run_script

TINY_DIGITS = ["--dataset", "digits", "--width", 8, "--z-dim", 8, "--batch-size", 16, "--eval-samples", 32,
               "--log-every", 2, "--r1", 0, "--steps", 2, "--no-progress"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(run dir, the training's last stdout line): two steps on digits, evaluated on 32 samples."""
    run = tmp_path_factory.mktemp("protocol") / "run"
    proc = run_script("train_gan.py", "--run-dir", run, *TINY_DIGITS)
    return run, proc.stdout.strip().splitlines()[-1]


def metrics_cli(argv, capsys):
    """python -m metrics in-process (conftest.run_in_process): (exit status, parsed stdout JSON)."""
    proc = run_in_process("-m", "metrics", *argv, check=False)
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.xdist_group("protocol_run")
def test_summary_line_and_metrics_json_give_the_real_vs_real_reference(tiny_run):
    run, last = tiny_run
    m = json.loads((run / "metrics.json").read_text())
    assert m["fid_reference"] > 0 and np.isfinite(m["fid"])
    match = re.search(r"FID (\S+) \(lower is better; real vs real (\S+)\), precision ", last)
    assert match, last
    assert float(match.group(1)) == pytest.approx(m["fid"], rel=1e-3)
    assert float(match.group(2)) == pytest.approx(m["fid_reference"], rel=1e-2)


@pytest.mark.xdist_group("protocol_run")
def test_metrics_cli_quick_and_paper_protocols(tiny_run, capsys, graph_mode):
    run = tiny_run[0]
    trained = json.loads((run / "metrics.json").read_text())
    code, out = metrics_cli([run, "--num", 32], capsys)  # quick, the training's own evaluation again
    assert code == 0 and out["fid_reference"] == pytest.approx(trained["fid_reference"], rel=1e-9)
    p = out["protocol"]
    assert (p["name"], p["generated"], p["real"], p["fid_reference_n"], p["seed"]) == ("quick", 32, 32, 32, 0)

    code, out = metrics_cli([run, "--protocol", "paper", "--num", 64], capsys)
    assert code == 0
    m = json.loads((run / "metrics.json").read_text())
    p = m["protocol"]
    # digits has 1797 images: all of them are the real set, the reference two disjoint halves
    assert (p["name"], p["generated"], p["real"], p["real_split"]) == ("paper", 64, 1797, "train")
    assert p["fid_reference_n"] == 898
    assert p["classifier"]["test_accuracy"] == m["classifier_accuracy"] and p["prdc"]["real"] == 1797
    assert out["protocol"] == p and out["fid_reference"] == m["fid_reference"] > 0 and out["samples"] == 64
    assert m["fid_reference"] < trained["fid_reference"]  # 898 per side is less biased than 32
    assert m["loss_d"] == trained["loss_d"] and m["step"] == 2  # the training's keys are kept


@pytest.mark.xdist_group("protocol_run")
def test_sample_counts_that_cannot_fit_in_memory_are_one_line_and_change_nothing(tiny_run, tmp_path, capsys,
                                                                                  graph_mode):
    import generate
    from metrics.__main__ import main
    run = tiny_run[0]
    before = (run / "metrics.json").read_bytes()
    code, lines = cli_error(main, [run, "--num", 10 ** 9], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(
        "error: --num 1000000000 (the samples and the real images they are scored against) needs at least"), lines
    code, lines = cli_error(generate.main, [run, "--num", 10 ** 9, "--out", tmp_path / "x.npy"], capsys)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --num 1000000000 (the samples) needs at "
                                                                 "least"), lines
    assert (run / "metrics.json").read_bytes() == before and not (tmp_path / "x.npy").exists()
    existing = tmp_path / "existing.npy"
    existing.write_bytes(b"keep")
    code, lines = cli_error(generate.main, [run, "--num", 4, "--out", existing], capsys)
    assert code == 2 and len(lines) == 1 and "--overwrite" in lines[0] and existing.read_bytes() == b"keep"


def test_metrics_cli_refuses_protocol_misuse(tmp_path, capsys):
    from metrics.__main__ import main
    rl = tmp_path / "rl"
    rl.mkdir()
    (rl / "config.json").write_text(json.dumps({"algo": "ppo", "env": "CartPole-v1"}))
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"w": 2.0}))
    gan = tmp_path / "gan"  # a run from before config.json named its recipe: told by its keys
    gan.mkdir()
    (gan / "config.json").write_text(json.dumps({"z_dim": 2, "dataset": "ring8"}))
    cases = [([rl, "--protocol", "paper"], "error: unrecognized arguments: --protocol paper "
                                             f"({rl} is a run of rl.ppo, whose evaluation takes --checkpoint, "
                                             "--episodes, --gif)"),
             ([other, "--protocol", "paper"], "its script defines no evaluation: nothing to evaluate"),
             ([gan, "--protocol", "best"], "error: argument --protocol: invalid choice: 'best'"),
             ([gan, "--protocol", "paper", "--num", -3], "error: --num must be >= 0"),
             ([tmp_path / "missing"], "does not exist"), ([tmp_path], "config.json is missing or unreadable")]
    for argv, message in cases:
        code, lines = cli_error(main, argv, capsys)
        assert code == 2 and len(lines) == 1 and message in lines[0], (argv, lines)


def test_sample_in_chunks_pads_the_last_chunk_and_keeps_order():
    from gan.models import sample_in_chunks
    shapes = []

    def fake(z, labels):
        shapes.append((z.shape, None if labels is None else labels.shape))
        return z * 2 + (0 if labels is None else labels[:, None])
    z = np.arange(23 * 3, dtype=np.float32).reshape(23, 3)
    labels = np.arange(23, dtype=np.int32) % 4
    np.testing.assert_array_equal(sample_in_chunks(fake, z, labels, chunk=10), z * 2 + labels[:, None])
    assert shapes == [((10, 3), (10,))] * 3  # one compiled shape
    shapes.clear()
    np.testing.assert_array_equal(sample_in_chunks(fake, z, None, chunk=30), z * 2)
    assert shapes == [((30, 3), None)]  # fewer than a chunk: still the one shape, padded


def test_training_evaluation_samples_in_fixed_chunks():
    """The end-of-run evaluation that a 32x32 preset died in (2500 samples in one call): the
    trainer's sampling goes through the fixed chunk shape, labels riding along."""
    from types import SimpleNamespace

    from gan.models import SAMPLE_CHUNK
    from gan.trainer import GANTrainer
    calls = []

    def sample(z, *labels):
        calls.append((z.shape[0], labels[0].shape[0] if labels else None))
        out = z.asnumpy() + (labels[0].asnumpy()[:, None] if labels else 0)
        return SimpleNamespace(asnumpy=lambda: out)
    n = 2 * SAMPLE_CHUNK + 7
    z = np.random.default_rng(0).standard_normal((n, 4), dtype=np.float32)
    labels = np.arange(n, dtype=np.int32) % 3
    samples, got = GANTrainer.eval_samples(SimpleNamespace(sample=sample, eval_z=z, eval_labels=labels))
    np.testing.assert_array_equal(samples, z + labels[:, None])
    assert got is labels and calls == [(SAMPLE_CHUNK, SAMPLE_CHUNK)] * 3


MEMORY_PROBE = """
import resource, numpy as np, mindspore as ms
from mindspore import Tensor
from gan.models import SAMPLE_CHUNK, build_models, make_sampler, sample_in_chunks
ms.set_context(mode=ms.GRAPH_MODE)
_, _, g_ema = build_models("dcgan", 32, (3, 32, 32), 32)
sampler = make_sampler(g_ema)
call = lambda z, labels: sampler(Tensor.from_numpy(z)).asnumpy()
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
for n in (SAMPLE_CHUNK, 20 * SAMPLE_CHUNK):
    out = sample_in_chunks(call, np.ones((n, 32), np.float32))
    print(n, out.nbytes / 2 ** 20, peak())
"""


def test_sampling_peak_memory_does_not_grow_with_the_sample_count():
    """Peak resident memory of 20 chunks' sampling is that of one chunk plus the samples themselves
    (measured: +46 MB for 2000 samples of 23 MB; in one call, +268 MB)."""
    import subprocess
    import sys

    import loops
    from conftest import ROOT
    proc = subprocess.run([sys.executable, "-c", MEMORY_PROBE], cwd=ROOT, capture_output=True, text=True,
                          env=loops.child_env(GLOG_v="3"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (_, _, one), (_, samples_mb, many) = [map(float, l.split()) for l in proc.stdout.split("\n") if l.strip()]
    # the samples twice (the chunks and their concatenation) and 40 MB of slack; one call: +268 MB
    assert many - one < 2 * samples_mb + 40, (one, many, samples_mb)
