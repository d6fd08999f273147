"""pix2pix (Isola et al. 2017): paired image-to-image translation, as junyanz/pytorch-CycleGAN-and-pix2pix.

    python train_translate.py --model pix2pix                       # edges2fashion on real Fashion-MNIST
    python train_translate.py --model pix2pix --data-dir DIR        # DIR/train, DIR/test: A|B side by side

Two Learners: G (A -> B) and D, a PatchGAN that judges the pair (A, B) stacked on channels. One
iteration, in the reference's order: D's step on real pairs and stop_gradient(G(A)), then G's step
    G minimises  GAN(D(A, G(A)) as real) + lambda_l1 * E|G(A) - B|       (lambda_l1 = 100)
    D minimises  (GAN(D(A, B) as real) + GAN(D(A, G(A)) as fake)) / 2
with the reference's GANLoss (vanilla: BCE on logits; lsgan: squared error; gan/losses.py's LOSSES
scaled to equal it). Adam 2e-4, beta1 0.5, constant then linear decay (--decay-steps).
Differences from the reference (docs/translate.md): sized for 28x28 / 32x32 on a CPU by default (a
small U-Net or ResNet, instance norm, a batch of 16; the reference's unet_256 / basic D / batch norm
/ batch 1 are flags away); no dropout in G by default (in-graph dropout would make resume inexact);
outputs are scored and pictured with G in eval mode.
"""
from dataclasses import dataclass

from mindspore import ops

from gan.losses import LOSSES
from gan.translation import Translator, build_generator, build_nets, check_task, eval_function, reference_gan_loss, \
    translation_config
from gan.translation_metrics import EVALUATION, GENERATION  # noqa: F401  (python -m metrics, generate.py)
from loops import distributed
from loops.config import opt
from loops.driver import Phase
from loops.learner import Learner, all_state

MODELS = {"g": "G", "d": "D"}


@dataclass
class Config(translation_config("pix2pix", MODELS, netg="unet_32", netd="small", image_size=32, batch_size=16,
                                 steps=2000)):
    HELP_GROUPS = {"pix2pix": ("loss", "lambda_l1")}
    TASK, PAIRED = "edges2fashion", True
    loss: str = opt("ns", "GAN loss (ns: the reference's vanilla BCE; lsgan)", sorted(LOSSES))
    lambda_l1: float = opt(100.0, "weight of the L1 term in G's loss")

    def validate(self):
        super().validate()
        self.check_non_negative("lambda_l1")
        check_task(self, paired=True)


class Pix2Pix(Translator):
    def __init__(self, cfg, run, source):
        super().__init__(cfg, run, source)
        a, b = source.shape_a[0], source.shape_b[0]
        generator, discriminator = build_nets(cfg, a, b, a + b, source.shape_a[1])  # D judges (A, B) pairs
        self.g = Learner.from_config("g", generator, cfg)
        self.d = Learner.from_config("d", discriminator, cfg)
        d_loss, g_loss = reference_gan_loss(cfg.loss)
        G, D, lam = self.g.net, self.d.net, cfg.lambda_l1

        def d_forward(a, b):
            fake = ops.stop_gradient(G(a))
            real_logits = D(ops.concat((a, b), 1))
            fake_logits = D(ops.concat((a, fake), 1))
            return d_loss(real_logits, fake_logits), ops.mean(real_logits), ops.mean(fake_logits)

        def g_forward(a, b):
            fake = G(a)
            gan = g_loss(D(ops.concat((a, fake), 1)))
            l1 = ops.mean(ops.abs(fake - b))
            return gan + lam * l1, gan, l1
        reducer = distributed.grad_reducer  # data parallel (None in one process)
        self.d_forward, self.g_forward = d_forward, g_forward
        self.d_step = self.d.step(d_forward, has_aux=True, takes_lr=True, grad_reducer=reducer)
        self.g_step = self.g.step(g_forward, has_aux=True, takes_lr=True, grad_reducer=reducer)
        self.state = all_state(self.g, self.d)
        self.g_eval = self.averaged(lambda: build_generator(cfg, a, b))
        self.generate = None
        self.pair = None

    def draw_d(self, step):
        self.pair = distributed.shard(*self.source.next(self.rng))  # G's step reads the same pair, as the reference
        return self.d_step.host_inputs(self.pair, self.rng, self.lr("d", step))

    def draw_g(self, step):
        return self.g_step.host_inputs(self.pair, self.rng, self.lr("g", step))

    def phases(self):
        return [Phase("d", self.draw_d, self.d_step.scalars, ("loss/d", "d_out/real", "d_out/fake", "grad_norm/d")),
                Phase("g", self.draw_g, self.g_step.scalars, ("loss/g", "loss/g_gan", "loss/g_l1", "grad_norm/g"))
                ] + self.ema_phases()

    def without_ema(self):
        """Translate with G itself, not G_ema (generate.py / python -m metrics --no-ema)."""
        self.g_eval, self.generate = self.g.net, None

    def translate(self, direction, images):
        """G(images) (G_ema's with --ema) in eval mode (its own compiled graph)."""
        if self.generate is None:
            self.generate = eval_function(self.g_eval)
        return self.generate(images)


TRAINER = Pix2Pix
