"""Seconds per training iteration of an image architecture: ours (MindSpore, compiled) vs a PyTorch
eager twin of the same network, measured in one process on the same threads.

    python bench/bench_arch.py [--arch sngan] [--width 128] [--iters 3] [--batch 64] [--num-classes 0]
                               [--torch-threads N] [--record]

One iteration = one D step + one G step: hinge loss, Adam(lr 2e-4, betas (0, 0.9)) per model, a batch
of 32x32x3 (SNGAN's CIFAR-10 recipe, Miyato et al. 2018). Ours: gan.models.build_models +
gan.steps.make_gan_steps, two jit calls per iteration, as the tests build them. The twin: the same
layers, widths and order of operations in plain PyTorch (torch.nn.utils.spectral_norm), in TWINS
below (tests/test_sngan.py checks that it computes what models/resnet.py computes). Prints seconds
per iteration for both (the median of iterations run in turns, one of ours, one of the twin's: load
from elsewhere and one framework's lingering threads slow both alike), their ratio, and the compile
time (first call) of our D and G steps. oneDNN's AVX2 cap (loops/__init__.py) is set at import, so
it holds for both frameworks here. A new architecture: its twin builder and one TWINS line.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import loops  # noqa: E402,F401  (oneDNN's ISA cap, before any kernel of either framework)
import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from mindspore import Tensor  # noqa: E402
from torch import nn  # noqa: E402

from bench import record  # noqa: E402
from bench.torch_biggan import biggan_twin  # noqa: E402
from gan.models import build_models  # noqa: E402
from gan.steps import make_gan_steps  # noqa: E402
from loops.optim import make_optimizer  # noqa: E402
from models.resnet import discriminator_layout, generator_layout  # noqa: E402

SHAPE = (3, 32, 32)
LR, BETAS = 2e-4, (0.0, 0.9)


# ---- SNGAN / cGAN-PD twin (models/resnet.py; mimicry's SNGAN*32/48/64, CGANPD*32) -----------------

def _conv(cin, cout, k, gain, sn=False):
    layer = nn.Conv2d(cin, cout, k, 1, k // 2)
    nn.init.xavier_uniform_(layer.weight, gain)
    return nn.utils.spectral_norm(layer) if sn else layer


def _up(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)


class TorchCBN(nn.Module):
    def __init__(self, c, classes):
        super().__init__()
        self.bn = nn.BatchNorm2d(c, affine=False)
        self.gamma, self.beta = nn.Embedding(classes, c), nn.Embedding(classes, c)
        nn.init.normal_(self.gamma.weight, 1.0, 0.02)
        nn.init.zeros_(self.beta.weight)

    def forward(self, x, y):
        return self.gamma(y)[:, :, None, None] * self.bn(x) + self.beta(y)[:, :, None, None]


class TorchGBlock(nn.Module):
    def __init__(self, cin, cout, classes):
        super().__init__()
        self.conditional = classes > 0
        self.b1 = TorchCBN(cin, classes) if classes else nn.BatchNorm2d(cin)
        self.c1 = _conv(cin, cout, 3, 2 ** 0.5)
        self.b2 = TorchCBN(cout, classes) if classes else nn.BatchNorm2d(cout)
        self.c2 = _conv(cout, cout, 3, 2 ** 0.5)
        self.c_sc = _conv(cin, cout, 1, 1.0)

    def forward(self, x, y=None):
        norm1 = self.b1(x, y) if self.conditional else self.b1(x)
        h = self.c1(_up(F.relu(norm1)))
        norm2 = self.b2(h, y) if self.conditional else self.b2(h)
        return self.c2(F.relu(norm2)) + self.c_sc(_up(x))


class TorchDBlock(nn.Module):
    def __init__(self, cin, cout, down):
        super().__init__()
        self.down = down
        self.c1, self.c2 = _conv(cin, cin, 3, 2 ** 0.5, True), _conv(cin, cout, 3, 2 ** 0.5, True)
        self.c_sc = _conv(cin, cout, 1, 1.0, True) if cin != cout or down else None

    def forward(self, x):
        x = F.relu(x)  # mimicry's in-place ReLU: the shortcut sees it too
        h = self.c2(F.relu(self.c1(x)))
        s = x if self.c_sc is None else self.c_sc(x)
        return F.avg_pool2d(h, 2) + F.avg_pool2d(s, 2) if self.down else h + s


class TorchDBlockOptimized(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.c1, self.c2 = _conv(cin, cout, 3, 2 ** 0.5, True), _conv(cout, cout, 3, 2 ** 0.5, True)
        self.c_sc = _conv(cin, cout, 1, 1.0, True)

    def forward(self, x):
        return F.avg_pool2d(self.c2(F.relu(self.c1(x))), 2) + self.c_sc(F.avg_pool2d(x, 2))


class TorchSNGANGenerator(nn.Module):
    def __init__(self, z_dim, out_shape, width, num_classes=0):
        super().__init__()
        self.bottom, chans = generator_layout(out_shape[1], width)
        self.base = chans[0]
        self.l1 = nn.Linear(z_dim, self.bottom * self.bottom * self.base)
        nn.init.xavier_uniform_(self.l1.weight, 1.0)
        self.blocks = nn.ModuleList([TorchGBlock(a, b, num_classes) for a, b in zip(chans[:-1], chans[1:])])
        self.bn = nn.BatchNorm2d(chans[-1])
        self.c_out = _conv(chans[-1], out_shape[0], 3, 1.0)

    def forward(self, z, y=None):
        h = self.l1(z).view(z.shape[0], self.base, self.bottom, self.bottom)
        for block in self.blocks:
            h = block(h, y)
        return torch.tanh(self.c_out(F.relu(self.bn(h))))


class TorchSNGANDiscriminator(nn.Module):
    def __init__(self, in_shape, width, num_classes=0):
        super().__init__()
        first, layout = discriminator_layout(in_shape[1], width)
        self.blocks = nn.Sequential(TorchDBlockOptimized(in_shape[0], first),
                                    *[TorchDBlock(a, b, down) for a, b, down in layout])
        features = layout[-1][1]
        head = nn.Linear(features, 1)
        nn.init.xavier_uniform_(head.weight, 1.0)
        self.head = nn.utils.spectral_norm(head)
        self.embed = None
        if num_classes:
            embed = nn.Embedding(num_classes, features)
            nn.init.xavier_uniform_(embed.weight, 1.0)
            self.embed = nn.utils.spectral_norm(embed)

    def forward(self, x, y=None):
        h = F.relu(self.blocks(x)).sum((2, 3))
        out = self.head(h).squeeze(-1)
        if self.embed is not None:
            out = out + (self.embed(y) * h).sum(-1)
        return out


def sngan_twin(z_dim, shape, width, num_classes=0):
    return TorchSNGANGenerator(z_dim, shape, width, num_classes), TorchSNGANDiscriminator(shape, width, num_classes)


# arch name (models.ARCHS) -> its PyTorch twin builder (z_dim, shape, width, num_classes) -> (G, D), and z_dim
TWINS = {
    "sngan": dict(build=sngan_twin, z_dim=128),
    "biggan": dict(build=biggan_twin, z_dim=80),
}


# ---- timing ---------------------------------------------------------------------------------------

def draws(rng, batch, z_dim, num_classes):
    """Host inputs of one iteration: real batch, D's z, G's z, labels (or None)."""
    real = rng.uniform(-1, 1, (batch,) + SHAPE).astype(np.float32)
    z_d = rng.standard_normal((batch, z_dim), dtype=np.float32)
    z_g = rng.standard_normal((batch, z_dim), dtype=np.float32)
    y = rng.integers(0, num_classes, batch).astype(np.int32) if num_classes else None
    return real, z_d, z_g, y


def ours(arch, width, batch, num_classes):
    """(iteration, D compile s, G compile s): our compiled steps; iteration() runs one D and one G
    step and returns the two losses as floats (synced)."""
    ms.set_context(mode=ms.GRAPH_MODE)
    z_dim = TWINS[arch]["z_dim"]
    G, D, _ = build_models(arch, z_dim, SHAPE, width, num_classes=num_classes)
    opt_g = make_optimizer("adam", G.trainable_params(), LR, "g.", BETAS)
    opt_d = make_optimizer("adam", D.trainable_params(), LR, "d.", BETAS)
    d_step, g_step = make_gan_steps(G, D, "hinge", opt_g, opt_d, conditional=num_classes > 0)
    rng = np.random.default_rng(0)

    def inputs():
        real, z_d, z_g, y = (None if a is None else Tensor.from_numpy(a) for a in draws(rng, batch, z_dim, num_classes))
        labels = (y,) if num_classes else ()
        return (real, z_d) + labels + labels, (z_g,) + labels

    def iteration():
        d_in, g_in = inputs()
        loss_d = d_step(*d_in)[0]
        return float(loss_d.asnumpy()), float(g_step(*g_in)[0].asnumpy())

    d_in, g_in = inputs()
    t0 = time.perf_counter()
    d_step(*d_in)[0].asnumpy()
    compile_d = time.perf_counter() - t0
    t0 = time.perf_counter()
    g_step(*g_in)[0].asnumpy()
    return iteration, compile_d, time.perf_counter() - t0


def twin(arch, width, batch, num_classes):
    """iteration() of the PyTorch eager twin: one D and one G step, the two losses as floats."""
    torch.manual_seed(0)
    z_dim = TWINS[arch]["z_dim"]
    G, D = TWINS[arch]["build"](z_dim, SHAPE, width, num_classes)
    G.train(), D.train()
    opt_g = torch.optim.Adam(G.parameters(), LR, betas=BETAS)
    opt_d = torch.optim.Adam(D.parameters(), LR, betas=BETAS)
    rng = np.random.default_rng(0)

    def iteration():
        real, z_d, z_g, y = (None if a is None else torch.from_numpy(a) for a in draws(rng, batch, z_dim, num_classes))
        y = None if y is None else y.long()
        with torch.no_grad():
            fake = G(z_d, y)
        loss_d = F.relu(1.0 - D(real, y)).mean() + F.relu(1.0 + D(fake, y)).mean()
        opt_d.zero_grad()
        loss_d.backward()
        torch.nn.utils.clip_grad_norm_(D.parameters(), float("inf"))  # the grad norm our steps return too
        opt_d.step()
        loss_g = -D(G(z_g, y), y).mean()
        opt_g.zero_grad()
        loss_g.backward()
        torch.nn.utils.clip_grad_norm_(G.parameters(), float("inf"))
        opt_g.step()
        return loss_d.item(), loss_g.item()
    return iteration


def timed(iteration):
    t0 = time.perf_counter()
    losses = iteration()
    assert np.all(np.isfinite(losses)), losses
    return time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="sngan", choices=sorted(TWINS))
    parser.add_argument("--width", type=int, default=128, help="the architecture's width (models/)")
    parser.add_argument("--iters", type=int, default=3, help="timed iterations per framework")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--num-classes", type=int, default=0, help=">0: the conditional variant (cGAN-PD)")
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="PyTorch's intra-op threads; 0: as many as MindSpore's runtime_num_threads")
    parser.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    args = parser.parse_args()
    # same thread count for both by default. On a machine busy with other work, PyTorch's OpenMP
    # threads wait on each other at every op: there --torch-threads 1 can be several times faster
    torch.set_num_threads(args.torch_threads or ms.get_context("runtime_num_threads") or os.cpu_count())
    ours_iteration, compile_d, compile_g = ours(args.arch, args.width, args.batch, args.num_classes)
    twin_iteration = twin(args.arch, args.width, args.batch, args.num_classes)
    timed(ours_iteration), timed(twin_iteration)  # warm-up (ours: first run after compile)
    # interleaved, one iteration each in turn: load from elsewhere on the machine and one framework's
    # idle threads slow both alike; medians
    times = np.array([(timed(ours_iteration), timed(twin_iteration)) for _ in range(args.iters)])
    ours_s, twin_s = np.median(times, axis=0)
    what = f"{args.arch} width {args.width}, batch {args.batch}, 32x32x3" + \
        (f", {args.num_classes} classes" if args.num_classes else "")
    ms_threads = ms.get_context("runtime_num_threads")
    table = "\n".join([
        "| model | implementation | s / iteration (median) | vs PyTorch | first call s: compile + run (D, G) |",
        "|---|---|---|---|---|",
        f"| {what} | MindSpore graph mode, two jit calls ({ms_threads} threads) | {ours_s:.3f} | "
        f"{twin_s / ours_s:.2f}x speed | {compile_d:.1f}, {compile_g:.1f} |",
        f"| {what} | PyTorch eager twin ({torch.get_num_threads()} threads) | {twin_s:.3f} | 1.00x | |",
    ])
    print(table)
    print(f"ratio MindSpore / PyTorch seconds per iteration: {ours_s / twin_s:.2f} ({args.iters} timed iterations "
          f"each, interleaved; all MindSpore: {np.round(times[:, 0], 3).tolist()}, "
          f"all PyTorch: {np.round(times[:, 1], 3).tolist()})")
    if args.record:
        command = (f"python bench/bench_arch.py --arch {args.arch} --width {args.width} --iters {args.iters} "
                   f"--batch {args.batch} --num-classes {args.num_classes} --torch-threads {torch.get_num_threads()} "
                   "--record")
        title = f"Architecture iteration speed vs PyTorch (MindSpore {ms.__version__}, torch {torch.__version__})"
        record.append(title, command, table)


if __name__ == "__main__":
    main()
