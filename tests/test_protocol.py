"""How every score was made: the real-vs-real FID reference in the summary line and metrics.json,
`python -m metrics --protocol paper` (all real images, more generated samples), the `protocol`
object, and the CLI's refusals."""
import json
import re

import numpy as np
import pytest

from conftest import cli_error, run_script

TINY_DIGITS = ["--dataset", "digits", "--width", 8, "--z-dim", 8, "--batch-size", 16, "--eval-samples", 32,
               "--log-every", 2, "--r1", 0, "--steps", 2, "--no-progress"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """(run dir, the training's last stdout line): two steps on digits, evaluated on 32 samples."""
    run = tmp_path_factory.mktemp("protocol") / "run"
    proc = run_script("train_gan.py", "--run-dir", run, *TINY_DIGITS)
    return run, proc.stdout.strip().splitlines()[-1]


def metrics_cli(argv, capsys):
    """python -m metrics in-process: (exit status, parsed stdout JSON)."""
    from loops.config import run_cli
    from metrics.__main__ import main
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, [str(a) for a in argv])
    return exit_info.value.code, json.loads(capsys.readouterr().out)


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
    from gan.evaluate import sample_in_chunks

    class Fake:
        shapes = []

        def sample(self, z, labels=None):
            self.shapes.append((z.shape, None if labels is None else labels.shape))
            return z * 2 + (0 if labels is None else labels[:, None])
    z = np.arange(23 * 3, dtype=np.float32).reshape(23, 3)
    labels = np.arange(23, dtype=np.int32) % 4
    fake = Fake()
    np.testing.assert_array_equal(sample_in_chunks(fake, z, labels, chunk=10), z * 2 + labels[:, None])
    assert fake.shapes == [((10, 3), (10,))] * 3  # one compiled shape
    Fake.shapes = []
    np.testing.assert_array_equal(sample_in_chunks(fake, z, None, chunk=30), z * 2)
    assert fake.shapes == [((23, 3), None)]  # up to one chunk: one call, unpadded, as before
