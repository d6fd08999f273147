"""PPO with the environments inside the graph (`--env-backend mindspore`): a whole iteration, rollout,
GAE and every epoch and minibatch update of actor and critic, is ONE compiled call.

The rollout is a driver phase like the actor's and the critic's, so the driver's fuse mode puts all
three in one graph: rl/native_envs.py steps the N environments in a graph-mode while loop, each
step's row (observation, action, log-probability, value, reward, done, finished episode's return and
length) is written in place into a non-trainable Parameter, GAE is computed from it in closed form
(a handful of (T, T, N) kernels; a backward loop for long rollouts), and the actor and critic steps
(each its own Learner, value_and_grad and optimizer, as on the host path) gather their minibatches
from them by index. The host draws every random number (action noise, reset states, minibatch
permutations) from the run's generator and passes them in, so the generator and the environments'
carry (a Parameter, saved in every checkpoint) decide a run and `--resume` continues it bit for bit.
Finished episodes are read back from the rollout Parameters after the call (`harvest`) for CleanRL's
tags and the end-of-run metrics.

Same math as the host path (rl/ppo.py): a time limit bootstraps from the final observation through
the reward, the per-minibatch advantage normalisation, the losses. Differences: the environments'
initial states come from the run's generator (reset_noise) instead of gymnasium's own seeding, and
everything after the first state follows from it, so the two backends train on different episodes.
"""
import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops

from loops.driver import Phase
from rl.agent import InGraphEnvironments
from rl.native_envs import NATIVE_ENVS
from rl.ppo import PPO, log_prob_and_entropy


# GAE in closed form costs (T, T, N) arithmetic and memory, the loop ~10 kernel launches per step T: the
# closed form is the cheaper while a rollout has at most about this many rows T x N (`python
# bench/bench_gae.py`, bench/RESULTS.md: 0.59 vs 3.55 ms at T 32 x N 8, 6.0 vs 11.9 at 128 x 40, but 4.2 vs
# 3.7 at 32 x 400); above it the rollout runs the loop.
CLOSED_FORM_MAX_ROWS = 8192


def gae_discounts(steps, gamma_lam):
    """(steps, steps, 1) float32 Tensor: (gamma lam)^(l - t) at [t, l] for l >= t, else 0 (computed in float64)."""
    t = np.arange(steps)
    lag = t[None] - t[:, None]
    return Tensor(np.where(lag >= 0, gamma_lam ** np.maximum(lag, 0), 0.0)[:, :, None].astype(np.float32))


def gae_in_closed_form(rewards, values, dones, next_value, gamma, discounts):
    """rl/storage.py's gae (advantages only), (T, N) Tensors, without its backward loop: the recursion
    A_t = delta_t + gamma lam (1 - done_t) A_{t+1} unrolled is A_t = the sum over l >= t of
    (gamma lam)^(l - t) delta_l while no episode ends in [t, l - 1]. Episodes are told apart by the
    number of dones before each step. A few (T, T, N) kernels where the loop costs ~10 a step, and
    kernel launches are what an iteration costs on CPU. `discounts`: gae_discounts(T, gamma * lam)."""
    T = rewards.shape[0]
    following = ops.concat([values[1:], next_value.reshape(1, -1)], 0)  # V(s_{t+1})
    delta = rewards + gamma * following * (1.0 - dones) - values
    ended_before = ops.cumsum(dones, 0) - dones
    same_episode = (ended_before.reshape(1, T, -1) == ended_before.reshape(T, 1, -1)).astype(delta.dtype)
    return ops.sum(discounts * same_episode * delta.reshape(1, T, -1), 1)


def gae_in_a_loop(rewards, values, dones, next_value, gamma, lam, out):
    """rl/storage.py's backward recursion in a graph-mode while loop, one step per iteration, for rollouts
    too long for the closed form: writes [A_t, A_t + V_t] into row t of `out`, a (T, N, 2) Parameter.
    Returns A_0 (an output that orders the writes)."""
    T = rewards.shape[0]
    last = ops.zeros_like(next_value)
    t = Tensor(T - 1, ms.int32)
    while t >= 0:
        following = ops.where(t == T - 1, next_value, values[ops.minimum(t + 1, T - 1)])
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * following * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        ops.scatter_update(out, t.reshape(1), ops.stack([last, last + values[t]], 1).reshape(1, -1, 2))
        t = t - 1
    return last


