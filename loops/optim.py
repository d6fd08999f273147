"""Optimizers by name, with their state Parameters renamed so two of them never clash.

`mindspore.experimental.optim` is used because it costs less per call than `nn.Adam`
(see bench/RESULTS.md). Each optimizer owns state such as `state_step` and `exp_avg.<param>`;
with two models both optimizers would own a `state_step`, which breaks a shared graph and a checkpoint,
so every state Parameter gets the model's prefix (`d.opt.state_step`).
"""
import mindspore as ms
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops
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


class FusedAdam(nn.Cell):
    """Adam (L2 weight decay as torch.optim.Adam) with ONE fused kernel per parameter (ops.Adam),
    where the experimental Adam runs about ten element-wise kernels per parameter. Same interface
    as the experimental optimizers here: `.parameters`, `param_groups[0]["lr"]`, state
    `state_step`, `exp_avg.*`, `exp_avg_sq.*`; call it with the gradients."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(auto_prefix=False)
        self.parameters = ParameterTuple(params)
        self.exp_avg = self.parameters.clone("exp_avg", "zeros")
        self.exp_avg_sq = self.parameters.clone("exp_avg_sq", "zeros")
        self.state_step = Parameter(Tensor(0, ms.int32), "state_step")
        self.lr = Parameter(Tensor(lr, ms.float32), "learning_rate_group_0")
        self.param_groups = [{"params": list(params), "lr": self.lr}]
        self.beta1, self.beta2 = Tensor(betas[0], ms.float32), Tensor(betas[1], ms.float32)
        self.eps = Tensor(eps, ms.float32)
        self.weight_decay = weight_decay
        self.adam = ops.Adam()

    def construct(self, grads):
        step = self.state_step + 1
        done = ops.assign(self.state_step, step)
        t = step.astype(ms.float32)
        beta1_power, beta2_power = ops.pow(self.beta1, t), ops.pow(self.beta2, t)
        for p, m, v, g in zip(self.parameters, self.exp_avg, self.exp_avg_sq, grads):
            if self.weight_decay:
                g = g + self.weight_decay * p
            done = ops.depend(done, self.adam(p, m, v, beta1_power, beta2_power, self.lr, self.beta1, self.beta2,
                                              self.eps, g))
        return done
