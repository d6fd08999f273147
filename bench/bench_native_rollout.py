"""A PPO rollout (policy forward, Gumbel-max sampling on host-drawn noise, critic value, environment
step, storage) two ways, same networks (CleanRL's 64-64 tanh actor and critic), same sizes:

  host    what rl/ppo.py does today: per step, one compiled policy call, then gymnasium's vector env
          stepped from Python, the arrays stored in numpy;
  native  the whole rollout in ONE compiled call: a graph-mode while loop over rl/native_envs.py's
          CartPole, each step's row either accumulated into the one carried (T + 1, N, F) tensor (a
          while loop must carry one tensor: docs/traps.md), or written in place into a Parameter with
          scatter_update (the loop then carries only the environments; both give the same rows).

    python bench/bench_native_rollout.py                      # 8 x 32 (train_rl.py's PPO), 4 x 128, 256 x 128

Prints environment steps per second of each (compilation excluded, printed apart) and the ratio.
"""
import argparse
import math
import os
import sys
import time

import mindspore as ms
import numpy as np
from mindspore import ops

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def networks(obs_dim, n_actions, hidden=64):
    from mindspore import nn
    from mindspore.common.initializer import Orthogonal

    def mlp(outputs, gain):
        return nn.SequentialCell(nn.Dense(obs_dim, hidden, weight_init=Orthogonal(math.sqrt(2))), nn.Tanh(),
                                 nn.Dense(hidden, hidden, weight_init=Orthogonal(math.sqrt(2))), nn.Tanh(),
                                 nn.Dense(hidden, outputs, weight_init=Orthogonal(gain)))
    actor, critic = mlp(n_actions, 0.01), mlp(1, 1.0)
    actor.update_parameters_name("actor.")  # one graph holds both: their parameter names must differ
    critic.update_parameters_name("critic.")
    return actor, critic


def host_rollout(env_id, n, steps, calls, rng):
    import mindspore as ms
    from mindspore import Tensor, ops
    from rl.envs import make_envs
    envs, obs = make_envs(env_id, n, 0)
    actor, critic = networks(obs.shape[1], int(envs.single_action_space.n))

    @ms.jit
    def policy(obs, gumbel):
        logits = actor(obs)
        action = ops.argmax(logits + gumbel, -1).astype(ms.int32)
        logp = ops.gather_elements(ops.log_softmax(logits, -1), 1, action.reshape(-1, 1)).reshape(-1)
        return action, logp, critic(obs).reshape(-1)

    def one(obs):
        store = np.zeros((steps, n, obs.shape[1] + 5), np.float32)
        for t in range(steps):
            gumbel = -np.log(-np.log(rng.uniform(1e-12, 1.0, (n, 2)))).astype(np.float32)
            action, logp, value = (x.asnumpy() for x in policy(Tensor(obs), Tensor(gumbel)))
            next_obs, reward, terminated, truncated, _ = envs.step(action)
            store[t] = np.concatenate([obs, np.stack([action, logp, value, reward, terminated | truncated], 1)], 1)
            obs = next_obs.astype(np.float32)
        return obs, store
    start = time.perf_counter()
    obs, _ = one(obs)
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(calls):
        obs, _ = one(obs)
    return calls * steps * n / (time.perf_counter() - start), compile_s


def step_row(env, actor, critic, carry, gumbel, reset_noise):
    """One rollout step inside the graph: (the environments' next carry, the stored row: obs, action,
    log pi(action), V(obs), reward, done). Module-level: a graph cannot run an import statement."""
    obs = env.observe(carry[:, :env.state_dim])
    logits = actor(obs)
    action = ops.argmax(logits + gumbel, -1).astype(ms.int32)
    logp = ops.gather_elements(ops.log_softmax(logits, -1), 1, action.reshape(-1, 1)).reshape(-1)
    value = critic(obs).reshape(-1)
    carry, out = env.step(carry, action, reset_noise)
    done = ops.logical_or(out["terminated"], out["truncated"]).astype(ms.float32)
    return carry, ops.concat([obs, ops.stack([action.astype(ms.float32), logp, value, out["reward"], done], 1)], 1)


