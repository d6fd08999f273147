"""Standard FID features: InceptionV3 pool3 (2048-d) from a user's mindcv `inception_v3` checkpoint.

Nothing is downloaded here. `python -m metrics RUN --fid-weights FILE` takes a MindSpore .ckpt of
mindcv's `inception_v3` (ImageNet, e.g. mindcv's released `inception_v3-38f67890.ckpt`); the network
below copies mindcv's architecture and parameter names (mindcv/models/inceptionv3.py, the
`nn.Conv2d` / `nn.BatchNorm2d` version its released weights were trained with: `conv1a.conv.weight`,
`conv1a.bn.gamma`, ..., `aux.fc.weight`, `classifier.weight`), so the file loads with strict name and
shape checks. Checkpoints saved by mindcv's newer `mint` version (BatchNorm named weight / bias /
running_mean / running_var) are renamed back, as mindcv's own loader does the other way round.

Preprocessing, images (N, C, H, W) in [-1, 1]: 1 channel is repeated to 3; bilinear resize to
299x299 (align_corners=False, no antialias); then mindcv's ImageNet normalisation, which its
inception_v3 was trained with (mindcv/data/constants.py: mean 255*(0.485, 0.456, 0.406), std
255*(0.229, 0.224, 0.225) on the [0, 255] scale, i.e. (x01 - 0.485) / 0.229 on [0, 1]). Features
are the global average pool before the classifier, in eval mode (BatchNorm running statistics).

Inception Score (metrics/evaluate.py: is_inception): the softmax over this network's 1000 ImageNet
logits (mindcv's `classifier`, on the same pool3 features), computed in float64. The original
TF-Inception graph of Salimans et al. (and torch-fidelity / Mimicry / StudioGAN, which reuse it) has
1008 outputs (1000 classes + 8 unused) and takes the softmax over all 1008; mindcv's network has no
such extra outputs, so the IS here is over 1000 classes: a different network, close to but not
identical with published IS values, like fid_inception.

Honesty note: this is the FID formula on an InceptionV3 pool3, but NOT the TF-Inception FID of
Heusel et al. that papers report (pytorch-fid / TTUR use a ported 2015 TF graph with its own weights,
[-1, 1] input scaling and resize). Numbers from mindcv's weights are close to, not identical with,
published FIDs: compare them within this project and with other FIDs computed on mindcv's weights.
"""
import hashlib
import os

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from loops.config import UserError
from loops.step import maybe_jit

SIZE = 299
BATCH = 16  # images per compiled call; the last chunk is padded, so one shape compiles once
MEAN = (0.485, 0.456, 0.406)  # mindcv's IMAGENET_DEFAULT_MEAN / 255
STD = (0.229, 0.224, 0.225)
# mindcv's mint-era BatchNorm names -> the nn.BatchNorm2d names used here
MINT_BN = {".bn.weight": ".bn.gamma", ".bn.bias": ".bn.beta", ".bn.running_mean": ".bn.moving_mean",
           ".bn.running_var": ".bn.moving_variance"}


class BasicConv2d(nn.Cell):
    """conv (no bias; MindSpore's default pad_mode 'same') + BatchNorm(eps 1e-3) + ReLU, as mindcv."""

    def __init__(self, cin, cout, kernel_size=1, stride=1, pad_mode="same"):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size, stride, pad_mode=pad_mode, has_bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001, momentum=0.9997)
        self.relu = nn.ReLU()

    def construct(self, x):
        return self.relu(self.bn(self.conv(x)))


def seq(*cells):
    return nn.SequentialCell(list(cells))


def avg_pool_branch(cin, cout):
    # 'same' averages over the in-image pixels only (TF style), as when mindcv's released weights were
    # trained; mindcv's later mint version (count_include_pad=True) would count the zero padding
    return seq(nn.AvgPool2d(kernel_size=3, pad_mode="same"), BasicConv2d(cin, cout))


class InceptionA(nn.Cell):
    def __init__(self, cin, pool_features):
        super().__init__()
        self.branch0 = BasicConv2d(cin, 64)
        self.branch1 = seq(BasicConv2d(cin, 48), BasicConv2d(48, 64, 5))
        self.branch2 = seq(BasicConv2d(cin, 64), BasicConv2d(64, 96, 3), BasicConv2d(96, 96, 3))
        self.branch_pool = avg_pool_branch(cin, pool_features)

    def construct(self, x):
        return ops.concat((self.branch0(x), self.branch1(x), self.branch2(x), self.branch_pool(x)), axis=1)


