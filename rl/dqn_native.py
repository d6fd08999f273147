"""DQN with the environments and the replay buffer inside the graph (`--env-backend mindspore`): an
iteration's --train-frequency epsilon-greedy vector steps, their replay inserts, the Q step and the
target update are ONE compiled call, and `--steps-per-call K` runs K such iterations in one call
(the driver's multi-step engine), so nothing goes back to the host between environment steps.

Same algorithm and the same draws as the host path (rl/dqn.py): per vector step the explore-or-not
draw and the random action (then a reset state per environment, used where one ends), per iteration
the replay batch, all from the run's host RNG, in the host path's order; the epsilon schedule and the
target updates follow the environment steps, which the host knows in advance (every iteration steps
num_envs x train_frequency). What the host cannot know, the greedy action, is computed in the graph
from Q's current weights. The environments (rl/native_envs.py) start from the run's generator instead
of gymnasium's seeding, so the two backends train on different episodes.

The replay buffer is ONE non-trainable Parameter (capacity, 2 obs + 3) of packed rows (obs, action,
reward, next_obs, terminated): one scatter per vector step, one gather per batch; the host keeps its
cursor (position, size) and computes every insert row. Finished episodes (return, length) are written
per vector step into a small Parameter of slots and read back on the host (`harvest`) for CleanRL's
tags (lazily: before their slot is written again, at a log line, a checkpoint and the end). An
iteration's --train-frequency steps are unrolled in the graph (a loop there would nest in the
multi-step loop), so the graph and its compile time grow with --train-frequency. Not supported here:
--gradient-steps > 1 (its iterations without environment steps would need a branch inside the
multi-step loop, where nested control flow leaks memory in MindSpore 2.10).
"""
import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, ops

from loops.driver import Phase
from loops.step import maybe_jit
from rl.agent import InGraphEnvironments
from rl.dqn import DQN
from rl.native_envs import NATIVE_ENVS


def _column(x):
    """(N,) -> (N, 1) float32."""
    return x.astype(ms.float32).reshape(-1, 1)


class DeviceReplay:
    """The replay buffer's storage in the graph (one packed Parameter) and its cursor on the host: the
    host computes the rows each vector step writes and samples the rows of each batch, with the same
    RNG calls as rl/replay.py's host buffer."""

    def __init__(self, capacity, obs_dim):
        self.capacity, self.pos, self.size, self.obs_dim = capacity, 0, 0, obs_dim
        self.param = Parameter(Tensor(np.zeros((capacity, 2 * obs_dim + 3), np.float32)), name="replay.rows",
                               requires_grad=False)

    def reserve(self, n):
        """The rows the next vector step of `n` environments writes (and advance the cursor)."""
        rows = (self.pos + np.arange(n)) % self.capacity
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)
        return rows.astype(np.int32)

    def sample(self, rng, batch_size):
        return rng.integers(0, self.size, batch_size).astype(np.int32)

    def split(self, rows):
        """Packed rows (B, 2 obs + 3) -> obs, actions (B, 1), rewards, next_obs, terminated."""
        d = self.obs_dim
        return rows[:, :d], rows[:, d:d + 1], rows[:, d + 1], rows[:, d + 2:2 * d + 2], rows[:, 2 * d + 2]

    # ---- checkpoints (the interface of rl/replay.py's buffer) ----
    def parameters(self):
        return [self.param]

    def sync_to_parameters(self):
        pass  # the rows live in the Parameter

    def load_from_parameters(self, cursor):
        self.pos, self.size = cursor["pos"], cursor["size"]

    def state(self):
        return {"pos": self.pos, "size": self.size}