def native_rollout(env_id, n, steps, calls, rng):
    import mindspore as ms
    from mindspore import Tensor, ops
    from rl.native_envs import NATIVE_ENVS
    env = NATIVE_ENVS[env_id]()
    d, obs_dim = env.state_dim, env.obs_dim
    actor, critic = networks(obs_dim, env.actions)
    width = obs_dim + 5

    @ms.jit
    def rollout(carry, gumbel, reset_noise):
        # ONE carried tensor: rows 0..T-1 the stored steps (width columns), row T the environments' carry
        packed = ops.concat([ops.zeros((steps, n, width), ms.float32),
                             ops.pad(carry, (0, width - (d + 2))).reshape(1, n, width)], 0)
        t = Tensor(0, ms.int32)
        while t < steps:
            carry = packed[steps, :, :d + 2]
            carry, row = step_row(env, actor, critic, carry, gumbel[t], reset_noise[t])
            at = ops.one_hot(t, steps + 1, Tensor(1.0, ms.float32), Tensor(0.0, ms.float32)).reshape(-1, 1, 1)
            last = ops.one_hot(Tensor(steps, ms.int32), steps + 1, Tensor(1.0, ms.float32),
                               Tensor(0.0, ms.float32)).reshape(-1, 1, 1)
            new_carry = ops.pad(carry, (0, width - (d + 2))).reshape(1, n, width)
            packed = packed * (1 - last) + at * row.reshape(1, n, width) + last * new_carry
            t = t + 1
        return packed

    carry = env.initial(Tensor(env.reset_noise(rng, n)))

    def one(carry):
        gumbel = Tensor(-np.log(-np.log(rng.uniform(1e-12, 1.0, (steps, n, env.actions)))).astype(np.float32))
        noise = Tensor(np.stack([env.reset_noise(rng, n) for _ in range(steps)]))
        packed = rollout(carry, gumbel, noise)
        return packed[steps, :, :d + 2], packed
    start = time.perf_counter()
    carry, packed = one(carry)
    packed.asnumpy()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(calls):
        carry, packed = one(carry)
        rows = packed.asnumpy()  # the rollout goes to the host, as GAE and the minibatches need it there today
    return calls * steps * n / (time.perf_counter() - start), compile_s, rows[:steps]


def native_rollout_scatter(env_id, n, steps, calls, rng):
    import mindspore as ms
    from mindspore import Parameter, Tensor, ops
    from rl.native_envs import NATIVE_ENVS
    env = NATIVE_ENVS[env_id]()
    d, obs_dim = env.state_dim, env.obs_dim
    actor, critic = networks(obs_dim, env.actions)
    width = obs_dim + 5

    buffer = Parameter(Tensor(np.zeros((steps, n, width), np.float32)), name="rollout", requires_grad=False)

    @ms.jit
    def rollout(carry, gumbel, reset_noise):
        # the rows are written in place into a Parameter; the loop carries only the environments' carry
        t = Tensor(0, ms.int32)
        while t < steps:
            carry, row = step_row(env, actor, critic, carry, gumbel[t], reset_noise[t])
            ops.scatter_update(buffer, t.reshape(1), row.reshape(1, n, width))
            t = t + 1
        return carry, buffer + 0

    carry = env.initial(Tensor(env.reset_noise(rng, n)))

    def one(carry):
        gumbel = Tensor(-np.log(-np.log(rng.uniform(1e-12, 1.0, (steps, n, env.actions)))).astype(np.float32))
        noise = Tensor(np.stack([env.reset_noise(rng, n) for _ in range(steps)]))
        return rollout(carry, gumbel, noise)
    start = time.perf_counter()
    carry, packed = one(carry)
    packed.asnumpy()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(calls):
        carry, packed = one(carry)
        rows = packed.asnumpy()  # the rollout goes to the host, as GAE and the minibatches need it there today
    return calls * steps * n / (time.perf_counter() - start), compile_s, rows


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8x32,4x128,256x128", help="comma-separated ENVSxSTEPS")
    p.add_argument("--calls", type=int, default=5, help="measured rollouts per size")
    args = p.parse_args(argv)
    import mindspore as ms
    ms.set_context(mode=ms.GRAPH_MODE)
    rng = np.random.default_rng(0)
    print("CartPole-v1 PPO rollout (64-64 tanh actor and critic), environment steps per second:")
    for size in args.sizes.split(","):
        n, steps = (int(v) for v in size.split("x"))
        host, host_compile = host_rollout("CartPole-v1", n, steps, args.calls, rng)
        native, native_compile, _ = native_rollout("CartPole-v1", n, steps, args.calls, rng)
        scatter, scatter_compile, _ = native_rollout_scatter("CartPole-v1", n, steps, args.calls, rng)
        print(f"  {n:4d} envs x {steps:3d} steps: host loop {host:9.0f} | one call, carried rows {native:10.0f} "
              f"({native / host:.1f}x) | one call, rows written in place {scatter:10.0f} ({scatter / host:.1f}x); "
              f"first calls {host_compile:.1f} / {native_compile:.1f} / {scatter_compile:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
