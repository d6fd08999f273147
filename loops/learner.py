"""Declaring a model that learns: its name, its Cell, its optimizer, its gradient transform, its steps.

    student = Learner("student", net, optimizer="adam", lr=1e-3, clip_norm=1.0)
    step = student.step(forward)                 # value_and_grad over student's parameters only
    state = all_state(student, teacher, ...)      # everything a checkpoint holds

From the name alone come: parameter names prefixed `<name>.` (the Cell's, its optimizer's state and
its transform's state, so any number of models share one graph and one checkpoint), the TensorBoard
tags `loss/<name>` and `grad_norm/<name>`, and its command-line flags. `model_flags` derives a config
dataclass with, for each declared model, `--lr-<name>`, `--optimizer-<name>`, `--beta1-<name>`,
`--beta2-<name>` and every gradient transform's `--<flag>-<name>` (loops/transforms.py TRANSFORMS),
plus the shared flags they fall back to (`--clip-norm`, `--skip-nonfinite`, `--optimizer`, ...).
`Learner.from_config(name, net, cfg)` reads them back. A model that does not learn but must be
named and checkpointed (an EMA copy, a Polyak target network) is declared with `declare(name, net)`.
"""
import dataclasses

import mindspore as ms

from loops import transforms
from loops.config import UserError, opt
from loops.optim import OPTIMIZERS, all_parameters, make_optimizer
from loops.step import make_step

# per-model flags besides the gradient transforms': key -> (value meaning "take the shared flag", help)
OPTIMIZER_FLAGS = {
    "lr": (0.0, "{who}'s learning rate (default: --lr, else the script's own)"),
    "optimizer": ("", "{who}'s optimizer (default: --optimizer)"),
    "beta1": (-1.0, "{who}'s Adam beta1 (momentum for SGD) (default: --beta1)"),
    "beta2": (-1.0, "{who}'s Adam beta2 (default: --beta2)"),
}
AMP_LEVELS = ("O0", "O1", "O2", "O3")


def apply_amp(net, level):
    """Mixed precision (float16 compute, float32 master weights) by mindspore.amp.auto_mixed_precision.

    O0: unchanged. O1: float16 for the white-list ops (MatMul, Conv, ConvTranspose), float32 elsewhere,
    through MindSpore's "auto" level: per-op casts in the graph, parameter names as in O0. MindSpore
    2.10's own "O1" (and custom_mixed_precision) rewrites the network's source, and the rewritten
    code does not compile for any Cell using nn.LeakyReLU (NameError: The name 'maximum_' is not
    defined); "auto" is documented as experimental, tested here (tests/test_registries.py).
    O2 / O3: MindSpore's levels as they are (they wrap the net: names gain `_backbone.`).
    Call before naming (declare): the wrapper would otherwise sit outside the prefixed names."""
    if level == "O0":
        return net
    return ms.amp.auto_mixed_precision(net, "auto" if level == "O1" else level)


def declare(name, net, train=False, amp="O0"):
    """Name a model: mixed precision first (see apply_amp), then every parameter prefixed `<name>.`,
    then its mode (Cells start in eval mode; a mode is baked in at a function's first compile).
    Returns the (possibly amp-wrapped) Cell."""
    net = apply_amp(net, amp)
    net.update_parameters_name(name + ".")
    net.set_train(train)
    return net


