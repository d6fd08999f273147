"""File-based datasets: real-format fixtures read through mindspore.dataset, bad dirs refused."""
import json
import os
import struct
from types import SimpleNamespace

import numpy as np
import pytest

import data.images
from conftest import assert_refused, run_script
from data.arrays import ArraySource
from data.images import image_source, load, read_idx
from fixtures import read_file, write_cifar, write_file, write_idx, write_png_folder
from loops.config import UserError

IMAGES_GZ, LABELS_GZ = "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"


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


def test_idx_gzip_and_uncompressed_read_identically(tmp_path):
    plain, packed = tmp_path / "plain", tmp_path / "gz"
    images, labels = write_idx(plain, n=130)
    write_idx(packed, n=130, gzip=True)
    assert sorted(os.listdir(packed)) == [IMAGES_GZ, LABELS_GZ]
    got, got_labels = read_idx(str(packed))
    assert got.shape == (130, 28, 28) and got.dtype == np.uint8 and got_labels.dtype == np.int32
    np.testing.assert_array_equal(got, images)
    np.testing.assert_array_equal(got_labels, labels)
    for size in (28, 20):  # and through load's pipeline, native and resized
        a, b = load("mnist", str(plain), size), load("fashion-mnist", str(packed), size)
        assert a[0].shape == (130, 1, size, size) and a[2] == b[2] == 10
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
    assert sorted(os.listdir(packed)) == [IMAGES_GZ, LABELS_GZ]  # nothing decompressed into the data dir
    write_idx(packed, n=40, seed=1)  # both formats: the uncompressed files win
    np.testing.assert_array_equal(read_idx(str(packed))[0], write_idx(tmp_path / "seed1", n=40, seed=1)[0])


def test_read_idx_splits(tmp_path):
    train, _ = write_idx(tmp_path, n=50, gzip=True)
    test, test_labels = write_idx(tmp_path, n=30, seed=3, split="test")
    assert sorted(os.listdir(tmp_path))[:2] == ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    np.testing.assert_array_equal(read_idx(str(tmp_path), "train")[0], train)
    got, got_labels = read_idx(str(tmp_path), "test")
    np.testing.assert_array_equal(got, test)
    np.testing.assert_array_equal(got_labels, test_labels)
    np.testing.assert_array_equal(load("mnist", str(tmp_path), 28)[0][:, 0], train)  # training reads train
    write_idx(tmp_path / "only_train", n=5)
    with pytest.raises(UserError, match="missing .*t10k-images-idx3-ubyte.gz"):
        read_idx(str(tmp_path / "only_train"), "test")
    with pytest.raises(ValueError, match="split"):
        read_idx(str(tmp_path), "validation")


def cfg(dataset, data_dir=""):
    return SimpleNamespace(dataset=dataset, data_dir=data_dir, image_size=0, batch_size=8, seed=0)


def test_fashion_mnist_default_data_dir(tmp_path, monkeypatch):
    images, labels = write_idx(tmp_path / "fm", n=60, gzip=True)
    monkeypatch.setitem(data.images.DEFAULT_DATA_DIRS, "fashion-mnist", str(tmp_path / "fm"))
    assert data.images.default_data_dir("fashion-mnist") == str(tmp_path / "fm")
    assert data.images.default_data_dir("mnist") == ""
    source = image_source(cfg("fashion-mnist"))  # no --data-dir: the default directory
    np.testing.assert_array_equal(source.images[:, 0], images)
    np.testing.assert_array_equal(source.labels, labels)
    with pytest.raises(UserError, match="needs --data-dir"):  # mnist has no default
        image_source(cfg("mnist"))
    source = image_source(cfg("fashion-mnist", str(tmp_path / "fm")))  # an explicit dir still works
    assert len(source.images) == 60


def test_no_data_dir_says_where_to_get_the_files(tmp_path, monkeypatch):
    absent = str(tmp_path / "absent")
    monkeypatch.setitem(data.images.DEFAULT_DATA_DIRS, "fashion-mnist", absent)
    with pytest.raises(UserError) as e:
        image_source(cfg("fashion-mnist"))
    assert str(e.value) == (
        "--dataset fashion-mnist needs --data-dir (the gzip IDX files from "
        "https://github.com/zalandoresearch/fashion-mnist, or on Debian/Ubuntu `apt-get install "
        f"dataset-fashion-mnist`, which puts them in {absent})")
    with pytest.raises(UserError) as e:
        image_source(cfg("mnist"))
    assert str(e.value).startswith("--dataset mnist needs --data-dir (") and "http" in str(e.value)
    assert "\n" not in str(e.value)


def edit(path, change):
    """Rewrite an IDX file (gzip or not, as its name says) with change(bytes) -> bytes."""
    write_file(path, change(read_file(path)))


def idx(d, n=50, size=28):
    """d with gzip IDX files of n size x size images."""
    write_idx(d, n=n, size=size, gzip=True)
    return d


def junk(path):
    with open(path, "wb") as f:
        f.write(b"junk, not gzip")


