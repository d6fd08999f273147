"""Learning-rate schedules: the values (that the compiled steps use them: tests/test_step.py for one
step's exact update, tests/test_train_gan.py for a whole run)."""
import pytest

from loops.schedules import lr_at


def test_schedule_values():
    assert [lr_at(s, 1.0, "constant", 10, warmup=4) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(4, 1.0, "linear", 10, warmup=4) == 1.0
    assert lr_at(7, 1.0, "linear", 10, warmup=4) == pytest.approx(0.5)
    assert lr_at(10, 1.0, "linear", 10) == 0.0
    assert lr_at(5, 2.0, "cosine", 10) == pytest.approx(1.0)
    assert lr_at(0, 2.0, "cosine", 10) == 2.0
    assert lr_at(20, 2.0, "cosine", 10) == pytest.approx(0.0, abs=1e-12)
