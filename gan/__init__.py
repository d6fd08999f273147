"""The GAN, as one user of the core in loops/: losses (LOSSES), penalties and PacGAN packing,
DiffAugment, the D / G / lazy-R1 steps, the models and their sampler, sample pictures, and the
trainer that composes them into driver phases (gan/trainer.py)."""
