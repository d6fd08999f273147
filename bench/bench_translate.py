"""Image-to-image training speed: train_translate.py's pix2pix and CycleGAN iterations against PyTorch
twins of the same small models and settings, side by side in this process.

    python bench/bench_translate.py [--iters 60] [--repeats 3] [--record]

pix2pix: edges2fashion at its defaults (unet_32 with ngf 16, the "small" 34x34 PatchGAN with ndf 16,
instance norm, 32x32, batch 16, non-saturating GAN + 100 L1). CycleGAN: sneaker2boot at its defaults
(two resnet_small with 3 blocks and ngf 16, two "small" PatchGANs, instance norm, 28x28, batch 8,
LSGAN, cycle 10, identity 0.5, image pools of 50). The MindSpore side is the recipe's own trainer,
phases and driver iteration (data drawn from the real Fashion-MNIST, so Debian's
dataset-fashion-mnist must be installed); the PyTorch side follows the reference implementation
(pytorch-CycleGAN-and-pix2pix: one G forward per iteration, D on the detached fakes, then G; CycleGAN:
G first, then both D with one optimizer) on batches drawn from arrays of the same shapes. Both run
after untimed warm-up iterations (compilation). torch is not a project requirement: without it only
the MindSpore rows are printed.
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("GLOG_v", "4")

import numpy as np  # noqa: E402

from bench import record  # noqa: E402

WARMUP = 5


def our_iteration(model):
    """(iteration, close): one driver iteration of train_translate.py --model MODEL at its defaults."""
    from gan import translator
    from gan.translation import make_source
    from loops.config import parse_config
    from loops.driver import run_iteration
    from loops.run import Run
    recipe = translator(model)
    cfg = parse_config(recipe.Config, ["--model", model, "--run-dir", tempfile.mkdtemp()], "")
    run = Run(cfg, convolutions=True, recipe=recipe.__name__)
    trainer = recipe.TRAINER(cfg, run, make_source(cfg))
    phases, step = trainer.phases(), [0]

    def iteration():
        out = run_iteration(phases, step[0])
        step[0] += 1
        return out
    return iteration, run.close


def ours(model, iters):
    """Milliseconds per training iteration of train_translate.py --model MODEL at its defaults."""
    iteration, close = our_iteration(model)
    for _ in range(WARMUP):
        iteration()
    t0 = time.perf_counter()
    for _ in range(iters):
        out = iteration()
    [float(v) for v in out.values()]  # the last call's results are on the host
    ms_iter = (time.perf_counter() - t0) / iters * 1e3
    close()
    return ms_iter


# ---- PyTorch twins (the reference's networks.py definitions at these sizes) ----
def torch_nets():
    import torch
    from torch import nn

    def norm(c):
        return nn.InstanceNorm2d(c)  # affine=False, no running statistics: the reference's "instance"

    class UnetBlock(nn.Module):
        def __init__(self, outer, inner, input_nc=None, sub=None, outermost=False, innermost=False):
            super().__init__()
            self.outermost = outermost
            input_nc = outer if input_nc is None else input_nc
            down = nn.Conv2d(input_nc, inner, 4, 2, 1, bias=True)
            if outermost:
                layers = [down, sub, nn.ReLU(True), nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1), nn.Tanh()]
            elif innermost:
                layers = [nn.LeakyReLU(0.2, True), down, nn.ReLU(True), nn.ConvTranspose2d(inner, outer, 4, 2, 1), norm(outer)]
            else:
                layers = [nn.LeakyReLU(0.2, True), down, norm(inner), sub, nn.ReLU(True),
                          nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1), norm(outer)]
            self.model = nn.Sequential(*layers)

        def forward(self, x):
            return self.model(x) if self.outermost else torch.cat([x, self.model(x)], 1)

    def unet(input_nc, output_nc, num_downs=5, ngf=16):
        block = UnetBlock(ngf * 8, ngf * 8, innermost=True)
        for _ in range(num_downs - 5):
            block = UnetBlock(ngf * 8, ngf * 8, sub=block)
        block = UnetBlock(ngf * 4, ngf * 8, sub=block)
        block = UnetBlock(ngf * 2, ngf * 4, sub=block)
        block = UnetBlock(ngf, ngf * 2, sub=block)
        return UnetBlock(output_nc, ngf, input_nc=input_nc, sub=block, outermost=True)

    class ResnetBlock(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), norm(dim), nn.ReLU(True),
                                       nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), norm(dim))

        def forward(self, x):
            return x + self.block(x)

    def resnet(input_nc, output_nc, ngf=16, n_blocks=3):
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, 7, bias=True), norm(ngf), nn.ReLU(True)]
        for i in range(2):
            m = 2 ** i
            layers += [nn.Conv2d(ngf * m, ngf * m * 2, 3, 2, 1, bias=True), norm(ngf * m * 2), nn.ReLU(True)]
        layers += [ResnetBlock(ngf * 4) for _ in range(n_blocks)]
        for i in range(2):
            m = 2 ** (2 - i)
            layers += [nn.ConvTranspose2d(ngf * m, ngf * m // 2, 3, 2, 1, output_padding=1, bias=True),
                       norm(ngf * m // 2), nn.ReLU(True)]
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, 7), nn.Tanh()]
        return nn.Sequential(*layers)

    def patchgan(input_nc, ndf=16, n_layers=2):
        layers, mult = [nn.Conv2d(input_nc, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)], 1
        for n in range(1, n_layers):
            prev, mult = mult, min(2 ** n, 8)
            layers += [nn.Conv2d(ndf * prev, ndf * mult, 4, 2, 1, bias=True), norm(ndf * mult), nn.LeakyReLU(0.2, True)]
        prev, mult = mult, min(2 ** n_layers, 8)
        layers += [nn.Conv2d(ndf * prev, ndf * mult, 4, 1, 1, bias=True), norm(ndf * mult), nn.LeakyReLU(0.2, True),
                   nn.Conv2d(ndf * mult, 1, 4, 1, 1)]
        return nn.Sequential(*layers)
    return unet, resnet, patchgan


def torch_pix2pix_iteration(batch=16, size=32, lam=100.0):
    import torch
    from torch import nn
    unet, _, patchgan = torch_nets()
    torch.manual_seed(0)
    G, D = unet(1, 1), patchgan(2)
    opt_g = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), 2e-4, betas=(0.5, 0.999))
    bce, l1 = nn.BCEWithLogitsLoss(), nn.L1Loss()
    rng = np.random.default_rng(0)
    data_a, data_b = (rng.uniform(-1, 1, (2000, 1, size, size)).astype(np.float32) for _ in range(2))

    def iteration():
        rows = rng.integers(0, len(data_a), batch)
        a, b = torch.from_numpy(data_a[rows]), torch.from_numpy(data_b[rows])
        fake = G(a)
        for p in D.parameters():
            p.requires_grad_(True)
        opt_d.zero_grad()
        fake_logits, real_logits = D(torch.cat([a, fake.detach()], 1)), D(torch.cat([a, b], 1))
        loss_d = 0.5 * (bce(fake_logits, torch.zeros_like(fake_logits)) + bce(real_logits, torch.ones_like(real_logits)))
        loss_d.backward()
        opt_d.step()
        for p in D.parameters():
            p.requires_grad_(False)
        opt_g.zero_grad()
        logits = D(torch.cat([a, fake], 1))
        loss_g = bce(logits, torch.ones_like(logits)) + lam * l1(fake, b)
        loss_g.backward()
        opt_g.step()
        return loss_g.item()
    return iteration


def torch_cyclegan_iteration(batch=8, size=28, lam=10.0, idt=0.5, pool_size=50):
    import torch
    from torch import nn
    _, resnet, patchgan = torch_nets()
    torch.manual_seed(0)
    G_A, G_B, D_A, D_B = resnet(1, 1), resnet(1, 1), patchgan(1), patchgan(1)
    opt_g = torch.optim.Adam(list(G_A.parameters()) + list(G_B.parameters()), 2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(list(D_A.parameters()) + list(D_B.parameters()), 2e-4, betas=(0.5, 0.999))
    mse, l1 = nn.MSELoss(), nn.L1Loss()
    rng = np.random.default_rng(0)
    data_a, data_b = (rng.uniform(-1, 1, (2000, 1, size, size)).astype(np.float32) for _ in range(2))
    pools = ([], [])

    def query(pool, images):  # the reference's ImagePool: fill, then return a stored image half the time
        out = []
        for image in images:
            image = image.unsqueeze(0)
            if len(pool) < pool_size:
                pool.append(image)
                out.append(image)
            elif rng.uniform() > 0.5:
                i = rng.integers(0, pool_size)
                out.append(pool[i].clone())
                pool[i] = image
            else:
                out.append(image)
        return torch.cat(out, 0)

    def gan(logits, real):
        return mse(logits, torch.ones_like(logits) if real else torch.zeros_like(logits))

    def iteration():
        a = torch.from_numpy(data_a[rng.integers(0, len(data_a), batch)])
        b = torch.from_numpy(data_b[rng.integers(0, len(data_b), batch)])
        fake_b, fake_a = G_A(a), G_B(b)
        rec_a, rec_b = G_B(fake_b), G_A(fake_a)
        for p in list(D_A.parameters()) + list(D_B.parameters()):
            p.requires_grad_(False)
        opt_g.zero_grad()
        loss_idt = idt * lam * (l1(G_A(b), b) + l1(G_B(a), a))
        loss_g = gan(D_A(fake_b), True) + gan(D_B(fake_a), True) + lam * (l1(rec_a, a) + l1(rec_b, b)) + loss_idt
        loss_g.backward()
        opt_g.step()
        for p in list(D_A.parameters()) + list(D_B.parameters()):
            p.requires_grad_(True)
        opt_d.zero_grad()
        pooled_b, pooled_a = query(pools[1], fake_b.detach()), query(pools[0], fake_a.detach())
        loss_d = 0.5 * (gan(D_A(b), True) + gan(D_A(pooled_b), False)) + 0.5 * (gan(D_B(a), True) + gan(D_B(pooled_a), False))
        loss_d.backward()
        opt_d.step()
        return loss_g.item()
    return iteration


def torch_pix2pix(iters):
    return timed(torch_pix2pix_iteration(), iters)


def torch_cyclegan(iters):
    return timed(torch_cyclegan_iteration(), iters)


def timed(iteration, iters):
    for _ in range(WARMUP):
        iteration()
    t0 = time.perf_counter()
    for _ in range(iters):
        iteration()
    return (time.perf_counter() - t0) / iters * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=60, help="timed iterations per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per side, alternating")
    parser.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    args = parser.parse_args()
    try:
        import torch
        threads = torch.get_num_threads()
    except ImportError:
        torch = None
    rows = ["| recipe (defaults) | implementation | ms per iteration, median (each run) | vs PyTorch |", "|---|---|---|---|"]
    for model, label, twin in (("pix2pix", "pix2pix edges2fashion (32x32, batch 16)", torch_pix2pix),
                               ("cyclegan", "CycleGAN sneaker2boot (28x28, batch 8)", torch_cyclegan)):
        mine, theirs = [], []
        for _ in range(args.repeats):  # alternating, so a change in the machine's load hits both sides
            mine.append(ours(model, args.iters))
            if torch:
                theirs.append(twin(args.iters))
        ratio = f"{np.median(theirs) / np.median(mine):.2f}x" if theirs else ""
        rows.append(f"| {label} | train_translate.py (MindSpore, graph mode) | {record.median_cell(mine)} | {ratio} |")
        if theirs:
            rows.append(f"| | PyTorch eager, the reference's recipe ({threads} threads) | {record.median_cell(theirs)} | 1.00x |")
        print("\n".join(rows[-2:]), flush=True)
    record.publish("Image-to-image training speed, MindSpore vs PyTorch", "\n".join(rows), args.record)


if __name__ == "__main__":
    main()
