"""The GAN's forward functions (D, G, lazy R1) and their steps, built with make_step.

Each forward function reads its host inputs by name through a StepInputs layout (loops/step.py),
defined once here by `d_inputs` / `g_inputs` / `r1_inputs`; the trainer's draws pack by the same
names. `gan_forwards` returns the functions alone; `make_gan_steps` / `make_lazy_r1_step` wrap them into
steps over given optimizers and gradient transforms: the ONE construction path, used by training
(gan/trainer.py, with each Learner's optimizer and transform), the tests and the benchmarks.
"""
from mindspore import ops

from gan import augment
from gan.losses import LOSSES
from gan.penalties import gradient_penalty, input_gradient, pack, per_input_weights, r1_penalty
from loops.constraints import ClipWeights
from loops.step import StepInputs, make_step


def d_inputs(conditional=False, augment_arity=0, gp=False):
    """D step: the real batch, G's latents, (conditional) real and fake labels, DiffAugment's draws
    for the real and the fake batch, (gp) one interpolation weight per D input."""
    return StepInputs(real=True, z=True, y_real=conditional, y_fake=conditional, aug_real=augment_arity,
                      aug_fake=augment_arity, alpha=gp)


def g_inputs(conditional=False, augment_arity=0):
    """G step: latents, (conditional) the labels G draws for, DiffAugment's draws for the fake batch."""
    return StepInputs(z=True, y_fake=conditional, aug_fake=augment_arity)


def r1_inputs(conditional=False, augment_arity=0):
    """Lazy R1 step: the real batch, (conditional) its labels, DiffAugment's draws for it."""
    return StepInputs(real=True, y_real=conditional, aug_real=augment_arity)


def discriminate(discriminator, pack_size, augment_policies):
    """x, y, aug -> D's logits on augmented, packed x (every image D sees is augmented)."""
    def d_of(x, y, aug):
        if augment_policies:
            x = augment.apply(x, aug, augment_policies)
        return discriminator(pack(x, pack_size), y)
    return d_of


def gan_forwards(generator, discriminator, loss, pack_size=1, r1=0.0, gp=0.0, conditional=False,
                 augment_policies=(), augment_arity=0):
    """(d_forward, g_forward, d_layout, g_layout) for the loss named `loss`.

    d_forward(*flat) -> (loss_d, mean real logit, mean fake logit); g_forward(*flat) -> loss_g.
    D's forward sees stop_gradient(G(z)), so D's step never builds G's backward graph; G's step
    differentiates through D but only updates G (its optimizer holds G's parameters alone).
    Penalties live in D's forward function, so their second-order gradients compile with it:
      r1: (r1 / 2) E ||grad_x D(x)||^2 on real data (Mescheder et al. 2018);
      gp: gp E (||grad_x D(x_hat)||_2 - 1)^2, x_hat = a x + (1 - a) G(z), a ~ U[0, 1] per D input
          (Gulrajani et al. 2017). Both are defined on what D judges (gan/penalties.py).
    """
    d_loss_fn, g_loss_fn = LOSSES[loss]
    d_layout, g_layout = d_inputs(conditional, augment_arity, gp > 0), g_inputs(conditional, augment_arity)
    d_of = discriminate(discriminator, pack_size, augment_policies)

    def d_sum(x, y, aug):
        return ops.sum(d_of(x, y, aug))

    input_grad = input_gradient(d_sum)

    def d_forward(*flat):
        real, z, y_real, y_fake, aug_real, aug_fake, alpha = d_layout.split(flat)
        fake = ops.stop_gradient(generator(z, y_fake))
        real_logits = d_of(real, y_real, aug_real)
        fake_logits = d_of(fake, y_fake, aug_fake)
        loss_d = d_loss_fn(real_logits, fake_logits)
        if r1 > 0:
            loss_d = loss_d + r1_penalty(input_grad(real, y_real, aug_real), r1, pack_size)
        if gp > 0:
            a = per_input_weights(alpha, pack_size, real.ndim)
            x_hat = a * real + (1.0 - a) * fake
            loss_d = loss_d + gp * gradient_penalty(input_grad(x_hat, y_real, aug_real), pack_size)
        return loss_d, ops.mean(real_logits), ops.mean(fake_logits)

    def g_forward(*flat):
        z, y_fake, aug_fake = g_layout.split(flat)
        return g_loss_fn(d_of(generator(z, y_fake), y_fake, aug_fake))

    return d_forward, g_forward, d_layout, g_layout