class InceptionB(nn.Cell):
    def __init__(self, cin):
        super().__init__()
        self.branch0 = BasicConv2d(cin, 384, 3, stride=2, pad_mode="valid")
        self.branch1 = seq(BasicConv2d(cin, 64), BasicConv2d(64, 96, 3),
                           BasicConv2d(96, 96, 3, stride=2, pad_mode="valid"))
        self.branch_pool = nn.MaxPool2d(kernel_size=3, stride=2)

    def construct(self, x):
        return ops.concat((self.branch0(x), self.branch1(x), self.branch_pool(x)), axis=1)


class InceptionC(nn.Cell):
    def __init__(self, cin, c7):
        super().__init__()
        self.branch0 = BasicConv2d(cin, 192)
        self.branch1 = seq(BasicConv2d(cin, c7), BasicConv2d(c7, c7, (1, 7)), BasicConv2d(c7, 192, (7, 1)))
        self.branch2 = seq(BasicConv2d(cin, c7), BasicConv2d(c7, c7, (7, 1)), BasicConv2d(c7, c7, (1, 7)),
                           BasicConv2d(c7, c7, (7, 1)), BasicConv2d(c7, 192, (1, 7)))
        self.branch_pool = avg_pool_branch(cin, 192)

    def construct(self, x):
        return ops.concat((self.branch0(x), self.branch1(x), self.branch2(x), self.branch_pool(x)), axis=1)


class InceptionD(nn.Cell):
    def __init__(self, cin):
        super().__init__()
        self.branch0 = seq(BasicConv2d(cin, 192), BasicConv2d(192, 320, 3, stride=2, pad_mode="valid"))
        self.branch1 = seq(BasicConv2d(cin, 192), BasicConv2d(192, 192, (1, 7)), BasicConv2d(192, 192, (7, 1)),
                           BasicConv2d(192, 192, 3, stride=2, pad_mode="valid"))
        self.branch_pool = nn.MaxPool2d(kernel_size=3, stride=2)

    def construct(self, x):
        return ops.concat((self.branch0(x), self.branch1(x), self.branch_pool(x)), axis=1)


class InceptionE(nn.Cell):
    def __init__(self, cin):
        super().__init__()
        self.branch0 = BasicConv2d(cin, 320)
        self.branch1 = BasicConv2d(cin, 384)
        self.branch1a = BasicConv2d(384, 384, (1, 3))
        self.branch1b = BasicConv2d(384, 384, (3, 1))
        self.branch2 = seq(BasicConv2d(cin, 448), BasicConv2d(448, 384, 3))
        self.branch2a = BasicConv2d(384, 384, (1, 3))
        self.branch2b = BasicConv2d(384, 384, (3, 1))
        self.branch_pool = avg_pool_branch(cin, 192)

    def construct(self, x):
        x1 = self.branch1(x)
        x2 = self.branch2(x)
        return ops.concat((self.branch0(x), self.branch1a(x1), self.branch1b(x1), self.branch2a(x2),
                           self.branch2b(x2), self.branch_pool(x)), axis=1)


class InceptionAux(nn.Cell):
    """The auxiliary head: unused for features, present so the checkpoint's aux.* parameters load."""

    def __init__(self, cin, num_classes):
        super().__init__()
        self.avg_pool = nn.AvgPool2d(5, stride=3, pad_mode="valid")
        self.conv0 = BasicConv2d(cin, 128)
        self.conv1 = BasicConv2d(128, 768, 5, pad_mode="valid")
        self.flatten = nn.Flatten()
        self.fc = nn.Dense(cin, num_classes)

    def construct(self, x):
        return self.fc(self.flatten(self.conv1(self.conv0(self.avg_pool(x)))))


class InceptionV3(nn.Cell):
    """mindcv's InceptionV3 (aux_logits=True); `pool3(x)` gives the FID features."""

    def __init__(self, num_classes=1000, in_channels=3):
        super().__init__()
        self.conv1a = BasicConv2d(in_channels, 32, 3, stride=2, pad_mode="valid")
        self.conv2a = BasicConv2d(32, 32, 3, pad_mode="valid")
        self.conv2b = BasicConv2d(32, 64, 3)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.conv3b = BasicConv2d(64, 80)
        self.conv4a = BasicConv2d(80, 192, 3, pad_mode="valid")
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.inception5b = InceptionA(192, pool_features=32)
        self.inception5c = InceptionA(256, pool_features=64)
        self.inception5d = InceptionA(288, pool_features=64)
        self.inception6a = InceptionB(288)
        self.inception6b = InceptionC(768, c7=128)
        self.inception6c = InceptionC(768, c7=160)
        self.inception6d = InceptionC(768, c7=160)
        self.inception6e = InceptionC(768, c7=192)
        self.aux = InceptionAux(768, num_classes)
        self.inception7a = InceptionD(768)
        self.inception7b = InceptionE(1280)
        self.inception7c = InceptionE(2048)
        self.dropout = nn.Dropout(p=0.2)
        self.classifier = nn.Dense(2048, num_classes)

    def pool3(self, x):
        x = self.maxpool1(self.conv2b(self.conv2a(self.conv1a(x))))
        x = self.maxpool2(self.conv4a(self.conv3b(x)))
        x = self.inception5d(self.inception5c(self.inception5b(x)))
        x = self.inception6e(self.inception6d(self.inception6c(self.inception6b(self.inception6a(x)))))
        x = self.inception7c(self.inception7b(self.inception7a(x)))
        return x.mean(axis=(2, 3))  # mindcv's GlobalAvgPooling

    def construct(self, x):
        """ImageNet logits (eval: no aux output)."""
        return self.classifier(self.dropout(self.pool3(x)))


