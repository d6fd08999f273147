"""Environment steps per second: gymnasium's vector env stepped from Python (what train_rl.py does
today) against rl/native_envs.py stepped inside one compiled call (a graph-mode while loop over T
steps), same environment, same number of environments, random actions drawn on the host.

    python bench/bench_native_envs.py                       # CartPole-v1, 4 and 256 environments
    python bench/bench_native_envs.py --env Pendulum-v1 --envs 1,64 --steps 500

Prints steps/s of each and their ratio (native / gymnasium), measured in this process after a warm-up
call (compilation excluded; its time is printed apart). Environment stepping only: no policy.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gymnasium_steps_per_s(env_id, n, steps, rng):
    from rl.envs import make_envs
    from rl.native_envs import NATIVE_ENVS
    native = NATIVE_ENVS[env_id]()
    envs, _ = make_envs(env_id, n, 0)
    actions = random_actions(native, rng, steps, n)
    start = time.perf_counter()
    for t in range(steps):
        envs.step(actions[t])
    return steps * n / (time.perf_counter() - start)


def random_actions(native, rng, steps, n):
    if native.actions:
        return rng.integers(0, native.actions, (steps, n)).astype(np.int32)
    return rng.uniform(native.low, native.high, (steps, n, native.action_dim)).astype(np.float32)


def native_steps_per_s(env_id, n, steps, rng, calls=3):
    import mindspore as ms
    from mindspore import Tensor, ops
    from rl.native_envs import NATIVE_ENVS
    env = NATIVE_ENVS[env_id]()

    d = env.state_dim

    @ms.jit
    def rollout(carry, actions, noise):
        # one tensor carried (the env's carry and the summed reward): a tuple carry gives wrong results in
        # MindSpore 2.10; a Tensor counter: a real loop (a Python int unrolls all T steps: 390 s to compile)
        packed, t = ops.concat([carry, ops.zeros((carry.shape[0], 1), carry.dtype)], 1), Tensor(0, ms.int32)
        while t < actions.shape[0]:
            carry, out = env.step(packed[:, :d + 2], actions[t], noise[t])
            packed = ops.concat([carry, (packed[:, d + 2] + out["reward"]).reshape(-1, 1)], 1)
            t = t + 1
        return packed[:, :d + 2], packed[:, d + 2]

    carry = env.initial(Tensor(env.reset_noise(rng, n)))
    inputs = [(Tensor(random_actions(env, rng, steps, n)), Tensor(np.stack([env.reset_noise(rng, n)
                                                                              for _ in range(steps)])))
              for _ in range(calls + 1)]
    start = time.perf_counter()
    carry, total = rollout(carry, *inputs[0])
    total.asnumpy()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for actions, noise in inputs[1:]:
        carry, total = rollout(carry, actions, noise)
    total.asnumpy()
    return calls * steps * n / (time.perf_counter() - start), compile_s


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--envs", default="4,256", help="comma-separated numbers of environments")
    p.add_argument("--steps", type=int, default=1000, help="steps per environment in each measured call")
    args = p.parse_args(argv)
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    rng = np.random.default_rng(0)
    print(f"{args.env}, {args.steps} steps per call (random actions, no policy):")
    for n in (int(v) for v in args.envs.split(",")):
        host = gymnasium_steps_per_s(args.env, n, args.steps, rng)
        native, compile_s = native_steps_per_s(args.env, n, args.steps, rng)
        print(f"  {n:5d} envs: gymnasium {host:10.0f} steps/s | native in one call {native:12.0f} steps/s "
              f"({native / host:.1f}x; compiled in {compile_s:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
