"""The GAN as driver phases over three declared models: D (learns), G (learns), G_ema (follows G).

An iteration: D x n_critic (each `draw_d` then D's compiled step), G (`draw_g`, G's step), lazy R1
every --r1-every iterations (`draw_r1`, its own D step), the EMA update. Every draw takes its host
inputs from the run's ONE numpy Generator, in a fixed order, and packs them by name into the step's
layout (gan/steps.py), so resume and the multi-step engine stay bit-identical. Hooks (samples,
metrics, checkpoints) run between calls, on the host.
"""

import numpy as np
from mindspore import Tensor
from tqdm import tqdm

from gan import augment
from gan.evaluate import EVALUATION, GENERATION  # noqa: F401  (python -m metrics, generate.py ask this recipe)
from gan.models import make_nets, make_sampler, sample_in_chunks
from gan.hooks import EvalHook, SampleHook
from gan.pictures import image_grid, scatter_plot
from gan.steps import make_gan_steps, make_lazy_r1_step
from loops import distributed
from loops.driver import Hook, Phase
from loops.ema import EMA
from loops.learner import Learner, all_state, declare, settings
from loops.memory import FLOAT
from loops.schedules import lr_at
from metrics.evaluate import make_evaluator


def lazy_r1_adjusted(cfg):
    """D's learning rate and betas under lazy R1 (StyleGAN2, Karras et al. 2020): with R1 as an extra
    D update every k iterations, c = k / (k + 1), lr x c and betas ** c keep the optimizer's
    effective step size and averaging horizon per iteration those of k plain updates."""
    c = cfg.r1_every / (cfg.r1_every + 1)
    return cfg.lr_d * c, (cfg.beta1_d ** c, cfg.beta2_d ** c)


def nets_for(cfg, source):
    """(G, D, G_ema) for this config and data; ValueError when the architecture cannot take the
    data's shape (called before the run dir is made, so that error leaves nothing behind)."""
    num_classes = source.num_classes if cfg.conditional else 0
    return make_nets(cfg.arch, cfg.z_dim, source.shape, cfg.width, num_classes, cfg.pack, cfg.spectral_norm,
                     cfg.width_d)


