"""Optimizers by name, with their state Parameters renamed so two of them never clash.

`mindspore.experimental.optim` is used because it costs less per call than `nn.Adam`
(see bench/RESULTS.md). Each optimizer owns state such as `state_step` and `exp_avg.<param>`;
in a GAN both optimizers would own a `state_step`, which breaks a shared graph and a checkpoint,
so every state Parameter gets the model's prefix (`d.opt.state_step`).
"""
from mindspore import Parameter
from mindspore.experimental import optim

OPTIMIZERS = {
    "sgd": lambda params, lr, betas, wd: optim.SGD(params, lr=lr, weight_decay=wd),
    "momentum": lambda params, lr, betas, wd: optim.SGD(params, lr=lr, momentum=betas[0], weight_decay=wd),
    "adam": lambda params, lr, betas, wd: optim.Adam(params, lr=lr, betas=betas, weight_decay=wd),
    "adamw": lambda params, lr, betas, wd: optim.AdamW(params, lr=lr, betas=betas, weight_decay=wd),
}


def make_optimizer(name, params, lr, prefix, betas=(0.9, 0.999), weight_decay=0.0):
    params = list(params)
    opt = OPTIMIZERS[name](params, lr, tuple(betas), weight_decay)
    model_ids = {id(p) for p in params}
    for p in opt.get_parameters():
        if id(p) not in model_ids:
            p.name = prefix + "opt." + p.name
    # the learning rate lives in param_groups as a Parameter (`learning_rate_group_0`), outside
    # get_parameters(): rename it too, and keep it for checkpoints (schedules change it)
    opt.lr_parameters = [v for group in opt.param_groups for v in group.values() if isinstance(v, Parameter)]
    for p in opt.lr_parameters:
        p.name = prefix + "opt." + p.name
    return opt


def all_parameters(*cells):
    """Every Parameter of the given Cells (models, optimizers, transforms), each once, in order."""
    seen, out = set(), []
    for cell in cells:
        for p in list(cell.get_parameters()) + getattr(cell, "lr_parameters", []) + getattr(cell, "extra_parameters", []):
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out
