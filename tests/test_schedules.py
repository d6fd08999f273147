"""Learning-rate schedules: the values, and that the compiled steps really use them."""
import math

import pytest

from conftest import checkpoint_arrays, run_script
from loops.schedules import lr_at


def test_schedule_values():
    assert [lr_at(s, 1.0, "constant", 10, warmup=4) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(4, 1.0, "linear", 10, warmup=4) == 1.0
    assert lr_at(7, 1.0, "linear", 10, warmup=4) == pytest.approx(0.5)
    assert lr_at(10, 1.0, "linear", 10) == 0.0
    assert lr_at(5, 2.0, "cosine", 10) == pytest.approx(1.0)
    assert lr_at(0, 2.0, "cosine", 10) == 2.0
    assert lr_at(20, 2.0, "cosine", 10) == pytest.approx(0.0, abs=1e-12)


def test_scheduled_rate_reaches_the_optimizers(tmp_path):
    run = tmp_path / "sched"
    run_script("train_gan.py", "--run-dir", run, "--dataset", "ring8", "--width", 16, "--batch-size", 32,
               "--eval-samples", 100, "--steps", 20, "--lr-schedule", "cosine", "--warmup", 4,
               "--lr-g", 0.002, "--lr-d", 0.001, "--optimizer-d", "sgd")
    arrays = checkpoint_arrays(run / "checkpoints" / "step_00000020.ckpt")
    assert float(arrays["g.opt.learning_rate_group_0"]) == pytest.approx(lr_at(19, 0.002, "cosine", 20, 4), rel=1e-6)
    assert float(arrays["d.opt.learning_rate_group_0"]) == pytest.approx(lr_at(19, 0.001, "cosine", 20, 4), rel=1e-6)
    assert not any(k.startswith("d.opt.exp_avg") for k in arrays)  # D really uses SGD
    assert math.isfinite(float(arrays["g.opt.learning_rate_group_0"]))
