"""Scores of an image-to-image run on held-out images (the first --eval-images of each domain's held-out
split, in file order), by the metrics/ library:

  every direction  fid_<dir>: FID of the outputs against the real held-out images of the target domain,
                   on the dataset's classifier features (metrics/classifier.py; labelled data only)
  paired data      l1 (mean |output - target| on the [-1, 1] scale) and psnr (per image, on [0, 1],
                   averaged) against the ground truth; class_preservation: the classifier's accuracy
                   on the outputs against the source image's label, beside class_accuracy_real, its
                   accuracy on the real targets
  class tasks      success_<dir>: share of outputs the classifier puts in the target domain's class
  CycleGAN         cycle_l1_<domain>: mean |G_back(G(x)) - x| on the [-1, 1] scale

The classifier is trained (once, then cached) on the training images of the domains that carry
labels: for edges2fashion the garments (10 classes), for class tasks both classes' images.
`evaluator.protocol` says how every number was made (written into metrics.json)."""
import numpy as np

from gan.translation import flip, in_chunks, to_float
from metrics.classifier import FeatureExtractor, load_or_train
from metrics.image import fid


def psnr(x, y):
    """Mean over images of 10 log10(1 / MSE) on the [0, 1] scale (x, y in [-1, 1])."""
    mse = np.mean(((x - y) / 2.0) ** 2, axis=tuple(range(1, x.ndim)))
    return float(np.mean(10.0 * np.log10(1.0 / np.maximum(mse, 1e-10))))


class TranslationEvaluator:
    def __init__(self, source, n, seed, log=print):
        self.source, self.n, self.seed = source, n, seed
        self.extract, self.accuracy = None, None
        images, labels = self.classifier_data()
        if images is not None:
            net, self.accuracy = load_or_train(images, labels, source.num_classes, log=log)
            self.extract = FeatureExtractor(net)
        self.protocol = None

    def classifier_data(self):
        """Labelled training images of the target domains (None without labels)."""
        s = self.source
        if not s.num_classes:
            return None, None
        if s.paired:  # the targets are the labelled images (edges are not garments)
            return s.train_b, s.labels_b
        return np.concatenate([s.train_a, s.train_b]), np.concatenate([s.labels_a, s.labels_b])

    def __call__(self, translator):
        s, out = self.source, {}
        for direction in translator.DIRECTIONS:
            x, real_target, source_labels, target_labels = self.held_out(direction)
            y = in_chunks(lambda t: translator.translate(direction, t), x)
            if s.paired and real_target is not None:
                out["l1"] = float(np.mean(np.abs(y - real_target)))
                out["psnr"] = psnr(y, real_target)
            if translator.CYCLE:
                back = in_chunks(lambda t: translator.translate(flip(direction), t), y)
                out[f"cycle_l1_{direction[0]}"] = float(np.mean(np.abs(back - x)))
            if self.extract is not None:
                out.update(self.scores(direction, y, real_target, source_labels, target_labels))
        self.protocol = self.describe(translator)
        return out

    def held_out(self, direction):
        """(source images, real target-domain images, source labels, target labels) as float32 / int."""
        s, n = self.source, self.n
        if direction == "AtoB":
            x, labels = s.test_a[:n], s.test_labels_a
            target, target_labels = s.test_b[:n], s.test_labels_b
        else:
            x, labels = s.test_b[:n], s.test_labels_b
            target, target_labels = s.test_a[:n], s.test_labels_a
        cut = (lambda v: None if v is None else np.asarray(v)[:n])
        return to_float(x), to_float(target), cut(labels), cut(target_labels)

    def scores(self, direction, outputs, real_target, source_labels, target_labels):
        fake_features, fake_probs = self.extract(outputs)
        real_features, real_probs = self.extract(real_target)
        out = {f"fid_{direction}": fid(real_features, fake_features)}
        if self.source.paired:  # outputs should keep the source's class (its label is the target's)
            out["class_preservation"] = float((fake_probs.argmax(1) == source_labels).mean())
            out["class_accuracy_real"] = float((real_probs.argmax(1) == target_labels).mean())
        elif target_labels is not None:  # class tasks: every target image has the target class
            out[f"success_{direction}"] = float((fake_probs.argmax(1) == target_labels[0]).mean())
        return out

    def describe(self, translator):
        s = self.source
        return {"held_out": f"the first {self.n} held-out images of each domain, in file order",
                "directions": list(translator.DIRECTIONS), "seed": self.seed,
                "classifier": None if self.extract is None else {
                    "network": "this project's classifier (metrics/classifier.py), 128-d penultimate features",
                    "trained_on": "the target domain's training images" if s.paired else "both domains' training images",
                    "test_accuracy": self.accuracy, "classes": s.num_classes},
                "l1": "mean |output - target| on [-1, 1]", "psnr": "mean per-image PSNR on [0, 1]"}


