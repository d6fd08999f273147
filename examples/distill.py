"""Three models that learn side by side: teacher -> assistant -> student distillation.

    python examples/distill.py --run-dir runs/distill --lr-student 0.02
"""
import os
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root
os.environ.setdefault("GLOG_v", "4")  # before MindSpore loads: keep its C++ log lines quiet
import numpy as np
from mindspore import Tensor, nn, ops

from loops.config import RunConfig, opt, parse_config, run_cli
from loops.driver import Phase
from loops.learner import Learner, all_state, model_flags
from loops.run import Run

WIDTH = {"teacher": 64, "assistant": 16, "student": 4}  # one Learner per name: --lr-teacher, ...


@dataclass
class Config(model_flags(RunConfig, {n: f"the {n}" for n in WIDTH}, lr=opt(1e-2, "learning rate"))):
    steps: int = opt(600, "iterations: one step of each model")
    batch_size: int = opt(64, "samples per step")


def main(argv):
    cfg = parse_config(Config, argv, __doc__)
    with Run(cfg) as run:
        run.open("distill", "sine", "mse")
        teacher, assistant, student = (Learner.from_config(n, nn.SequentialCell(
            nn.Dense(1, w), nn.Tanh(), nn.Dense(w, 1)), cfg) for n, w in WIDTH.items())

        def teacher_loss(x, y):  # fits noisy y = sin(3x)
            return ops.mean(ops.square(teacher.net(x) - y))

        def assistant_loss(x):  # stop_gradient: the assistant's step never moves the teacher
            return ops.mean(ops.square(assistant.net(x) - ops.stop_gradient(teacher.net(x))))

        def student_loss(x):
            return ops.mean(ops.square(student.net(x) - ops.stop_gradient(assistant.net(x))))
        models = (teacher, assistant, student)
        steps = dict(zip(WIDTH, (m.step(f) for m, f in zip(models, (teacher_loss, assistant_loss, student_loss)))))
        state = all_state(*models)
        run.restore(state)  # --resume: before the first compiled call
        run.begin(state)

        def draw(name):  # host inputs from the run's one RNG: exact resume
            def inputs(step):
                x = run.rng.uniform(-1, 1, (cfg.batch_size, 1)).astype(np.float32)
                y = (np.sin(3 * x) + 0.05 * run.rng.standard_normal(x.shape)).astype(np.float32)
                return steps[name].host_inputs((x, y) if name == "teacher" else (x,), run.rng)
            return inputs
        code = run.train([Phase(m.name, draw(m.name), steps[m.name].scalars, (m.loss_tag, m.grad_norm_tag))
                          for m in models])
        x = np.linspace(-1, 1, 201, dtype=np.float32).reshape(-1, 1)
        error = {f"mse_{m.name}": float(np.mean((m.net(Tensor(x)).asnumpy() - np.sin(3 * x)) ** 2)) for m in models}
        run.finish(dict(error, steps=cfg.steps) if code == 0 else None)
    print(" ".join(f"{k}={v:.4f}" for k, v in error.items()), "run dir:", cfg.run_dir)
    return code


if __name__ == "__main__":
    run_cli(main)
