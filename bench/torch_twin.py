"""PyTorch eager twins of two whole training scripts, for bench/bench_process.py.

    python bench/torch_twin.py regression --steps 500     # train_regression.py's defaults
    python bench/torch_twin.py ring8 --steps 5000         # train_gan.py --dataset ring8's defaults

Each is the loop a PyTorch user would write for the same job (same models, batch, optimizer, data
drawn from a numpy Generator as ours are), logging every 100 steps, no checkpoints. It prints
`first step done` after its first iteration, for the time-to-first-step comparison. torch is not a
project dependency: install it beside the venv to run this.
"""
import argparse
import sys
import time

import numpy as np
import torch
from torch import nn


def regression(steps, log_every):
    rng = np.random.default_rng(0)
    model = nn.Linear(1, 1)
    nn.init.zeros_(model.weight)
    nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = rng.uniform(-2, 2, size=(4, 1)).astype(np.float32)
        y = (2 * x + 3 + rng.normal(0, 0.01, size=(4, 1)).astype(np.float32)).astype(np.float32)
        loss = ((model(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == 0:
            print("first step done", flush=True)
        if (step + 1) % log_every == 0:
            print(f"step {step + 1} loss {loss.item():.6f}", flush=True)
    print(f"w={model.weight.item():.4f} b={model.bias.item():.4f}")


def ring8(steps, log_every, batch=512, pack=2, z_dim=16, width=128):
    rng = np.random.default_rng(0)
    angles = 2 * np.pi * np.arange(8) / 8
    centers = np.stack([2 * np.cos(angles), 2 * np.sin(angles)], 1).astype(np.float32)
    G = nn.Sequential(nn.Linear(z_dim, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2))
    D = nn.Sequential(nn.Linear(2 * pack, width), nn.LeakyReLU(0.2), nn.Linear(width, width), nn.LeakyReLU(0.2),
                      nn.Linear(width, 1))
    ema = [p.detach().clone() for p in G.parameters()]
    opt_g = torch.optim.Adam(G.parameters(), 1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), 1e-3, betas=(0.5, 0.999))
    sp = nn.functional.softplus

    def packed(x):  # PacGAN: `pack` samples side by side per D input
        return x.reshape(-1, 2 * pack)
    for step in range(steps):
        idx = rng.integers(0, 8, batch)
        real = torch.from_numpy((centers[idx] + 0.02 * rng.standard_normal((batch, 2))).astype(np.float32))
        z = torch.from_numpy(rng.standard_normal((batch, z_dim), dtype=np.float32))
        with torch.no_grad():
            fake = G(z)
        loss_d = sp(-D(packed(real))).mean() + sp(D(packed(fake))).mean()
        opt_d.zero_grad()
        loss_d.backward()
        norm_d = nn.utils.clip_grad_norm_(D.parameters(), float("inf"))  # logged, as ours logs it
        opt_d.step()
        z = torch.from_numpy(rng.standard_normal((batch, z_dim), dtype=np.float32))
        loss_g = sp(-D(packed(G(z)))).mean()
        opt_g.zero_grad()
        loss_g.backward()
        norm_g = nn.utils.clip_grad_norm_(G.parameters(), float("inf"))
        opt_g.step()
        with torch.no_grad():
            for e, p in zip(ema, G.parameters()):
                e.mul_(0.99).add_(p, alpha=0.01)
        if step == 0:
            print("first step done", flush=True)
        if (step + 1) % log_every == 0:
            print(f"step {step + 1} d {loss_d.item():.4f} g {loss_g.item():.4f} "
                  f"|gd| {norm_d.item():.3f} |gg| {norm_g.item():.3f}", flush=True)


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("job", choices=["regression", "ring8"])
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    start = time.perf_counter()
    {"regression": regression, "ring8": ring8}[args.job](args.steps, args.log_every)
    print(f"loop {time.perf_counter() - start:.2f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
