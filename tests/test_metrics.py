"""Metrics against slow numpy references, and sanity on real data: real vs held-out real is close,
noise is far, a one-class generator is flagged; the real-vs-real FID reference and the protocol."""
import os

import numpy as np
import pytest
from scipy import linalg

from metrics.image import class_coverage, class_score, fid, inception_score, kid, prdc, softmax64
from metrics.toy import mode_stats

RNG = np.random.default_rng(0)
A = RNG.normal(size=(300, 6))
B = RNG.normal(size=(250, 6)) * 1.5 + 0.7


def test_fid_matches_the_symmetric_formula():
    ca, cb = np.cov(A, rowvar=False), np.cov(B, rowvar=False)
    root_a = linalg.sqrtm(ca).real
    expected = ((A.mean(0) - B.mean(0)) ** 2).sum() + np.trace(ca + cb) - 2 * np.trace(linalg.sqrtm(root_a @ cb @ root_a).real)
    assert fid(A, B) == pytest.approx(expected, rel=1e-6)
    assert abs(fid(A, A)) < 1e-6


def test_fid_works_on_a_scipy_without_sqrtm_disp(monkeypatch):
    """SciPy 1.18 drops sqrtm's `disp` argument (deprecated in 1.17): the FID must not pass it."""
    real_sqrtm = linalg.sqrtm

    def sqrtm_of_scipy_1_18(matrix, blocksize=64):  # no disp: passing it is a TypeError
        return real_sqrtm(matrix, blocksize=blocksize)
    expected = fid(A, B)
    monkeypatch.setattr(linalg, "sqrtm", sqrtm_of_scipy_1_18)
    assert fid(A, B) == expected


