"""What the image-to-image recipes share (pix2pix, CycleGAN): their flags, their data, pictures of
input | output (| reconstruction) rows, the held-out evaluation, and the reference's learning-rate
schedule (constant, then linear decay to 0 over the last --decay-steps iterations).

A recipe module (gan/pix2pix.py, gan/cyclegan.py) defines MODELS, a Config built with
`translation_config(name, MODELS, **defaults)`, a TRAINER subclassing Translator (its Learners,
phases and `translate(direction, images)`), and EVALUATION; train_translate.py does the rest.
"""
from dataclasses import dataclass

import numpy as np
from mindspore import Tensor

from gan.hooks import EvalHook, SampleHook
from gan.pictures import image_grid
from loops import distributed
from loops.config import RunConfig, UserError, opt
from loops.driver import Hook, Phase
from loops.ema import EMA
from loops.learner import all_state, declare, model_flags, settings
from loops.optim import OPTIMIZERS
from loops.step import jit_enabled, maybe_jit
from data.translate import TASKS
from models.translate import DISCRIMINATORS, GENERATORS, make_translation_nets

CHUNK = 100  # held-out images are translated in calls of this fixed shape (one compile)
PICTURE_ROWS = 8


@dataclass
class TranslationConfig(RunConfig):
    """Flags of every image-to-image recipe; each recipe's Config sets its own defaults."""
    RUNTIME_KEYS = RunConfig.RUNTIME_KEYS + ("eval_images",)
    HELP_GROUPS = {"data": ("model", "task", "data_dir", "image_size", "batch_size"),
                   "model": ("netg", "netd", "ngf", "ndf", "norm", "spectral_norm", "ema"),
                   "optimisation (shared; per model: --<flag>-<model>)": ("steps", "decay_steps"),
                   "evaluation and pictures": ("sample_every", "eval_every", "eval_images"),
                   "run": ("steps_per_call", "distributed")}
    model: str = opt("pix2pix", "recipe (each has its own flags: train_translate.py --model NAME --help)")
    task: str = opt("", "built-in task on Fashion-MNIST (see above); with --data-dir alone: the reference "
                        "repository's folder layout", [""] + sorted(TASKS), auto="the recipe's own task")
    data_dir: str = opt("", "folder layout (trainA/ trainB/ testA/ testB/, or train/ test/ of A|B pairs); with "
                            "--task: the Fashion-MNIST IDX files", auto="/usr/share/datasets/fashion-mnist for tasks")
    image_size: int = opt(0, "resize every image to S x S", auto="the data's own size (28 for the tasks)")
    batch_size: int = opt(1, "images per step (the reference: 1)", auto=True)
    netg: str = opt("resnet_small", "generator (models/translate.py; the reference's resnet_9blocks, "
                                    "resnet_6blocks, unet_128, unet_256, and small CPU variants)",
                    sorted(GENERATORS), auto=True)
    netd: str = opt("small", "discriminator (basic: the 70x70 PatchGAN; small: 34x34; pixel: 1x1)",
                    sorted(DISCRIMINATORS), auto=True)
    ngf: int = opt(0, "generator base channels", auto="the architecture's own: 64, small variants 16")
    ndf: int = opt(0, "discriminator base channels", auto="the architecture's own: 64, small 16")
    norm: str = opt("instance", "normalisation layers", ["instance", "batch", "none"], auto=True)
    spectral_norm: bool = opt(False, "spectral normalisation of every conv in D (Miyato et al. 2018; not in "
                                     "the reference)")
    ema: float = opt(0.0, "EMA decay of a copy of the generator(s) that pictures, evaluation and generate.py "
                          "use (0: off, G itself, as the reference)")
    steps: int = opt(2000, "iterations (one D step and one G step each)", auto=True)
    decay_steps: int = opt(-1, "the learning rates decay linearly to 0 over the last N steps (0: constant)",
                           auto="half of --steps, as the reference's n_epochs / n_epochs_decay")
    sample_every: int = opt(0, "input | output picture every N steps", auto="5 times per run")
    eval_every: int = opt(0, "evaluate on held-out images every N steps (0: only at the end)")
    eval_images: int = opt(500, "held-out images evaluated (the first N in file order, per domain)")
    steps_per_call: int = opt(1, "run K iterations inside one compiled loop (recipes that allow it)")
    distributed: bool = opt(False, "data parallel under msrun: --batch-size per rank, gradients averaged over "
                                   "ranks, rank 0 writes the run dir (needs --run-dir)")

    TASK = ""  # the recipe's built-in task when neither --task nor --data-dir is given
    FIXED_ON_RESUME = ("spectral_norm",)  # it renames D's weights (layer.weight) and adds their u vectors

    def owns_run(self, config):
        return config.get("model") == self.model

    def validate(self):
        own = type(self).__dataclass_fields__["model"].default  # this Config is that recipe's
        self.check(self.model == own, f"--model {self.model}: this config is {own}'s (train_translate.py picks it)")
        if not self.task and not self.data_dir:
            self.task = self.TASK
        if self.decay_steps == -1:
            self.decay_steps = self.steps // 2
        if self.sample_every == 0:
            self.sample_every = max(1, self.steps // 5)
        super().validate()
        self.check_positive("batch_size", "eval_images", "steps_per_call", "lr")
        self.check_non_negative("decay_steps", "sample_every", "eval_every", "image_size", "ngf", "ndf")
        self.check(0 <= self.ema < 1, f"--ema must be in [0, 1) (0: off), got {self.ema}")
        self.check(self.decay_steps <= self.steps, f"--decay-steps ({self.decay_steps}) must not exceed --steps "
                                                   f"({self.steps})")
        self.check(not self.distributed or self.run_dir, "--distributed needs --run-dir (the same on every rank)")


def translation_config(name, models, lr=2e-4, **defaults):
    """The base of recipe `name`'s Config: TranslationConfig with --model defaulting to `name`, this
    recipe's `defaults` for the shared flags, and the per-model flags of `models` ({name: who}):
    Adam, lr 2e-4, beta1 0.5 as the reference."""
    base = model_flags(TranslationConfig, models, lr=opt(lr, "learning rate of every model"),
                       optimizer=opt("adam", "optimizer of every model", sorted(OPTIMIZERS)),
                       beta1=opt(0.5, "Adam beta1 of every model"), beta2=opt(0.999, "Adam beta2 of every model"))
    shared = TranslationConfig.__dataclass_fields__
    from gan import TRANSLATORS
    fields = {key: opt(value, shared[key].metadata["help"], shared[key].metadata["choices"],
                       True if shared[key].metadata["auto"] else None) for key, value in defaults.items()}
    fields["model"] = opt(name, shared["model"].metadata["help"], sorted(TRANSLATORS))
    namespace = {"__annotations__": {k: shared[k].type for k in fields}, "__module__": __name__, **fields}
    return dataclass(type(f"{name.capitalize()}Base", (base,), namespace))


def make_source(cfg):
    """The data of this run (UserError for bad data: before the run dir is made)."""
    from data.translate import folder_source, task_source
    if cfg.task:
        return task_source(cfg.task, cfg.data_dir, cfg.image_size or 28, cfg.batch_size, cfg.seed)
    return folder_source(cfg.data_dir, cfg.image_size or 32, cfg.batch_size, cfg.seed, paired=cfg.PAIRED)


def build_nets(cfg, input_nc, output_nc, d_input_nc, image_size):
    """(G, D) by the config's architecture names (models/translate.py); UserError when they cannot take
    the data's size (checked before the run dir is made)."""
    try:
        return make_translation_nets(cfg.netg, cfg.netd, input_nc, output_nc, cfg.ngf or None, cfg.ndf or None,
                                     cfg.norm, d_input_nc=d_input_nc, image_size=image_size,
                                     spectral_norm=cfg.spectral_norm)
    except ValueError as e:
        raise UserError(f"{e} (--image-size {image_size}; --netg {cfg.netg})")


def build_generator(cfg, input_nc, output_nc):
    """A fresh G of this config's architecture and width (the --ema copy); build_nets has already
    checked that it takes the data's size."""
    return GENERATORS[cfg.netg](input_nc, output_nc, cfg.ngf or None, cfg.norm)


def to_float(images):
    return images.astype(np.float32) / 127.5 - 1.0 if images.dtype == np.uint8 else images.astype(np.float32)


def in_chunks(fn, images):
    """fn over float32 images in calls of CHUNK images (the last one padded): one compiled shape."""
    images = to_float(images)
    out = []
    for i in range(0, len(images), CHUNK):
        part = images[i:i + CHUNK]
        pad = np.zeros((CHUNK - len(part),) + part.shape[1:], np.float32)
        out.append(fn(Tensor.from_numpy(np.concatenate([part, pad]))).asnumpy()[:len(part)])
    return np.concatenate(out)


class Translator:
    """The run of one image-to-image recipe: a subclass builds its Learners (attributes), sets
    `self.state` (every Parameter a checkpoint holds), and defines `phases()`, `translate(direction,
    float images) -> images` and DIRECTIONS (("AtoB",) or ("AtoB", "BtoA"))."""
    DIRECTIONS = ("AtoB",)
    CYCLE = False  # pictures and evaluation also show input -> output -> back

    def __init__(self, cfg, run, source):
        self.cfg, self.run, self.source, self.rng = cfg, run, source, run.rng
        self.batch = distributed.global_batch(cfg.batch_size)
        self.sample_hook = SampleHook(run, self.picture)
        self.eval_hook = EvalHook(run, self.held_out, self.evaluator)

    # ---- learning rates: the reference's constant-then-linear policy ----
    def lr(self, name, step):
        base = settings(self.cfg, name)["lr"]
        decay = self.cfg.decay_steps
        if decay == 0:
            return base
        return base * min(1.0, (self.cfg.steps - step) / decay)

    def averaged(self, make_copy):
        """The generator(s) that pictures, evaluation and generate.py translate with. With --ema DECAY,
        make_copy() (a fresh instance of self.g.net) is declared g_ema, made equal to G when a fresh run
        starts (load_host_state), follows it by Polyak averaging after each iteration's G step (the "ema"
        phase, loops/ema.py, as train_gan.py's G_ema) and is saved in every checkpoint; without, G
        itself. Call after self.state is set."""
        if not self.cfg.ema:
            return self.g.net
        g_ema = declare("g_ema", make_copy())
        self.ema = EMA(self.g.net, g_ema, self.cfg.ema)
        self.state = self.state + all_state(g_ema)
        return g_ema

    def ema_phases(self):
        """[the EMA update phase] with --ema, else []: appended after a recipe's own phases."""
        return [Phase("ema", lambda step: (), self.ema.phase_body, ("ema/decay",))] if self.cfg.ema else []

    def learners(self):
        from loops.learner import Learner
        return tuple(v for v in vars(self).values() if isinstance(v, Learner))

    # ---- pictures ----
    def test_images(self, direction):
        """The held-out source images of a direction (file order) and its targets (paired data) or None."""
        a, b = self.source.test_a, self.source.test_b
        return (a, b if self.source.paired else None) if direction == "AtoB" else (b, None)

    def rows(self, direction, inputs):
        """(cells, columns): input | output (| reconstruction) (| target, paired data) per image."""
        x = to_float(inputs)
        y = in_chunks(lambda t: self.translate(direction, t), x)
        columns = [x, y]
        if self.CYCLE:
            columns.append(in_chunks(lambda t: self.translate(flip(direction), t), y))
        _, targets = self.test_images(direction)
        if targets is not None:
            columns.append(to_float(targets[:len(x)]))
        channels = max(c.shape[1] for c in columns)  # a grey column beside RGB ones: repeated to RGB
        columns = [np.repeat(c, channels // c.shape[1], axis=1) for c in columns]
        return np.stack(columns, 1).reshape((-1,) + columns[0].shape[1:]), len(columns)

    def picture_of(self, direction, inputs):
        cells, columns = self.rows(direction, inputs)
        return image_grid(cells, columns=columns)

    def picture(self, step):
        """Rows of input | output (| reconstruction | target) for the first held-out images of each direction."""
        parts = [self.rows(d, self.test_images(d)[0][:PICTURE_ROWS]) for d in self.DIRECTIONS]
        return image_grid(np.concatenate([cells for cells, _ in parts]), columns=parts[0][1])

    # ---- evaluation ----
    def held_out(self):
        return (self,)

    def evaluator(self):
        from gan.translation_metrics import TranslationEvaluator
        return TranslationEvaluator(self.source, self.cfg.eval_images, self.cfg.seed)

    def hooks(self):
        return [Hook(self.cfg.sample_every, self.sample_hook), Hook(self.cfg.eval_every, self.eval_hook)]

    def host_state(self):
        return {"data": self.source.state()}

    def load_host_state(self, meta):
        """After run.restore (before any compiled step): the data position of a resumed run, or, on a
        fresh run with --ema, G_ema made equal to G."""
        if meta:
            self.source.load_state(meta["data"])
        elif self.cfg.ema:
            self.ema.copy()

    def before_save(self):
        """Copy host data into Parameters before a checkpoint is written (CycleGAN: its image pools)."""

    def save(self, step, final=True):
        self.before_save()
        self.run.save(step, final)

    def final_results(self):
        results = self.eval_hook.results
        results["device"] = self.run.device
        if results.get("step") != self.cfg.steps:
            self.eval_hook(self.cfg.steps)
        return results


def reference_gan_loss(name):
    """(d_loss(real, fake), g_loss(fake)) equal to the reference's GANLoss: gan/losses.py's LOSSES,
    scaled (vanilla: D = (BCE(real, 1) + BCE(fake, 0)) / 2 is d_ns / 2; lsgan: G = MSE(fake, 1) is 2 g_lsgan)."""
    from gan.losses import LOSSES
    d_loss, g_loss = LOSSES[name]
    d_scale, g_scale = {"ns": (0.5, 1.0), "minimax": (0.5, 1.0), "lsgan": (1.0, 2.0),
                        "wgan": (0.5, 1.0)}.get(name, (0.5, 1.0))  # the reference halves every D loss

    def d_scaled(real, fake):
        return d_scale * d_loss(real, fake)

    def g_scaled(fake):
        return g_scale * g_loss(fake)
    return d_scaled, g_scaled


class EvalFunction:
    """net(x) compiled in eval mode (BatchNorm on running statistics), its own graph: the mode is baked
    in at a function's first compile, so it is compiled on its first call between set_train(False) and
    set_train(True); the training steps keep their training-mode graphs."""

    def __init__(self, net):
        self.net, self.ready = net, False

        def forward(x):
            return net(x)
        self.fn = maybe_jit(forward)

    def __call__(self, x):
        if self.ready and jit_enabled():  # compiled in eval mode already
            return self.fn(x)
        training = self.net.training  # the first compile, or every call of an eager (pynative) run
        self.net.set_train(False)
        try:
            out = self.fn(x)
            self.ready = True
            return out
        finally:
            self.net.set_train(training)


eval_function = EvalFunction


def flip(direction):
    return "BtoA" if direction == "AtoB" else "AtoB"


def check_task(cfg, paired):
    """UserError unless the task's kind (paired / unpaired) fits the recipe."""
    from data.translate import TASKS
    if cfg.task and TASKS[cfg.task][0] != ("paired" if paired else "unpaired"):
        fits = sorted(t for t, (kind, _) in TASKS.items() if kind == ("paired" if paired else "unpaired"))
        raise UserError(f"--task {cfg.task} is {TASKS[cfg.task][0]}; --model {cfg.model} takes "
                        f"{'paired' if paired else 'unpaired'} data: {', '.join(fits)}")