BAD_IDX = [  # (make a bad dir in d, the file the error must name, what it must say)
    (lambda d: junk(os.path.join(idx(d), IMAGES_GZ)), IMAGES_GZ, "not a valid gzip file"),
    (lambda d: truncate(os.path.join(idx(d), IMAGES_GZ)), IMAGES_GZ, "not a valid gzip file"),  # cut stream
    (lambda d: edit(os.path.join(idx(d), IMAGES_GZ), lambda b: b"\0\0\x08\x01" + b[4:]), IMAGES_GZ,
     "not an IDX image file (bad header)"),
    (lambda d: edit(os.path.join(idx(d), LABELS_GZ), lambda b: b[:6]), LABELS_GZ, "not an IDX label file"),
    (lambda d: edit(os.path.join(idx(d), IMAGES_GZ), lambda b: b[:-1]), IMAGES_GZ, "truncated"),
    (lambda d: edit(os.path.join(idx(d), IMAGES_GZ), lambda b: b + b"x"), IMAGES_GZ, "padded"),
    (lambda d: edit(os.path.join(idx(d), LABELS_GZ), lambda b: struct.pack(">II", 2049, 49) + b[8:-1]),
     LABELS_GZ, "holds 49 labels, but"),
    (lambda d: edit(os.path.join(idx(d), LABELS_GZ), lambda b: b[:-1] + b"\xff"), LABELS_GZ,
     "labels must be in [0, 9], found 255 in"),
    (lambda d: (write_idx(d, n=20), edit(os.path.join(d, "train-labels-idx1-ubyte"), lambda b: b[:-1] + b"\n")),
     "train-labels-idx1-ubyte", "labels must be in [0, 9], found 10 in"),
    (lambda d: idx(d, n=20, size=1), IMAGES_GZ, "holds 1x1 images; expected between 4x4 and 512x512"),
    (lambda d: idx(d, n=2, size=513), IMAGES_GZ, "holds 513x513 images"),
    (lambda d: idx(d, n=0), IMAGES_GZ, "holds 0 images"),
    (lambda d: os.remove(os.path.join(idx(d), LABELS_GZ)), "train-labels-idx1-ubyte", "missing"),
]


@pytest.mark.parametrize("make, name, message", BAD_IDX, ids=[case[2][:24] for case in BAD_IDX])
def test_bad_idx_files_are_one_line_naming_the_file(tmp_path, make, name, message):
    d = str(tmp_path / "data")
    os.makedirs(d)
    make(d)
    with pytest.raises(UserError) as e:
        load("fashion-mnist", d, 28)
    assert message in str(e.value) and os.path.join(d, name) in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


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
    (lambda d: junk(os.path.join(idx(d), IMAGES_GZ)), ["--dataset", "fashion-mnist"], f"{IMAGES_GZ} is not a valid gzip file"),
    (lambda d: edit(os.path.join(idx(d), IMAGES_GZ), lambda b: b"\0\0\x08\x01" + b[4:]),
     ["--dataset", "mnist"], f"{IMAGES_GZ} is not an IDX image file"),
    (lambda d: write_idx(d, size=1), ["--dataset", "mnist"], "holds 1x1 images"),
    (lambda d: idx(d, n=0), ["--dataset", "fashion-mnist"], "holds 0 images"),
    (lambda d: (write_idx(d, n=50), edit(os.path.join(d, "train-labels-idx1-ubyte"), lambda b: b[:-1] + b"\xff")),
     ["--dataset", "mnist"], "labels must be in [0, 9], found 255 in"),
])
def test_bad_data_dirs_exit_2_with_one_line(tmp_path, capsys, make, args, message):
    import train_gan
    data = str(tmp_path / "data")
    make(data)
    data_args = ["--data-dir", data] if os.path.exists(data) else []
    assert_refused(train_gan.main, [*args, *data_args, "--steps", 2], capsys, tmp_path / "run", message)


def truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-100])


@pytest.mark.slow
def test_mnist_format_run_trains_and_evaluates(tmp_path, monkeypatch):
    write_idx(tmp_path / "mnist", n=400)
    write_idx(tmp_path / "mnist", n=150, seed=1, split="test", gzip=True)  # a held-out split, as distributed
    run = tmp_path / "run"
    run_script("train_gan.py", "--run-dir", run, "--dataset", "mnist", "--data-dir", tmp_path / "mnist",
               "--width", 8, "--z-dim", 8, "--batch-size", 32, "--steps", 20, "--eval-samples", 200,
               "--image-size", 16)
    m = json.loads((run / "metrics.json").read_text())
    assert {"fid", "kid", "precision", "recall", "density", "coverage", "class_score", "classes_covered",
            "class_kl", "classifier_accuracy"} <= set(m)
    assert m["classifier_accuracy"] > 0.9  # the bars are easy: the feature extractor really learned
    assert (run / "samples").is_dir()
    # pixel-space k-NN precision / recall against the test split; real training images, drawn from the
    # same patterns, score near 1 there; 20 steps of a width-8 G are far from them
    assert m["pixel_precision_reference"] > 0.8 and m["pixel_recall_reference"] > 0.8, m
    assert m["pixel_precision"] < m["pixel_precision_reference"] and 0 <= m["pixel_recall"] <= 1
    pixel = json.loads((run / "metrics.json").read_text())["protocol"]["pixel"]
    assert (pixel["real"], pixel["generated"], pixel["k"], pixel["real_split"]) == (150, 200, 5, "test")


def test_idx_images_of_another_size_are_resized_to_the_datasets_size(tmp_path):
    """A consistent IDX file of 64x64 images is usable: read and resized to the 28x28 asked for."""
    write_idx(str(tmp_path), n=20, size=64)
    images, labels, classes = load("fashion-mnist", str(tmp_path), 28)
    assert images.shape == (20, 1, 28, 28) and labels.tolist() == [k % 10 for k in range(20)] and classes == 10
