"""The GAN, as one user of the core in loops/: losses (LOSSES), penalties and PacGAN packing,
DiffAugment, the D / G / lazy-R1 steps, the models and their sampler, sample pictures, hooks that
take a sample function, and one module per recipe: the noise -> image trainer (trainer.py,
train_gan.py) and the image-to-image recipes of train_translate.py (translation.py: what they share).

TRANSLATORS is the registry of train_translate.py's --model: a new image-to-image recipe is its
module (Config, TRAINER, EVALUATION; see gan/translation.py) plus one line here.
"""
import importlib

TRANSLATORS = {  # --model name -> module
    "pix2pix": "gan.pix2pix",
    "cyclegan": "gan.cyclegan",
}
DEFAULT_TRANSLATOR = "pix2pix"


def translator(name):
    """The module of image-to-image recipe `name` (imported on first use: MindSpore loads with it)."""
    return importlib.import_module(TRANSLATORS[name])