def preprocess(x):
    """(N, 1 or 3, H, W) in [-1, 1] -> (N, 3, 299, 299), normalised as mindcv trained inception_v3."""
    if x.shape[1] == 1:
        x = ops.tile(x, (1, 3, 1, 1))
    x = ops.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    mean = Tensor(np.array(MEAN, np.float32).reshape(1, 3, 1, 1))
    std = Tensor(np.array(STD, np.float32).reshape(1, 3, 1, 1))
    return ((x + 1) * 0.5 - mean) / std


class InceptionFeatures:
    """features(images, batch=BATCH): (N, C, H, W) in [-1, 1] -> pool3 features (N, 2048) float32;
    features.with_logits(images) -> (pool3 features, ImageNet logits (N, 1000)) from the same pass.

    Two compiled functions: the cheap preprocessing (recompiles per input size) and the network on a
    fixed (batch, 3, 299, 299) shape, so new image sizes never recompile Inception itself.
    `weights` / `sha256` name the checkpoint it was loaded from (None for a network built in memory).
    """

    def __init__(self, net, weights=None, sha256=None):
        net.set_train(False)  # BatchNorm running statistics (and no dropout); must precede the first compile
        self.net = net
        self.weights, self.sha256 = weights, sha256
        self.prep = maybe_jit(preprocess)

        def run(x):
            feats = net.pool3(x)
            return feats, net.classifier(feats)  # construct()'s dropout is the identity in eval mode
        self.fn = maybe_jit(run)

    def __call__(self, images, batch=BATCH):
        return self.with_logits(images, batch)[0]

    def with_logits(self, images, batch=BATCH):
        images = np.asarray(images, np.float32)
        if images.ndim != 4 or images.shape[1] not in (1, 3):
            raise UserError(f"Inception features need (N, 1 or 3, H, W) images, got shape {images.shape}")
        batch = min(batch, len(images))
        feats, logits = [], []
        for i in range(0, len(images), batch):
            part = images[i:i + batch]
            pad = np.zeros((batch - len(part),) + part.shape[1:], np.float32)
            x = self.prep(Tensor.from_numpy(np.concatenate([part, pad])))
            f, lg = self.fn(x)
            feats.append(f.asnumpy()[:len(part)])
            logits.append(lg.asnumpy()[:len(part)])
        return np.concatenate(feats), np.concatenate(logits)


def load_weights(path, net):
    """Copy a mindcv inception_v3 .ckpt into `net`; UserError naming the file / first bad parameter.
    Extra entries (optimizer state, ema.*) are ignored; every network parameter must be present."""
    if not os.path.isfile(path):
        raise UserError(f"--fid-weights {path} does not exist")
    try:
        data = ms.load_checkpoint(path)
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"--fid-weights {path} is not a readable MindSpore checkpoint ({reason[:120]})")
    for key in list(data):
        for new, old in MINT_BN.items():
            if key.endswith(new) and key[:-len(new)] + old not in data:
                data[key[:-len(new)] + old] = data.pop(key)
    params = list(net.get_parameters())
    for p in params:
        if p.name not in data:
            raise UserError(f"--fid-weights {path} has no parameter {p.name!r}: is it mindcv's inception_v3?")
        shape = tuple(data[p.name].shape)
        if shape != tuple(p.shape):
            raise UserError(f"--fid-weights {path}: parameter {p.name!r} has shape {shape}, "
                            f"InceptionV3 wants {tuple(p.shape)}")
    for p in params:
        p.set_data(Tensor(data[p.name].asnumpy().astype(np.float32)))


def file_sha256(path, chunk=1 << 20):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def load_inception(path):
    """The feature function of the InceptionV3 in a user's checkpoint (see InceptionFeatures); it
    carries the file's name and the first 12 hex digits of its sha256, for the metrics' protocol."""
    net = InceptionV3()
    load_weights(path, net)
    return InceptionFeatures(net, os.path.basename(path), file_sha256(path)[:12])
