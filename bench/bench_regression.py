"""Regression step time: our jit step vs PyNative vs MindSpore's Model.train, same data, same process.

    python bench/bench_regression.py [--steps 2000] [--record]

Prints ms per step and the ratio to our graph-mode step; --record appends the table to
bench/RESULTS.md. Each variant trains y = 2x + 3 with SGD lr 0.01, batch 4, from zero weights.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mindspore as ms  # noqa: E402
import numpy as np  # noqa: E402
from mindspore import Tensor, nn, ops  # noqa: E402

from bench import record  # noqa: E402
from loops import lift_isa_cap  # noqa: E402
from data.regression import sample_batch  # noqa: E402
from loops.driver import MultiStep, Phase  # noqa: E402
from loops.optim import make_optimizer  # noqa: E402
from loops.step import make_step  # noqa: E402
from models.linear import Linear  # noqa: E402


def batches(steps, seed=0):
    rng = np.random.default_rng(seed)
    return [sample_batch(rng, 4) for _ in range(steps)]


def ours(mode, data, k=1):
    ms.set_context(mode=mode)
    model = Linear()
    model.update_parameters_name(f"m{mode}{k}.")
    opt = make_optimizer("sgd", model.trainable_params(), 0.01, f"m{mode}{k}.")

    def forward(x, y):
        return ops.mean(ops.square(model(x) - y))
    step = make_step(forward, opt)
    if k > 1:
        it = iter(data)

        def fit(x, y):  # a def, not a lambda: the graph parser rejects inline lambdas
            return step.body(x, y)[:1]
        multi = MultiStep([Phase("fit", lambda step: next(it), fit, ("loss",))], k)
        multi.run(0)  # compile
        start = time.perf_counter()
        for i in range(len(data) // k - 1):
            multi.run(i * k)  # host floats: each call ends synced
        return (time.perf_counter() - start) / (len(data) - k), model
    tensors = [(Tensor.from_numpy(x), Tensor.from_numpy(y)) for x, y in data]
    step(*tensors[0])  # compile
    start = time.perf_counter()
    for x, y in tensors[1:]:
        loss = step(x, y)[0]
    loss.asnumpy()
    return (time.perf_counter() - start) / (len(data) - 1), model


def model_train(data):
    ms.set_context(mode=ms.GRAPH_MODE)
    from mindspore import dataset as ds
    from mindspore.train import Model
    xs = np.concatenate([x for x, _ in data])
    ys = np.concatenate([y for _, y in data])
    dataset = ds.NumpySlicesDataset({"x": xs, "y": ys}, shuffle=False).batch(4)
    net = nn.Dense(1, 1, weight_init="zeros", bias_init="zeros")
    model = Model(net, loss_fn=nn.MSELoss(), optimizer=nn.SGD(net.trainable_params(), learning_rate=0.01))
    model.train(1, dataset.take(2), dataset_sink_mode=False)  # compile
    start = time.perf_counter()
    model.train(1, dataset, dataset_sink_mode=False)
    return (time.perf_counter() - start) / len(data), net


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    lift_isa_cap()  # no convolutions here, as in train_regression.py / toy train_gan.py runs
    data = batches(args.steps)
    rows = []
    base, _ = ours(ms.GRAPH_MODE, data)
    rows.append(("make_step, graph mode (jit), 1 call/step", base))
    rows.append(("make_step, graph mode, 50 steps/call", ours(ms.GRAPH_MODE, data, 50)[0]))
    rows.append(("make_step, PyNative (eager)", ours(ms.PYNATIVE_MODE, data[:500])[0]))
    rows.append(("Model.train (dataset_sink_mode=False)", model_train(data)[0]))
    lines = ["| variant | ms/step | time vs jit step |", "|---|---|---|"]
    lines += [f"| {name} | {t * 1e3:.3f} | {t / base:.2f}x |" for name, t in rows]
    table = "\n".join(lines)
    print(table)
    if args.record:
        record.append("Regression step", f"python bench/bench_regression.py --steps {args.steps} --record", table)


if __name__ == "__main__":
    main()