def load_run(run_dir, checkpoint_path="", no_ema=False):
    """(trainer, checkpoint meta, checkpoint path) of a train_translate.py run: its recipe rebuilds the
    models from the config stored in the checkpoint, and the checkpoint is loaded into them. no_ema: a
    run trained with --ema translates with its raw generator(s)."""
    import os

    from gan import TRANSLATORS, translator
    from gan.translation import make_source
    from loops import checkpoint
    from loops.config import UserError
    from loops.run import Run
    path = checkpoint_path or checkpoint.latest(run_dir)
    if not path:
        raise UserError(f"no checkpoint in {os.path.join(run_dir, 'checkpoints')}")
    _, meta = checkpoint.read(path)
    name = meta.get("config", {}).get("model")
    if name not in TRANSLATORS or meta.get("recipe", TRANSLATORS[name]) != TRANSLATORS[name]:
        raise UserError(f"{path} is not a checkpoint of a train_translate.py run")
    recipe = translator(name)
    fields = recipe.Config.__dataclass_fields__
    cfg = recipe.Config(**{k: v for k, v in meta["config"].items() if k in fields})
    cfg.run_dir, cfg.resume, cfg.no_progress = run_dir, False, True
    cfg.distributed, cfg.device = False, ""  # read back in one process, on the best device here
    run = Run(cfg, convolutions=True, recipe=recipe.__name__)
    trainer = recipe.TRAINER(cfg, run, make_source(cfg))
    checkpoint.load_into(path, trainer.state)
    if no_ema:
        if not cfg.ema:
            raise UserError("--no-ema: this run was trained without --ema; its generators are the only ones")
        trainer.without_ema()
    return trainer, meta, path


class Evaluation:
    """`python -m metrics RUN_DIR` for a train_translate.py run."""
    description = __doc__

    def add_flags(self, parser):
        parser.add_argument("--checkpoint", default="", help="checkpoint to evaluate (default: the run's latest)")
        parser.add_argument("--num", type=int, default=0, help="held-out images per domain (default: the run's "
                                                               "--eval-images)")
        parser.add_argument("--no-ema", action="store_true", help="a run trained with --ema: evaluate the raw "
                                                                  "generator(s), not their EMA")

    def __call__(self, run_dir, args):
        import os

        from loops import rundir
        from loops.config import UserError
        if args.num < 0:
            raise UserError(f"--num must be >= 0 (0: the run's --eval-images), got {args.num}")
        trainer, meta, path = load_run(run_dir, args.checkpoint, args.no_ema)
        import sys
        evaluator = TranslationEvaluator(trainer.source, args.num or trainer.cfg.eval_images, trainer.cfg.seed,
                                         log=lambda m: print(m, file=sys.stderr))  # stdout is the JSON
        metrics = evaluator(trainer)
        metrics["protocol"] = evaluator.protocol
        existing = rundir.read_metrics(run_dir)
        existing.update(metrics, step=meta["step"], checkpoint=os.path.basename(path))
        if trainer.cfg.ema:
            existing["ema"] = not args.no_ema
        rundir.write_metrics(run_dir, existing)
        trainer.run.close()
        return {"checkpoint": path, "step": meta["step"], **{k: v for k, v in metrics.items() if k != "protocol"}}


def generate(args):
    """generate.py on a train_translate.py run: (outputs, picture or None, checkpoint, "translations") for
    the first --num held-out source images of --direction, in file order."""
    from loops.config import UserError
    if args.label >= 0 or args.seed:
        raise UserError("--class and --seed are for train_gan.py runs; this is a train_translate.py run (a "
                        "translation draws no noise)")
    trainer, _, path = load_run(args.run_dir, args.checkpoint, args.no_ema)
    direction = args.direction or "AtoB"
    if direction not in trainer.DIRECTIONS:
        raise UserError(f"--direction {direction}: this {trainer.cfg.model} run translates {', '.join(trainer.DIRECTIONS)}")
    inputs, _ = trainer.test_images(direction)
    if args.num > len(inputs):
        raise UserError(f"--num {args.num}: the held-out source images are {len(inputs)}")
    out = in_chunks(lambda x: trainer.translate(direction, x), inputs[:args.num])
    picture = trainer.picture_of(direction, inputs[:min(args.num, 64)]) if args.out.lower().endswith(".png") else None
    trainer.run.close()
    return out, picture, path, "translations"


EVALUATION = Evaluation()
GENERATION = generate
