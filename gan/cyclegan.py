"""CycleGAN (Zhu et al. 2017): unpaired image-to-image translation, as junyanz/pytorch-CycleGAN-and-pix2pix.

    python train_translate.py --model cyclegan                      # sneaker2boot on real Fashion-MNIST
    python train_translate.py --model cyclegan --data-dir DIR       # DIR/trainA trainB testA testB

Four networks in two Learners, grouped as the reference groups its optimizers: "g" holds G_A (A -> B)
and G_B (B -> A) under one Adam, "d" holds D_A (judges domain B) and D_B (judges domain A) under
another; each Learner is updated by its own compiled step. One iteration, in the reference's order:
    G minimises  GAN(D_A(G_A(a))) + GAN(D_B(G_B(b)))                                 (as real)
                 + lambda_A |G_B(G_A(a)) - a| + lambda_B |G_A(G_B(b)) - b|            (cycle, 10 each)
                 + lambda_idt (lambda_B |G_A(b) - b| + lambda_A |G_B(a) - a|)          (identity, 0.5)
    D minimises  (GAN(D_A(b)) + GAN(D_A(pool_B(G_A(a))), fake)) / 2 + the same for D_B on domain A
with LSGAN (the reference's default), D judging fakes drawn from a 50-image pool per domain
(ImagePool below: half the time an older fake, as Shrivastava et al. 2017), the fakes being those of
G's step (computed before G's update, as the reference's single forward). Adam 2e-4, beta1 0.5,
constant then linear decay. The pools are part of every checkpoint: resume is exact.
Differences from the reference (docs/translate.md): small ResNet generators, small PatchGANs and a
batch of 8 by default, sized for 28x28 on a CPU; one driver iteration is one batch (the reference
counts epochs).
"""
from dataclasses import dataclass

import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from gan.losses import LOSSES
from gan.translation import Translator, build_generator, build_nets, check_task, eval_function, reference_gan_loss, \
    translation_config
from gan.translation_metrics import EVALUATION, GENERATION  # noqa: F401  (python -m metrics, generate.py)
from loops import distributed
from loops.config import UserError, opt
from loops.driver import Phase
from loops.learner import Learner, all_state
from loops.step import maybe_jit

MODELS = {"g": "both generators", "d": "both discriminators"}


@dataclass
class Config(translation_config("cyclegan", MODELS, netg="resnet_small", netd="small", batch_size=8, steps=2000)):
    HELP_GROUPS = {"CycleGAN": ("loss", "lambda_a", "lambda_b", "lambda_identity", "pool_size")}
    TASK, PAIRED = "sneaker2boot", False
    loss: str = opt("lsgan", "GAN loss (lsgan: the reference's default; ns: vanilla BCE)", sorted(LOSSES))
    lambda_a: float = opt(10.0, "weight of the cycle loss A -> B -> A")
    lambda_b: float = opt(10.0, "weight of the cycle loss B -> A -> B")
    lambda_identity: float = opt(0.5, "identity loss weight, relative to lambda_a / lambda_b (0: off)")
    pool_size: int = opt(50, "fakes kept per domain for D (0: D sees only the newest)")

    def validate(self):
        super().validate()
        self.check_non_negative("lambda_a", "lambda_b", "lambda_identity", "pool_size")
        self.check(self.steps_per_call == 1, "--steps-per-call must be 1 for cyclegan: D's fakes come from "
                                             "the image pools, on the host, between the two steps")
        check_task(self, paired=False)


class Pair(nn.Cell):
    """Two networks learning under one optimizer, as the reference's itertools.chain of parameters."""

    def __init__(self, first, second, names):
        super().__init__()
        setattr(self, names[0], first)
        setattr(self, names[1], second)


