"""The GAN's three models (G, D, and G's EMA copy), its sampler, and loading a trained generator
back from a checkpoint (generate.py, python -m metrics)."""
import os

import mindspore as ms
import numpy as np
from mindspore import Tensor

from loops import checkpoint
from loops.config import UserError
from loops.learner import declare
from loops.step import maybe_jit
from models import ARCHS


def make_nets(arch, z_dim, shape, width, num_classes=0, pack_size=1, spectral_norm=False, width_d=0):
    """(G, D, G_ema) as plain, unnamed Cells; D's width is `width_d` (0: `width`). With PacGAN
    packing, D sees pack_size samples stacked along the first feature axis."""
    make_g, make_d = ARCHS[arch]
    generator = make_g(z_dim, shape, width=width, num_classes=num_classes)
    d_shape = (shape[0] * pack_size,) + tuple(shape[1:])
    discriminator = make_d(d_shape, width=width_d or width, num_classes=num_classes, spectral_norm=spectral_norm)
    g_ema = make_g(z_dim, shape, width=width, num_classes=num_classes)
    return generator, discriminator, g_ema


def build_models(arch, z_dim, shape, width, num_classes=0, pack_size=1, spectral_norm=False, amp="O0", width_d=0):
    """(G, D, G_ema) declared as the trainer declares them (loops/learner.py): names prefixed
    g. / d. / g_ema., G and D in training mode (BatchNorm on batch statistics, spectral norm's
    power iteration advancing), G_ema in eval mode (it only samples)."""
    generator, discriminator, g_ema = make_nets(arch, z_dim, shape, width, num_classes, pack_size, spectral_norm, width_d)
    return (declare("g", generator, train=True, amp=amp), declare("d", discriminator, train=True, amp=amp),
            declare("g_ema", g_ema, train=False, amp=amp))


# Samples per compiled generator call in every evaluation path (training hooks, python -m metrics,
# generate.py): one shape compiles once, and peak memory is one chunk's activations whatever the sample
# count. Measured in graph mode on the CPU: the cGAN-PD-32 generator holds ~18 MB per sample during a
# call (1.4 GB peak at 50 samples, 4.1 GB at 200), so its 2500 evaluation samples in one call needed
# ~46 GB; at 100 a call peaks near 2.3 GB (docs/results.md "Evaluation memory").
SAMPLE_CHUNK = 100


def sample_in_chunks(sample, z, labels=None, chunk=SAMPLE_CHUNK):
    """sample(z, labels or None) -> numpy for any number of latents, in calls of exactly `chunk` rows
    (the last one padded with zeros and cut), so every path compiles one shape and a latent gives the
    same sample whichever path or count asked for it."""
    out = []
    for i in range(0, len(z), chunk):
        part, pad = z[i:i + chunk], chunk - len(z[i:i + chunk])
        zs = np.concatenate([part, np.zeros((pad, z.shape[1]), z.dtype)])
        ys = None if labels is None else np.concatenate([labels[i:i + chunk], np.zeros(pad, labels.dtype)])
        out.append(np.asarray(sample(zs, ys))[:len(part)])
    return np.concatenate(out)


def make_sampler(generator):
    """A compiled (z[, y]) -> G(z, y) for an eval-mode generator (its own graph: BatchNorm uses
    running statistics)."""
    generator.set_train(False)

    def sample(z, *labels):
        return generator(z, labels[0] if labels else None)
    return maybe_jit(sample)


class TrainedGenerator:
    """A generator loaded from a train_gan.py checkpoint: `.sample(z, labels=None) -> numpy`, plus the
    run's `config` and checkpoint `meta` (data shape, number of classes, step)."""

    def __init__(self, run_dir, checkpoint_path="", ema=True):
        if not os.path.isdir(run_dir):
            raise UserError(f"run dir {run_dir} does not exist")
        path = checkpoint_path or checkpoint.latest(run_dir)
        if not path:
            raise UserError(f"no checkpoint in {os.path.join(run_dir, 'checkpoints')}")
        _, self.meta = checkpoint.read(path)
        self.path, self.config = path, self.meta.get("config", {})
        cfg = self.config
        made_by = self.meta.get("recipe") or ("a train_rl.py run" if "algo" in cfg else "")
        if "z_dim" not in cfg or made_by not in ("", "gan.trainer"):
            raise UserError(f"{path} is not a checkpoint of a train_gan.py run"
                            + (f" (it is of {made_by})" if made_by else "") + ": nothing to sample")
        self.conditional = bool(cfg.get("conditional", False))
        self.num_classes = self.meta["num_classes"] if self.conditional else 0
        self.z_dim, self.kind = cfg["z_dim"], self.meta["kind"]
        generator, _, g_ema = build_models(cfg["arch"], cfg["z_dim"], tuple(self.meta["data_shape"]), cfg["width"],
                                           num_classes=self.num_classes)
        chosen = g_ema if ema else generator
        checkpoint.load_into(path, chosen.get_parameters())  # before the sampler's first compile
        self._sample = make_sampler(chosen)

    def sample(self, z, labels=None):
        """G(z[, labels]) for any number of latents, in SAMPLE_CHUNK calls (see sample_in_chunks)."""
        return sample_in_chunks(self._sample_call, z, labels)

    def _sample_call(self, z, labels):
        y = (Tensor.from_numpy(labels.astype("int32")),) if self.conditional else ()
        return self._sample(Tensor.from_numpy(z), *y).asnumpy()


def graph_mode_on_cpu():
    """Context for loading and sampling outside training (generate.py, python -m metrics)."""
    ms.set_context(mode=ms.GRAPH_MODE)
    if ms.get_context("device_target") != "CPU":
        ms.set_device("CPU")
