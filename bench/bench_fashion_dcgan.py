"""A plain PyTorch DCGAN (the PyTorch DCGAN tutorial's recipe at 28x28) beside a train_gan.py run, on
the same data, for the same number of steps, scored by the same evaluation.
--batch-size gives the twin a batch of its own (the tutorial's recipe trains at 128; by default it
takes the run's, so both see the same images). Its first 64 samples are saved as
RUN/torch_dcgan_samples.png beside the run's own grids.

    python train_gan.py --dataset fashion-mnist --seed 4 --run-dir runs/fm4
    PYTHONPATH=/path/to/torch/site-packages python bench/bench_fashion_dcgan.py runs/fm4 [--batch-size 64]

The twin reads the run's config.json: its dataset (through data/, so the very images the run trained
on, in the same epoch order), seed, batch size and steps. The recipe is the tutorial's
(pytorch/tutorials beginner_source/dcgan_faces_tutorial.py): z 100, width 64 (ngf = ndf = 64),
BatchNorm in both nets but D's first layer, ReLU in G, LeakyReLU(0.2) in D, weights N(0, 0.02) and
BatchNorm N(1, 0.02), BCE, Adam 2e-4 with betas (0.5, 0.999) for both, D then G each step. Its 64x64
layer stack becomes 28x28 by one 7x7 layer at each end (G: 1 -> 7 -> 14 -> 28; D mirrored), as the
usual MNIST ports do. It samples the run's --eval-samples images from its generator in eval mode and
scores them with the run's own evaluator (metrics/evaluate.py: FID on the project's classifier,
precision / recall, pixel precision / recall against the test split), then prints both rows.
torch is not a project dependency: install it beside the venv to run this.
"""
import argparse
import json
import os
import sys
import time
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Z, WIDTH, LR, BETAS = 100, 64, 2e-4, (0.5, 0.999)


def generator(channels):
    return nn.Sequential(
        nn.ConvTranspose2d(Z, WIDTH * 4, 7, 1, 0, bias=False), nn.BatchNorm2d(WIDTH * 4), nn.ReLU(True),
        nn.ConvTranspose2d(WIDTH * 4, WIDTH * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(WIDTH * 2), nn.ReLU(True),
        nn.ConvTranspose2d(WIDTH * 2, channels, 4, 2, 1, bias=False), nn.Tanh())


def discriminator(channels):
    return nn.Sequential(
        nn.Conv2d(channels, WIDTH, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(WIDTH, WIDTH * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(WIDTH * 2), nn.LeakyReLU(0.2, True),
        nn.Conv2d(WIDTH * 2, 1, 7, 1, 0, bias=False))  # logits: BCEWithLogits is the tutorial's Sigmoid + BCE


def tutorial_init(m):  # the tutorial's weights_init
    if "Conv" in type(m).__name__:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in type(m).__name__:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def train(source, steps, seed, log_every=200):
    torch.manual_seed(seed)
    channels = source.shape[0]
    g, d = generator(channels), discriminator(channels)
    g.apply(tutorial_init)
    d.apply(tutorial_init)
    opt_g, opt_d = torch.optim.Adam(g.parameters(), LR, betas=BETAS), torch.optim.Adam(d.parameters(), LR, betas=BETAS)
    bce = nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        real = torch.from_numpy(source.next()[0])
        n = len(real)
        z = torch.from_numpy(rng.standard_normal((n, Z, 1, 1), dtype=np.float32))
        fake = g(z)
        loss_d = bce(d(real).view(-1), torch.ones(n)) + bce(d(fake.detach()).view(-1), torch.zeros(n))
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        loss_g = bce(d(fake).view(-1), torch.ones(n))  # the non-saturating G loss, as the tutorial
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        if step % log_every == 0 or step == steps:
            print(f"torch dcgan step {step}/{steps} loss_d {loss_d.item():.3f} loss_g {loss_g.item():.3f} "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return g, time.perf_counter() - start


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--batch-size", type=int, default=0, help="the twin's batch (default: the run's)")
    args = parser.parse_args(argv)
    run_dir = args.run_dir
    torch.set_num_threads(os.cpu_count())
    import mindspore as ms
    from data import SOURCES
    from metrics.evaluate import make_evaluator
    ms.set_context(mode=ms.GRAPH_MODE)
    with open(os.path.join(run_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(run_dir, "metrics.json")) as f:
        ours = json.load(f)
    batch = args.batch_size or cfg["batch_size"]
    source = SOURCES[cfg["dataset"]](SimpleNamespace(**dict(cfg, batch_size=batch)))
    g, seconds = train(source, cfg["steps"], cfg["seed"])
    g.eval()
    z = np.random.default_rng([cfg["seed"], 8]).standard_normal((cfg["eval_samples"], Z, 1, 1), dtype=np.float32)
    with torch.no_grad():
        samples = np.concatenate([g(torch.from_numpy(z[i:i + 100])).numpy() for i in range(0, len(z), 100)])
    from PIL import Image
    from gan.pictures import image_grid
    Image.fromarray(image_grid(samples[:64])).save(os.path.join(run_dir, "torch_dcgan_samples.png"))
    evaluator = make_evaluator(source, cfg["eval_samples"], cfg["seed"], log=lambda m: print(m, file=sys.stderr))
    theirs = evaluator(samples.astype(np.float32))
    keys = ("fid", "fid_reference", "precision", "recall", "density", "coverage", "pixel_precision", "pixel_recall")
    print(f"{cfg['dataset']}, {cfg['steps']} steps, seed {cfg['seed']}:")
    print("| | " + " | ".join(keys) + " | training steps/s |")
    print("|---" * (len(keys) + 2) + "|")
    print(f"| train_gan.py ({run_dir}) | " + " | ".join(f"{ours[k]:.3f}" for k in keys)
          + f" | {ours['perf_steps_per_s']:.2f} |")
    print(f"| PyTorch DCGAN tutorial recipe, batch {batch} | " + " | ".join(f"{theirs[k]:.3f}" for k in keys)
          + f" | {cfg['steps'] / seconds:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
