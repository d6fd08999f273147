"""Deep Q-learning (Mnih et al. 2015), as CleanRL's dqn.py, with Double DQN (van Hasselt et al. 2016)
behind --double. One Learner, the Q network (--lr-q, --clip-norm-q, ...), and its target network,
declared with `declare` and moved by loops.ema.EMA.

  Q       regressed on the TD target  y = r + gamma (1 - terminated) max_a' Q'(s', a')
          (--double: y = r + gamma (1 - terminated) Q'(s', argmax_a' Q(s', a'))), Q' the target network,
          y held constant (stop_gradient); loss mean (Q(s, a) - y)^2 (--loss mse) or its Huber form,
          0.5 d^2 for |d| < 1 else |d| - 0.5 (--loss huber: SB3's smooth L1);
  target  Q' <- (1 - tau) Q' + tau Q every --target-network-frequency environment steps
          (tau 1: an exact copy, the hard update of the paper).

Actions are epsilon-greedy: with probability epsilon a uniform random action, else argmax_a Q(s, a);
epsilon falls linearly from --start-e to --end-e over the first --exploration-fraction x --total-steps
environment steps and stays there. Every draw (explore or not, the random action, the replay batch)
comes from the run's host RNG, so the seed decides a run and a resumed run continues bit for bit.

One driver iteration = --train-frequency vector steps of the --num-envs environments
(epsilon-greedy), then one Q step on a uniform replay batch, then the target update when the
iteration's environment steps crossed a multiple of --target-network-frequency: the Q step and the
target update are ONE compiled call (the target update always runs in it, with decay 1, a no-op bit
for bit, when none is due, and 1 - tau when one is). With --gradient-steps G (SB3's recipe: many
updates after a long collection) the environments step only before every G-th iteration, and the G
iterations after it are G Q steps on G replay batches; a target update falls due only at those
environment steps and runs in the group's first call, after its Q step (SB3 updates its target
during collection, before the group). Before the first iteration --learning-starts environment steps
fill the buffer (epsilon-greedy too, as CleanRL). So --steps counts Q updates, and --total-steps T
gives (T - learning_starts) // (num_envs x train_frequency) x G iterations. (Why not one environment
step per iteration with the Q phase every --train-frequency iterations: train_rl.py runs every
iteration as a compiled call (the driver's fuse mode), so 9 of 10 calls would run nothing, at the
cost of a call.)

`--env-backend mindspore` (rl/dqn_native.py) moves the environments and the replay buffer into the graph:
an iteration's environment steps, inserts, Q step and target update in one compiled call, --steps-per-call
iterations per call; the same draws, from the same host RNG.

The replay buffer (rl/replay.py) stores the discrete actions as float32 (act_dim 1; exact for any
action count below 2^24), cast to int32 inside the loss to pick Q(s, a) with gather_elements.
A time limit is not a terminal state: `terminated` (not `truncated`) ends the bootstrap, and the
stored next observation is the episode's final one (info["final_obs"]) whenever it ended.

Differences from CleanRL's dqn.py (its defaults: lr 2.5e-4, buffer 10000, batch 128, gamma 0.99,
tau 1, target every 500 steps, epsilon 1 -> 0.05 over half of 500k steps, learning from step 10000,
a Q step every 10 steps, Q net 120-84 relu, MSE):
  - defaults tuned for CartPole-v1 in 100k steps (docs/rl_dqn.md): lr 1e-3, buffer 100000 (every
    transition of the run: with 50000, 7 of 10 seeds reached 475; with it, 9 of 10), batch 128,
    learning from step 1000, epsilon 1 -> 0.05 over the first 20% of the run, a Q step every 4 steps,
    a target copy every 100 steps (with CleanRL's 500, 2 of seeds 0-2 reached 475), two relu layers
    of --hidden 128 units (one width for both layers);
  - the learning rate anneals linearly to 0 over the run (--anneal-lr, shared by every algorithm
    here; --no-anneal-lr: constant, as CleanRL);
  - the Q step comes after the iteration's environment steps, and the first one after
    learning_starts + train_frequency steps (CleanRL: at global steps > learning_starts divisible by
    train_frequency); the target update counts environment steps from 0 as CleanRL's does, but runs
    only right after a Q step;
  - more than one environment (--num-envs N: N transitions per vector step; CleanRL asserts N = 1),
    each environment explores on its own epsilon draw (CleanRL: one draw for all);
  - the next observation stored at an episode's end is its final observation for terminated
    episodes too (CleanRL copies it only for truncated ones; the bootstrap term is 0 there anyway);
  - --double (Double DQN) and --loss huber are additions; the defaults are CleanRL's (off, mse);
  - the learner's usual gradient interventions (--clip-norm-q, ...), off by default;
  - the evaluation is the greedy policy (epsilon 0) on fresh environments; CleanRL evaluates with
    epsilon = end_e.
"""
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from loops.config import opt
from loops.driver import Phase
from loops.ema import EMA
from loops.learner import Learner, all_state, declare
from loops.step import maybe_jit
from rl.agent import ReplayAgent
from rl.config import RLConfig, algorithm_config
from rl.evaluate import EVALUATION  # noqa: F401  (python -m metrics RUN_DIR)
from rl.replay import ReplayBuffer