def lazy_r1_forward(discriminator, gamma, every, pack_size=1, conditional=False, augment_policies=(),
                    augment_arity=0):
    """(r1_forward, layout): R1 as its own D step, run every `every` iterations with the penalty
    scaled by `every` (lazy regularisation, Karras et al. 2020): (gamma / 2) * every * E ||grad_x D(x)||^2.
    With DiffAugment, the reals go through the same augmentation as in D's main step, as in
    StyleGAN2-ADA: the gradient is w.r.t. the un-augmented reals."""
    layout = r1_inputs(conditional, augment_arity)
    d_of = discriminate(discriminator, pack_size, augment_policies)

    def d_sum(x, y, aug):
        return ops.sum(d_of(x, y, aug))

    input_grad = input_gradient(d_sum)

    def r1_forward(*flat):
        real, y_real, aug_real = layout.split(flat)
        return every * r1_penalty(input_grad(real, y_real, aug_real), gamma, pack_size)

    return r1_forward, layout


def weight_clipper(optimizer, weight_clip):
    """WGAN weight clipping of the optimizer's parameters after each update (None when 0)."""
    return ClipWeights(optimizer.parameters, weight_clip) if weight_clip > 0 else None


def make_gan_steps(generator, discriminator, loss, opt_g, opt_d, transform_g=None, transform_d=None,
                   pack_size=1, r1=0.0, gp=0.0, takes_lr=False, grad_reducer=None, conditional=False,
                   augment_policies=(), augment_arity=0, weight_clip=0.0):
    """(d_step, g_step) over the given optimizers, inputs in the order of d_inputs / g_inputs:
    d_step(real, z[, y_real, y_fake][, aug_real..., aug_fake...][, alpha]); g_step(z[, y][, aug...]).
    Each step carries its layout as `.layout`. weight_clip: clip every D parameter to [-c, c] after
    each D update (WGAN). grad_reducer: a factory `parameters -> (grads -> grads)` (data parallel)."""
    d_forward, g_forward, d_layout, g_layout = gan_forwards(
        generator, discriminator, loss, pack_size, r1, gp, conditional, augment_policies, augment_arity)
    reduce_d = grad_reducer(opt_d.parameters) if grad_reducer else None
    reduce_g = grad_reducer(opt_g.parameters) if grad_reducer else None
    d_step = make_step(d_forward, opt_d, transform_d, has_aux=True, takes_lr=takes_lr, grad_reducer=reduce_d,
                       constraint=weight_clipper(opt_d, weight_clip))
    g_step = make_step(g_forward, opt_g, transform_g, takes_lr=takes_lr, grad_reducer=reduce_g)
    d_step.layout, g_step.layout = d_layout, g_layout
    return d_step, g_step


def make_lazy_r1_step(discriminator, opt_d, gamma, every, transform=None, pack_size=1, conditional=False,
                      augment_policies=(), weight_clip=0.0, grad_reducer=None):
    """The lazy R1 step over D's optimizer: r1_step(real[, y_real][, aug...]) (see lazy_r1_forward).
    Use it with make_gan_steps(..., r1=0)."""
    arity = augment.arity(augment_policies) if augment_policies else 0
    forward, layout = lazy_r1_forward(discriminator, gamma, every, pack_size, conditional, augment_policies, arity)
    reducer = grad_reducer(opt_d.parameters) if grad_reducer else None
    step = make_step(forward, opt_d, transform, grad_reducer=reducer, constraint=weight_clipper(opt_d, weight_clip))
    step.layout = layout
    return step
