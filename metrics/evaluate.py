"""Evaluators: samples -> metrics dict, for the toy mixtures and for image datasets.

Every evaluator also states how its numbers were made: after each call, `evaluator.protocol` is a
JSON-ready dict (written as `protocol` into metrics.json): the protocol's name, the seed, how many
generated and real samples, which real split, the feature networks (this project's classifier with
its held-out accuracy; InceptionV3 with its weights file and sha256 prefix) and the scores each one
gives, the IS splits, and the sample size of the real-vs-real reference. It is an attribute, not a
key of the returned dict, because the returned values are all logged as TensorBoard scalars.

Protocols (metrics/protocol.py): quick (the default, used while training: --eval-samples generated
vs as many training images) and paper (50000 generated vs the full training set).

fid_reference: the FID between two disjoint random subsets of the real images, n each, on the same
feature network, with n the number of real images the evaluation uses (or half of all images when
there are fewer than 2n; the protocol's `fid_reference_n` says which). It is the score of a
"generator" that reproduces the data perfectly at this sample size: FID is biased upwards at small
n, so a run's FID reads against it, not against 0.
"""
import numpy as np

from metrics.classifier import FeatureExtractor, load_or_train, to_float
from metrics.image import class_coverage, class_score, fid, inception_score, kid, prdc, softmax64
from metrics.protocol import PROTOCOLS
from metrics.toy import mode_stats

IS_SPLITS = 10  # Salimans et al. 2016 and every reimplementation since
PRDC_MAX = 10000  # PRDC on at most this many real and generated samples (Naeem et al. 2020 use 10k)
KID_SUBSETS, KID_SUBSET_SIZE, PRDC_K = 20, 200, 5  # metrics/image.py's defaults, stated in the protocol
# k-NN precision / recall in pixel space (k = 5) of this many generated images against as many
# held-out real ones (a dataset's test split): a check that needs no trained network at all
PIXEL_N = 1000


def class_accuracy(predicted, asked, num_classes):
    """Conditional runs: the share of samples recognised as the class they were asked for, overall,
    per class (`class_accuracy_per_class`, asked-for class k at index k) and its worst class."""
    predicted, asked = np.asarray(predicted), np.asarray(asked)
    per_class = [float((predicted[asked == k] == k).mean()) if (asked == k).any() else None  # None: never asked
                 for k in range(num_classes)]
    asked_classes = [a for a in per_class if a is not None]
    return {"class_accuracy": float((predicted == asked).mean()), "class_accuracy_per_class": per_class,
            "class_accuracy_min": min(asked_classes)}


class ToyEvaluator:
    def __init__(self, source, seed=None, protocol="quick"):
        self.source, self.seed, self.name = source, seed, protocol
        self.protocol = None

    def __call__(self, samples, labels=None):
        """labels (conditional runs): the mode each sample was asked for; class_accuracy is the share
        of samples whose nearest mode is that one."""
        out = mode_stats(samples, self.source.centers, self.source.std)
        if labels is not None:
            d = np.linalg.norm(samples[:, None, :] - self.source.centers[None], axis=2)
            out.update(class_accuracy(d.argmin(1), labels, len(self.source.centers)))
        k = len(self.source.centers)
        self.protocol = {
            "name": self.name, "description": PROTOCOLS[self.name].split(" vs ")[0],  # no real set here
            "seed": self.seed, "generated": len(samples),
            "real": 0, "feature_network": None,
            "reference": f"the mixture's {k} known centres and std {self.source.std:g}: a sample is high quality "
                         f"within 3 std of its nearest centre; no real samples are drawn"}
        return out