class Rows:
    """The rollout's rows, (T, N, width) in ONE non-trainable Parameter written one step at a time (one
    scatter per step, one read on the host), in named columns: a column of shape () is one number per
    row, (w,) a vector of w."""

    def __init__(self, name, steps, num_envs, shapes):
        self.slices, start = {}, 0
        for column, shape in shapes.items():
            width = shape[0] if shape else 1
            self.slices[column] = (start, start + width, bool(shape))
            start += width
        self.param = Parameter(Tensor(np.zeros((steps, num_envs, start), np.float32)), name=name, requires_grad=False)

    def column(self, rows, name):
        """Column `name` of `rows` (B, width) or (T, N, width)."""
        a, b, vector = self.slices[name]
        return rows[..., a:b] if vector else rows[..., a]

    def numpy(self):
        """{name: numpy array} of the rows the last call wrote (the host's view)."""
        rows = self.param.asnumpy()
        return {name: rows[..., a:b] if vector else rows[..., a] for name, (a, b, vector) in self.slices.items()}


class NativePPO(InGraphEnvironments, PPO):  # with seeds > 1 (rl/ppo_seeds.py) the lanes and rows are seed-major

    def __init__(self, cfg, run):
        super().__init__(cfg, run)  # the gymnasium envs stay for the action space and the evaluation
        self.env = env = NATIVE_ENVS[cfg.env]()
        T, N = cfg.num_steps, cfg.num_envs * self.seeds
        self.env_carry = Parameter(env.initial(Tensor(env.reset_noise(self.rng, N))), name="env_carry",
                                   requires_grad=False)
        scalar = ()
        self.rows = Rows("rollout.rows", T, N, {
            "obs": (self.obs_dim,), "actions": scalar if self.discrete else (self.n_actions,), "logprobs": scalar,
            "values": scalar, "rewards": scalar, "dones": scalar, "episode_return": scalar, "episode_length": scalar})
        self.targets = Rows("rollout.targets", T, N, {"advantages": scalar, "returns": scalar})
        self.rollouts_unread = 0  # rollouts run (or about to run) whose episodes the host has not read

    # ---- the graph ----
    def rollout_fn(self):
        """(action noise (T, N, A), reset states (T, N, d)) -> (mean reward,): T steps of the N
        environments with the current policy, stored in self.rows, then GAE into self.targets."""
        env, rows, targets, carry_param = self.env, self.rows, self.targets, self.env_carry
        actor, critic, discrete, T, K = self.actor.net, self.critic.net, self.discrete, self.cfg.num_steps, self.seeds
        gamma, lam, d = self.cfg.gamma, self.cfg.gae_lambda, env.state_dim
        low, high = (None, None) if discrete else (Tensor(self.bounds[0]), Tensor(self.bounds[1]))
        rows_per_step = self.rows.param.shape[1]
        closed_form = T * rows_per_step <= CLOSED_FORM_MAX_ROWS
        discount = gae_discounts(T, gamma * lam) if closed_form else None

        def one_step(t, carry, action_noise, reset_noise):
            obs = env.observe(carry[:, :d])
            out = actor(obs)
            noise = action_noise[t]
            if discrete:
                action = ops.argmax(out + noise, -1).astype(ms.int32)
                env_action = action
            else:
                action = out + ops.exp(actor.log_std_for(out)) * noise
                env_action = ops.clamp(action, low, high)
            logp = log_prob_and_entropy(out, actor.log_std_for(out), action, discrete)[0]
            carry, step = env.step(carry, env_action, reset_noise[t])
            terminated, truncated = step["terminated"], step["truncated"]
            n = obs.shape[0]
            # one forward for both, each seed's rows together: (K, observations then final observations)
            both = ops.concat([obs.reshape(K, n // K, -1), step["final_obs"].reshape(K, n // K, -1)], 1)
            values = critic(both.reshape(2 * n, -1)).reshape(K, 2, n // K)
            value, final_value = values[:, 0].reshape(-1), values[:, 1].reshape(-1)
            cut = ops.logical_and(truncated, ops.logical_not(terminated)).astype(ms.float32)
            # a time limit is not a terminal state: bootstrap from the final observation
            reward = step["reward"].astype(ms.float32) + gamma * cut * final_value
            done = ops.logical_or(terminated, truncated).astype(ms.float32)
            row = ops.concat([obs, action.astype(ms.float32).reshape(n, -1), ops.stack(
                [logp, value, reward, done, step["episode_return"].astype(ms.float32) * done,
                 step["episode_length"].astype(ms.float32) * done], 1)], 1)
            ops.scatter_update(rows.param, t.reshape(1), row.reshape((1,) + row.shape))
            return carry

        def rollout(action_noise, reset_noise):
            carry = carry_param + 0
            t = Tensor(0, ms.int32)
            while t < T:
                carry = one_step(t, carry, action_noise, reset_noise)
                t = t + 1
            carry = ops.depend(carry, ops.assign(carry_param, carry))
            next_value = critic(env.observe(carry[:, :d])).reshape(-1)
            stored = rows.param
            rewards, values, dones = (rows.column(stored, c) for c in ("rewards", "values", "dones"))
            if closed_form:
                advantages = gae_in_closed_form(rewards, values, dones, next_value, gamma, discount)
                written = ops.assign(targets.param, ops.stack([advantages, advantages + values], 2))
            else:
                written = gae_in_a_loop(rewards, values, dones, next_value, gamma, lam, targets.param)
            # depend: the writes are part of the output, so they are neither pruned nor ordered after the updates
            return (ops.depend(ops.mean(rewards), written),)
        return rollout

    def gather(self, name, idx):
        """Rows `idx` (of the T * N flattened) of column group `name`."""
        store = self.targets if name in self.targets.slices else self.rows
        flat = store.param.reshape((-1, store.param.shape[-1]))
        return store.column(ops.gather(flat, idx, 0), name)

    def actor_objective(self):  # the host path's loss on minibatches gathered from the rows (traced after __init__)
        inner, gather, discrete, K = self.actor_loss_fn(), self.gather, self.discrete, self.seeds

        def loss(idx):
            adv = gather("advantages", idx).reshape(K, -1)
            centred = adv - ops.mean(adv, 1, keep_dims=True)
            # per minibatch and seed, numpy's std (ddof 0)
            adv = (centred / (ops.sqrt(ops.mean(centred * centred, 1, keep_dims=True)) + 1e-8)).reshape(-1)
            actions = gather("actions", idx)
            if discrete:
                actions = actions.astype(ms.int32)
            out = inner(gather("obs", idx), actions, gather("logprobs", idx), adv)
            return (out[0] * K,) + out[1:] if K > 1 else out  # K x the mean over seeds: each seed's own gradient
        return loss

    def critic_objective(self):
        inner, gather, K = self.critic_loss_fn(), self.gather, self.seeds

        def loss(idx):
            value_loss = inner(gather("obs", idx), gather("returns", idx))
            return value_loss * K if K > 1 else value_loss
        return loss

    # ---- host side ----
    def draw_rollout(self, step):
        """The rollout's host inputs; the previous rollout's episodes are read first, and this
        iteration's minibatches are drawn after the noise (the order is part of exact resume)."""
        self.harvest()
        cfg, env, K = self.cfg, self.env, self.seeds
        T, N = cfg.num_steps, cfg.num_envs
        if self.discrete:
            action_noise = self.rng.gumbel(size=(T, K * N, self.n_actions)).astype(np.float32)
        else:
            action_noise = self.rng.standard_normal((T, K * N, self.n_actions), dtype=np.float32)
        reset_noise = env.reset_noise(self.rng, T * K * N).reshape(T, K * N, -1)
        n = T * N
        size = n // cfg.num_minibatches

        def rows_of(local, k):  # seed k's sample t * N + i is row t * K * N + k * N + i of the T x (K * N)
            return (local // N) * (K * N) + k * N + local % N
        self.batches = [np.concatenate([rows_of(order[i * size:(i + 1) * size], k) for k, order in enumerate(orders)])
                        .astype(np.int32) for _ in range(cfg.update_epochs)
                        for orders in [[self.rng.permutation(n) for _ in range(K)]] for i in range(cfg.num_minibatches)]
        self.rollouts_unread += 1
        return action_noise, reset_noise

    def next_batch(self, who):
        i = self.cursor[who]
        self.cursor[who] = (i + 1) % len(self.batches)
        return self.batches[i]

    def draw_actor(self, step):
        return self.actor_step.host_inputs((self.next_batch("actor"),), self.rng, self.scheduled_lr("actor", step))

    def draw_critic(self, step):
        return self.critic_step.host_inputs((self.next_batch("critic"),), self.rng, self.scheduled_lr("critic", step))

    def harvest(self):
        """Count the environment steps of the rollout that ran and record its finished episodes
        (in gymnasium's order: by step, then by environment; x = the environment step they ended at)."""
        if not self.rollouts_unread:
            return
        self.rollouts_unread = 0
        rows = self.rows.numpy()
        dones, returns, lengths = rows["dones"], rows["episode_return"], rows["episode_length"]
        for t, i in zip(*np.nonzero(dones)):
            self.finished(int(t), int(i), (float(returns[t, i]), int(lengths[t, i])))
        self.env_steps += dones.size

    def finished(self, t, lane, episode):
        """The episode that environment `lane` finished at rollout step `t`."""
        self.episodes.append(episode)
        self.unlogged.append((self.env_steps + (t + 1) * self.rows.param.shape[1], *episode))

    def phases(self):  # the rollout's tag: its mean reward, time-limit bootstraps included (what GAE reads)
        return [Phase("rollout", self.draw_rollout, self.rollout_fn(), ("charts/rollout_reward_mean",))] + super().phases()
