"""The presets in configs/ parse, and they say what the published recipes say."""
import glob
import json
import os

import pytest

from conftest import ROOT
from loops.config import parse_config

PRESETS = sorted(glob.glob(os.path.join(ROOT, "configs", "*.json")))

# the recipes as published (mimicry's CIFAR-10 training parameters; StudioGAN's CIFAR10/BigGAN config)
RECIPES = {
    "sngan_cifar10": dict(arch="sngan", conditional=False, loss="hinge", n_critic=5, batch_size=64, lr_g=2e-4,
                          lr_d=2e-4, beta1_g=0.0, beta2_g=0.9, lr_schedule="linear", steps=100_000, width=128,
                          z_dim=128),
    "cgan_pd_cifar10": dict(arch="sngan", conditional=True, loss="hinge", n_critic=5, batch_size=64, lr_g=2e-4,
                            beta1_d=0.0, beta2_d=0.9, lr_schedule="linear", steps=100_000, width=128, z_dim=128),
    "biggan_cifar10": dict(arch="biggan", conditional=True, loss="hinge", n_critic=5, batch_size=64, lr_g=2e-4,
                           lr_d=2e-4, beta1_g=0.5, beta2_d=0.999, lr_schedule="constant", steps=100_000, width=96,
                           z_dim=80, ema=0.9999),
}


def test_every_preset_has_a_recipe():
    assert sorted(os.path.basename(p)[:-5] for p in PRESETS) == sorted(RECIPES)


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: os.path.basename(p))
def test_preset_resolves_to_the_published_recipe(path):
    import train_gan
    cfg = parse_config(train_gan.GANConfig, ["--config", path, "--data-dir", "somewhere"], "")
    for key, value in RECIPES[os.path.basename(path)[:-5]].items():
        assert getattr(cfg, key) == value, key
    assert cfg.dataset == "cifar10" and cfg.pack == 1 and cfg.r1 == 0.0
    assert json.load(open(path))  # a plain JSON object: a user copies and edits it
