"""Train an image-to-image GAN: the recipe is looked up by name in gan/ (gan/__init__.py TRANSLATORS),
and its own config decides the flags.

    python train_translate.py --model pix2pix --task edges2fashion    # paired, real Fashion-MNIST
    python train_translate.py --model cyclegan --task sneaker2boot    # unpaired: class 7 <-> class 9
    python train_translate.py --model cyclegan --data-dir DIR         # DIR/trainA trainB testA testB
    python train_translate.py --model pix2pix --help                  # pix2pix's flags
    python generate.py RUN_DIR --num 16 --out rows.png                # input | output rows, held-out images
    python -m metrics RUN_DIR                                         # score the run again

Built-in tasks read Fashion-MNIST as distributed (gzip IDX; /usr/share/datasets/fashion-mnist, from
Debian's `apt-get install dataset-fashion-mnist`, when --data-dir is left out): edges2fashion (paired:
an edge map -> the garment), sneaker2boot and trouser2dress (unpaired: one class <-> another).
"""
import os
import sys

# before MindSpore loads: its C++ log lines would bury our one-line `error:` messages
os.environ.setdefault("GLOG_v", "2" if "--debug" in sys.argv else "4")
if __name__ == "__main__":  # --help or a mistyped flag answers before MindSpore loads (loops/flagcache.py)
    from loops.flagcache import check_flags_early
    from loops.config import choose_recipe
    from gan import DEFAULT_TRANSLATOR, TRANSLATORS
    if "--config" not in " ".join(sys.argv):  # a preset may name another recipe: parse it for real
        check_flags_early(__file__, variant=choose_recipe(sys.argv[1:], "model", TRANSLATORS, DEFAULT_TRANSLATOR))

import json

from gan import DEFAULT_TRANSLATOR, TRANSLATORS, translator
from gan.translation import make_source
from loops import distributed
from loops.config import choose_recipe, parse_config, run_cli
from loops.learner import settings
from loops.run import Run


def main(argv):
    name = choose_recipe(argv, "model", TRANSLATORS, DEFAULT_TRANSLATOR)
    recipe = translator(name)
    cache = (__file__, name) if __name__ == "__main__" else None
    cfg = parse_config(recipe.Config, argv, __doc__, cache=cache)  # exits after printing under --dry-run
    with Run(cfg, convolutions=True, recipe=recipe.__name__) as run:
        source = make_source(distributed.with_global_batch(cfg))  # data errors first: no run dir left behind
        trainer = recipe.TRAINER(cfg, run, source)
        run.open("train_translate", cfg.task or "folder", cfg.model)
        trainer.load_host_state(run.restore(trainer.state))  # --resume: weights, optimizers, pools, data, RNG
        run.begin(trainer.state, meta=trainer.host_state, learners=trainer.learners())
        skip = any(settings(cfg, m)["skip_nonfinite"] for m in cfg.MODELS)  # else a NaN loss stops the run
        code = run.train(trainer.phases(), hooks=trainer.hooks(), save=trainer.save, stop_on_nonfinite=not skip)
        results, code = run.evaluate(code, trainer.final_results)
        run.finish(results)
    if results is not None and distributed.is_main():
        shown = {k: round(v, 4) for k, v in results.items() if isinstance(v, float)}
        print(f"done: {cfg.steps} steps; {json.dumps(shown)}; samples: {os.path.join(cfg.run_dir, 'samples')}; "
              f"run dir: {cfg.run_dir}")
    return code


if __name__ == "__main__":
    run_cli(main)