class NativeDQN(InGraphEnvironments, DQN):
    def __init__(self, cfg, run):
        super().__init__(cfg, run)  # the gymnasium envs stay for the action space and the evaluation
        self.env = env = NATIVE_ENVS[cfg.env]()
        n = cfg.num_envs
        self.env_carry = Parameter(env.initial(Tensor(env.reset_noise(self.rng, n))), name="env_carry",
                                   requires_grad=False)
        # finished episodes: per vector step and environment (done, return, length), in slots of one
        # iteration each. K = --steps-per-call slots would do (a slot's last user ran in an earlier call);
        # 2K let harvest() read K iterations at once, one device read per call instead of one per iteration
        self.per_call = max(1, getattr(cfg, "steps_per_call", 1))
        self.slots = 2 * self.per_call
        self.episode_rows = Parameter(Tensor(np.zeros((self.slots * cfg.train_frequency, n, 3), np.float32)),
                                      name="rollout.episodes", requires_grad=False)
        self.unread = []  # (iteration, environment steps before it) of iterations whose episodes are not read yet
        self.warm_rows = None  # the warm-up's episode rows (made when it runs)

    # ---- the graph ----
    def vector_step(self, carry, explore, random_action, reset_noise, rows, slot_row, rows_param):
        """One epsilon-greedy step of the environments in `carry`; its transitions go into the replay
        rows `rows`, its finished episodes into row `slot_row` of `rows_param`. Returns the new carry."""
        env, q, buffer, d = self.env, self.q.net, self.buffer, self.env.state_dim
        obs = env.observe(carry[:, :d])
        greedy = ops.argmax(q(obs), -1).astype(ms.int32)
        action = ops.where(explore > 0.5, random_action, greedy)
        carry, out = env.step(carry, action, reset_noise)
        terminated = out["terminated"].astype(ms.float32)
        done = ops.logical_or(out["terminated"], out["truncated"]).astype(ms.float32)
        # final_obs is the state the action led to (before any reset): the next observation of every lane
        packed = ops.concat([obs, _column(action), _column(out["reward"]), out["final_obs"], _column(terminated)], 1)
        written = ops.scatter_update(buffer.param, rows, packed)
        stats = ops.stack([done, out["episode_return"].astype(ms.float32) * done,
                           out["episode_length"].astype(ms.float32) * done], 1)
        recorded = ops.scatter_update(rows_param, slot_row.reshape(1), stats.reshape((1,) + stats.shape))
        written = ops.depend(written, recorded)
        return ops.depend(carry, written)

    def replay_buffer(self):
        return DeviceReplay(self.cfg.buffer_size, self.obs_dim)

    def q_objective(self):
        """The host path's TD loss on a batch gathered from the replay rows by index."""
        inner, buffer = self.q_loss_fn(), self.buffer

        def loss(idx):
            return inner(*buffer.split(ops.gather(buffer.param, idx, 0)))
        return loss

    def q_body(self):
        """(explore, random actions, reset noise, insert rows (each train_frequency x N), first episode
        row, target decay, epsilon, *Q step inputs) -> td loss, mean Q, grad norm, epsilon."""
        step, polyak, carry_param, T = self.q_step.scalars, self.polyak, self.env_carry, self.cfg.train_frequency
        episode_rows = self.episode_rows

        def body(explore, random_action, reset_noise, rows, first_row, decay, epsilon, *inputs):
            carry = carry_param + 0
            for t in range(T):  # unrolled: a loop here would nest in the multi-step loop (it leaks)
                carry = self.vector_step(carry, explore[t], random_action[t], reset_noise[t], rows[t], first_row + t,
                                         episode_rows)
            carry = ops.depend(carry, ops.assign(carry_param, carry))
            out = step(*[ops.depend(x, carry) for x in inputs])  # after the inserts
            done = polyak.body(ops.depend(decay, out[0]))  # after Q's update
            return ops.depend(out[0], done), out[1], out[2], epsilon
        return body

    def warmup_fn(self):
        """(explore, random actions, reset noise, insert rows, each (T, N)) -> 0: T vector steps in a loop
        (the collection before the first Q step), episodes into the warm-up's own rows."""
        carry_param, warm_rows = self.env_carry, self.warm_rows

        def collect(explore, random_action, reset_noise, rows):
            carry = carry_param + 0
            t = Tensor(0, ms.int32)
            while t < explore.shape[0]:
                carry = self.vector_step(carry, explore[t], random_action[t], reset_noise[t], rows[t], t, warm_rows)
                t = t + 1
            return ops.depend(ops.sum(carry[:1, :1]), ops.assign(carry_param, carry))
        return maybe_jit(collect)

    # ---- host side ----
    def draw_vector_step(self):
        """The host draws of one vector step, in the host path's order (act()): explore, random action."""
        n = self.cfg.num_envs
        explore = self.rng.random(n) < self.epsilon()
        action = self.rng.integers(0, self.n_actions, n).astype(np.int32)
        reset = self.env.reset_noise(self.rng, n)
        rows = self.buffer.reserve(n)
        self.env_steps += n
        return explore.astype(np.float32), action, reset, rows

    def collect_warmup(self):
        """The --learning-starts steps before the first Q step: one compiled call, its episodes read back."""
        cfg = self.cfg
        count = -(-(cfg.learning_starts - self.env_steps) // cfg.num_envs)
        if count <= 0:
            return
        before = self.env_steps
        draws = [self.draw_vector_step() for _ in range(count)]
        self.warm_rows = Parameter(Tensor(np.zeros((count, cfg.num_envs, 3), np.float32)), name="warmup.episodes",
                                   requires_grad=False)
        self.warmup_fn()(*[Tensor(np.stack(column)) for column in zip(*draws)])
        self.read_episodes(self.warm_rows.asnumpy(), before)

    def draw_q(self, step):
        cfg = self.cfg
        self.collect_warmup()
        slot = step % self.slots
        self.harvest(before_step=step)
        before = self.env_steps
        draws = [self.draw_vector_step() for _ in range(cfg.train_frequency)]
        self.unread.append((step, before))
        due = self.env_steps // cfg.target_network_frequency > before // cfg.target_network_frequency
        decay = np.float32(1.0 - cfg.tau if due else 1.0)
        idx = self.buffer.sample(self.rng, cfg.batch_size)
        inputs = self.q_step.host_inputs((idx,), self.rng, self.scheduled_lr("q", step))
        stacked = tuple(np.stack(column) for column in zip(*draws))
        return stacked + (np.int32(slot * cfg.train_frequency), decay, np.float32(self.epsilon())) + inputs

    def harvest(self, before_step=None):
        """Record the finished episodes of the iterations that ran. With `before_step` (a draw for that
        iteration): only when its slot still holds unread episodes, and then every iteration up to
        before_step - K, which ran in an earlier call (a call runs at most K = --steps-per-call
        consecutive iterations): one device read per K iterations. Without: all of them (after a call,
        at a log line or a checkpoint)."""
        if not self.unread or (before_step is not None and self.unread[0][0] > before_step - self.slots):
            return  # nothing read yet, or the slot of before_step is free (its last user was read)
        rows, T = self.episode_rows.asnumpy(), self.cfg.train_frequency
        last = float("inf") if before_step is None else before_step - self.per_call
        while self.unread and self.unread[0][0] <= last:
            iteration, before = self.unread.pop(0)
            slot = iteration % self.slots
            self.read_episodes(rows[slot * T:(slot + 1) * T], before)

    def read_episodes(self, rows, before):
        """Episodes finished in `rows` (T, N, 3), whose first vector step came after `before` environment steps."""
        n = rows.shape[1]
        for t, i in zip(*np.nonzero(rows[..., 0])):
            episode = (float(rows[t, i, 1]), int(rows[t, i, 2]))
            self.episodes.append(episode)
            self.unlogged.append((before + (int(t) + 1) * n, *episode))

    def phases(self):
        return [Phase("q", self.draw_q, self.q_body(),
                      ("losses/td_loss", "losses/q_values", "grad_norm/q", "charts/epsilon"))]