MODELS = {"q": "the Q network"}
LOSSES = ("mse", "huber")


@dataclass
class Config(algorithm_config("dqn", MODELS, lr=1e-3, env="CartPole-v1", num_envs=1, total_steps=100_000,
                              hidden=128, gamma=0.99, log_every=100)):
    HELP_GROUPS = {"DQN": ("buffer_size", "batch_size", "learning_starts", "train_frequency", "gradient_steps",
                           "target_network_frequency", "tau", "start_e", "end_e", "exploration_fraction", "loss",
                           "double", "env_backend", "steps_per_call")}
    FIXED_ON_RESUME = RLConfig.FIXED_ON_RESUME + ("env_backend",)
    buffer_size: int = opt(100_000, "replay buffer capacity (transitions; saved in every checkpoint)")
    batch_size: int = opt(128, "transitions per Q update")
    learning_starts: int = opt(1000, "environment steps (epsilon-greedy) before the first Q update")
    train_frequency: int = opt(4, "vector environment steps before each Q update (each group of --gradient-steps)")
    gradient_steps: int = opt(1, "Q updates after each --train-frequency vector steps, each on its own replay "
                                 "batch (SB3's gradient_steps); one driver iteration per Q update")
    target_network_frequency: int = opt(100, "environment steps between target network updates")
    tau: float = opt(1.0, "target update rate: 1 copies Q into the target, < 1 moves it that far (Polyak)")
    start_e: float = opt(1.0, "exploration epsilon at the start")
    end_e: float = opt(0.05, "exploration epsilon at the end of the schedule")
    exploration_fraction: float = opt(0.2, "fraction of --total-steps over which epsilon falls linearly "
                                           "from --start-e to --end-e")
    loss: str = opt("mse", "TD loss: mse, or huber (smooth L1, delta 1)", list(LOSSES))
    double: bool = opt(False, "Double DQN: the target network evaluates the online network's argmax")
    env_backend: str = opt("gymnasium", "where the environments run: gymnasium (host numpy, stepped from Python) or "
                           "mindspore (rl/dqn_native.py: environment steps, replay inserts and the Q step in one "
                           "compiled call)", ("gymnasium", "mindspore"))
    steps_per_call: int = opt(1, "iterations per compiled call (--env-backend mindspore: nothing returns to the host "
                                 "between them; each iteration's --train-frequency steps are unrolled in the graph)")

    def iterations(self):  # one iteration: one Q update, after train_frequency vector steps (module docstring)
        return (self.total_steps - self.learning_starts) // (self.num_envs * self.train_frequency) * self.gradient_steps

    def validate(self):
        self.check_positive("buffer_size", "batch_size", "train_frequency", "gradient_steps",
                            "target_network_frequency")
        self.check_non_negative("learning_starts")
        self.check(0 < self.tau <= 1, f"--tau must be in (0, 1], got {self.tau}")
        for key in ("start_e", "end_e"):
            value = getattr(self, key)
            self.check(0 <= value <= 1, f"--{key.replace('_', '-')} must be in [0, 1], got {value}")
        self.check(0 < self.exploration_fraction <= 1,
                   f"--exploration-fraction must be in (0, 1], got {self.exploration_fraction}")
        self.check_positive("steps_per_call")
        if self.env_backend == "mindspore":
            from rl.native_envs import NATIVE_ENVS
            discrete = sorted(name for name, env in NATIVE_ENVS.items() if env.actions)
            self.check(self.env in discrete, f"--env-backend mindspore has no {self.env} for DQN; it has "
                                             f"{', '.join(discrete)} (or use --env-backend gymnasium)")
            self.check(self.gradient_steps == 1, "--gradient-steps must be 1 with --env-backend mindspore")
            # one vector step writes num_envs rows in one scatter: they must be distinct rows
            self.check(self.buffer_size >= self.num_envs, f"--buffer-size ({self.buffer_size}) must be at least "
                                                          f"--num-envs ({self.num_envs}) with --env-backend mindspore")
        else:
            self.check(self.steps_per_call == 1, "--steps-per-call needs --env-backend mindspore (each iteration "
                                                 "of the gymnasium backend waits for the host's environment steps)")
        per_update = self.num_envs * self.train_frequency
        self.check(self.steps > 0 or self.total_steps - self.learning_starts >= per_update,
                   f"--total-steps ({self.total_steps}) must exceed --learning-starts ({self.learning_starts}) by at "
                   f"least --num-envs x --train-frequency ({per_update}), the environment steps of one update")
        super().validate()


