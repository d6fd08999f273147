"""GAN losses, penalties, and the two steps (D and G) built with make_step.

Losses are pure functions of logits, picked by name from LOSSES: (d_loss(real, fake), g_loss(fake)).
A new loss is one function pair and one dict line. Everything works on logits through a stable
softplus (log(1 + e^x) = relu(x) + log1p(e^-|x|)), never sigmoid followed by a log.
"""
from mindspore import ops

from loops.step import make_step, maybe_jit


def softplus(x):
    return ops.relu(x) + ops.log1p(ops.exp(-ops.abs(x)))


# non-saturating (Goodfellow et al. 2014): D maximises log D(x) + log(1 - D(G(z))),
# G maximises log D(G(z)). With D = sigmoid(l): -log D = softplus(-l), -log(1 - D) = softplus(l).
def d_ns(real, fake):
    return ops.mean(softplus(-real)) + ops.mean(softplus(fake))


def g_ns(fake):
    return ops.mean(softplus(-fake))


# minimax: same D; G minimises log(1 - D(G(z))) = -softplus(l) (saturates when D wins).
def g_minimax(fake):
    return -ops.mean(softplus(fake))


# hinge (Lim & Ye 2017; Miyato et al. 2018).
def d_hinge(real, fake):
    return ops.mean(ops.relu(1.0 - real)) + ops.mean(ops.relu(1.0 + fake))


def g_hinge(fake):
    return -ops.mean(fake)


# Wasserstein (Arjovsky et al. 2017): D (the critic) maximises E[D(x)] - E[D(G(z))].
def d_wgan(real, fake):
    return ops.mean(fake) - ops.mean(real)


def g_wgan(fake):
    return -ops.mean(fake)


# least squares (Mao et al. 2017), targets a=0 (fake), b=1 (real), c=1 (G's target).
def d_lsgan(real, fake):
    return 0.5 * ops.mean(ops.square(real - 1.0)) + 0.5 * ops.mean(ops.square(fake))


def g_lsgan(fake):
    return 0.5 * ops.mean(ops.square(fake - 1.0))


LOSSES = {
    "ns": (d_ns, g_ns),
    "minimax": (d_ns, g_minimax),
    "hinge": (d_hinge, g_hinge),
    "wgan": (d_wgan, g_wgan),
    "lsgan": (d_lsgan, g_lsgan),
}


def per_sample_grad_norm(grad):
    """||grad_i||_2 per sample, taken over every non-batch axis (C, H, W), not just one."""
    return ops.sqrt(ops.sum(ops.square(grad.reshape(grad.shape[0], -1)), dim=1) + 1e-12)


def make_gan_steps(generator, discriminator, loss, opt_g, opt_d, transform_g=None, transform_d=None):
    """(d_step, g_step) for the loss named `loss`.

    d_step(real, z) -> (loss_d, (mean real logit, mean fake logit), grad norms); updates D only.
    g_step(z) -> (loss_g, (), grad norms); updates G only (D's parameters are not in opt_g).
    """
    d_loss_fn, g_loss_fn = LOSSES[loss]

    def d_forward(real, z):
        fake = ops.stop_gradient(generator(z))  # D's step must not build G's backward graph
        real_logits = discriminator(real)
        fake_logits = discriminator(fake)
        return d_loss_fn(real_logits, fake_logits), ops.mean(real_logits), ops.mean(fake_logits)

    def g_forward(z):
        return g_loss_fn(discriminator(generator(z)))

    d_step = make_step(d_forward, opt_d, transform_d, has_aux=True)
    g_step = make_step(g_forward, opt_g, transform_g)
    return d_step, g_step


def make_sampler(generator):
    """A compiled z -> G(z) for an eval-mode generator (its own graph: BatchNorm uses running stats)."""
    generator.set_train(False)

    def sample(z):
        return generator(z)
    return maybe_jit(sample)


def build_models(arch, z_dim, shape, width, num_classes=0):
    """(G, D, G_ema) with parameter names prefixed g. / d. / g_ema. (unique in graphs and checkpoints)."""
    from models import ARCHS
    make_g, make_d = ARCHS[arch]
    generator = make_g(z_dim, shape, width=width, num_classes=num_classes)
    discriminator = make_d(shape, width=width, num_classes=num_classes)
    g_ema = make_g(z_dim, shape, width=width, num_classes=num_classes)
    generator.update_parameters_name("g.")
    discriminator.update_parameters_name("d.")
    g_ema.update_parameters_name("g_ema.")
    return generator, discriminator, g_ema
