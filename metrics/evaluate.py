"""Evaluators: samples -> metrics dict, for the toy mixtures and for image datasets."""
import numpy as np

from metrics.classifier import FeatureExtractor, load_or_train, to_float
from metrics.image import class_coverage, class_score, fid, kid, prdc
from metrics.toy import mode_stats


class ToyEvaluator:
    def __init__(self, source):
        self.source = source

    def __call__(self, samples, labels=None):
        """labels (conditional runs): the mode each sample was asked for; class_accuracy is the share
        of samples whose nearest mode is that one."""
        out = mode_stats(samples, self.source.centers, self.source.std)
        if labels is not None:
            d = np.linalg.norm(samples[:, None, :] - self.source.centers[None], axis=2)
            out["class_accuracy"] = float((d.argmin(1) == labels).mean())
        return out


class ImageEvaluator:
    """Compares generated images with a fixed random subset of the training images (same size).
    With `inception` (a metrics/inception.py feature function) it adds `fid_inception`: the FID on
    InceptionV3 pool3 features of the same real subset."""

    def __init__(self, source, n, seed, log=print, inception=None):
        net, self.accuracy = load_or_train(source.images, source.labels, source.num_classes, log=log)
        self.extract = FeatureExtractor(net)
        idx = np.random.default_rng([seed, 9]).permutation(len(source.images))[:n]
        real = to_float(source.images[idx])
        self.real_features, self.real_probs = self.extract(real)
        self.inception = inception
        self.real_inception = inception(real) if inception else None

    def __call__(self, samples, labels=None):
        """labels (conditional runs): the class each sample was asked for; class_accuracy is the share
        the classifier assigns to that class."""
        feats, probs = self.extract(np.asarray(samples, np.float32))
        out = {"fid": fid(self.real_features, feats), "kid": kid(self.real_features, feats),
               "class_score": class_score(probs), "classifier_accuracy": self.accuracy}
        out.update(prdc(self.real_features, feats))
        out.update(class_coverage(probs))
        if self.inception:
            out["fid_inception"] = fid(self.real_inception, self.inception(np.asarray(samples, np.float32)))
        if labels is not None:
            out["class_accuracy"] = float((probs.argmax(1) == labels).mean())
        return out


def make_evaluator(source, n, seed, log=print, inception=None):
    return ToyEvaluator(source) if source.kind == "toy" else ImageEvaluator(source, n, seed, log, inception)
