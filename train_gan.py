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

import json
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Tensor
from tqdm import tqdm

from data import SOURCES, TOY
from loops import augment, checkpoint, distributed, rundir, runtime, transforms
from loops.config import RunConfig, UserError, opt, parse_config, run_cli
from loops.driver import Hook, Phase, train
from loops.ema import EMA
from loops.gan import LOSSES, build_models, make_gan_steps, make_lazy_r1_step, make_sampler
from loops.logging import RunLogger
from loops.optim import OPTIMIZERS, all_parameters, make_optimizer
from loops.schedules import SCHEDULES, lr_at
from loops.samples import image_grid, save_png, scatter_plot
from metrics.evaluate import make_evaluator
from models import ARCHS

# Defaults that depend on the kind of data; a flag left at its "auto" value (0, -1 or "") takes these.
AUTO = {
    "toy": dict(steps=5000, arch="mlp", width=128, z_dim=16, batch_size=512, pack=2, lr_g=1e-3, lr_d=1e-3,
                beta1=0.5, beta2=0.999, ema=0.99, r1=0.0, steps_per_call=10),
    "image": dict(steps=2000, arch="dcgan", width=32, z_dim=32, batch_size=64, pack=1, lr_g=2e-4, lr_d=2e-4,
                  beta1=0.5, beta2=0.999, ema=0.99, r1=1.0, steps_per_call=10),
}
# grid25 needs longer: ~0 of 25 modes at 2000 steps, ~24 at 6000; at 10000, 23.0 +- 2.3 (README).
AUTO_PER_DATASET = {"grid25": dict(steps=10000)}


