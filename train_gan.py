"""Train a GAN: separate jit-compiled D and G steps, alternated by the driver.

    python train_gan.py                                  # DCGAN on scikit-learn's 8x8 digits
    python train_gan.py --dataset ring8                  # MLP GAN on 8 Gaussians
    python train_gan.py --dataset grid25 --loss wgan --gp 1 --n-critic 5 --pack 1 --run-dir runs/grid
    tensorboard --logdir runs

Each iteration: D step x --n-critic (D's loss on real data and stop_gradient(G(z))), then one G
step, then the generator EMA update. Every model and optimizer parameter, the host RNG and the
data position go into checkpoints, so --resume continues bit-identically.
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")
if __name__ == "__main__":  # --help or a mistyped flag answers before MindSpore loads (loops/flagcache.py)
    from loops.flagcache import check_flags_early
    check_flags_early(__file__)

from dataclasses import dataclass

from data import SOURCES, TOY
from gan import augment
from gan.losses import LOSSES
from gan.trainer import GANTrainer, memory_parts, nets_for
from loops import distributed
from loops.config import RunConfig, UserError, opt, parse_config, run_cli
from loops.learner import fill_optimizer_flags, model_flags, settings
from loops.memory import check_fits
from loops.optim import OPTIMIZERS
from loops.run import Run
from loops.schedules import SCHEDULES
from models import ARCHS

# Defaults that depend on the kind of data: a flag left out or given as `auto` takes these.
AUTO = {
    "toy": dict(steps=20000, arch="mlp", width=128, z_dim=16, batch_size=512, pack=2, lr_g=1e-3, lr_d=1e-3,
                beta1=0.5, beta2=0.999, ema=0.99, r1=0.0, steps_per_call=10),
    "image": dict(steps=2000, arch="dcgan", width=32, z_dim=32, batch_size=64, pack=1, lr_g=2e-4, lr_d=4e-4,
                  beta1=0.5, beta2=0.999, ema=0.99, r1=1.0, steps_per_call=10),
}
# Chosen with seed sweeps (python -m tools.sweep, 10 seeds; docs/results.md "Choosing the defaults"). Images:
# D learns twice as fast as G (TTUR, Heusel et al. 2017): digits FID 3.95 +- 0.26, recall 0.96 (was
# FID 28 +- 11 on 3 seeds). grid25 needs longer (~0 of 25 modes at 2000 steps, ~24 at 6000) and a
# small R1 penalty: 25 modes on 10 of 10 seeds (without R1: >= 24 on 3 of 5); hq (the share of samples
# near a mode) is 0.82 +- 0.04 at 10000 steps and 0.937 +- 0.007 at 20000, >= 0.9 on 10 of 10 seeds.
# ring8: hq 0.913 +- 0.021 at 5000 steps, 0.970 +- 0.007 at 20000 (>= 0.95 on 10 of 10; ~90 s a run).
# MNIST-format 28x28 (measured on the 8x8 digits written as IDX, data/export_idx.py): both rates doubled
# and 3000 steps: FID 50.8 +- 6.3 over 10 seeds, <= 10x the real-half reference on 10 of 10 (seed 0 at 2000
# steps with the image rates: 85.0, 12x). A run takes 467 s alone (751-805 s two at a time), less than the
# ~550 s the 2000-step run took on 2026-12-03. docs/results.md "Choosing the defaults".
# The real Fashion-MNIST (60000 28x28 garments) needs a much stronger R1 than 8x8 digits (R1 is usually
# scaled with the pixel count): seed 4 at 2000 steps, R1 0 / 1 / 5 / 20 / 50: FID 126 / 78 / 46 / 34 / 38;
# with z 100 and 3000 steps, seeds 0-9: FID 24.2 +- 2.3 (was 77.6 with the image defaults, seed 4). The same
# images in batches of 16 are 4x the updates for less than twice the time, and a D of width 48 adds precision:
# seeds 0-9 FID 11.6 +- 1.3, pixel precision / recall 0.595 / 0.726 (0.491 / 0.691 at batch 64), garments of
# every class, at 12000 steps; 14000 (each seed's run resumed from 12000): FID 9.9 +- 1.1, 0.599 / 0.746, both
# targets on 8 of 10 seeds (6 at 12000). docs/results.md "More, smaller steps".
AUTO_PER_DATASET = {"grid25": dict(r1=0.1), "mnist": dict(steps=3000, lr_g=4e-4, lr_d=8e-4),
                    "fashion-mnist": dict(r1=20.0, z_dim=100, steps=14000, batch_size=16, width_d=48)}
# Class-conditional image runs keep learning the labels after 2000 steps (digits, seed 0: class accuracy
# 0.89 at 2000, 0.93 at 3000, 0.96 at 4000). Seeds 0-9: at 3000 steps the worst class is below 0.8 on one
# seed; at 4000 accuracy >= 0.9 and every class >= 0.8 on 10 of 10 (docs/results.md "Choosing the defaults").
AUTO_CONDITIONAL = {"image": dict(steps=4000)}


# per-model flags for G and D (--lr-g, --clip-norm-d, --optimizer-g, --accumulate-d, ...) and the shared
# ones they fall back to, from the declaration of the two models that learn (loops/learner.py)
GANFlags = model_flags(RunConfig, {"g": "G", "d": "D"},
                       lr=opt(0.0, "learning rate of both models",
                              auto="toy 1e-3, images G 2e-4 / D 4e-4, mnist G 4e-4 / D 8e-4"),
                       optimizer=opt("adam", "optimizer of both models", sorted(OPTIMIZERS)),
                       beta1=opt(-1.0, "Adam beta1 (momentum for SGD) of both models", auto="0.5"),
                       beta2=opt(-1.0, "Adam beta2 of both models", auto="0.999"),
                       weight_decay=opt(0.0, "weight decay (decoupled for AdamW)"),
                       loss_scale=opt("", "loss scaling", ["", "dynamic", "static", "none"],
                                      auto="dynamic with --amp O1, O2 or O3, else none"))


@dataclass
class GANConfig(GANFlags):
    HELP_GROUPS = {
        "data": ("dataset", "data_dir", "image_size", "conditional"),
        "model": ("arch", "width", "width_d", "z_dim", "spectral_norm", "amp"),
        "loss and penalties": ("loss", "n_critic", "g_first", "pack", "r1", "r1_every", "gp", "weight_clip", "diffaug"),
        "optimisation (shared; per model: --<flag>-<model>)": ("steps", "batch_size", "lr_schedule", "warmup", "ema"),
        "evaluation and pictures": ("sample_every", "eval_every", "eval_samples"),
        "run": ("steps_per_call", "distributed"),
    }
    steps: int = opt(0, "iterations (D x n_critic, then G)",
                     auto="toy 20000, images 2000, mnist 3000, fashion-mnist 14000 (--conditional: at least 4000)")
    dataset: str = opt("digits", "training data", sorted(SOURCES))
    data_dir: str = opt("", "directory of the file-based datasets (mnist, fashion-mnist, cifar10, folder)")
    image_size: int = opt(0, "resize/crop images to this size (multiple of 4); 0: the dataset's own")
    arch: str = opt("", "model family", [""] + sorted(ARCHS), auto="mlp for toy data, dcgan for images")
    width: int = opt(0, "hidden units (mlp) or base channels (dcgan)", auto="toy 128, images 32")
    width_d: int = opt(0, "D's own width (hidden units or base channels), where it differs from G's",
                      auto="--width, fashion-mnist 48")
    z_dim: int = opt(0, "latent dimension", auto="toy 16, images 32, fashion-mnist 100")
    loss: str = opt("ns", "GAN loss", sorted(LOSSES))
    n_critic: int = opt(1, "D steps per G step")
    g_first: bool = opt(False, "run the G step before the D steps in each iteration")
    pack: int = opt(0, "PacGAN: D judges this many samples jointly (1: off)", auto="toy 2, images and --conditional 1")
    r1: float = opt(-1.0, "R1 penalty weight gamma on real data (0: off)", auto="images 1, fashion-mnist 20, grid25 0.1, ring8 0")
    r1_every: int = opt(1, "lazy R1: its own D step every K iterations, penalty scaled by K (1: in every D step)")
    gp: float = opt(0.0, "WGAN-GP gradient penalty weight (0: off)")
    weight_clip: float = opt(0.0, "WGAN weight clipping: D's parameters to [-C, C] after each update (0: off)")
    spectral_norm: bool = opt(False, "spectral normalisation on every D layer")
    diffaug: str = opt("", "DiffAugment policies for real and fake images, e.g. color,translation,cutout")
    conditional: bool = opt(False, "class-conditional G (label embedding) and projection D (labels: "
                                   "digit classes, image classes, or the toy mixture's mode index)")
    batch_size: int = opt(0, "batch size of every D and G step", auto="toy 512, images 64, fashion-mnist 16")
    lr_schedule: str = opt("constant", "learning-rate schedule of both models", sorted(SCHEDULES))
    warmup: int = opt(0, "linear learning-rate warm-up over N iterations")
    ema: float = opt(-1.0, "generator EMA decay used for samples and metrics (0: off)", auto="0.99")
    amp: str = opt("O0", "mixed precision (O0: float32; O1: float16 matmuls and convolutions; O2 / O3: "
                         "mindspore.amp's levels)",
                   ["O0", "O1", "O2", "O3"])
    sample_every: int = opt(0, "sample grid / scatter plot every N steps", auto="5 times per run")
    eval_every: int = opt(0, "evaluate metrics every N steps (0: only at the end)")
    eval_samples: int = opt(2500, "samples drawn for each evaluation")
    steps_per_call: int = opt(0, "run K iterations inside one compiled loop (1: one call per step)",
                              auto="10 (K=50: no faster on toy data, 5x coarser logs; bench/RESULTS.md)")
    distributed: bool = opt(False, "data parallel under msrun: --batch-size per rank, gradients averaged "
                                   "over ranks, rank 0 writes the run dir (needs --run-dir)")

    def kind(self):
        return "toy" if self.dataset in TOY else "image"

    def owns_run(self, config):  # a run recorded before config.json named its recipe
        return "z_dim" in config and "algo" not in config

    def canonical(self, config):
        """D as wide as G is width_d 0 however it was asked for (left out, as every run from before the
        flag, or --width-d equal to --width), so a changed --width alone is one difference."""
        return {**config, "width_d": 0 if config.get("width_d") == config.get("width") else config.get("width_d")}

    def resume_words(self, key, saved):
        """width_d 0 cannot be typed (leaving the flag out gives fashion-mnist's 48): spell G's width."""
        return f"--width-d {saved['width']}" if key == "width_d" and not saved["width_d"] else None

    def validate(self):
        if self.conditional and self.pack == 0:
            self.pack = 1  # packing mixes labels: off for conditional runs
        fill_optimizer_flags(self, ("lr",), only_given=True)  # --lr: both models' rate, before the autos
        autos = {**AUTO[self.kind()], **AUTO_PER_DATASET.get(self.dataset, {})}
        for key, floor in (AUTO_CONDITIONAL.get(self.kind(), {}) if self.conditional else {}).items():
            autos[key] = max(autos[key], floor)  # a floor: fashion-mnist's 14000 steps stay 14000
        for key, value in autos.items():
            if getattr(self, key) == self.__dataclass_fields__[key].default:  # left at "auto"
                setattr(self, key, value)
        if not self.loss_scale:
            self.loss_scale = "none" if self.amp == "O0" else "dynamic"
        fill_optimizer_flags(self)  # per-model optimizer and betas fall back to the shared ones
        if self.sample_every == 0:
            self.sample_every = max(1, self.steps // 5)
        super().validate()
        self.check_positive("width", "z_dim", "n_critic", "batch_size", "eval_samples", "steps_per_call", "pack")
        self.check_non_negative("r1", "gp", "weight_clip")
        self.check(self.loss != "wgan" or self.gp > 0 or self.weight_clip > 0 or self.spectral_norm,
                   "--loss wgan needs a Lipschitz constraint on the critic: --gp W, --weight-clip C "
                   "or --spectral-norm")
        self.check_positive("r1_every")
        self.check(settings(self, "d")["accumulate"] == 1 or not (self.r1 > 0 and self.r1_every > 1),
                   "--accumulate-d does not combine with lazy R1 (--r1-every > 1): both step D's optimizer")
        self.check(not (self.conditional and self.pack > 1), "--conditional does not combine with --pack > 1")
        try:
            augment.parse(self.diffaug)
        except ValueError as e:
            raise UserError(f"--diffaug: {e}")
        self.check(not self.diffaug or self.kind() == "image", "--diffaug applies to image datasets")
        self.check(self.batch_size % self.pack == 0,
                   f"--batch-size ({self.batch_size}) must be a multiple of --pack ({self.pack})")
        self.check_positive("lr_g", "lr_d")
        self.check_non_negative("sample_every", "eval_every", "weight_decay", "warmup")
        for name in ("beta1", "beta2", "beta1_g", "beta1_d", "beta2_g", "beta2_d", "ema"):
            self.check(0 <= getattr(self, name) < 1, f"--{name.replace('_', '-')} must be in [0, 1), got {getattr(self, name)}")
        # width_d stays 0 when left out (D as wide as --width; make_nets reads it so; fashion-mnist's auto is
        # 48): runs recorded before the flag existed then resume with the same config (see canonical)
        self.check_non_negative("width_d")
        for key in ("width", "width_d"):
            self.check(self.arch != "dcgan" or getattr(self, key) % 4 == 0,
                       f"--{key.replace('_', '-')} must be a multiple of 4 for dcgan, got {getattr(self, key)}")
        self.check(self.image_size >= 0 and self.image_size % 4 == 0,
                   f"--image-size must be a multiple of 4, got {self.image_size}")
        self.check(self.image_size == 0 or self.dataset not in TOY + ("digits",),
                   "--image-size applies to mnist, fashion-mnist, cifar10 and folder")
        self.check(not self.distributed or self.run_dir, "--distributed needs --run-dir (the same on every rank)")


def main(argv):
    cfg = parse_config(GANConfig, argv, __doc__)  # exits after printing under --dry-run
    with Run(cfg, convolutions=cfg.kind() == "image", recipe="gan.trainer") as run:
        try:  # data and model errors first: a bad --data-dir or --arch must not leave a run dir behind
            # --distributed: the source yields the global batch (per-rank batch x ranks); draws slice it
            source = SOURCES[cfg.dataset](distributed.with_global_batch(cfg))
            check_fits(memory_parts(cfg, source.shape))  # before the networks or a run dir exist
            nets = nets_for(cfg, source)
        except ValueError as e:
            raise UserError(str(e))
        run.open("train_gan", cfg.dataset, cfg.loss)
        gan = GANTrainer(cfg, run, source, nets)
        meta = run.restore(gan.state)  # before the first compiled call
        if meta:
            source.load_state(meta["data"])
        else:
            gan.ema.copy()  # G_ema starts as G
        run.begin(gan.state, meta=gan.checkpoint_meta, learners=(gan.g, gan.d))
        if distributed.is_main():
            os.makedirs(os.path.join(cfg.run_dir, "samples"), exist_ok=True)
        code = run.train(gan.phases(), hooks=gan.hooks(), save=gan.save,
                         stop_on_nonfinite=not any(settings(cfg, m)["skip_nonfinite"] for m in cfg.MODELS))
        results, code = run.evaluate(code, gan.final_results)
        run.finish(results)
        if results is not None and distributed.is_main():
            print(summary_line(cfg, results, getattr(source, "centers", None)))
    return code


def summary_line(cfg, results, centers):
    """The last line of a run: its numbers with their scale, and where to look."""
    parts = []
    if "modes" in results:
        k = len(centers)
        parts.append(f"modes {results['modes']}/{k} (PacGAN's count {results.get('modes_pacgan', '?')}/{k}), "
                     f"hq {results['hq']:.3f} (share of samples near a mode)")
    if "fid" in results:  # real vs real: the FID of two disjoint real subsets at this sample size
        reference = f"; real vs real {results['fid_reference']:.3g}" if "fid_reference" in results else ""
        parts.append(f"FID {results['fid']:.4g} (lower is better{reference}), precision {results['precision']:.3f}, "
                     f"recall {results['recall']:.3f}")
    samples = sorted(os.listdir(os.path.join(cfg.run_dir, "samples")))
    picture = os.path.join(cfg.run_dir, "samples", samples[-1]) if samples else "none"
    return (f"done: {cfg.steps} steps; {'; '.join(parts)}; samples: {picture}; "
            f"metrics: {os.path.join(cfg.run_dir, 'metrics.json')}; run dir: {cfg.run_dir}")


if __name__ == "__main__":
    run_cli(main)
