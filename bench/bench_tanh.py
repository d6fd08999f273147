"""What MindSpore's CPU `tanh` error (up to 1e-4 near saturation) changes in trained results.

    python bench/bench_tanh.py --sac RUN [RUN ...] [--gan RUN [RUN ...]]

Each trained run is evaluated twice, in separate processes, from the same checkpoint: once as it
is, once with every tanh that shapes an output computed as 2 sigmoid(2x) - 1 (within 1.6e-6 of the
true tanh): the squash of SAC's actor (`rl.sac.ops.tanh`) and the DCGAN generator's output layer
(`models.dcgan.nn.Tanh`). SAC: the deterministic policy's returns over 10 evaluation episodes (the
seeds train_rl.py's final evaluation uses) and the largest change of an action over 20000 random
observations. GAN: `python -m metrics` on a copy of the run dir (FID, KID, precision / recall, pixel
precision / recall). The runs themselves are not written to.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

import mindspore.ops as ms_ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GAN_KEYS = ("fid", "kid", "precision", "recall", "pixel_precision", "pixel_recall")  # kid printed x 1000


def exact_tanh(x):
    return 2.0 * ms_ops.sigmoid(2.0 * x) - 1.0


def install_exact_tanh():
    """Swap the modules' `ops` / `nn` for copies whose tanh is exact (the graph compiler resolves
    names through the module, so the copies are registered in sys.modules)."""
    import mindspore.nn as real_nn
    import mindspore.ops as real_ops
    import models.dcgan
    import rl.sac

    class ExactTanh(real_nn.Cell):
        def construct(self, x):
            return exact_tanh(x)
    for name, real, attr, value, user in (("ops_exact_tanh", real_ops, "tanh", exact_tanh, rl.sac),
                                          ("nn_exact_tanh", real_nn, "Tanh", ExactTanh, models.dcgan)):
        copy = types.ModuleType(name)
        copy.__dict__.update({k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
        setattr(copy, attr, value)
        sys.modules[name] = copy
        setattr(user, "ops" if name.startswith("ops") else "nn", copy)


def child(variant, kind, runs, out):
    """In a fresh process: evaluate `runs` with `variant` tanh, write the numbers to `out`."""
    sys.path.insert(0, ROOT)
    if variant == "exact":
        install_exact_tanh()
    import numpy as np
    results = {}
    for run in runs:
        with open(os.path.join(run, "config.json")) as f:
            config = json.load(f)
        covered = config.get("algo") == "sac" if kind == "sac" else config.get("arch") == "dcgan"
        if not covered:  # another actor or generator keeps MindSpore's tanh: "no change" would mean nothing
            print(f"error: {run} is not a {'SAC' if kind == 'sac' else 'DCGAN'} run; the swap covers only those",
                  file=sys.stderr)
            sys.exit(2)
        if kind == "sac":
            from rl.evaluate import load_agent
            agent, _, _ = load_agent(run)
            returns = agent.evaluate(10)
            obs = np.random.default_rng(0).uniform(-1, 1, (20000, agent.obs_dim)).astype(np.float32)
            results[run] = {"returns": [float(r) for r in returns], "actions": agent.deterministic_action(obs).tolist()}
            agent.envs.close()
        else:
            from metrics.__main__ import main
            main([run])
            with open(os.path.join(run, "metrics.json")) as f:
                metrics = json.load(f)
            results[run] = {k: metrics[k] * (1000 if k == "kid" else 1) for k in GAN_KEYS if k in metrics}
    with open(out, "w") as f:
        json.dump(results, f)


def evaluate(variant, kind, runs, tmp):
    out = os.path.join(tmp, f"{kind}_{variant}.json")
    child_run = subprocess.run([sys.executable, __file__, "--child", variant, kind, out, *runs], cwd=ROOT,
                               stdout=subprocess.DEVNULL)
    if child_run.returncode:  # the child said why on stderr
        sys.exit(child_run.returncode)
    with open(out) as f:
        return json.load(f)


def main():
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2], sys.argv[3], sys.argv[5:], sys.argv[4])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sac", nargs="*", default=[], help="trained train_rl.py --algo sac run dirs")
    parser.add_argument("--gan", nargs="*", default=[], help="trained train_gan.py dcgan run dirs")
    args = parser.parse_args()
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        if args.sac:
            base, exact = (evaluate(v, "sac", args.sac, tmp) for v in ("ops", "exact"))
            print("| SAC run | evaluation return, ops.tanh | exact tanh | largest change of one episode's return | largest action change |")
            print("|---|---|---|---|---|")
            for run in args.sac:
                a, b = np.array(base[run]["returns"]), np.array(exact[run]["returns"])
                moved = np.abs(np.array(base[run]["actions"]) - np.array(exact[run]["actions"])).max()
                print(f"| {run} | {a.mean():.3f} | {b.mean():.3f} | {np.abs(a - b).max():.3f} | {moved:.2e} |")
        if args.gan:
            copies = {}
            for variant in ("ops", "exact"):
                copies[variant] = [shutil.copytree(run, os.path.join(tmp, variant, str(i))) for i, run in enumerate(args.gan)]
            base, exact = (evaluate(v, "gan", copies[v], tmp) for v in ("ops", "exact"))
            print("| GAN run | metric | ops.tanh | exact tanh |")
            print("|---|---|---|---|")
            for run, a, b in zip(args.gan, copies["ops"], copies["exact"]):
                for key in base[a]:
                    print(f"| {run} | {key}{' x 1000' if key == 'kid' else ''} | {base[a][key]:.4f} | {exact[b][key]:.4f} |")


if __name__ == "__main__":
    main()