class ImagePool:
    """The reference's ImagePool (Shrivastava et al. 2017), drawn from the run's RNG: while the pool
    holds fewer than `size` images, each new fake is stored and returned; after that, each fake is, with
    probability 1/2, swapped for a random stored one (which is returned), else returned as it is.
    Its images live in a Parameter, so checkpoints hold them."""

    def __init__(self, size, shape, name):
        self.size, self.count = size, 0
        self.images = np.zeros((max(size, 1),) + tuple(shape), np.float32)
        self.param = Parameter(Tensor(self.images), name=f"{name}.images", requires_grad=False)

    def query(self, fakes, rng):
        if self.size == 0:
            return fakes
        out = fakes.copy()
        for i, image in enumerate(fakes):
            if self.count < self.size:
                self.images[self.count] = image
                self.count += 1
            elif rng.uniform() > 0.5:
                k = int(rng.integers(0, self.size))
                out[i], self.images[k] = self.images[k].copy(), image
        return out

    def sync_to_parameter(self):
        self.param.set_data(Tensor(self.images.copy()))

    def load_from_parameter(self, count):
        self.images, self.count = self.param.asnumpy().copy(), int(count)


class CycleGAN(Translator):
    DIRECTIONS, CYCLE = ("AtoB", "BtoA"), True

    def __init__(self, cfg, run, source):
        super().__init__(cfg, run, source)
        a, b = source.shape_a[0], source.shape_b[0]
        if cfg.lambda_identity > 0 and source.shape_a != source.shape_b:  # G_A(b) needs b to look like an A
            raise UserError(f"--lambda-identity needs domains of one shape; A is {source.shape_a}, B is "
                            f"{source.shape_b}: pass --lambda-identity 0")
        g_a, d_a = build_nets(cfg, a, b, b, source.shape_a[1])  # G_A: A -> B, D_A judges domain B
        g_b, d_b = build_nets(cfg, b, a, a, source.shape_b[1])  # G_B: B -> A, D_B judges domain A
        gens, discs = Pair(g_a, g_b, ("g_a", "g_b")), Pair(d_a, d_b, ("d_a", "d_b"))
        self.g = Learner.from_config("g", gens, cfg)
        self.d = Learner.from_config("d", discs, cfg)
        self.pool_a = ImagePool(cfg.pool_size, source.shape_a, "pool_a")
        self.pool_b = ImagePool(cfg.pool_size, source.shape_b, "pool_b")
        reducer = distributed.grad_reducer  # data parallel (None in one process)
        self.g_loss, self.d_loss = self.g_forward(), self.d_forward()  # forward functions, also for tests
        self.g_step = self.g.step(self.g_loss, has_aux=True, takes_lr=True, grad_reducer=reducer)
        self.d_step = self.d.step(self.d_loss, has_aux=True, takes_lr=True, grad_reducer=reducer)
        self.state = all_state(self.g, self.d) + [self.pool_a.param, self.pool_b.param]
        used = self.averaged(lambda: Pair(build_generator(cfg, a, b), build_generator(cfg, b, a), ("g_a", "g_b")))
        self.to_b, self.to_a = eval_function(used.g_a), eval_function(used.g_b)
        self.pair, self.fakes = None, None

    def g_forward(self):
        G_A, G_B, D_A, D_B = self.g.net.g_a, self.g.net.g_b, self.d.net.d_a, self.d.net.d_b
        _, g_loss = reference_gan_loss(self.cfg.loss)
        lam_a, lam_b, idt = self.cfg.lambda_a, self.cfg.lambda_b, self.cfg.lambda_identity

        def forward(a, b):
            fake_b, fake_a = G_A(a), G_B(b)
            gan = g_loss(D_A(fake_b)) + g_loss(D_B(fake_a))
            cycle_a = lam_a * ops.mean(ops.abs(G_B(fake_b) - a))
            cycle_b = lam_b * ops.mean(ops.abs(G_A(fake_a) - b))
            loss = gan + cycle_a + cycle_b
            identity = ops.zeros((), a.dtype)
            if idt > 0:  # checked in __init__: the domains share their shape
                identity = idt * (lam_b * ops.mean(ops.abs(G_A(b) - b)) + lam_a * ops.mean(ops.abs(G_B(a) - a)))
                loss = loss + identity
            return loss, gan, cycle_a, cycle_b, identity, ops.stop_gradient(fake_b), ops.stop_gradient(fake_a)
        return forward

    def d_forward(self):
        D_A, D_B = self.d.net.d_a, self.d.net.d_b
        d_loss, _ = reference_gan_loss(self.cfg.loss)

        def forward(a, b, pooled_fake_a, pooled_fake_b):
            loss_a = d_loss(D_A(b), D_A(pooled_fake_b))  # D_A: real B vs G_A's fakes
            loss_b = d_loss(D_B(a), D_B(pooled_fake_a))  # D_B: real A vs G_B's fakes
            return loss_a + loss_b, loss_a, loss_b
        return forward

    # ---- host side: one batch per iteration, D's fakes through the pools ----
    def draw_g(self, step):
        self.pair = distributed.shard(*self.source.next(self.rng))  # every rank draws the global batch
        return self.g_step.host_inputs(self.pair, self.rng, self.lr("g", step))

    def draw_d(self, step):
        # The fakes of the global batch (all-gathered under --distributed): every rank runs the same pool
        # draws on the same images, so the pools stay identical on all ranks (rank 0's checkpoint resumes
        # them exactly) and equal one process's over the global batch; each rank's D sees its own slice.
        fake_b, fake_a = (f.asnumpy() for f in self.fakes)
        pooled_a = self.pool_a.query(fake_a, self.rng)
        pooled_b = self.pool_b.query(fake_b, self.rng)
        pooled = distributed.shard(pooled_a, pooled_b)
        return self.d_step.host_inputs(self.pair + pooled, self.rng, self.lr("d", step))

    def phases(self):
        step = self.g_step
        gather = ops.AllGather() if distributed.active() else None  # rank order: the global batch's order

        def g_body(*inputs):  # the tagged scalars first, then G's fakes (kept for D's pools)
            loss, aux, norm, norm_after = step.body(*inputs)
            fakes = (aux[4], aux[5]) if gather is None else (gather(aux[4]), gather(aux[5]))
            return (loss,) + tuple(aux[:4]) + (norm,) + fakes + (norm_after,)
        compiled = maybe_jit(g_body)

        def g_call(*inputs):
            out = compiled(*inputs)
            self.fakes = out[6:8]  # fake B, fake A
            return out
        g_tags = ("loss/g", "loss/g_gan", "loss/cycle_a", "loss/cycle_b", "loss/identity", "grad_norm/g")
        d_tags = ("loss/d", "loss/d_a", "loss/d_b", "grad_norm/d")
        return [Phase("g", self.draw_g, g_body, g_tags, compiled=g_call),
                Phase("d", self.draw_d, self.d_step.scalars, d_tags)] + self.ema_phases()

    def without_ema(self):
        """Translate with G_A and G_B themselves, not their EMA (generate.py / python -m metrics --no-ema)."""
        self.to_b, self.to_a = eval_function(self.g.net.g_a), eval_function(self.g.net.g_b)

    def translate(self, direction, images):
        return (self.to_b if direction == "AtoB" else self.to_a)(images)

    # ---- checkpoints: the pools ----
    def host_state(self):
        return {**super().host_state(), "pool_counts": [self.pool_a.count, self.pool_b.count]}

    def load_host_state(self, meta):
        super().load_host_state(meta)
        if meta:
            self.pool_a.load_from_parameter(meta["pool_counts"][0])
            self.pool_b.load_from_parameter(meta["pool_counts"][1])

    def before_save(self):
        self.pool_a.sync_to_parameter()
        self.pool_b.sync_to_parameter()


TRAINER = CycleGAN