def test_fid_with_fewer_samples_than_dimensions_is_exact():
    """n < d (InceptionV3's 2048-d at small n): singular covariances, an exact nuclear norm instead of
    a d x d sqrtm; the same value on both sides of n = d."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(40, 64)), rng.normal(size=(30, 64)) * 1.5 + 0.7
    ca, cb = np.cov(x, rowvar=False), np.cov(y, rowvar=False)
    expected = ((x.mean(0) - y.mean(0)) ** 2).sum() + np.trace(ca + cb) - 2 * np.trace(linalg.sqrtm(ca @ cb).real)
    assert fid(x, y) == pytest.approx(expected, rel=1e-7)
    assert abs(fid(x, x)) < 1e-9
    # zero dimensions change nothing: A, B padded to 306-d (> 250 samples) take the n < d path
    assert fid(*(np.pad(m, ((0, 0), (0, 300))) for m in (A, B))) == pytest.approx(fid(A, B), rel=1e-9)


def test_kid_matches_a_loop_reference():
    def k(x, y):
        return (x @ y / 6 + 1) ** 3
    x, y = A[:40], B[:40]
    m = 40
    kxx = sum(k(x[i], x[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    kyy = sum(k(y[i], y[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    kxy = sum(k(x[i], y[j]) for i in range(m) for j in range(m)) / (m * m)
    assert kid(x, y, subsets=1, subset_size=40) == pytest.approx(kxx + kyy - 2 * kxy, rel=1e-9)


def test_prdc_matches_a_loop_reference():
    real, fake, k = A[:30], B[:25], 5
    dist = lambda p, q: np.linalg.norm(p - q)  # noqa: E731
    r_rad = [sorted(dist(r, s) for s in real)[k] for r in real]
    f_rad = [sorted(dist(f, s) for s in fake)[k] for f in fake]
    precision = np.mean([any(dist(f, r) < r_rad[i] for i, r in enumerate(real)) for f in fake])
    recall = np.mean([any(dist(r, f) < f_rad[j] for j, f in enumerate(fake)) for r in real])
    density = np.mean([sum(dist(f, r) < r_rad[i] for i, r in enumerate(real)) for f in fake]) / k
    coverage = np.mean([min(dist(r, f) for f in fake) < r_rad[i] for i, r in enumerate(real)])
    got = prdc(real, fake, k)
    assert got == pytest.approx({"precision": precision, "recall": recall, "density": density, "coverage": coverage})


def test_class_score_and_coverage():
    k = 4
    uniform = np.full((100, k), 1 / k)
    onehot = np.eye(k)[np.arange(100) % k]
    assert class_score(uniform) == pytest.approx(1.0)
    assert class_score(onehot) == pytest.approx(k, rel=1e-6)
    assert class_coverage(onehot) == {"classes_covered": 4, "class_kl": pytest.approx(0.0, abs=1e-12)}
    collapsed = np.eye(k)[np.zeros(100, int)]
    assert class_coverage(collapsed) == {"classes_covered": 1, "class_kl": pytest.approx(np.log(k))}


def reference_inception_score(probs, splits):
    """Salimans et al.'s improved-gan loop, literally, in float64."""
    preds = np.asarray(probs, np.float64)
    scores = []
    for i in range(splits):
        part = preds[(i * preds.shape[0] // splits):((i + 1) * preds.shape[0] // splits), :]
        kl = part * (np.log(part) - np.log(np.expand_dims(np.mean(part, 0), 0)))
        kl = np.mean(np.sum(kl, 1))
        scores.append(np.exp(kl))
    return np.mean(scores), np.std(scores)


def test_inception_score_matches_the_original_formula():
    rng = np.random.default_rng(3)
    for n, k, splits in ((1003, 10, 10), (500, 1000, 10), (64, 7, 3)):
        probs = rng.dirichlet(np.full(k, 0.3), size=n)  # not divisible by the splits: uneven boundaries
        mean, std = inception_score(probs, splits)
        expected = reference_inception_score(probs, splits)
        assert (mean, std) == (pytest.approx(expected[0], rel=1e-12), pytest.approx(expected[1], rel=1e-9))
        assert 1 <= mean <= k and std > 0
    probs = rng.dirichlet(np.ones(10), size=300)
    assert inception_score(probs, 1) == (pytest.approx(class_score(probs), rel=1e-9), 0.0)  # one split: class_score


def test_inception_score_bounds_constant_and_confident_balanced():
    k, n = 10, 1000
    constant = np.tile(np.random.default_rng(0).dirichlet(np.ones(k)), (n, 1))
    assert inception_score(constant) == (pytest.approx(1.0, abs=1e-12), pytest.approx(0.0, abs=1e-12))
    # confident (softmax of a margin of 30) and balanced within every split: IS -> k
    logits = 30.0 * np.eye(k)[np.arange(n) % k]
    mean, std = inception_score(softmax64(logits))
    assert mean == pytest.approx(k, rel=1e-9) and std < 1e-9
    one_hot = np.eye(k)[np.arange(n) % k]  # exact zeros: 0 log 0 counts 0, no nan
    assert inception_score(one_hot) == (pytest.approx(k), pytest.approx(0.0, abs=1e-12))
    with pytest.raises(ValueError, match="at least 10 samples"):
        inception_score(one_hot[:5])


def test_softmax64_is_a_float64_softmax_without_underflow():
    logits = np.array([[0.0, 1.0, 2.0], [1000.0, 0.0, -1000.0]], np.float32)
    p = softmax64(logits)
    assert p.dtype == np.float64 and np.allclose(p.sum(1), 1)
    np.testing.assert_allclose(p[0], np.exp([0, 1, 2]) / np.exp([0, 1, 2]).sum(), rtol=1e-12)
    assert p[1, 0] == 1.0 and np.isfinite(inception_score(np.repeat(p, 10, axis=0))[0])


def test_toy_mode_stats():
    centers = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    near = np.repeat(centers[:2], 50, axis=0) + 0.01
    far = np.full((10, 2), 5.0)
    stats = mode_stats(np.concatenate([near, far]), centers, std=0.02)
    assert stats["modes"] == 2 and stats["hq"] == pytest.approx(100 / 110)
    assert stats["mode_counts"] == [50, 50, 0]
    assert stats["reverse_kl"] == pytest.approx(np.log(3 / 2))  # p = (1/2, 1/2, 0) vs uniform 1/3
    assert stats["modes_pacgan"] == 2
    # one high-quality sample on the third mode: PacGAN's count takes it, ours needs 5% of n / K
    lone = mode_stats(np.concatenate([near, far, centers[2:] + 0.01]), centers, std=0.02)
    assert lone["modes_pacgan"] == 3 and lone["modes"] == 2


@pytest.mark.slow
def test_digit_metrics_separate_real_noise_and_collapse(graph_mode):
    from data.digits import digits
    from metrics.evaluate import ImageEvaluator
    source = digits(64, 0)
    # A random split, so both halves are samples of one distribution (the file is ordered by writer).
    order = np.random.default_rng(0).permutation(len(source.images))
    train, rest = order[: len(order) // 2], order[len(order) // 2:]
    held_out = source.images[rest]
    source.images, source.labels = source.images[train], source.labels[train]
    evaluate = ImageEvaluator(source, 800, 0, log=lambda *a: None)
    assert evaluate.accuracy > 0.9
    real = evaluate(held_out[:800])
    noise = evaluate(np.random.default_rng(1).uniform(-1, 1, (800, 1, 8, 8)).astype(np.float32))
    one_class = held_out[np.argmax(evaluate.extract(held_out)[1], axis=1) == 3]
    collapsed = evaluate(one_class[np.random.default_rng(2).integers(0, len(one_class), 800)])
    assert real["fid"] < 0.05 * noise["fid"]
    # Two samples of one distribution: coverage near 1 - 2**-k = 0.97 and density near 1 (Naeem et al.
    # 2020); measured 0.97 / 0.98 / 1.00 / 0.99. (A first-half / second-half split mixes writers and
    # gave recall 0.899 on CI: a real distribution shift, not a metric bug.)
    assert real["precision"] > 0.9 and real["recall"] > 0.9 and real["classes_covered"] == 10
    assert real["coverage"] > 0.9 and 0.8 < real["density"] < 1.25
    assert noise["precision"] < 0.2 and noise["recall"] < 0.2 and noise["coverage"] < 0.2
    assert collapsed["classes_covered"] == 1 and collapsed["recall"] < 0.3 and collapsed["fid"] > real["fid"]


@pytest.fixture(scope="module")
def digits_source():
    from data.digits import digits
    return digits(64, 0)


def quiet(*args):
    pass


def test_fid_reference_is_small_positive_stable_and_stated(digits_source, graph_mode):
    from metrics.evaluate import ImageEvaluator
    evaluate = ImageEvaluator(digits_source, 2500, 0, log=quiet)  # the training default: --eval-samples 2500
    ref = evaluate.fid_reference
    noise = evaluate(np.random.default_rng(1).uniform(-1, 1, (2500, 1, 8, 8)).astype(np.float32))
    assert noise["fid_reference"] == ref and 0 < ref < 0.05 * noise["fid"]  # measured 3.8 vs 432
    assert ImageEvaluator(digits_source, 2500, 0, log=quiet).fid_reference == ref  # same seed: same value
    assert ImageEvaluator(digits_source, 2500, 1, log=quiet).fid_reference != ref  # other subsets
    # 1797 images < 2 x 2500: the evaluation uses all of them, the reference two disjoint halves
    p = evaluate.protocol
    assert p["name"] == "quick" and p["generated"] == 2500 and p["real"] == 1797 and p["fid_reference_n"] == 898
    assert p["real_split"] == "train" and p["seed"] == 0 and "inception" not in p
    assert p["classifier"]["test_accuracy"] == evaluate.accuracy > 0.9 and p["classifier"]["classes"] == 10
    assert {"fid", "fid_reference", "kid", "precision", "class_score"} <= set(p["classifier"]["scores"])
    assert p["prdc"] == {"k": 5, "real": 1797, "generated": 2500}


def test_fid_reference_subsets_are_disjoint_and_of_the_evaluation_size(digits_source, graph_mode):
    from metrics.classifier import to_float
    from metrics.evaluate import ImageEvaluator
    evaluate = ImageEvaluator(digits_source, 400, 5, log=quiet)
    assert evaluate.n_real == 400 and evaluate.reference_n == 400
    perm = np.random.default_rng([5, 9]).permutation(len(digits_source.images))
    first, second = (evaluate.extract(to_float(digits_source.images[perm[a:b]]))[0] for a, b in ((0, 400), (400, 800)))
    np.testing.assert_array_equal(evaluate.real_features, first)  # the evaluation's own real subset ...
    assert evaluate.fid_reference == pytest.approx(fid(first, second), rel=1e-9)  # ... against 400 others
    # at n = 400 the reference is larger than at 898 per side (FID's small-sample bias)
    assert evaluate.fid_reference > ImageEvaluator(digits_source, 2500, 5, log=quiet).fid_reference
    samples = to_float(digits_source.images[perm[800:1200]])
    assert evaluate(samples)["fid"] < 3 * evaluate.fid_reference  # held-out real images score about the reference
    paper = ImageEvaluator(digits_source, 64, 5, log=quiet, protocol="paper")
    paper(samples[:64])
    assert (paper.n_real, paper.reference_n) == (1797, 898)
    assert paper.protocol["name"] == "paper" and paper.protocol["generated"] == 64 and paper.protocol["real"] == 1797


def test_class_accuracy_overall_per_class_and_worst():
    from metrics.evaluate import class_accuracy
    asked = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    predicted = np.array([0, 0, 0, 1, 1, 0, 2, 2])  # class 0: 3/4, class 1: 1/2, class 2: 2/2
    out = class_accuracy(predicted, asked, 4)
    assert out["class_accuracy"] == 6 / 8
    assert out["class_accuracy_per_class"] == [0.75, 0.5, 1.0, None]  # class 3 never asked for
    assert out["class_accuracy_min"] == 0.5


def test_digits_use_the_shipped_reference_classifier(tmp_path, monkeypatch, graph_mode):
    """A trained classifier's weights follow the process's MindSpore random state, so the digits and
    MNIST-format classifiers the numbers of docs/results.md were measured on (docs/metrics.md) ship in
    metrics/reference/ and are read before any cache: an empty cache gives those weights, and nothing
    is trained."""
    import os

    import mindspore as ms

    from data.digits import digits
    from metrics import classifier
    monkeypatch.setenv("GANLAB_CACHE", str(tmp_path / "empty"))
    source = digits(64, 0)
    key = classifier.data_key(source.images, source.labels, version=1)
    shipped = os.path.join(classifier.REFERENCE_DIR, f"classifier-{key}.ckpt")
    assert os.path.isfile(shipped)  # the reference's key is the digits' (version-1) data key: it is reachable
    reference = ms.load_checkpoint(shipped)
    net, accuracy = classifier.load_or_train(source.images, source.labels, 10,
                                             log=lambda m: pytest.fail(f"trained instead of loading: {m}"))
    names = [p.name for p in net.get_parameters()]
    assert names and set(names) <= set(reference)
    for p in net.get_parameters():  # every weight from the file: no random initial value is left
        np.testing.assert_array_equal(p.asnumpy(), reference[p.name].asnumpy(), err_msg=p.name)
    assert accuracy > 0.95 and net.version == 1  # the classifier the documented numbers were measured on
    assert not (tmp_path / "empty").exists()  # nothing was cached: nothing was trained


def test_a_corrupt_cached_classifier_is_trained_again_and_replaced(tmp_path, monkeypatch, graph_mode):
    from metrics import classifier
    from fixtures import pattern
    monkeypatch.setenv("GANLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(classifier, "TRAIN_STEPS", 300)  # half the real count: the same code, less CPU
    rng = np.random.default_rng(0)
    labels = (np.arange(200) % 10).astype(np.uint8)  # 8x8: cheap to train; no shipped reference for these
    images = np.stack([pattern(k, 8, rng) for k in labels])[:, None]
    path = tmp_path / f"classifier-{classifier.data_key(images, labels)}.ckpt"
    path.write_bytes(b"not a checkpoint")
    said = []
    net, accuracy = classifier.load_or_train(images, labels, 10, log=said.append)
    assert "corrupt" in said[0] and "not used" in said[0] and "training the metrics classifier" in said[1], said
    assert [l.split(",")[0].strip() for l in said if "step " in l] == [  # progress while it trains
        f"metrics classifier: step {k}/300" for k in range(100, 301, 100)]
    assert said[-1].strip() == f"metrics classifier: held-out accuracy {accuracy:.3f}"
    assert path.read_bytes() != b"not a checkpoint"  # replaced by the newly trained classifier ...
    reloaded, again = classifier.load_or_train(images, labels, 10, log=lambda m: pytest.fail(m))
    assert again == accuracy  # ... which is read back without training


def test_classifier_initial_weights_follow_its_seed_not_the_processs_random_state(graph_mode):
    """Version 1 drew the classifier's first weights from MindSpore's global random state, so two
    machines could train two classifiers from the same data; version 2 seeds them itself."""
    import mindspore as ms
    from metrics import classifier
    nets = []
    for global_seed, seed in ((1, 0), (2, 0), (1, 5)):
        ms.set_seed(global_seed)
        net = classifier.Classifier((1, 8, 8), 10)
        classifier.seed_weights(net, seed)
        nets.append([p.asnumpy() for p in net.get_parameters()])
    assert all(np.array_equal(a, b) for a, b in zip(nets[0], nets[1]))  # another global seed: the same net
    assert all(not np.array_equal(a, b) for a, b in zip(nets[0], nets[2]))  # another seed of its own: another
    first = nets[0][0]  # conv 1 -> 32, 3x3: fan-in 9
    assert np.abs(first).max() <= 1 / 3 and np.abs(first).max() > 0.3 and abs(first.mean()) < 0.05
    assert classifier.data_key(np.zeros((2, 1, 8, 8), np.uint8), np.zeros(2, np.uint8)) != classifier.data_key(
        np.zeros((2, 1, 8, 8), np.uint8), np.zeros(2, np.uint8), version=1)  # a version-1 cache is not reused


def test_pixel_scores_are_knn_precision_and_recall_of_flattened_images():
    """An exact copy of the held-out images scores 1 / 1; images from elsewhere in pixel space 0 / 0;
    a generator that makes one of the real images over and over: precision 1, recall near 0."""
    from metrics.evaluate import flat_pixels, pixel_scores
    rng = np.random.default_rng(0)
    real = rng.integers(0, 256, (60, 1, 6, 6)).astype(np.uint8)
    as_float = real.astype(np.float32) / 127.5 - 1
    assert flat_pixels(real).shape == (60, 36) and np.allclose(flat_pixels(real), flat_pixels(as_float))
    assert pixel_scores(flat_pixels(real), flat_pixels(as_float)) == {"pixel_precision": 1.0, "pixel_recall": 1.0}
    far = np.full((60, 1, 6, 6), 5.0, np.float32)  # outside [-1, 1]: no real ball reaches it
    assert pixel_scores(flat_pixels(real), flat_pixels(far), "_x") == {"pixel_precision_x": 0.0, "pixel_recall_x": 0.0}
    collapsed = np.repeat(as_float[:1], 60, axis=0)
    scores = pixel_scores(flat_pixels(real), flat_pixels(collapsed))
    assert scores["pixel_precision"] == 1.0 and scores["pixel_recall"] <= 1 / 60


def test_reference_classifier_tool_writes_what_load_or_train_then_reads(tmp_path, monkeypatch, capsys, graph_mode):
    """tools/reference_classifier.py on an MNIST-format directory with a test split: one line with both
    accuracies, and a file under the data key that load_or_train reads (as version 2) before any cache."""
    from data.images import load
    from fixtures import write_idx
    from metrics import classifier
    write_idx(tmp_path / "data", n=200, size=8)
    write_idx(tmp_path / "data", n=50, size=8, seed=1, split="test", gzip=True)
    from tools import reference_classifier
    monkeypatch.setattr(classifier, "TRAIN_STEPS", 200)  # in-process and shorter: the same code, less CPU
    assert reference_classifier.main(["--dataset", "mnist", "--data-dir", str(tmp_path / "data"),
                                      "--image-size", "8", "--out", str(tmp_path / "ref")]) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("mnist: held-out accuracy ") and "test-split accuracy" in last and "(50 images)" in last
    assert "metrics classifier: step 200/200" in out  # its progress
    images, labels, classes = load("mnist", str(tmp_path / "data"), 8)
    name = f"classifier-{classifier.data_key(images, labels)}.ckpt"
    assert os.listdir(tmp_path / "ref") == [name] and last.endswith(str(tmp_path / "ref" / name))
    monkeypatch.setattr(classifier, "REFERENCE_DIR", str(tmp_path / "ref"))
    monkeypatch.setenv("GANLAB_CACHE", str(tmp_path / "cache"))
    net, accuracy = classifier.load_or_train(images, labels, classes, log=lambda m: pytest.fail(m))
    assert net.version == 2 and f"held-out accuracy {accuracy:.4f}" in last
