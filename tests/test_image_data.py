"""File-based datasets: real-format fixtures read through mindspore.dataset, bad dirs refused."""
import json
import os

import numpy as np
import pytest

from conftest import error_lines, run_script
from data.arrays import ArraySource
from data.images import load
from fixtures import write_cifar, write_idx, write_png_folder


def test_idx_cifar_and_folder_read_exactly(tmp_path):
    images, labels = write_idx(tmp_path / "mnist", n=120)
    got, got_labels, k = load("mnist", str(tmp_path / "mnist"), 28)
    assert got.shape == (120, 1, 28, 28) and k == 10
    np.testing.assert_array_equal(got[:, 0], images)
    np.testing.assert_array_equal(got_labels, labels)
    got, _, _ = load("fashion-mnist", str(tmp_path / "mnist"), 16)  # resized
    assert got.shape == (120, 1, 16, 16)
    rgb, labels = write_cifar(tmp_path / "cifar")
    got, got_labels, _ = load("cifar10", str(tmp_path / "cifar"), 32)
    np.testing.assert_array_equal(got, rgb)
    np.testing.assert_array_equal(got_labels, labels)
    write_png_folder(tmp_path / "folder", classes=("cat", "dog", "eel"), per_class=5)
    got, got_labels, k = load("folder", str(tmp_path / "folder"), 12)
    assert got.shape == (15, 3, 12, 12) and k == 3 and np.bincount(got_labels).tolist() == [5, 5, 5]
    got, _, k = load("folder", str(tmp_path / "folder" / "cat"), 12)  # a flat folder is one class
    assert got.shape == (5, 3, 12, 12) and k == 1


def test_array_source_order_is_seeded_fixed_shape_and_resumable():
    images = np.arange(10 * 4, dtype=np.uint8).reshape(10, 1, 2, 2)
    a, b = ArraySource(images, np.arange(10), 3, 5, 10), ArraySource(images, np.arange(10), 3, 5, 10)
    first = [a.next()[1].tolist() for _ in range(7)]  # 3 batches per epoch, remainder dropped
    assert all(len(batch) == 3 for batch in first)
    assert len(set(sum(first[:3], []))) == 9  # no repeats inside an epoch
    b.load_state({"counter": 4})
    assert [b.next()[1].tolist() for _ in range(3)] == first[4:7]
    assert ArraySource(images, np.arange(10), 3, 6, 10).next()[1].tolist() != first[0]  # seed matters
    x, _ = a.next()
    assert x.dtype == np.float32 and x.min() >= -1 and x.max() <= 1


@pytest.mark.parametrize("make, args, message", [
    (lambda d: None, ["--dataset", "mnist"], "needs --data-dir"),
    (lambda d: os.makedirs(d), ["--dataset", "mnist"], "missing"),
    (lambda d: write_idx(d, n=50), ["--dataset", "cifar10"], "data_batch_1.bin"),
    (lambda d: (write_idx(d, n=50), truncate(os.path.join(d, "train-images-idx3-ubyte"))),
     ["--dataset", "mnist"], "truncated"),
    (lambda d: (write_idx(d, n=50), open(os.path.join(d, "train-labels-idx1-ubyte"), "wb").write(b"junk")),
     ["--dataset", "fashion-mnist"], "not an IDX label file"),
    (lambda d: (os.makedirs(d), open(os.path.join(d, "data_batch_1.bin"), "wb").write(b"x" * 100)),
     ["--dataset", "cifar10"], "expected 10000 records"),
    (lambda d: (os.makedirs(d), open(os.path.join(d, "a.png"), "wb").write(b"not a png")),
     ["--dataset", "folder"], "a.png is not a readable image"),
    (lambda d: os.makedirs(d), ["--dataset", "folder"], "holds no .png"),
])
def test_bad_data_dirs_exit_2_with_one_line(tmp_path, make, args, message):
    data = str(tmp_path / "data")
    make(data)
    data_args = ["--data-dir", data] if os.path.exists(data) else []
    proc = run_script("train_gan.py", "--run-dir", tmp_path / "run", *args, *data_args, "--steps", 2, check=False)
    lines = error_lines(proc)
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-100])


@pytest.mark.slow
def test_mnist_format_run_trains_and_evaluates(tmp_path, monkeypatch):
    write_idx(tmp_path / "mnist", n=400)
    run = tmp_path / "run"
    run_script("train_gan.py", "--run-dir", run, "--dataset", "mnist", "--data-dir", tmp_path / "mnist",
               "--width", 8, "--z-dim", 8, "--batch-size", 32, "--steps", 20, "--eval-samples", 200,
               "--image-size", 16)
    m = json.loads((run / "metrics.json").read_text())
    assert {"fid", "kid", "precision", "recall", "density", "coverage", "class_score", "classes_covered",
            "class_kl", "classifier_accuracy"} <= set(m)
    assert m["classifier_accuracy"] > 0.9  # the bars are easy: the feature extractor really learned
    assert (run / "samples").is_dir()
