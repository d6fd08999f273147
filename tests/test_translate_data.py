"""Image-to-image data (data/translate.py): paired and unpaired sources from generated fixtures only."""
import io
import json
import os

import numpy as np
import pytest
from PIL import Image

import data.images
from data.images import _idx_arrays
from data.translate import EDGE_THRESHOLD, TASKS, TranslationSource, edge_map, folder_source, task_source
from fixtures import write_idx
from loops.config import UserError


def save_png(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(array).save(path)


def write_paired_folder(root, n_train=12, n_test=5, side=8, test_name="test", seed=0):
    """train/ and test/ of A|B PNGs (RGB, side x 2 side) with B = 255 - A; returns {split: (A, B)} in
    file order (names sort as written)."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", n_train), (test_name, n_test)):
        a = rng.integers(0, 256, size=(n, side, side, 3)).astype(np.uint8)
        b = 255 - a
        for i in range(n):
            save_png(os.path.join(root, split, f"{i:03d}.png"), np.concatenate([a[i], b[i]], axis=1))
        out[split] = (a, b)
    return out


def write_unpaired_folder(root, n=(10, 14, 3, 4), side=6):
    """trainA/ trainB/ testA/ testB/: image i of a domain is the constant value id (A: 10 + i,
    B: 100 + i) so a batch tells which images it holds; A grayscale PNGs, B RGB PNGs."""
    for part, count in zip(("trainA", "trainB", "testA", "testB"), n):
        for i in range(count):
            value = (10 if part.endswith("A") else 100) + i
            gray = np.full((side, side), value, np.uint8)
            image = gray if part.endswith("A") else np.stack([gray] * 3, -1)
            save_png(os.path.join(root, part, f"{i:03d}.png"), image)


def ids(batch):
    """The constant value of each image of a float batch (written as uint8 id)."""
    return np.rint((batch[:, 0, 0, 0] + 1) * 127.5).astype(int).tolist()


def stream(source, k):
    return [source.next(np.random.default_rng(123)) for _ in range(k)]


def assert_same_stream(x, y):
    assert len(x) == len(y)
    for (a1, b1), (a2, b2) in zip(x, y):
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(b1, b2)


def one_line_error(fn, *needles):
    with pytest.raises(UserError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message and message.strip()
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# ---------------------------------------------------------------- folders

def test_paired_folder_is_aligned_and_in_file_order(tmp_path):
    written = write_paired_folder(tmp_path)
    source = folder_source(str(tmp_path), 8, 4, 0, paired=True)
    assert source.paired and source.name == tmp_path.name and source.num_classes is None
    assert source.shape_a == source.shape_b == (3, 8, 8)
    assert source.labels_a is None and source.test_labels_a is None and source.test_labels_b is None
    for split, (a_arr, b_arr), (a_want, b_want) in (
            ("train", (source.train_a, source.train_b), written["train"]),
            ("test", (source.test_a, source.test_b), written["test"])):
        assert a_arr.dtype == np.uint8, split
        np.testing.assert_array_equal(a_arr, a_want.transpose(0, 3, 1, 2))  # left half, file order
        np.testing.assert_array_equal(b_arr, b_want.transpose(0, 3, 1, 2))  # right half
    seen = []
    for _ in range(6):  # two epochs of 3 batches
        a, b = source.next(np.random.default_rng(0))
        assert a.shape == b.shape == (4, 3, 8, 8) and a.dtype == b.dtype == np.float32
        assert -1 <= a.min() and a.max() <= 1
        np.testing.assert_allclose(b, -a, atol=1e-6)  # B = 255 - A, pair by pair
        seen.append(a)
    firsts = [np.rint((x + 1) * 127.5).astype(np.uint8) for x in seen[:3]]
    got = sorted(map(bytes, np.concatenate(firsts)))  # epoch 0 covers all 12 pairs once
    assert got == sorted(map(bytes, written["train"][0].transpose(0, 3, 1, 2)))
    resized = folder_source(str(tmp_path), 12, 4, 0, paired=True)  # halves resized apart: no bleeding
    assert resized.shape_a == (3, 12, 12)
    total = resized.train_a.astype(int) + resized.train_b.astype(int)
    assert np.abs(total - 255).max() <= 1


def test_paired_folder_val_and_grayscale(tmp_path):
    write_paired_folder(tmp_path, test_name="val")
    source = folder_source(str(tmp_path), 8, 3, 0, paired=True)
    assert len(source.test_a) == 5 and len(source.train_a) == 12
    gray = tmp_path / "gray"
    for split in ("train", "test"):
        for i in range(4):
            a = np.full((5, 5), 20 * i, np.uint8)
            save_png(str(gray / split / f"{i}.png"), np.concatenate([a, 255 - a], axis=1))
    source = folder_source(str(gray), 5, 2, 0, paired=True)
    assert source.shape_a == source.shape_b == (1, 5, 5)  # grayscale files keep one channel
    np.testing.assert_array_equal(source.test_a[:, 0, 0, 0], [0, 20, 40, 60])
    np.testing.assert_array_equal(source.test_b[:, 0, 0, 0], [255, 235, 215, 195])


def test_unpaired_folder_orders_channels_and_file_order(tmp_path):
    write_unpaired_folder(tmp_path)
    source = folder_source(str(tmp_path), 6, 3, 0, paired=False)
    assert not source.paired
    assert source.shape_a == (1, 6, 6) and source.shape_b == (3, 6, 6)  # gray A, RGB B
    assert source.per_epoch_a == 3 and source.per_epoch_b == 4  # remainders dropped
    np.testing.assert_array_equal(source.test_a[:, 0, 0, 0], [10, 11, 12])  # file order
    np.testing.assert_array_equal(source.test_b[:, :, 0, 0], [[100] * 3, [101] * 3, [102] * 3, [103] * 3])
    np.testing.assert_array_equal(source.train_b[:, 0, 0, 0], np.arange(100, 114))
    batches = stream(source, 12)  # 4 epochs of A, 3 of B
    a_ids = [ids(a) for a, _ in batches]
    b_ids = [ids(b) for _, b in batches]
    for epoch in range(4):  # each A epoch: 9 distinct images of the 10
        chunk = sum(a_ids[3 * epoch:3 * epoch + 3], [])
        assert len(set(chunk)) == 9 and set(chunk) <= set(range(10, 20))
    for epoch in range(3):  # each B epoch: 12 distinct of the 14
        chunk = sum(b_ids[4 * epoch:4 * epoch + 4], [])
        assert len(set(chunk)) == 12 and set(chunk) <= set(range(100, 114))
    assert set(sum(a_ids, [])) == set(range(10, 20)) and set(sum(b_ids, [])) == set(range(100, 114))
    # independent orders: B's positions are not A's (nor serial), and epochs are reshuffled
    assert [[i - 10 for i in x] for x in a_ids[:3]] != [[i - 100 for i in x] for x in b_ids[:3]]
    assert sum(b_ids[:4], []) != list(range(100, 112))
    assert sum(a_ids[:3], []) != sum(a_ids[3:6], [])
    for a, b in batches:  # B's channels are its one gray value replicated
        assert a.shape == (3, 1, 6, 6) and b.shape == (3, 3, 6, 6)
        np.testing.assert_array_equal(b[:, 0], b[:, 2])


def test_same_seed_same_batches_and_exact_resume(tmp_path):
    write_unpaired_folder(tmp_path / "u")
    write_paired_folder(tmp_path / "p")
    for path, paired in ((tmp_path / "u", False), (tmp_path / "p", True)):
        first = folder_source(str(path), 6, 3, 7, paired)
        again = folder_source(str(path), 6, 3, 7, paired)
        other = folder_source(str(path), 6, 3, 8, paired)
        full = stream(first, 11)
        assert_same_stream(full, stream(again, 11))
        assert not all(np.array_equal(x[0], y[0]) for x, y in zip(full, stream(other, 11)))
        resumed = folder_source(str(path), 6, 3, 7, paired)
        head = stream(resumed, 5)
        saved = json.loads(json.dumps(resumed.state()))  # checkpoints hold it as JSON
        fresh = folder_source(str(path), 6, 3, 7, paired)
        fresh.load_state(saved)
        assert_same_stream(head + stream(fresh, 6), full)  # across epoch boundaries too
        fresh.load_state({"counter": 0})
        assert_same_stream(stream(fresh, 3), full[:3])


def test_rng_is_not_consumed(tmp_path):
    images = np.arange(8, dtype=np.uint8).repeat(4).reshape(8, 1, 2, 2)
    source = TranslationSource("t", images, images, images, images, 2, 0, paired=True)
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    source.next(rng)
    assert rng.bit_generator.state == before  # the seed, not the run's draws, decides the order


# ---------------------------------------------------------------- malformed folders

def bad_png(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\nnot really a png")


def truncated_jpeg(path):
    """A JPEG cut in half: its header reads, MindSpore's Decode fills the rest in grey, PIL refuses it."""
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3)).astype(np.uint8)).save(buf, "JPEG")
    with open(path, "wb") as f:
        f.write(buf.getvalue()[:len(buf.getvalue()) // 2])


def test_malformed_folders_are_one_line(tmp_path):
    messages = []  # one UserError line per malformed layout, each naming its file or folder
    def unpaired(name, **kw):
        root = tmp_path / name
        write_unpaired_folder(root, **kw)
        return root

    root = unpaired("missing")
    for f in os.listdir(root / "testB"):
        os.remove(root / "testB" / f)
    os.rmdir(root / "testB")
    messages.append(one_line_error(lambda: folder_source(str(root), 6, 2, 0, False), str(root / "testB"), "missing folder"))

    root = unpaired("empty")
    for f in os.listdir(root / "testA"):
        os.remove(root / "testA" / f)
    messages.append(one_line_error(lambda: folder_source(str(root), 6, 2, 0, False), str(root / "testA"), "no .png"))

    root = unpaired("unreadable")
    bad_png(str(root / "trainB" / "999.png"))
    messages.append(one_line_error(lambda: folder_source(str(root), 6, 2, 0, False), str(root / "trainB" / "999.png"),
                   "not a readable image"))

    root = unpaired("undecodable")
    truncated_jpeg(str(root / "trainA" / "999.jpg"))
    messages.append(one_line_error(lambda: folder_source(str(root), 6, 2, 0, False), str(root / "trainA" / "999.jpg"),
                   "not a readable image"))

    root = unpaired("few", n=(3, 14, 2, 2))
    messages.append(one_line_error(lambda: folder_source(str(root), 6, 4, 0, False), str(root / "trainA"), "fewer than --batch-size 4"))

    root = tmp_path / "paired"
    write_paired_folder(root)
    messages.append(one_line_error(lambda: folder_source(str(root), 8, 13, 0, True), str(root / "train"), "fewer than --batch-size 13"))
    save_png(str(root / "train" / "odd.png"), np.zeros((8, 15, 3), np.uint8))
    messages.append(one_line_error(lambda: folder_source(str(root), 8, 2, 0, True), str(root / "train" / "odd.png"), "odd"))
    os.remove(root / "train" / "odd.png")
    save_png(str(root / "test" / "wide.png"), np.zeros((8, 24, 3), np.uint8))
    messages.append(one_line_error(lambda: folder_source(str(root), 8, 2, 0, True), str(root / "test" / "wide.png"),
                   "not twice its height"))

    root = tmp_path / "no_test"
    write_paired_folder(root, test_name="other")
    messages.append(one_line_error(lambda: folder_source(str(root), 8, 2, 0, True), str(root / "test"), "missing folder"))
    messages.append(one_line_error(lambda: folder_source(str(tmp_path / "nowhere"), 8, 2, 0, True), "is not a directory"))
    messages.append(one_line_error(lambda: folder_source("", 8, 2, 0, False), "needs --data-dir"))
    messages.append(one_line_error(lambda: folder_source(str(tmp_path / "paired"), 8, 2, 0, False), "trainA", "missing folder"))


# ---------------------------------------------------------------- built-in tasks (Fashion-MNIST format)
    assert len(messages) == 12 and len(set(messages)) == 12  # 12 distinct one-line refusals


@pytest.fixture
def fashion(tmp_path):
    """gzip IDX files as downloaded: 300 training images, 100 t10k images, labels i % 10."""
    train, train_labels = write_idx(tmp_path, n=300, gzip=True)
    test, test_labels = write_idx(tmp_path, n=100, seed=1, gzip=True, split="test")
    assert all(name.endswith(".gz") for name in os.listdir(tmp_path))
    return str(tmp_path), train, train_labels.astype(np.int32), test, test_labels.astype(np.int32)


def reference_edges(image):
    """Independent: scipy's Sobel in float64 on [0, 1] pixels, border replicated (mode="nearest")."""
    from scipy import ndimage
    x = image.astype(np.float64) / 255.0
    m = np.hypot(ndimage.sobel(x, axis=1, mode="nearest"), ndimage.sobel(x, axis=0, mode="nearest"))
    if m.max() == 0:
        return np.zeros(image.shape, np.uint8)
    return np.where(m / m.max() >= EDGE_THRESHOLD, 255, 0).astype(np.uint8)


def test_edge_operator_against_scipy(fashion):
    _, train, *_ = fashion
    step = np.zeros((10, 10), np.uint8)
    step[:, 5:] = 200
    for image in [*train[:40], step, np.zeros((10, 10), np.uint8), np.full((9, 7), 77, np.uint8)]:
        np.testing.assert_array_equal(edge_map(image), reference_edges(image))
    got = edge_map(step)
    assert (got[:, [4, 5]] == 255).all() and (got[:, :4] == 0).all() and (got[:, 6:] == 0).all()
    assert not edge_map(np.zeros((6, 6), np.uint8)).any()  # a blank image has no edges
    batch = edge_map(train[:40])
    assert batch.shape == (40, 28, 28) and set(np.unique(batch)) <= {0, 255}
    np.testing.assert_array_equal(batch, np.stack([reference_edges(im) for im in train[:40]]))


def test_edges2fashion_is_paired_and_aligned(fashion):
    data_dir, train, train_labels, test, test_labels = fashion
    source = task_source("edges2fashion", data_dir, 28, 16, 0)
    assert source.paired and source.name == "edges2fashion" and source.num_classes == 10
    assert source.shape_a == source.shape_b == (1, 28, 28)
    np.testing.assert_array_equal(source.train_b[:, 0], train)  # 28 keeps the garments
    np.testing.assert_array_equal(source.test_b[:, 0], test)  # t10k in file order
    np.testing.assert_array_equal(source.test_a[:, 0], np.stack([reference_edges(im) for im in test]))
    np.testing.assert_array_equal(source.labels_a, train_labels)
    np.testing.assert_array_equal(source.labels_b, train_labels)
    np.testing.assert_array_equal(source.test_labels_a, test_labels)
    np.testing.assert_array_equal(source.test_labels_b, test_labels)
    for _ in range(20):  # batch by batch, A is the edge map of B (across epochs of 18 batches)
        a, b = source.next()
        garments = np.rint((b[:, 0] + 1) * 127.5).astype(np.uint8)
        np.testing.assert_array_equal(a[:, 0], edge_map(garments) / 127.5 - 1)
    big = task_source("edges2fashion", data_dir, 32, 16, 0)  # resized by mindspore.dataset, edges after
    assert big.shape_a == big.shape_b == (1, 32, 32)
    np.testing.assert_array_equal(big.train_b, _idx_arrays(train, 32))
    np.testing.assert_array_equal(big.train_a, edge_map(big.train_b))
    np.testing.assert_array_equal(big.test_a, edge_map(big.test_b))


@pytest.mark.parametrize("task,classes,size", [("sneaker2boot", (7, 9), 28), ("trouser2dress", (1, 3), 32)])
def test_class_tasks_pick_classes_in_file_order(fashion, task, classes, size):
    data_dir, train, train_labels, test, test_labels = fashion
    assert TASKS[task][0] == "unpaired"
    source = task_source(task, data_dir, size, 8, 0)
    assert not source.paired and source.num_classes == 10
    assert source.shape_a == source.shape_b == (1, size, size)
    for k, images, labels, test_images, held_out_labels in (
            (classes[0], source.train_a, source.labels_a, source.test_a, source.test_labels_a),
            (classes[1], source.train_b, source.labels_b, source.test_b, source.test_labels_b)):
        assert len(images) == 30 and len(test_images) == 10
        assert (labels == k).all() and (held_out_labels == k).all()
        want_train, want_test = train[train_labels == k], test[test_labels == k]
        if size != 28:
            want_train, want_test = _idx_arrays(want_train, size)[:, 0], _idx_arrays(want_test, size)[:, 0]
        np.testing.assert_array_equal(images[:, 0], want_train)
        np.testing.assert_array_equal(test_images[:, 0], want_test)
    a, b = source.next()
    assert a.shape == b.shape == (8, 1, size, size)
    one_line_error(lambda: task_source(task, data_dir, size, 31, 0), "fewer than --batch-size 31")


def test_task_errors_and_default_dir(fashion, tmp_path, monkeypatch):
    data_dir = fashion[0]
    assert set(TASKS) == {"edges2fashion", "sneaker2boot", "trouser2dress"}
    assert TASKS["edges2fashion"][0] == "paired"
    monkeypatch.setitem(data.images.DEFAULT_DATA_DIRS, "fashion-mnist", str(tmp_path / "absent"))
    message = one_line_error(lambda: task_source("sneaker2boot", "", 28, 4, 0),
                             "--task sneaker2boot reads Fashion-MNIST and needs --data-dir (")
    assert data.images.where_to_get("fashion-mnist") in message  # the source and the Debian package
    monkeypatch.setitem(data.images.DEFAULT_DATA_DIRS, "fashion-mnist", data_dir)
    source = task_source("sneaker2boot", "", 0, 4, 0)  # "" -> the default dir, 0 -> 28
    assert source.shape_a == (1, 28, 28) and len(source.train_a) == 30
    one_line_error(lambda: task_source("horse2zebra", data_dir, 28, 4, 0), "unknown task", "edges2fashion")
    only_train = tmp_path / "only_train"
    write_idx(only_train, n=50, gzip=True)
    one_line_error(lambda: task_source("edges2fashion", str(only_train), 28, 4, 0), "t10k-images-idx3-ubyte")