class ImageEvaluator:
    """Compares generated images with a fixed random subset of the training images (quick: as many as
    there are generated samples; paper: all of them). With `inception` (a metrics/inception.py feature
    function) it adds `fid_inception` (the FID on InceptionV3 pool3 features of the same real images),
    `fid_inception_reference`, and the Inception Score `is_inception` / `is_inception_std`.

    The real features and both real-vs-real references are computed once, here; each call then costs
    only the generated samples' features."""

    def __init__(self, source, n, seed, log=print, inception=None, protocol="quick"):
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
        net, self.accuracy = load_or_train(source.images, source.labels, source.num_classes, log=log)
        self.classifier_version = net.version
        self.extract = FeatureExtractor(net)
        self.name, self.seed, self.num_classes = protocol, seed, source.num_classes
        total = len(source.images)
        self.n_real = total if protocol == "paper" else min(n, total)
        # the real subset is perm[:n_real] (as it always was); the reference pairs perm[:m] with perm[m:2m]
        perm = np.random.default_rng([seed, 9]).permutation(total)
        self.reference_n = min(self.n_real, total // 2)
        used = perm[:max(self.n_real, 2 * self.reference_n)]
        real = to_float(source.images[used])
        features, self.real_probs = self.extract(real)
        self.real_probs = self.real_probs[:self.n_real]
        self.real_features = features[:self.n_real]
        self.fid_reference = self._reference(features)
        self.inception = inception
        self.real_inception, self.fid_inception_reference = None, None
        if inception:
            inception_features = inception(real)
            self.real_inception = inception_features[:self.n_real]
            self.fid_inception_reference = self._reference(inception_features)
        self.pixel_real, self.pixel_reference = None, {}
        held = getattr(source, "held_out", None)
        if held is not None and len(held) > PRDC_K:
            pick = np.random.default_rng([seed, 11]).permutation(len(held))[:PIXEL_N]
            self.pixel_real = flat_pixels(held[pick])
            train_pixels = flat_pixels(source.images[perm[:len(pick)]])  # real training images: the ceiling
            self.pixel_reference = pixel_scores(self.pixel_real, train_pixels, "_reference")
        self.protocol = None

    def _reference(self, features):
        """FID of real vs real: perm[:m] against the disjoint perm[m:2m] (None below 2 images each)."""
        m = self.reference_n
        return fid(features[:m], features[m:2 * m]) if m >= 2 else None

    def __call__(self, samples, labels=None):
        """labels (conditional runs): the class each sample was asked for; class_accuracy is the share
        the classifier assigns to that class."""
        samples = np.asarray(samples, np.float32)
        feats, probs = self.extract(samples)
        out = {"fid": fid(self.real_features, feats)}
        if self.fid_reference is not None:
            out["fid_reference"] = self.fid_reference
        out.update({"kid": kid(self.real_features, feats, KID_SUBSETS, KID_SUBSET_SIZE),
                    "class_score": class_score(probs), "classifier_accuracy": self.accuracy})
        out.update(prdc(self.real_features[:PRDC_MAX], feats[:PRDC_MAX], PRDC_K))
        out.update(class_coverage(probs))
        is_splits = min(IS_SPLITS, len(samples))
        if self.inception:
            inception_features, logits = self.inception.with_logits(samples)
            out["fid_inception"] = fid(self.real_inception, inception_features)
            if self.fid_inception_reference is not None:
                out["fid_inception_reference"] = self.fid_inception_reference
            out["is_inception"], out["is_inception_std"] = inception_score(softmax64(logits), is_splits)
        if labels is not None:
            out.update(class_accuracy(probs.argmax(1), labels, probs.shape[1]))
        if self.pixel_real is not None and len(samples) > PRDC_K:
            out.update(pixel_scores(self.pixel_real, flat_pixels(samples[:PIXEL_N])))
            out.update(self.pixel_reference)
        self.protocol = self.describe(len(samples), is_splits, labels is not None)
        return out

    def describe(self, generated, is_splits, conditional=False):
        classifier_scores = ["fid", "fid_reference", "kid", "precision", "recall", "density", "coverage",
                             "class_score", "classes_covered", "class_kl"] + (
                                 ["class_accuracy", "class_accuracy_min"] if conditional else [])
        protocol = {
            "name": self.name, "description": PROTOCOLS[self.name], "seed": self.seed,
            "generated": generated, "real": self.n_real, "real_split": "train",
            "fid_reference_n": self.reference_n,
            "classifier": {"network": f"this project's classifier (metrics/classifier.py v{self.classifier_version}), 128-d "
                                      "penultimate features and its softmax",
                           "test_accuracy": self.accuracy, "classes": self.num_classes,
                           "scores": classifier_scores, "class_score_splits": 1},
            "kid": {"subsets": KID_SUBSETS, "subset_size": min(KID_SUBSET_SIZE, self.n_real, generated)},
            "prdc": {"k": PRDC_K, "real": min(self.n_real, PRDC_MAX), "generated": min(generated, PRDC_MAX)},
        }
        if self.pixel_real is not None:
            protocol["pixel"] = {"k": PRDC_K, "real": len(self.pixel_real), "real_split": "test",
                                 "generated": min(generated, PIXEL_N), "space": "pixels in [-1, 1]",
                                 "reference": "the same number of training images in place of the generated ones"}
        if self.inception:
            protocol["inception"] = {
                "network": "InceptionV3 (mindcv inception_v3), pool3 2048-d features; IS: softmax over its "
                           "1000 ImageNet logits",
                "weights": self.inception.weights, "sha256": self.inception.sha256,
                "scores": ["fid_inception", "fid_inception_reference", "is_inception", "is_inception_std"]}
            protocol["is_splits"] = is_splits
        return protocol


def flat_pixels(images):
    """(N, C, H, W) uint8 or float in [-1, 1] -> (N, C*H*W) float64 in [-1, 1]."""
    return to_float(np.asarray(images)).reshape(len(images), -1).astype(np.float64)


def pixel_scores(real, generated, suffix=""):
    """pixel_precision / pixel_recall: k-NN manifolds (Kynkaanniemi et al. 2019) of flattened pixels."""
    scores = prdc(real, generated, PRDC_K)
    return {f"pixel_precision{suffix}": scores["precision"], f"pixel_recall{suffix}": scores["recall"]}


def make_evaluator(source, n, seed, log=print, inception=None, protocol="quick"):
    if source.kind == "toy":
        return ToyEvaluator(source, seed, protocol)
    return ImageEvaluator(source, n, seed, log, inception, protocol)