def relu_mlp(inputs, outputs, hidden):
    return nn.SequentialCell(nn.Dense(inputs, hidden), nn.ReLU(), nn.Dense(hidden, hidden), nn.ReLU(),
                             nn.Dense(hidden, outputs))


def epsilon_at(env_steps, cfg):
    """Epsilon after `env_steps` environment steps: linear from --start-e to --end-e over the first
    --exploration-fraction x --total-steps steps, then --end-e (CleanRL's linear_schedule)."""
    duration = cfg.exploration_fraction * cfg.total_steps
    return cfg.start_e + min(1.0, env_steps / duration) * (cfg.end_e - cfg.start_e)


class DQN(ReplayAgent):
    ACTIONS = ("discrete",)
    PROGRESS_TAGS = ("charts/episodic_return_mean20", "losses/td_loss")

    def __new__(cls, cfg, run):  # --env-backend mindspore: environments and replay in the graph (rl/dqn_native.py)
        if cls is DQN and cfg.env_backend == "mindspore":
            from rl.dqn_native import NativeDQN
            return super().__new__(NativeDQN)
        return super().__new__(cls)

    def __init__(self, cfg, run):
        super().__init__(cfg, run)
        self.q = Learner.from_config("q", relu_mlp(self.obs_dim, self.n_actions, cfg.hidden), cfg)
        self.target = declare("q_target", relu_mlp(self.obs_dim, self.n_actions, cfg.hidden))
        for s, t in zip(self.q.net.get_parameters(), self.target.get_parameters()):
            t.set_data(s.data.copy())  # the target starts as Q (a resume then loads both)
        self.polyak = EMA(self.q.net, self.target, 1.0 - cfg.tau)
        self.buffer = self.replay_buffer()
        self.greedy = self.make_greedy()
        self.host_weights = None  # Q's weights as numpy, for acting (host_greedy)
        self.q_step = self.q.step(self.q_objective(), has_aux=True, takes_lr=cfg.anneal_lr)

    def replay_buffer(self):
        return ReplayBuffer(self.cfg.buffer_size, self.obs_dim, 1)  # host arrays (rl/dqn_native.py: in the graph)

    def q_objective(self):
        """The Q step's forward function: the TD loss of a batch passed in (rl/dqn_native.py: gathered by index)."""
        return self.q_loss_fn()

    def make_greedy(self):
        """Compiled obs -> argmax_a Q(obs, a) (int32)."""
        net = self.q.net

        def greedy(obs):
            return ops.argmax(net(obs), -1).astype(ms.int32)
        return maybe_jit(greedy)

    def q_loss_fn(self):
        """(obs, actions, rewards, next_obs, terminated) -> (TD loss, mean Q(s, a)) (module docstring)."""
        q, target, gamma = self.q.net, self.target, self.cfg.gamma
        double, huber = self.cfg.double, self.cfg.loss == "huber"

        def loss(obs, actions, rewards, next_obs, terminated):
            next_q = target(next_obs)
            if double:  # the online network picks a', the target network values it
                best = ops.argmax(q(next_obs), -1).astype(ms.int32).reshape(-1, 1)
                next_value = ops.gather_elements(next_q, 1, best).reshape(-1)
            else:
                next_value = ops.amax(next_q, -1)
            y = ops.stop_gradient(rewards + gamma * next_value * (1.0 - terminated))
            q_sa = ops.gather_elements(q(obs), 1, actions.astype(ms.int32).reshape(-1, 1)).reshape(-1)
            d = q_sa - y
            if huber:
                a = ops.abs(d)
                td = ops.mean(ops.where(a < 1.0, 0.5 * d * d, a - 0.5))
            else:
                td = ops.mean(d * d)
            return td, ops.mean(q_sa)
        return loss

    # ---- device side: the phase body ----
    def q_body(self):
        """(target decay, epsilon, *Q step inputs) -> td loss, mean Q, grad norm, epsilon: the Q step,
        then the target update at the given decay (1: unchanged, bit for bit), in one compiled call."""
        step, polyak = self.q_step.scalars, self.polyak

        def body(decay, epsilon, *inputs):
            out = step(*inputs)  # loss, mean Q(s, a), grad norm, grad norm after
            done = polyak.body(ops.depend(decay, out[0]))  # after Q's update
            return ops.depend(out[0], done), out[1], out[2], epsilon
        return body

    # ---- host side ----
    def host_greedy(self, obs):
        """argmax_a Q(obs, a) in numpy from the weights pulled at this iteration's start: acting needs
        one forward of one observation per step, and a compiled call costs 1-2 ms on this CPU where
        numpy takes ~20 us (the Q step itself is a compiled call per iteration: the weights are read
        once, after it)."""
        w = self.host_weights
        h = np.maximum(obs @ w[0].T + w[1], 0)
        h = np.maximum(h @ w[2].T + w[3], 0)
        return (h @ w[4].T + w[5]).argmax(-1).astype(np.int32)

    def pull_weights(self):
        self.host_weights = [p.asnumpy() for p in self.q.net.trainable_params()]

    def epsilon(self):
        return epsilon_at(self.env_steps, self.cfg)

    def act(self):
        """One vector step, epsilon-greedy; its transitions go into the replay buffer."""
        n = self.cfg.num_envs
        explore = self.rng.random(n) < self.epsilon()
        action = self.rng.integers(0, self.n_actions, n).astype(np.int32)  # drawn every step: a fixed RNG stream
        if not explore.all():
            action = np.where(explore, action, self.host_greedy(self.obs))
        self.step_and_store(action, stored_action=action.reshape(-1, 1).astype(np.float32))

    def draw_q(self, step):
        cfg = self.cfg
        due = False
        if step % cfg.gradient_steps == 0:  # the first Q update of a group: the environments step first
            self.pull_weights()  # Q after the last update (the previous call has been read: it is done)
            while self.env_steps < cfg.learning_starts:
                self.act()
            before = self.env_steps
            for _ in range(cfg.train_frequency):
                self.act()
            due = self.env_steps // cfg.target_network_frequency > before // cfg.target_network_frequency
        decay = np.float32(1.0 - cfg.tau if due else 1.0)
        batch = self.buffer.sample(self.rng, cfg.batch_size)
        inputs = self.q_step.host_inputs(batch, self.rng, self.scheduled_lr("q", step))
        return (decay, np.float32(self.epsilon())) + inputs

    def phases(self):
        return [Phase("q", self.draw_q, self.q_body(),
                      ("losses/td_loss", "losses/q_values", "grad_norm/q", "charts/epsilon"))]

    def deterministic_action(self, obs):
        return self.greedy(Tensor.from_numpy(obs)).asnumpy()

    # ---- checkpoints ----
    def state(self):
        """Every Parameter a checkpoint holds: Q's (weights, optimizer), the target's, the replay buffer's."""
        return all_state(self.q, self.target) + self.buffer.parameters()


AGENT = DQN