class Learner:
    """A model that learns: `net` (trained in training mode), its optimizer over net's trainable
    parameters, and its gradient transform (transform flags as keywords: clip_norm=, accumulate=, ...).
    `members` > 1: `net` is that many independent models side by side, every parameter with that leading
    dimension (a clip by norm then clips each member's own norm; loops/transforms.py from_flags)."""

    def __init__(self, name, net, optimizer="adam", lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0, amp="O0",
                 members=1, **transform_flags):
        self.name = name
        self.net = declare(name, net, train=True, amp=amp)
        self.optimizer = make_optimizer(optimizer, self.net.trainable_params(), lr, name + ".", betas, weight_decay)
        self.transform = transforms.from_flags(self.optimizer.parameters, name + ".", members, **transform_flags)
        self.loss_tag, self.grad_norm_tag = f"loss/{name}", f"grad_norm/{name}"

    @classmethod
    def from_config(cls, name, net, cfg, flags=None, lr=None, betas=None, **overrides):
        """Declared from a config built with model_flags: the settings of `flags` (default: `name`;
        "" for the unsuffixed flags of a one-model script). lr / betas override the config's."""
        s = settings(cfg, name if flags is None else flags)
        if lr is None and not s["lr"] > 0:
            raise UserError(f"no learning rate for {name}: pass --lr or --lr-{name}")
        betas = betas or (s["beta1"] if s["beta1"] >= 0 else 0.9, s["beta2"] if s["beta2"] >= 0 else 0.999)
        flags_of_transforms = {t.flag: s[t.flag] for t in transforms.TRANSFORMS}
        return cls(name, net, optimizer=s["optimizer"] or "adam", lr=s["lr"] if lr is None else lr, betas=betas,
                   weight_decay=getattr(cfg, "weight_decay", 0.0), amp=getattr(cfg, "amp", "O0"),
                   **{**flags_of_transforms, **overrides})

    def step(self, forward_fn, has_aux=False, takes_lr=False, grad_reducer=None, constraint=None):
        """make_step over this model's optimizer and transform (loops/step.py). `grad_reducer` is a
        factory `parameters -> (grads -> grads)` (data parallel: loops.distributed.grad_reducer)."""
        reducer = grad_reducer(self.optimizer.parameters) if grad_reducer else None
        return make_step(forward_fn, self.optimizer, self.transform, has_aux=has_aux, takes_lr=takes_lr,
                         grad_reducer=reducer, constraint=constraint)

    def size(self):
        """Trainable parameters (elements) of the model: what papers compare."""
        return sum(int(p.size) for p in self.net.trainable_params())

    def parameters(self):
        """Every Parameter this model owns: weights, optimizer state, transform state."""
        return all_parameters(self.net, self.optimizer, self.transform)

    def skipped(self):
        """Updates (or micro-batches) vetoed so far by its transform (host int)."""
        return self.transform.skipped_count()


def all_state(*owners):
    """Every Parameter of the given Learners and Cells, each once: what a checkpoint holds."""
    out, seen = [], set()
    for owner in owners:
        for p in owner.parameters() if isinstance(owner, Learner) else all_parameters(owner):
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def model_flags(base, models, **shared):
    """A dataclass deriving `base` with the per-model and shared training flags.

    models: {name: who}, e.g. {"g": "G", "d": "D"}: fields `lr_g`, `optimizer_g`, `beta1_g`,
    `beta2_g` and `<flag>_g` for every gradient transform, each defaulting to "take the shared value".
    shared: the shared fields' defaults, e.g. optimizer="adam", beta1=-1.0; every transform flag
    gets a shared field too (default: off). A value may be `opt(default, help, choices)`. Shared fields only are what a one-model script wants:
    model_flags(RunConfig, {}, lr=0.01, optimizer="sgd"). Its validate() checks their ranges
    (check_model_flags)."""
    fields = []
    shared = {"lr": 0.0, **shared}  # every model's learning rate falls back to --lr
    helps = {"lr": "learning rate of every model", "optimizer": "optimizer of every model",
             "beta1": "Adam beta1 (momentum for SGD) of every model", "beta2": "Adam beta2 of every model",
             "weight_decay": "weight decay (decoupled for AdamW)"}
    for key, default in shared.items():  # a value, or opt(...) for a help text of its own
        auto = "the script's own" if key == "lr" and default == 0.0 else None  # 0.0: a placeholder
        spec = default if isinstance(default, dataclasses.Field) else opt(default, helps.get(key, key), _choices(key), auto)
        fields.append((key, type(spec.default), spec))
    for t in transforms.TRANSFORMS:
        if t.flag not in shared:
            whose = "every model's " if models else ""
            fields.append((t.flag, type(t.default), opt(t.default, t.help.format(whose=whose), _choices(t.flag))))
    for name, who in models.items():
        for key, (unset, help_text) in OPTIMIZER_FLAGS.items():
            choices = [""] + sorted(OPTIMIZERS) if key == "optimizer" else None
            fields.append((f"{key}_{name}", type(unset), opt(unset, help_text.format(who=who), choices)))
        for t in transforms.TRANSFORMS:
            unset = "" if isinstance(t.default, str) else t.default
            help_text = t.help.format(whose=who + "'s ") + f" (default: --{t.flag.replace('_', '-')})"
            choices = [""] + list(t.choices) if getattr(t, "choices", None) else None
            fields.append((f"{t.flag}_{name}", type(unset), opt(unset, help_text, choices)))
    def validate(self):  # the derived config checks these flags' ranges too
        base.validate(self)
        check_model_flags(self)
    transform_flags = {t.flag for t in transforms.TRANSFORMS}
    interventions = [f[0] for f in fields if f[0] in transform_flags or f[0].rsplit("_", 1)[0] in transform_flags]
    groups = {"optimisation (shared; per model: --<flag>-<model>)": [f[0] for f in fields if f[0] not in interventions],
              "gradient interventions (shared; per model: --<flag>-<model>)": interventions}
    cls = dataclasses.make_dataclass(base.__name__ + "WithModels", fields, bases=(base,),
                                     namespace={"validate": validate, "MODELS": dict(models), "FLAG_GROUPS": groups})
    return cls


