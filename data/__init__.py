"""Datasets by name: SOURCES[name](cfg) -> source. A new dataset is its file plus one line here.

A source has `shape` (one sample), `num_classes`, `kind` ("toy" or "image"), `next(rng)` ->
(x float32 batch, labels int32 batch), and `state()` / `load_state()` for exact resume.
"""
from data.digits import digits
from data.images import image_source
from data.toy2d import grid25, ring8

SOURCES = {
    "ring8": lambda cfg: ring8(cfg.batch_size),
    "grid25": lambda cfg: grid25(cfg.batch_size),
    "digits": lambda cfg: digits(cfg.batch_size, cfg.seed),
    "mnist": image_source,
    "fashion-mnist": image_source,
    "cifar10": image_source,
    "folder": image_source,
}
TOY = ("ring8", "grid25")
