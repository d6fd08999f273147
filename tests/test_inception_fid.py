"""Standard FID from a user's InceptionV3 checkpoint (metrics/inception.py, --fid-weights).

Nothing is downloaded: the network gets random weights (fixed seed) and is saved with
mindspore.save_checkpoint, as a user's mindcv checkpoint would be. The expected names and shapes
are read off mindcv/models/inceptionv3.py (the nn.* version its released weights were made with).
"""
import hashlib
import json

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from conftest import checkpoint_arrays, cli_error, run_script
from loops.config import UserError
from metrics.inception import InceptionFeatures, InceptionV3, load_inception, load_weights, preprocess

# 96 BasicConv2d (conv weight + BN gamma/beta/moving_mean/moving_variance) + aux.fc + classifier
NUM_TENSORS, NUM_VALUES = 96 * 5 + 4, 27_197_488  # mindcv's README: 27.20 M params
EXPECTED = {
    "conv1a.conv.weight": (32, 3, 3, 3), "conv1a.bn.gamma": (32,), "conv2b.conv.weight": (64, 32, 3, 3),
    "conv4a.conv.weight": (192, 80, 3, 3), "inception5b.branch1.1.conv.weight": (64, 48, 5, 5),
    "inception5b.branch_pool.1.conv.weight": (32, 192, 1, 1), "inception6a.branch0.conv.weight": (384, 288, 3, 3),
    "inception6b.branch2.4.conv.weight": (192, 128, 1, 7), "inception6e.branch1.2.conv.weight": (192, 192, 7, 1),
    "aux.conv1.conv.weight": (768, 128, 5, 5), "aux.fc.weight": (1000, 768), "aux.fc.bias": (1000,),
    "inception7a.branch1.3.conv.weight": (192, 192, 3, 3), "inception7c.branch2b.conv.weight": (384, 384, 3, 1),
    "inception7c.branch_pool.1.bn.moving_variance": (192,), "classifier.weight": (1000, 2048),
    "classifier.bias": (1000,),
}
TINY_DIGITS = ["--dataset", "digits", "--width", 8, "--z-dim", 8, "--batch-size", 16, "--eval-samples", 32,
               "--log-every", 2, "--r1", 0, "--steps", 2, "--no-progress"]


def randomize(net, seed=0):
    """He-normal convs and varied BatchNorm statistics. MindSpore's default init shrinks the features
    to ~1e-8 over 94 layers, which would make every comparison below pass trivially."""
    rng = np.random.default_rng(seed)
    for p in net.get_parameters():
        shape, name = p.shape, p.name
        if name.endswith("conv.weight"):
            value = rng.normal(0, np.sqrt(2 / np.prod(shape[1:])), shape)
        elif name.endswith(("gamma", "moving_variance")):
            value = rng.uniform(0.8, 1.2, shape)
        elif name.endswith(("beta", "moving_mean")):
            value = rng.uniform(-0.1, 0.1, shape)
        else:  # the two Dense layers
            value = rng.normal(0, 1 / np.sqrt(shape[-1]), shape)
        p.set_data(Tensor(value.astype(np.float32)))
    return net


@pytest.fixture(scope="module")
def inception(tmp_path_factory):
    """(in-memory feature function, its saved checkpoint path)."""
    ms.set_context(mode=ms.GRAPH_MODE)
    net = randomize(InceptionV3())
    path = str(tmp_path_factory.mktemp("inception") / "inception_v3.ckpt")
    ms.save_checkpoint(net, path)
    return InceptionFeatures(net), path


IMAGES = np.random.default_rng(1).uniform(-1, 1, (3, 3, 32, 32)).astype(np.float32)


def test_names_and_shapes_match_mindcv(inception):
    saved = checkpoint_arrays(inception[1])
    assert len(saved) == NUM_TENSORS and sum(v.size for v in saved.values()) == NUM_VALUES
    for name, shape in EXPECTED.items():
        assert saved[name].shape == shape, name
    for suffix in ("conv.weight", "bn.gamma", "bn.beta", "bn.moving_mean", "bn.moving_variance"):
        assert sum(k.endswith(suffix) for k in saved) == 96, suffix