def _choices(key):
    if key == "optimizer":
        return sorted(OPTIMIZERS)
    for t in transforms.TRANSFORMS:
        if t.flag == key and getattr(t, "choices", None):
            return [""] + list(t.choices)
    return None


def _unset(cfg, field_name):
    return getattr(cfg, field_name) == type(cfg).__dataclass_fields__[field_name].default


def settings(cfg, name):
    """Model `name`'s effective settings: its own flag where given, else the shared flag
    (name "": the shared flags themselves). Keys: lr, optimizer, beta1, beta2, each transform flag."""
    out = {}
    for key in list(OPTIMIZER_FLAGS) + [t.flag for t in transforms.TRANSFORMS]:
        own = f"{key}_{name}"
        if name and hasattr(cfg, own) and not _unset(cfg, own):
            out[key] = getattr(cfg, own)
        else:
            out[key] = getattr(cfg, key, OPTIMIZER_FLAGS.get(key, (None,))[0])
    return out


def fill_optimizer_flags(cfg, keys=("optimizer", "beta1", "beta2"), only_given=False):
    """Write the shared values of `keys` into every model's unset `<key>_<n>` (config.json then
    shows what each model ran with); with only_given, not a shared value left at its default.
    Scripts with "auto" values: fill ("lr",) with only_given before filling them, the rest after."""
    for name in getattr(cfg, "MODELS", {}):
        for key in keys:
            if hasattr(cfg, key) and _unset(cfg, f"{key}_{name}") and not (only_given and _unset(cfg, key)):
                setattr(cfg, f"{key}_{name}", getattr(cfg, key))


def check_model_flags(cfg):
    """UserError unless every transform flag is in range (numbers finite and >= 0, counts >= 1) and
    every set beta is in [0, 1); per-model and shared alike."""
    names = [""] + list(getattr(cfg, "MODELS", {}))
    for name in names:
        suffix = f"_{name}" if name else ""
        for t in transforms.TRANSFORMS:
            key = t.flag + suffix
            if isinstance(t.default, bool) or isinstance(t.default, str) or not hasattr(cfg, key):
                continue
            (cfg.check_positive if isinstance(t.default, int) else cfg.check_non_negative)(key)
        for beta in ("beta1", "beta2"):
            value = getattr(cfg, beta + suffix, -1.0)
            cfg.check(value == -1.0 or 0 <= value < 1, f"--{(beta + suffix).replace('_', '-')} must be in [0, 1), got {value}")
        if hasattr(cfg, "lr" + suffix):
            cfg.check_non_negative("lr" + suffix)
