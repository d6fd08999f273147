"""GAN losses: pure functions of D's logits, picked by name from LOSSES: (d_loss(real, fake), g_loss(fake)).

A new loss is one function pair and one dict line. Everything works on logits through a stable
softplus (log(1 + e^x) = relu(x) + log1p(e^-|x|)), never sigmoid followed by a log.
"""
from mindspore import ops


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