def test_preprocessing_repeats_gray_resizes_and_normalises(graph_mode):
    x = np.stack([np.full((1, 8, 8), -1.0), np.full((1, 8, 8), 1.0)]).astype(np.float32)
    out = ms.jit(preprocess)(Tensor(x)).asnumpy()
    assert out.shape == (2, 3, 299, 299)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(out[0, :, 150, 7], -mean / std, rtol=1e-5)  # [-1, 1] -> [0, 1] -> ImageNet
    np.testing.assert_allclose(out[1, :, 0, 298], (1 - mean) / std, rtol=1e-5)


def test_resize_is_bilinear_with_half_pixel_centres(graph_mode):
    """A horizontal ramp resized to 299: matches numpy's bilinear interpolation (align_corners=False),
    which nearest-neighbour or corner-aligned resizing would not."""
    ramp = np.tile(np.linspace(-1, 1, 8, dtype=np.float32), (8, 1))[None, None]
    row = ms.jit(preprocess)(Tensor(np.repeat(ramp, 3, axis=1))).asnumpy()[0, 0, 100]
    src = np.clip((np.arange(299) + 0.5) * 8 / 299 - 0.5, 0, 7)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, 7)
    values = ramp[0, 0, 0]
    expected = values[lo] + (src - lo) * (values[hi] - values[lo])
    expected = ((expected + 1) / 2 - 0.485) / 0.229  # [-1, 1] -> [0, 1] -> ImageNet, red channel
    np.testing.assert_allclose(row, expected, rtol=1e-4, atol=1e-4)


def test_features_are_2048_finite_deterministic_for_gray_and_rgb(inception):
    features = inception[0]
    gray = IMAGES[:2, :1, :8, :8]
    a = features(gray)
    assert a.shape == (2, 2048) and np.isfinite(a).all() and a.std() > 1e-3
    np.testing.assert_array_equal(a, features(gray))
    np.testing.assert_array_equal(a, features(np.repeat(gray, 3, axis=1)))  # gray == repeated to RGB
    b = features(IMAGES, batch=2)  # 32x32 RGB, two chunks (the second padded)
    assert b.shape == (3, 2048) and np.isfinite(b).all() and not np.allclose(b[0], b[1])
    with pytest.raises(UserError, match="1 or 3"):
        features(IMAGES[:, :2])


def test_logits_are_the_classifier_on_the_same_pool3(inception):
    """is_inception's input: mindcv's 1000 ImageNet logits, from the pass that gives the features."""
    features = inception[0]
    feats, logits = features.with_logits(IMAGES, batch=2)
    np.testing.assert_array_equal(feats, features(IMAGES, batch=2))
    weight, bias = (features.net.classifier.weight.asnumpy(), features.net.classifier.bias.asnumpy())
    assert logits.shape == (3, 1000)
    np.testing.assert_allclose(logits, feats @ weight.T + bias, rtol=1e-4, atol=1e-4)


class StandIn:
    """A numpy stand-in with InceptionFeatures' interface (2048-d features, 1000 logits): the evaluator's
    wiring without 299x299 passes (the real network's logits are tested above, end to end below)."""
    weights, sha256 = "stand_in.ckpt", "0123456789ab"

    def __init__(self):
        rng = np.random.default_rng(4)
        self.w1, self.w2 = rng.normal(size=(64, 2048)), rng.normal(size=(2048, 1000)) / 8
        self.seen = []

    def __call__(self, images):
        return self.with_logits(images)[0]

    def with_logits(self, images):
        feats = np.tanh(images.reshape(len(images), -1) @ self.w1)
        self.seen.append(feats @ self.w2)
        return feats, self.seen[-1]


def test_evaluator_adds_inception_score_reference_and_protocol(graph_mode):
    from data.digits import digits
    from metrics.evaluate import ImageEvaluator
    from metrics.image import inception_score, softmax64
    stand_in = StandIn()
    evaluate = ImageEvaluator(digits(64, 0), 300, 0, log=lambda *a: None, inception=stand_in)
    samples = np.random.default_rng(2).uniform(-1, 1, (300, 1, 8, 8)).astype(np.float32)
    out = evaluate(samples)
    expected = inception_score(softmax64(stand_in.seen[-1]), 10)
    assert (out["is_inception"], out["is_inception_std"]) == pytest.approx(expected, rel=1e-12)
    assert 1 <= out["is_inception"] <= 1000 and out["is_inception_std"] > 0
    assert 0 < out["fid_inception_reference"] < out["fid_inception"]  # noise is further than real from real
    assert stand_in.seen[0].shape == (600, 1000)  # the real features: 300 evaluated + 300 disjoint for the reference
    p = evaluate.protocol
    assert p["is_splits"] == 10 and p["real"] == 300 and p["fid_reference_n"] == 300
    assert p["inception"]["weights"] == "stand_in.ckpt" and p["inception"]["sha256"] == "0123456789ab"
    assert {"fid_inception", "fid_inception_reference", "is_inception"} <= set(p["inception"]["scores"])


