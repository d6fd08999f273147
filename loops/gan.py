"""GAN losses, penalties, and the two steps (D and G) built with make_step.

Losses are pure functions of logits, picked by name from LOSSES: (d_loss(real, fake), g_loss(fake)).
A new loss is one function pair and one dict line. Everything works on logits through a stable
softplus (log(1 + e^x) = relu(x) + log1p(e^-|x|)), never sigmoid followed by a log.
"""
import mindspore as ms
from mindspore import ops

from loops import augment
from loops.constraints import ClipWeights
from loops.step import jit_enabled, make_step, maybe_jit


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


def per_sample_grad_norm(grad, pack_size=1):
    """||grad_i||_2 per D input, taken over every non-batch axis (C, H, W), not just one.
    With PacGAN packing a D input is m consecutive samples, so the norm runs over all m of them:
    the gradient w.r.t. the packed input is the per-sample gradients side by side."""
    return ops.sqrt(ops.sum(ops.square(grad.reshape(grad.shape[0] // pack_size, -1)), dim=1) + 1e-12)


def r1_penalty(grad, gamma, pack_size=1):
    """(gamma / 2) E ||grad_x D(x)||^2 over D inputs (Mescheder et al. 2018)."""
    return (gamma / 2) * ops.mean(ops.square(per_sample_grad_norm(grad, pack_size)))


def per_input_weights(alpha, pack_size, ndim):
    """GP's interpolation weights, one per D input (B/m,), repeated over the m samples of each pack
    and shaped to broadcast over a (B, ...) batch."""
    a = alpha.reshape(-1, 1).broadcast_to((alpha.shape[0], pack_size)).reshape(-1)
    return a.reshape((-1,) + (1,) * (ndim - 1))


def input_gradient(fn):
    """d fn / d (first input), for penalties that are differentiated again (second order).

    Compiled even under --mode pynative: MindSpore 2.10's PyNative autodiff silently drops the
    second-order gradient along a view op (reshape, transpose) that runs inside the first backward
    pass and feeds another backward op. R1 / GP then gave exactly zero gradient to the DCGAN head
    and to every spectral-norm layer (graph mode matched finite differences). Compiling just this
    function makes PyNative agree with graph mode to ~1e-7 (tests/test_penalties.py)."""
    grad = ms.grad(fn, grad_position=0)
    return grad if jit_enabled() else ms.jit(grad)


def pack(x, m):
    """PacGAN (Lin et al. 2018): m consecutive samples become one D input, concatenated along the
    first feature axis: (B, C, ...) -> (B/m, m*C, ...). D then judges m samples jointly, which
    penalises a generator that covers few modes."""
    return x if m == 1 else x.reshape((x.shape[0] // m, m * x.shape[1]) + x.shape[2:])


def make_gan_steps(generator, discriminator, loss, opt_g, opt_d, transform_g=None, transform_d=None,
                   pack_size=1, r1=0.0, gp=0.0, takes_lr=False, grad_reducer=None, conditional=False,
                   augment_policies=(), augment_arity=0, weight_clip=0.0):
    """(d_step, g_step) for the loss named `loss`.

    d_step(real, z[, alpha]) -> (loss_d, (mean real logit, mean fake logit), grad norms); updates D
    only. `alpha` (B / pack_size,) ~ U[0, 1] from the host, one per D input, is taken when gp > 0.
    g_step(z) -> (loss_g, (), grad norms); updates G only (D's parameters are not in opt_g).
    conditional: the steps take class labels right after z: d_step(real, z, y_real, y_fake[, alpha]),
    g_step(z, y_fake); G and D receive them (class embedding in G, projection in D).
    augment_policies (DiffAugment, loops/augment.py): then the host-drawn augmentation tensors
    (augment_arity of them per batch) follow the labels: d_step(..., aug_real..., aug_fake...[, alpha]),
    g_step(z[, y], aug...); every image D sees, real or fake, is augmented.
    Penalties live in D's forward function, so their second-order gradients compile with it:
      r1: (r1 / 2) E ||grad_x D(x)||^2 on real data (Mescheder et al. 2018);
      gp: gp E (||grad_x D(x_hat)||_2 - 1)^2, x_hat = a x + (1 - a) G(z), a ~ U[0, 1] per D input
          (Gulrajani et al. 2017), the norm taken per D input over all non-batch axes.
      Both are defined on what D judges: with PacGAN packing, one packed input of m samples (the
      norm spans the m samples, and they share one interpolation weight a).
    weight_clip: clip every D parameter to [-c, c] after each D update (WGAN, Arjovsky et al. 2017).
    grad_reducer: data parallel, a factory `parameters -> (grads -> grads)` (loops.distributed.grad_reducer),
    called once per model: an all-reduce is built for one optimizer's parameters.
    """
    d_loss_fn, g_loss_fn = LOSSES[loss]

    n_labels, m = (2 if conditional else 0), augment_arity

    def d_of(x, y, aug):
        if augment_policies:
            x = augment.apply(x, aug, augment_policies)
        return discriminator(pack(x, pack_size), y)

    def d_sum(x, y, aug):
        return ops.sum(d_of(x, y, aug))

    input_grad = input_gradient(d_sum)

    def d_forward(real, z, *extra):
        y_real, y_fake = (extra[0], extra[1]) if conditional else (None, None)
        aug_real, aug_fake = extra[n_labels:n_labels + m], extra[n_labels + m:n_labels + 2 * m]
        fake = ops.stop_gradient(generator(z, y_fake))  # D's step must not build G's backward graph
        real_logits = d_of(real, y_real, aug_real)
        fake_logits = d_of(fake, y_fake, aug_fake)
        loss_d = d_loss_fn(real_logits, fake_logits)
        if r1 > 0:
            loss_d = loss_d + r1_penalty(input_grad(real, y_real, aug_real), r1, pack_size)
        if gp > 0:
            a = per_input_weights(extra[-1], pack_size, real.ndim)
            x_hat = a * real + (1.0 - a) * fake
            grad = input_grad(x_hat, y_real, aug_real)
            loss_d = loss_d + gp * ops.mean(ops.square(per_sample_grad_norm(grad, pack_size) - 1.0))
        return loss_d, ops.mean(real_logits), ops.mean(fake_logits)

    def g_forward(z, *extra):
        y = extra[0] if conditional else None
        aug = extra[n_labels // 2:n_labels // 2 + m]
        return g_loss_fn(d_of(generator(z, y), y, aug))

    reduce_d = grad_reducer(opt_d.parameters) if grad_reducer else None  # data parallel (else None)
    reduce_g = grad_reducer(opt_g.parameters) if grad_reducer else None
    clip = ClipWeights(opt_d.parameters, weight_clip) if weight_clip > 0 else None
    d_step = make_step(d_forward, opt_d, transform_d, has_aux=True, takes_lr=takes_lr, grad_reducer=reduce_d,
                       constraint=clip)
    g_step = make_step(g_forward, opt_g, transform_g, takes_lr=takes_lr, grad_reducer=reduce_g)
    return d_step, g_step


def make_lazy_r1_step(discriminator, opt_d, gamma, every, transform=None, pack_size=1, conditional=False,
                      augment_policies=(), weight_clip=0.0):
    """R1 as its own D step, run every `every` iterations with the penalty scaled by `every`
    (lazy regularisation, Karras et al. 2020): r1_step(real[, y_real][, aug...]) -> ((gamma / 2) *
    every * E ||grad_x D(x)||^2, (), grad norms). Use it with make_gan_steps(..., r1=0).
    With DiffAugment, the reals go through the same augmentation as in D's main step (host draws
    after the labels), as in StyleGAN2-ADA: the gradient is w.r.t. the un-augmented reals.
    weight_clip: as in make_gan_steps (this step updates D too)."""
    def d_sum(x, y, aug):
        if augment_policies:
            x = augment.apply(x, aug, augment_policies)
        return ops.sum(discriminator(pack(x, pack_size), y))

    input_grad = input_gradient(d_sum)

    def r1_forward(real, *extra):
        y = extra[0] if conditional else None
        aug = extra[1:] if conditional else extra
        return every * r1_penalty(input_grad(real, y, aug), gamma, pack_size)

    clip = ClipWeights(opt_d.parameters, weight_clip) if weight_clip > 0 else None
    return make_step(r1_forward, opt_d, transform, constraint=clip)


def make_sampler(generator):
    """A compiled (z[, y]) -> G(z, y) for an eval-mode generator (its own graph: BatchNorm uses
    running statistics)."""
    generator.set_train(False)

    def sample(z, *labels):
        return generator(z, labels[0] if labels else None)
    return maybe_jit(sample)


def build_models(arch, z_dim, shape, width, num_classes=0, pack_size=1, spectral_norm=False, amp="O0"):
    """(G, D, G_ema) with parameter names prefixed g. / d. / g_ema. (unique in graphs and checkpoints).
    With PacGAN packing, D sees pack_size samples stacked along the first feature axis.
    G and D are put in training mode (MindSpore Cells start in eval mode: BatchNorm would use its
    never-updated running statistics and spectral norm would never advance its u); G_ema stays in
    eval mode, it only samples. The mode is baked in at a function's first compile.
    amp: mindspore.amp.auto_mixed_precision level (float16 compute, float32 master weights), applied
    before the names are prefixed: O1 rewrites the network and would drop the prefixes."""
    from models import ARCHS
    make_g, make_d = ARCHS[arch]
    generator = make_g(z_dim, shape, width=width, num_classes=num_classes)
    d_shape = (shape[0] * pack_size,) + tuple(shape[1:])
    discriminator = make_d(d_shape, width=width, num_classes=num_classes, spectral_norm=spectral_norm)
    g_ema = make_g(z_dim, shape, width=width, num_classes=num_classes)
    if amp != "O0":
        generator, discriminator, g_ema = (ms.amp.auto_mixed_precision(net, amp)
                                           for net in (generator, discriminator, g_ema))
    generator.update_parameters_name("g.")
    discriminator.update_parameters_name("d.")
    g_ema.update_parameters_name("g_ema.")
    generator.set_train(True)
    discriminator.set_train(True)
    g_ema.set_train(False)
    return generator, discriminator, g_ema