def memory_parts(cfg, shape):
    """Lower bounds of what this run's own arrays take (loops/memory.py): a batch's training
    activations (data, latents and the first hidden layer, kept for the backward pass: an MLP's width,
    a convolution's width x a quarter of the pixels) and the end-of-run evaluation (the samples, as
    many real images and their features; sampling itself runs in fixed chunks)."""
    size = int(np.prod(shape))
    hidden = cfg.width * (int(np.prod(shape[1:])) // 4 if len(shape) == 3 else 1)
    images = len(shape) == 3  # toy runs: no real samples or features are kept, only the samples
    per_eval_sample = 2 * size + cfg.z_dim + 138 if images else size + cfg.z_dim  # real images are read before
    return [(f"--batch-size {cfg.batch_size} (a training step's activations)",  # the samples exist: the larger
             2 * cfg.batch_size * (size + cfg.z_dim + hidden) * FLOAT),
            (f"--eval-samples {cfg.eval_samples} (the evaluation's samples, real images and features)",
             cfg.eval_samples * per_eval_sample * FLOAT)]


class GANTrainer:
    def __init__(self, cfg, run, source, nets):
        self.cfg, self.run, self.rng, self.source = cfg, run, run.rng, source
        self.num_classes = source.num_classes if cfg.conditional else 0
        self.lazy_r1 = cfg.r1 > 0 and cfg.r1_every > 1
        self.scheduled = cfg.lr_schedule != "constant" or cfg.warmup > 0
        self.policies = augment.parse(cfg.diffaug)
        self.arity = augment.arity(self.policies, source.shape) if self.policies else 0
        G, D, G_ema = nets
        lr_d, betas_d = lazy_r1_adjusted(cfg) if self.lazy_r1 else (None, None)
        self.base_lr = {"g": cfg.lr_g, "d": lr_d or cfg.lr_d}
        self.g = Learner.from_config("g", G, cfg)
        self.d = Learner.from_config("d", D, cfg, lr=lr_d, betas=betas_d)
        self.g_ema = declare("g_ema", G_ema, amp=cfg.amp)
        self.build_steps()
        self.ema = EMA(self.g.net, self.g_ema, cfg.ema)
        self.sample = make_sampler(self.g_ema)
        self.state = all_state(self.g, self.d, self.g_ema)
        self.batch = distributed.global_batch(cfg.batch_size)  # every rank draws the global batch
        self.fixed_inputs()
        self.sample_hook = SampleHook(run, self.picture, before=self.refresh_ema)
        self.eval_hook = EvalHook(run, self.eval_samples, self.evaluator, before=self.refresh_ema)

    def build_steps(self):
        """D's and G's steps (and lazy R1's) by gan/steps.py, the one path tests and benchmarks use too."""
        cfg, g, d = self.cfg, self.g, self.d
        reducer = distributed.grad_reducer  # data parallel (None in one process)
        self.d_step, self.g_step = make_gan_steps(
            g.net, d.net, cfg.loss, g.optimizer, d.optimizer, g.transform, d.transform, pack_size=cfg.pack,
            r1=0.0 if self.lazy_r1 else cfg.r1, gp=cfg.gp, takes_lr=self.scheduled, grad_reducer=reducer,
            conditional=cfg.conditional, augment_policies=self.policies, augment_arity=self.arity,
            weight_clip=cfg.weight_clip)
        self.d_layout, self.g_layout = self.d_step.layout, self.g_step.layout
        if self.lazy_r1:
            self.r1_step = make_lazy_r1_step(d.net, d.optimizer, cfg.r1, cfg.r1_every, d.transform, cfg.pack,
                                             cfg.conditional, self.policies, cfg.weight_clip, grad_reducer=reducer)
            self.r1_layout = self.r1_step.layout

    # ---- host draws: one call's inputs, always in the same order from the one RNG ----
    def latent(self):
        return self.rng.standard_normal((self.batch, self.cfg.z_dim), dtype=np.float32)

    def fake_labels(self):  # uniform classes for G's samples (conditional runs)
        return self.rng.integers(0, self.num_classes, self.batch).astype(np.int32) if self.cfg.conditional else None

    def augmentation(self):  # DiffAugment's random draws for one batch
        return augment.draw(self.rng, self.policies, self.batch, self.source.shape) if self.policies else ()

    def lr(self, name, step):  # host-side schedule (None: constant, the step takes no rate)
        if not self.scheduled:
            return None
        return lr_at(step, self.base_lr[name], self.cfg.lr_schedule, self.cfg.steps, self.cfg.warmup)

    def shard(self, **named):  # --distributed: this rank's slice of every global-batch array
        names = [k for k, v in named.items() if v is not None and not isinstance(v, tuple)]
        for name, part in zip(names, distributed.shard(*(named[k] for k in names))):
            named[name] = part
        for name, value in named.items():
            if isinstance(value, tuple):
                named[name] = distributed.shard(*value)
        return {k: v for k, v in named.items() if v is not None}

    def draw_d(self, step):
        # this order of draws is part of the checkpoint format: changing it breaks exact resume
        real, real_labels = self.source.next(self.rng)
        y_real = real_labels if self.cfg.conditional else None
        y_fake = self.fake_labels()
        aug_real, aug_fake = self.augmentation(), self.augmentation()
        alpha = self.rng.uniform(size=self.batch // self.cfg.pack).astype(np.float32) if self.cfg.gp > 0 else None
        z = self.latent()
        named = self.shard(real=real, z=z, y_real=y_real, y_fake=y_fake, aug_real=aug_real, aug_fake=aug_fake,
                           alpha=alpha)
        return self.d_step.host_inputs(self.d_layout.pack(**named), self.rng, self.lr("d", step))

    def draw_g(self, step):
        z = self.latent()
        named = self.shard(z=z, y_fake=self.fake_labels(), aug_fake=self.augmentation())
        return self.g_step.host_inputs(self.g_layout.pack(**named), self.rng, self.lr("g", step))

    def draw_r1(self, step):
        real, real_labels = self.source.next(self.rng)
        named = self.shard(real=real, y_real=real_labels if self.cfg.conditional else None,
                           aug_real=self.augmentation())
        return self.r1_step.host_inputs(self.r1_layout.pack(**named), self.rng)

    def phases(self):
        """D x n_critic, G (or G first with --g-first), lazy R1, EMA. With --accumulate-X K a phase
        runs K micro-batch steps per update (the transform applies every K-th)."""
        cfg, g, d = self.cfg, self.g, self.d
        d_phase = Phase("d", self.draw_d, self.d_step.scalars, (d.loss_tag, "d_out/real", "d_out/fake", d.grad_norm_tag),
                        repeat=cfg.n_critic * settings(cfg, "d")["accumulate"])
        g_phase = Phase("g", self.draw_g, self.g_step.scalars, (g.loss_tag, g.grad_norm_tag),
                        repeat=settings(cfg, "g")["accumulate"])
        phases = [g_phase, d_phase] if cfg.g_first else [d_phase, g_phase]
        if self.lazy_r1:
            phases.append(Phase("r1", self.draw_r1, self.r1_step.scalars, ("loss/r1",), every=cfg.r1_every))
        if cfg.ema > 0:
            phases.append(Phase("ema", lambda step: (), self.ema.phase_body, ("ema/decay",)))
        return phases

    # ---- hooks: between compiled calls, on the host ----
    def fixed_inputs(self):
        """Fixed noise from its own streams, so sampling never disturbs the training RNG; conditional
        runs sample every class in turn (grid rows show classes; evaluation is class-balanced)."""
        cfg, k = self.cfg, self.num_classes

        def normals(n, stream):
            return np.random.default_rng([cfg.seed, stream]).standard_normal((n, cfg.z_dim), dtype=np.float32)
        self.fixed_z, self.eval_z = Tensor.from_numpy(normals(64, 7)), normals(cfg.eval_samples, 8)
        self.fixed_y = (Tensor.from_numpy(np.arange(64, dtype=np.int32) % k),) if k else ()
        self.eval_labels = np.arange(cfg.eval_samples, dtype=np.int32) % k if k else None

    def refresh_ema(self):  # --ema 0: G_ema is G itself, copied whenever it is used
        if self.cfg.ema == 0:
            self.ema.copy()

    def picture(self, step):
        """The sample picture: an image grid of G_ema at the fixed latents, or a scatter plot over the modes."""
        if self.source.kind == "toy":
            return scatter_plot(self.eval_samples()[0], self.source.centers, step=step)
        return image_grid(self.sample(self.fixed_z, *self.fixed_y).asnumpy())

    def eval_samples(self):
        """(G_ema's samples at the evaluation latents, the classes they were asked for or None), in the
        fixed-size calls python -m metrics and generate.py make too (bounded memory, equal samples)."""
        def call(z, labels):
            y = (Tensor.from_numpy(labels),) if labels is not None else ()
            return self.sample(Tensor.from_numpy(z), *y).asnumpy()
        return sample_in_chunks(call, self.eval_z, self.eval_labels), self.eval_labels

    def evaluator(self):
        return make_evaluator(self.source, self.cfg.eval_samples, self.cfg.seed, log=tqdm.write)

    def skip_hook(self, step):  # updates vetoed by --skip-nonfinite / loss-scale overflows (one sync per log)
        self.run.logger.scalars(step, {"skipped/d": self.d.skipped(), "skipped/g": self.g.skipped()})

    def save(self, step, final=True):
        self.refresh_ema()  # --ema 0: the checkpoint's g_ema is this step's G, not the last sampled one
        self.run.save(step, final)

    def checkpoint_meta(self):
        source = self.source
        return {"data": source.state(), "data_shape": list(source.shape), "kind": source.kind,
                "num_classes": source.num_classes}

    def hooks(self):
        cfg = self.cfg
        counts_skips = any(settings(cfg, m)["skip_nonfinite"] or settings(cfg, m)["loss_scale"] != "none"
                           for m in ("g", "d"))
        return [Hook(cfg.sample_every, self.sample_hook), Hook(cfg.eval_every, self.eval_hook),
                Hook(cfg.log_every if counts_skips else 0, self.skip_hook)]

    def final_results(self):
        """The end-of-run metrics.json: the last evaluation (run now if the end was not evaluated),
        the last logged values, vetoed update counts, the device."""
        results = self.eval_hook.results
        results.update(skipped_d=self.d.skipped(), skipped_g=self.g.skipped(), device=self.run.device)
        if results.get("step") != self.cfg.steps:
            self.eval_hook(self.cfg.steps)
        return results
