"""How much the test suite catches: plant one plausible bug at a time in a scratch copy of the
repository, run the tests that should catch it, and report caught / missed.

    python bench/mutation_check.py            # every mutation (~15 min on 2 cores)
    python bench/mutation_check.py --list     # the mutations, without running anything
    python bench/mutation_check.py gp_at_reals r1_on_fakes

Each mutation is a list of exact (file, old, new) replacements (each `old` must occur exactly once,
so a refactor that moves the code makes this script fail loudly instead of testing nothing) and the
test files that should catch it. A mutation is caught when those tests fail. The working tree is
never touched: every mutation runs in its own copy under a temp dir. Latest results: bench/RESULTS.md.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name: ([(file, old, new), ...], [test paths], what the bug is)
MUTATIONS = {
    "train_mode_off": (
        [("loops/learner.py", "        self.net = declare(name, net, train=True, amp=amp)",
          "        self.net = declare(name, net, train=False, amp=amp)")],
        ["tests/test_train_mode.py"], "G and D train in eval mode (BatchNorm frozen, spectral norm's u fixed)"),
    "sn_u_frozen": (
        [("models/spectral_norm.py", "sigma = ops.depend(sigma, ops.assign(self.u, u))", "sigma = sigma")],
        ["tests/test_spectral_norm.py", "tests/test_train_mode.py"], "spectral norm never advances u"),
    "gp_at_reals": (
        [("gan/steps.py", "x_hat = a * real + (1.0 - a) * fake", "x_hat = real")],
        ["tests/test_penalties.py"], "GP evaluated at the real samples, not the interpolates"),
    "r1_on_fakes": (
        [("gan/steps.py", "r1_penalty(input_grad(real, y_real, aug_real), r1, pack_size)",
          "r1_penalty(input_grad(fake, y_fake, aug_fake), r1, pack_size)")],
        ["tests/test_penalties.py"], "R1 evaluated on fakes"),
    "pack_norm_per_sample": (
        [("gan/penalties.py", "grad.reshape(grad.shape[0] // pack_size, -1)", "grad.reshape(grad.shape[0], -1)")],
        ["tests/test_penalties.py"], "PacGAN penalties measured per unpacked sample"),
    "pynative_second_order": (
        [("gan/penalties.py", "return grad if jit_enabled() else ms.jit(grad)", "return grad")],
        ["tests/test_penalties.py"], "PyNative penalties lose their gradient through view ops"),
    "swap_real_fake_logits": (
        [("gan/steps.py", "loss_d = d_loss_fn(real_logits, fake_logits)", "loss_d = d_loss_fn(fake_logits, real_logits)")],
        ["tests/test_penalties.py", "tests/test_gan_losses.py"], "D's loss with real and fake logits swapped"),
    "diffaug_off_in_d": (
        [("gan/steps.py", "        if augment_policies:\n            x = augment.apply(x, aug, augment_policies)\n        return discriminator(",
          "        return discriminator(")],
        ["tests/test_augment.py"], "DiffAugment not applied inside D's main step"),
    "lazy_r1_skips_diffaug": (
        [("gan/steps.py", "    d_of = discriminate(discriminator, pack_size, augment_policies)\n\n    def d_sum(x, y, aug):\n        return ops.sum(d_of(x, y, aug))\n\n    input_grad = input_gradient(d_sum)\n\n    def r1_forward",
          "    d_of = discriminate(discriminator, pack_size, ())\n\n    def d_sum(x, y, aug):\n        return ops.sum(d_of(x, y, aug))\n\n    input_grad = input_gradient(d_sum)\n\n    def r1_forward")],
        ["tests/test_penalties.py"], "lazy R1 computed on un-augmented reals"),
    "lazy_r1_unscaled": (
        [("gan/steps.py", "return every * r1_penalty(", "return r1_penalty(")],
        ["tests/test_penalties.py"], "lazy R1 without its x every scaling"),
    "lazy_r1_no_adjustment": (
        [("gan/trainer.py", "c = cfg.r1_every / (cfg.r1_every + 1)", "c = 1.0")],
        ["tests/test_penalties.py"], "lazy R1 without StyleGAN2's lr / beta adjustment"),
    "lr_assigned_after_update": (
        [("loops/step.py", "            grads = ops.depend(grads, ops.assign(lr_param, lr))", "            pass"),
         ("loops/step.py", "            loss = ops.depend(loss, optimizer(grads))\n            if constraint is not None:  #",
          "            loss = ops.depend(loss, optimizer(grads))\n            if takes_lr:\n"
          "                loss = ops.depend(loss, ops.assign(lr_param, lr))\n            if constraint is not None:  #")],
        ["tests/test_step.py"], "the scheduled rate is assigned after the update"),
    "multistep_logs_sums": (
        [("loops/driver.py", "np.full(len(p.tags), 1.0 / max(1, n * p.repeat), np.float32)",
          "np.full(len(p.tags), 1.0, np.float32)")],
        ["tests/test_gan_steps.py"], "multi-step logs sums instead of means"),
    "amp_grad_norm_scaled": (
        [("loops/step.py", "            norm_before = scaler.unscale(norm_before)", "            norm_before = norm_before")],
        ["tests/test_step.py"], "an --amp grad norm left x65536"),
    "loss_scale_not_checkpointed": (
        [("loops/transforms.py", "self.extra_parameters = list(self.state)",
          "self.extra_parameters = []")],
        ["tests/test_train_gan.py::test_gan_resume_is_bit_identical", "tests/test_transforms.py"],
        "the loss-scaler state missing from checkpoints"),
    "no_checkpoint_crc": (
        [("loops/checkpoint.py", "ms.load_checkpoint(path, crc_check=True)", "ms.load_checkpoint(path)")],
        ["tests/test_regression.py"], "checkpoints loaded without verifying their checksum"),
    "ema_off_stale": (
        [("gan/trainer.py", "        self.refresh_ema()  # --ema 0: the checkpoint's", "        pass  # --ema 0: the checkpoint's")],
        ["tests/test_train_gan.py::test_ema_off_checkpoints_hold_the_current_generator_as_g_ema"],
        "--ema 0 saves a stale g_ema"),
    "nearest_resize": (
        [("metrics/inception.py", 'mode="bilinear", align_corners=False', 'mode="nearest"')],
        ["tests/test_inception_fid.py"], "Inception preprocessing resizes nearest-neighbour"),
    "translation_rounding": (
        [("gan/augment.py", "dy, dx = int(h * ratio + 0.5), int(w * ratio + 0.5)", "dy, dx = int(h * ratio), int(w * ratio)")],
        ["tests/test_augment.py"], "DiffAugment translation rounds the shift down"),
    "weight_clip_ignored": (
        [("gan/steps.py", "    return ClipWeights(optimizer.parameters, weight_clip) if weight_clip > 0 else None",
          "    return None")],
        ["tests/test_penalties.py"], "WGAN weight clipping never applied"),
    "modes_pacgan_wrong": (
        [("metrics/toy.py", '"modes_pacgan": int((counts >= 1).sum())', '"modes_pacgan": int(covered.sum())')],
        ["tests/test_metrics.py"], "PacGAN's mode count equal to ours"),
}


def scratch_copy(dest):
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        if os.path.isfile(os.path.join(ROOT, f)):
            os.makedirs(os.path.dirname(os.path.join(dest, f)) or dest, exist_ok=True)
            shutil.copy2(os.path.join(ROOT, f), os.path.join(dest, f))


def apply(dest, edits):
    for path, old, new in edits:
        full = os.path.join(dest, path)
        text = open(full).read()
        if text.count(old) != 1:
            raise SystemExit(f"error: mutation target not found exactly once in {path}: {old[:60]!r}")
        with open(full, "w") as f:
            f.write(text.replace(old, new))


def run(name):
    edits, tests, _ = MUTATIONS[name]
    with tempfile.TemporaryDirectory(prefix=f"mut_{name}_") as dest:
        scratch_copy(dest)
        apply(dest, edits)
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                              cwd=dest, capture_output=True, text=True)
        took = time.perf_counter() - start
    summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    return proc.returncode != 0, took, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = parser.parse_args()
    if args.list:
        for name, (_, tests, what) in MUTATIONS.items():
            print(f"{name:30s} {what}  [{' '.join(tests)}]")
        return 0
    unknown = [n for n in args.names if n not in MUTATIONS]
    if unknown:
        print(f"error: unknown mutation {unknown[0]!r} (see --list)", file=sys.stderr)
        return 2
    caught = 0
    names = args.names or list(MUTATIONS)
    print("| mutation | caught | seconds | last pytest line |\n|---|---|---|---|")
    for name in names:
        ok, took, summary = run(name)
        caught += ok
        print(f"| {name} | {'yes' if ok else '**NO**'} | {took:.0f} | {summary} |", flush=True)
    print(f"\ncaught {caught} of {len(names)}")
    return 0 if caught == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