@dataclass
class GANConfig(RunConfig):
    steps: int = opt(0, "iterations (D x n_critic, then G); 0: the dataset's default")
    dataset: str = opt("digits", "training data", sorted(SOURCES))
    data_dir: str = opt("", "directory of the file-based datasets (mnist, fashion-mnist, cifar10, folder)")
    image_size: int = opt(0, "resize/crop images to this size (multiple of 4); 0: the dataset's own")
    arch: str = opt("", "model family (default: mlp for toy data, dcgan for images)", [""] + sorted(ARCHS))
    width: int = opt(0, "hidden units (mlp) or base channels (dcgan); 0: auto")
    z_dim: int = opt(0, "latent dimension; 0: auto")
    loss: str = opt("ns", "GAN loss", sorted(LOSSES))
    n_critic: int = opt(1, "D steps per G step")
    g_first: bool = opt(False, "run the G step before the D steps in each iteration")
    pack: int = opt(0, "PacGAN: D judges this many samples jointly (1: off); 0: auto (toy 2, images 1)")
    r1: float = opt(-1.0, "R1 penalty weight gamma on real data (0: off); -1: auto (images 1, toy 0)")
    r1_every: int = opt(1, "lazy R1: its own D step every K iterations, penalty scaled by K (1: in every D step)")
    gp: float = opt(0.0, "WGAN-GP gradient penalty weight (0: off)")
    weight_clip: float = opt(0.0, "WGAN weight clipping: D's parameters to [-C, C] after each update (0: off)")
    spectral_norm: bool = opt(False, "spectral normalisation on every D layer")
    diffaug: str = opt("", "DiffAugment policies for real and fake images, e.g. color,translation,cutout")
    conditional: bool = opt(False, "class-conditional G (label embedding) and projection D (labels: "
                                   "digit classes, image classes, or the toy mixture's mode index)")
    batch_size: int = opt(0, "batch size of every D and G step; 0: auto")
    optimizer: str = opt("adam", "optimizer of both models", sorted(OPTIMIZERS))
    optimizer_g: str = opt("", "G's optimizer (default: --optimizer)", [""] + sorted(OPTIMIZERS))
    optimizer_d: str = opt("", "D's optimizer (default: --optimizer)", [""] + sorted(OPTIMIZERS))
    lr_g: float = opt(0.0, "generator learning rate; 0: auto")
    lr_d: float = opt(0.0, "discriminator learning rate; 0: auto")
    beta1: float = opt(-1.0, "Adam beta1 (momentum for SGD) of both models; -1: auto (0.5)")
    beta2: float = opt(-1.0, "Adam beta2 of both models; -1: auto (0.999)")
    beta1_g: float = opt(-1.0, "G's beta1 (default: --beta1)")
    beta1_d: float = opt(-1.0, "D's beta1 (default: --beta1)")
    beta2_g: float = opt(-1.0, "G's beta2 (default: --beta2)")
    beta2_d: float = opt(-1.0, "D's beta2 (default: --beta2)")
    weight_decay: float = opt(0.0, "weight decay (decoupled for AdamW)")
    lr_schedule: str = opt("constant", "learning-rate schedule of both models", sorted(SCHEDULES))
    warmup: int = opt(0, "linear learning-rate warm-up over N iterations")
    ema: float = opt(-1.0, "generator EMA decay used for samples and metrics (0: off); -1: auto")
    clip_norm_d: float = opt(0.0, "clip D's global gradient norm (0: off)")
    clip_norm_g: float = opt(0.0, "clip G's global gradient norm (0: off)")
    clip_value_d: float = opt(0.0, "clip D's gradient elements to [-V, V] (0: off)")
    clip_value_g: float = opt(0.0, "clip G's gradient elements to [-V, V] (0: off)")
    grad_noise_d: float = opt(0.0, "Gaussian noise std added to D's gradients (0: off)")
    grad_noise_g: float = opt(0.0, "Gaussian noise std added to G's gradients (0: off)")
    accumulate_d: int = opt(1, "average D's gradients over K micro-batches per D update")
    accumulate_g: int = opt(1, "average G's gradients over K micro-batches per G update")
    skip_nonfinite: bool = opt(False, "skip (and count) D/G updates with NaN/Inf gradients")
    amp: str = opt("O0", "mixed precision level of mindspore.amp.auto_mixed_precision (O0: float32)",
                   ["O0", "O1", "O2", "O3"])
    loss_scale: str = opt("", "loss scaling: dynamic, static or none (default: dynamic with --amp O2 or O3; O1 is refused)",
                          ["", "dynamic", "static", "none"])
    sample_every: int = opt(0, "sample grid / scatter plot every N steps; 0: 5 times per run")
    eval_every: int = opt(0, "evaluate metrics every N steps (0: only at the end)")
    eval_samples: int = opt(2500, "samples drawn for each evaluation")
    steps_per_call: int = opt(0, "run K iterations inside one compiled loop; 0: auto (10: bench/bench_gan.py)")
    distributed: bool = opt(False, "data parallel under msrun: --batch-size per rank, gradients averaged "
                                   "over ranks, rank 0 writes the run dir (needs --run-dir)")

    def kind(self):
        return "toy" if self.dataset in TOY else "image"

    def validate(self):
        if self.conditional and self.pack == 0:
            self.pack = 1  # packing mixes labels: off for conditional runs
        for key, value in {**AUTO[self.kind()], **AUTO_PER_DATASET.get(self.dataset, {})}.items():
            if getattr(self, key) == self.__dataclass_fields__[key].default:  # left at "auto"
                setattr(self, key, value)
        if not self.loss_scale:
            self.loss_scale = "none" if self.amp == "O0" else "dynamic"
        for who in ("g", "d"):  # per-model settings fall back to the shared ones
            for key in ("optimizer", "beta1", "beta2"):
                if getattr(self, f"{key}_{who}") in ("", -1.0):
                    setattr(self, f"{key}_{who}", getattr(self, key))
        if self.sample_every == 0:
            self.sample_every = max(1, self.steps // 5)
        super().validate()
        self.check_positive("width", "z_dim", "n_critic", "batch_size", "eval_samples", "steps_per_call", "pack")
        # MindSpore 2.10's O1 rewrites the network's source and the rewritten code does not compile
        # (NameError: The name 'leaky_relu_opt' is not defined; 'maximum_' for the DCGAN D)
        self.check(self.amp != "O1", "--amp O1 does not work with MindSpore 2.10 (its network rewrite "
                                     "fails to compile LeakyReLU); use --amp O2 or O3")
        self.check_non_negative("r1", "gp", "weight_clip")
        self.check(self.loss != "wgan" or self.gp > 0 or self.weight_clip > 0 or self.spectral_norm,
                   "--loss wgan needs a Lipschitz constraint on the critic: --gp W, --weight-clip C "
                   "or --spectral-norm")
        self.check_positive("r1_every", "accumulate_d", "accumulate_g")
        self.check(self.accumulate_d == 1 or not (self.r1 > 0 and self.r1_every > 1),
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
        self.check_non_negative("clip_norm_d", "clip_norm_g", "clip_value_d", "clip_value_g",
                                "grad_noise_d", "grad_noise_g", "sample_every", "eval_every")
        self.check_non_negative("weight_decay", "warmup")
        for name in ("beta1", "beta2", "beta1_g", "beta1_d", "beta2_g", "beta2_d", "ema"):
            self.check(0 <= getattr(self, name) < 1, f"--{name} must be in [0, 1), got {getattr(self, name)}")
        self.check(self.arch != "dcgan" or self.width % 4 == 0,
                   f"--width must be a multiple of 4 for dcgan, got {self.width}")
        self.check(self.image_size >= 0 and self.image_size % 4 == 0,
                   f"--image-size must be a multiple of 4, got {self.image_size}")
        self.check(self.image_size == 0 or self.dataset not in TOY + ("digits",),
                   "--image-size applies to mnist, fashion-mnist, cifar10 and folder")
        self.check(not self.distributed or self.run_dir, "--distributed needs --run-dir (the same on every rank)")


def lazy_r1_adjusted(cfg):
    """D's learning rate and betas under lazy R1 (StyleGAN2, Karras et al. 2020): with R1 as an extra
    D update every k iterations, c = k / (k + 1), lr x c and betas ** c keep the optimizer's
    effective step size and averaging horizon per iteration those of k plain updates."""
    c = cfg.r1_every / (cfg.r1_every + 1)
    return cfg.lr_d * c, (cfg.beta1_d ** c, cfg.beta2_d ** c)


def transform_for(cfg, optimizer, who):
    return transforms.from_flags(
        optimizer.parameters, who + ".", clip_value=getattr(cfg, "clip_value_" + who),
        clip_norm=getattr(cfg, "clip_norm_" + who), grad_noise=getattr(cfg, "grad_noise_" + who),
        accumulate=getattr(cfg, "accumulate_" + who), skip_nonfinite=cfg.skip_nonfinite, loss_scale=cfg.loss_scale)


def main(argv):
    cfg = parse_config(GANConfig, argv, __doc__)  # exits after printing under --dry-run
    # first: with --distributed, the msrun scheduler process stops in here
    rng, device = runtime.setup(cfg, convolutions=cfg.kind() == "image")
    try:  # data errors first: a bad --data-dir must not leave a run dir behind
        # --distributed: the source yields the global batch (per-rank batch x ranks); d_draw slices it
        source = SOURCES[cfg.dataset](distributed.with_global_batch(cfg))
    except ValueError as e:
        raise UserError(str(e))
    # only rank 0 creates and checks the run dir; the other ranks just find the checkpoint to resume
    resume_from = distributed.prepare_run_dir(cfg, rundir.prepare, "train_gan", cfg.dataset, cfg.loss)

    num_classes = source.num_classes if cfg.conditional else 0
    G, D, G_ema = build_models(cfg.arch, cfg.z_dim, source.shape, cfg.width, num_classes=num_classes,
                               pack_size=cfg.pack, spectral_norm=cfg.spectral_norm, amp=cfg.amp)
    lazy_r1 = cfg.r1 > 0 and cfg.r1_every > 1
    lr_d, betas_d = lazy_r1_adjusted(cfg) if lazy_r1 else (cfg.lr_d, (cfg.beta1_d, cfg.beta2_d))
    opt_g = make_optimizer(cfg.optimizer_g, G.trainable_params(), cfg.lr_g, "g.", (cfg.beta1_g, cfg.beta2_g),
                           cfg.weight_decay)
    opt_d = make_optimizer(cfg.optimizer_d, D.trainable_params(), lr_d, "d.", betas_d, cfg.weight_decay)
    t_g, t_d = transform_for(cfg, opt_g, "g"), transform_for(cfg, opt_d, "d")
    scheduled = cfg.lr_schedule != "constant" or cfg.warmup > 0
    policies = augment.parse(cfg.diffaug)
    d_step, g_step = make_gan_steps(G, D, cfg.loss, opt_g, opt_d, t_g, t_d, pack_size=cfg.pack, r1=0.0 if lazy_r1 else cfg.r1, gp=cfg.gp,
                                    takes_lr=scheduled, grad_reducer=distributed.grad_reducer,
                                    conditional=cfg.conditional, augment_policies=policies,
                                    augment_arity=augment.arity(policies, source.shape) if policies else 0,
                                    weight_clip=cfg.weight_clip)
    r1_step = make_lazy_r1_step(D, opt_d, cfg.r1, cfg.r1_every, t_d, cfg.pack, cfg.conditional,
                                augment_policies=policies, weight_clip=cfg.weight_clip) if lazy_r1 else None
    ema = EMA(G, G_ema, cfg.ema)
    sample = make_sampler(G_ema)
    state = all_parameters(G, D, G_ema, opt_g, opt_d, t_g, t_d)

    start = 0
    if resume_from:
        meta = checkpoint.load_into(resume_from, state,  # before the first compiled call
                                    check=lambda meta: rundir.check_resume_config(cfg, meta))
        rng.bit_generator.state = meta["rng"]
        source.load_state(meta["data"])
        start = meta["step"]
    else:
        ema.copy()  # G_ema starts as G
    if distributed.is_main():  # rank 0 alone writes files
        rundir.write_config(cfg)
        os.makedirs(os.path.join(cfg.run_dir, "samples"), exist_ok=True)
    # --distributed: every rank draws the GLOBAL batch (data, z, alpha) from the same RNG and keeps its
    # slice (distributed.shard), so all ranks' RNG states stay equal; 1 rank: the batch itself
    batch = distributed.global_batch(cfg.batch_size)

    def latent():
        return rng.standard_normal((batch, cfg.z_dim), dtype=np.float32)

    def lr(base, step):
        return (np.float32(lr_at(step, base, cfg.lr_schedule, cfg.steps, cfg.warmup)),) if scheduled else ()

    def fake_labels():  # uniform classes for G's samples (conditional runs only)
        return (rng.integers(0, num_classes, batch).astype(np.int32),) if cfg.conditional else ()

    def augmentation():  # DiffAugment's random draws for one batch
        return augment.draw(rng, policies, batch, source.shape) if policies else ()

    def d_draw(step):
        real, real_labels = source.next(rng)
        labels = (real_labels,) + fake_labels() if cfg.conditional else ()
        aug = augmentation() + augmentation()  # real, then fake
        alpha = (rng.uniform(size=batch // cfg.pack).astype(np.float32),) if cfg.gp > 0 else ()  # per D input
        return (distributed.shard(real, latent(), *labels, *aug, *alpha) + lr(lr_d, step)
                + d_step.draw_noise(rng))

    def d_body(*inputs):
        loss, (real_out, fake_out), norm, _ = d_step.body(*inputs)
        return loss, real_out, fake_out, norm

    def g_draw(step):
        return (distributed.shard(latent(), *fake_labels(), *augmentation()) + lr(cfg.lr_g, step)
                + g_step.draw_noise(rng))

    def g_body(*inputs):
        loss, _, norm, _ = g_step.body(*inputs)
        return loss, norm

    def ema_body():
        return (ema.body(ema.decay),)

    # with --accumulate-X K a phase runs K micro-batch steps per update (the transform applies every K-th)
    d = Phase("d", d_draw, d_body, ("loss/d", "d_out/real", "d_out/fake", "grad_norm/d"),
              repeat=cfg.n_critic * cfg.accumulate_d)
    g = Phase("g", g_draw, g_body, ("loss/g", "grad_norm/g"), repeat=cfg.accumulate_g)
    phases = [g, d] if cfg.g_first else [d, g]
    if lazy_r1:
        def r1_draw(step):
            real, real_labels = source.next(rng)
            labels = (real_labels,) if cfg.conditional else ()
            return distributed.shard(real, *labels, *augmentation()) + r1_step.draw_noise(rng)

        def r1_body(*inputs):
            return r1_step.body(*inputs)[:1]
        phases.append(Phase("r1", r1_draw, r1_body, ("loss/r1",), every=cfg.r1_every))
    if cfg.ema > 0:
        phases.append(Phase("ema", lambda step: (), ema_body, ("ema/decay",)))

    # fixed noise from its own stream, so sampling never disturbs the training RNG
    fixed_z = Tensor.from_numpy(np.random.default_rng([cfg.seed, 7]).standard_normal((64, cfg.z_dim), dtype=np.float32))
    eval_z = Tensor.from_numpy(np.random.default_rng([cfg.seed, 8]).standard_normal(
        (cfg.eval_samples, cfg.z_dim), dtype=np.float32))
    # conditional runs: every class in turn (grid rows show classes; evaluation is class-balanced)
    fixed_y = (Tensor.from_numpy(np.arange(64, dtype=np.int32) % num_classes),) if cfg.conditional else ()
    eval_labels = np.arange(cfg.eval_samples, dtype=np.int32) % num_classes if cfg.conditional else None
    eval_y = (Tensor.from_numpy(eval_labels),) if cfg.conditional else ()
    logger = RunLogger(cfg.run_dir, cfg.to_dict(), cfg.steps, start, progress=not cfg.no_progress,
                       enabled=distributed.is_main())
    results = {}

    def refresh_ema():
        if cfg.ema == 0:
            ema.copy()

    def sample_hook(step):
        refresh_ema()
        if not distributed.is_main():  # every rank refreshes G_ema (identical state); rank 0 samples
            return
        if source.kind == "toy":
            picture = scatter_plot(sample(eval_z, *eval_y).asnumpy(), source.centers)
        else:
            picture = image_grid(sample(fixed_z, *fixed_y).asnumpy())
        logger.image("samples", step, picture)
        save_png(os.path.join(cfg.run_dir, "samples", f"step_{step:08d}.png"), picture)

    evaluator = []  # built at the first evaluation (image metrics may train their classifier)

    def eval_hook(step):
        refresh_ema()
        if not distributed.is_main():
            return
        if not evaluator:
            evaluator.append(make_evaluator(source, cfg.eval_samples, cfg.seed, log=tqdm.write))
        metrics = evaluator[0](sample(eval_z, *eval_y).asnumpy(), eval_labels)
        logger.scalars(step, {f"metrics/{k}": v for k, v in metrics.items() if not isinstance(v, list)})
        results.update(metrics, step=step)
        results.update({k.replace("/", "_"): v for k, v in logger.latest.items() if not k.startswith("metrics/")})
        rundir.write_metrics(cfg.run_dir, results)

    def save(step):
        refresh_ema()  # --ema 0: the checkpoint's g_ema is this step's G, not the last sampled one
        if not distributed.is_main():
            return
        meta = {"rng": rng.bit_generator.state, "config": cfg.to_dict(), "data": source.state(),
                "data_shape": list(source.shape), "kind": source.kind, "num_classes": source.num_classes}
        checkpoint.save(cfg.run_dir, step, state, meta, keep=cfg.keep_ckpts)

    def skip_hook(step):  # updates vetoed by --skip-nonfinite / loss-scale overflows (one sync per log)
        logger.scalars(step, {"skipped/d": t_d.skipped_count(), "skipped/g": t_g.skipped_count()})

    counts_skips = cfg.skip_nonfinite or cfg.loss_scale != "none"
    hooks = [Hook(cfg.sample_every, sample_hook), Hook(cfg.eval_every, eval_hook),
             Hook(cfg.log_every if counts_skips else 0, skip_hook)]
    code = 0
    if start < cfg.steps:
        _, code = train(phases, start_step=start, steps=cfg.steps, log_every=cfg.log_every, logger=logger,
                        save=save, ckpt_every=cfg.ckpt_every, hooks=hooks, steps_per_call=cfg.steps_per_call,
                        stop_on_nonfinite=not cfg.skip_nonfinite)
    if code == 0:
        results.update(skipped_d=t_d.skipped_count(), skipped_g=t_g.skipped_count(), device=device)
        if results.get("step") != cfg.steps:
            eval_hook(cfg.steps)
        if distributed.is_main():
            rundir.write_metrics(cfg.run_dir, results)
            summary = {k: round(v, 4) for k, v in results.items() if k in ("modes", "modes_pacgan", "hq", "fid", "precision", "recall")}
            print(f"done: {cfg.steps} steps {json.dumps(summary)} run dir: {cfg.run_dir}")
    distributed.report(state)  # --distributed: one digest line per rank (equal: bit-identical ranks)
    logger.close()
    return code


if __name__ == "__main__":
    run_cli(main)