def test_checkpoint_round_trip_and_mindcv_mint_names(inception, tmp_path):
    features, path = inception
    np.testing.assert_allclose(load_inception(path)(IMAGES, batch=2), features(IMAGES, batch=2), rtol=1e-5)
    # mindcv's newer mint layers name BatchNorm weight / bias / running_mean / running_var
    renames = {"gamma": "weight", "beta": "bias", "moving_mean": "running_mean", "moving_variance": "running_var"}
    saved = checkpoint_arrays(path)
    mint = [{"name": k.rsplit(".", 1)[0] + "." + renames[k.rsplit(".", 1)[1]] if ".bn." in k else k,
             "data": Tensor(v)} for k, v in saved.items()]
    ms.save_checkpoint(mint, str(tmp_path / "mint.ckpt"))
    net = InceptionV3()
    load_weights(str(tmp_path / "mint.ckpt"), net)
    for p in net.get_parameters():
        np.testing.assert_array_equal(p.asnumpy(), saved[p.name], err_msg=p.name)


def test_bad_checkpoints_name_the_parameter_or_file(inception, tmp_path):
    saved = checkpoint_arrays(inception[1])
    wrong = dict(saved, **{"inception6b.branch1.1.conv.weight": np.zeros((128, 128, 7, 1), np.float32)})
    missing = {k: v for k, v in saved.items() if k != "aux.fc.bias"}
    cases = {"wrong.ckpt": (wrong, r"'inception6b.branch1.1.conv.weight' has shape \(128, 128, 7, 1\), "
                                   r"InceptionV3 wants \(128, 128, 1, 7\)"),
             "missing.ckpt": (missing, "has no parameter 'aux.fc.bias'")}
    for name, (arrays, message) in cases.items():
        ms.save_checkpoint([{"name": k, "data": Tensor(v)} for k, v in arrays.items()], str(tmp_path / name))
        with pytest.raises(UserError, match=message):
            load_inception(str(tmp_path / name))
    (tmp_path / "junk.ckpt").write_bytes(np.random.default_rng(0).bytes(5000))
    with pytest.raises(UserError, match="junk.ckpt is not a readable MindSpore checkpoint"):
        load_inception(str(tmp_path / "junk.ckpt"))
    with pytest.raises(UserError, match="nowhere.ckpt does not exist"):
        load_inception(str(tmp_path / "nowhere.ckpt"))


def test_metrics_cli_writes_fid_inception_and_rejects_bad_weights(inception, tmp_path, capsys):
    from metrics.__main__ import main
    run = tmp_path / "run"
    run_script("train_gan.py", "--run-dir", run, *TINY_DIGITS)
    code, _ = cli_error(main, [run, "--num", 16, "--fid-weights", inception[1]], capsys)
    assert code == 0
    written = (run / "metrics.json").read_bytes()
    metrics = json.loads(written)
    assert np.isfinite(metrics["fid_inception"]) and metrics["fid_inception"] >= 0
    assert np.isfinite(metrics["fid"])  # the domain-classifier metrics are still there
    assert 1 <= metrics["is_inception"] <= 1000 and metrics["is_inception_std"] >= 0
    assert np.isfinite(metrics["fid_inception_reference"]) and metrics["fid_inception_reference"] > 0
    digest = hashlib.sha256(open(inception[1], "rb").read()).hexdigest()
    assert metrics["protocol"]["inception"]["weights"] == "inception_v3.ckpt"
    assert digest.startswith(metrics["protocol"]["inception"]["sha256"]) and metrics["protocol"]["is_splits"] == 10
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    for bad in (tmp_path / "missing.ckpt", tmp_path / "junk.ckpt"):
        code, lines = cli_error(main, [run, "--num", 32, "--fid-weights", bad], capsys)
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: --fid-weights") and bad.name in lines[0]
        assert (run / "metrics.json").read_bytes() == written
