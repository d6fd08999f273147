"""Soft actor-critic (Haarnoja et al. 2018, with the learned temperature of the 2018 follow-up), as
CleanRL's sac_continuous_action.py: three Learners, each with its own optimizer and flags
(--lr-actor, --clip-norm-critic, ...):

  critic  twin Q networks (Q1, Q2) regressed on r + gamma (1 - terminated) (min Q'(s', a') - alpha log pi(a'|s')),
          a' drawn from the current policy, Q' the target networks; then the targets move by Polyak
          averaging (target <- (1 - tau) target + tau critic: loops.ema.EMA with decay 1 - tau),
  actor   a tanh-squashed Gaussian, minimising E[alpha log pi(a|s) - min(Q1, Q2)(s, a)],
  alpha   the temperature, log alpha minimising E[-alpha (log pi(a|s) + target entropy)], target -dim(A).

One driver iteration = one vector step of the environments (after --learning-starts steps of uniform
random actions) + one critic step (with its target update, in the same compiled call); every
--policy-frequency iterations, that many actor and temperature steps (each actor step followed by a
temperature step, in one compiled call). Exploration and the policy's reparameterisation noise are
drawn on the host, so the host RNG alone decides a run.
Defaults: the SB3 zoo's Pendulum-v1 hyperparameters (hyperparams/sac.yml: 20k steps, lr 1e-3 for every
model, constant; SB3's SAC defaults for the rest: 100 random steps, batch 256, tau 0.005, gamma 0.99,
one critic, actor and temperature step per environment step, two relu layers of 256) on CleanRL's SAC;
docs/rl.md lists where CleanRL's implementation differs from SB3's (log std range, action units,
temperature loss)."""
import math
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops

from loops.config import opt
from loops.driver import Phase
from loops.ema import EMA
from loops.learner import Learner, all_state, declare
from loops.step import maybe_jit
from rl.agent import ReplayAgent
from rl.config import algorithm_config
from rl.evaluate import EVALUATION  # noqa: F401  (python -m metrics RUN_DIR)
from rl.replay import ReplayBuffer

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
LOG_2 = math.log(2.0)

MODELS = {"actor": "the actor", "critic": "both Q networks", "alpha": "the temperature"}


@dataclass
class Config(algorithm_config("sac", MODELS, env="Pendulum-v1", num_envs=1, total_steps=20_000, hidden=256,
                              gamma=0.99, anneal_lr=False, log_every=250)):
    HELP_GROUPS = {"SAC": ("buffer_size", "batch_size", "learning_starts", "tau", "policy_frequency", "alpha")}
    buffer_size: int = opt(100_000, "replay buffer capacity (transitions; saved in every checkpoint)")
    batch_size: int = opt(256, "transitions per update")
    learning_starts: int = opt(100, "uniform random environment steps before the first update")
    tau: float = opt(0.005, "Polyak rate of the target critics")
    policy_frequency: int = opt(1, "actor and temperature steps, that many every that many iterations")
    alpha: float = opt(0.0, "fixed temperature; 0: learned (target entropy -dim(actions))")

    def iterations(self):  # one iteration: one vector step of the environments, after the random warm-up
        return (self.total_steps - self.learning_starts) // self.num_envs

    def validate(self):
        self.check_positive("buffer_size", "batch_size", "policy_frequency")
        self.check_non_negative("learning_starts", "alpha")
        self.check(0 < self.tau <= 1, f"--tau must be in (0, 1], got {self.tau}")
        self.check(self.learning_starts <= self.buffer_size,
                   f"--learning-starts ({self.learning_starts}) must not exceed --buffer-size ({self.buffer_size})")
        self.check(self.steps > 0 or self.total_steps > self.learning_starts,
                   f"--total-steps ({self.total_steps}) must exceed --learning-starts ({self.learning_starts})")
        if self.alpha > 0:  # a fixed temperature: there is no alpha model to configure
            fields = type(self).__dataclass_fields__
            for key in (k for k in fields if k.endswith("_alpha")):
                self.check(getattr(self, key) == fields[key].default,
                           f"--{key.replace('_', '-')} needs a learned temperature (--alpha 0), not --alpha {self.alpha}")
        super().validate()


def relu_mlp(inputs, outputs, hidden):
    return nn.SequentialCell(nn.Dense(inputs, hidden), nn.ReLU(), nn.Dense(hidden, hidden), nn.ReLU(),
                             nn.Dense(hidden, outputs))


class SquashedGaussianActor(nn.Cell):
    """obs, standard normal noise -> (action, log pi(action | obs), deterministic action), actions in
    [low, high] through tanh; log std squashed into [LOG_STD_MIN, LOG_STD_MAX] (CleanRL's actor)."""

    def __init__(self, obs_dim, act_dim, hidden, low, high):
        super().__init__()
        self.trunk = nn.SequentialCell(nn.Dense(obs_dim, hidden), nn.ReLU(), nn.Dense(hidden, hidden), nn.ReLU())
        self.mean = nn.Dense(hidden, act_dim)
        self.log_std = nn.Dense(hidden, act_dim)
        self.scale = Tensor((high - low) / 2, ms.float32)
        self.bias = Tensor((high + low) / 2, ms.float32)

    def construct(self, obs, noise):
        h = self.trunk(obs)
        mean = self.mean(h)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (ops.tanh(self.log_std(h)) + 1)
        x = mean + ops.exp(log_std) * noise
        # Gaussian log-density of the pre-squash sample x (its z-score is the noise), minus
        # log |d action / dx| = log scale + log(1 - tanh(x)^2), written as 2 (log 2 - x - softplus(-2x)):
        # MindSpore's CPU tanh returns up to 1 + 1e-5, so log(1 - tanh^2 + eps) gives NaN (measured)
        log_det = ops.log(self.scale) + 2.0 * (LOG_2 - x - ops.softplus(-2.0 * x))
        logp = ops.sum(-0.5 * noise * noise - log_std - LOG_SQRT_2PI - log_det, -1)
        return ops.tanh(x) * self.scale + self.bias, logp, ops.tanh(mean) * self.scale + self.bias


class TwinQ(nn.Cell):
    """(obs, action) -> (Q1, Q2), two independent networks (clipped double Q)."""

    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.q1 = relu_mlp(obs_dim + act_dim, 1, hidden)
        self.q2 = relu_mlp(obs_dim + act_dim, 1, hidden)

    def construct(self, obs, action):
        x = ops.concat((obs, action), -1)
        return self.q1(x).reshape(-1), self.q2(x).reshape(-1)


class LogAlpha(nn.Cell):
    def __init__(self):
        super().__init__()
        self.value = Parameter(Tensor(np.zeros(1, np.float32)), name="log_alpha")


class SAC(ReplayAgent):
    ACTIONS = ("continuous",)
    def __init__(self, cfg, run):
        super().__init__(cfg, run)
        low, high = self.bounds
        act_dim, hidden = self.n_actions, cfg.hidden
        self.actor = Learner.from_config("actor", SquashedGaussianActor(self.obs_dim, act_dim, hidden, low, high), cfg)
        self.critic = Learner.from_config("critic", TwinQ(self.obs_dim, act_dim, hidden), cfg)
        self.target = declare("critic_target", TwinQ(self.obs_dim, act_dim, hidden))
        for s, t in zip(self.critic.net.get_parameters(), self.target.get_parameters()):
            t.set_data(s.data.copy())  # the targets start as the critics (a resume then loads both)
        self.learn_alpha = cfg.alpha == 0
        self.alpha = Learner.from_config("alpha", LogAlpha(), cfg) if self.learn_alpha else None
        self.target_entropy = -float(act_dim)
        self.polyak = EMA(self.critic.net, self.target, 1.0 - cfg.tau)
        self.buffer = ReplayBuffer(cfg.buffer_size, self.obs_dim, act_dim)
        self.policy, self.deterministic = self.make_policies()
        takes_lr = cfg.anneal_lr
        self.critic_step = self.critic.step(self.critic_loss_fn(), has_aux=True, takes_lr=takes_lr)
        self.actor_step = self.actor.step(self.actor_loss_fn(), has_aux=True, takes_lr=takes_lr)
        self.alpha_step = self.alpha.step(self.alpha_loss_fn(), has_aux=True, takes_lr=takes_lr) if self.alpha else None
        self.batch = None

    def make_policies(self):
        """Compiled (obs, noise) -> sampled action and obs -> deterministic action (tanh of the mean)."""
        actor = self.actor.net

        def sample(obs, noise):
            return actor(obs, noise)[0]

        def deterministic(obs):
            return actor(obs, ops.zeros((obs.shape[0], actor.mean.out_channels), ms.float32))[2]
        return maybe_jit(sample), maybe_jit(deterministic)

    def alpha_value(self):
        """alpha inside a compiled function: exp(log alpha), a constant for every model but alpha's own."""
        if self.learn_alpha:
            log_alpha = self.alpha.net.value
            return lambda: ops.exp(log_alpha)
        fixed = Tensor(self.cfg.alpha, ms.float32)
        return lambda: fixed

    def critic_loss_fn(self):
        actor, critic, target, gamma, alpha = self.actor.net, self.critic.net, self.target, self.cfg.gamma, self.alpha_value()

        def loss(obs, actions, rewards, next_obs, terminated, noise):
            next_action, next_logp, _ = actor(next_obs, noise)
            t1, t2 = target(next_obs, next_action)
            soft_value = ops.minimum(t1, t2) - alpha() * next_logp
            y = ops.stop_gradient(rewards + (1.0 - terminated) * gamma * soft_value)
            q1, q2 = critic(obs, actions)
            qf1, qf2 = ops.mean(ops.square(q1 - y)), ops.mean(ops.square(q2 - y))
            return qf1 + qf2, qf1, qf2, ops.mean(q1)
        return loss

    def actor_loss_fn(self):
        actor, critic, alpha = self.actor.net, self.critic.net, self.alpha_value()

        def loss(obs, noise):
            action, logp, _ = actor(obs, noise)
            q1, q2 = critic(obs, action)
            return ops.mean(alpha() * logp - ops.minimum(q1, q2)), -ops.mean(logp)
        return loss

    def alpha_loss_fn(self):
        actor, log_alpha, target_entropy = self.actor.net, self.alpha.net.value, self.target_entropy

        def loss(obs, noise):
            _, logp, _ = actor(obs, noise)
            alpha = ops.exp(log_alpha)
            return -ops.mean(alpha * ops.stop_gradient(logp + target_entropy)), ops.sum(alpha)
        return loss

    # ---- device side: the phase bodies ----
    def critic_body(self):
        step, polyak = self.critic_step.scalars, self.polyak

        def body(*inputs):
            out = step(*inputs)  # loss, qf1, qf2, q1 mean, grad norm, grad norm after
            done = polyak.body(ops.depend(polyak.decay, out[0]))  # after the critic's update
            return (ops.depend(out[0], done),) + out[1:5]
        return body

    def actor_body(self):
        actor, alpha = self.actor_step.scalars, self.alpha_step.scalars if self.alpha_step else None
        n_actor = input_count(self.actor_step)

        def body(*inputs):
            a = actor(*inputs[:n_actor])  # loss, entropy, grad norm, grad norm after
            if alpha is None:
                return a[:3]
            rest = inputs[n_actor:]
            b = alpha(ops.depend(rest[0], a[0]), *rest[1:])  # reads the actor after its update
            return a[:3] + b[:3]
        return body

    # ---- host side ----
    def noise(self, rows):
        return self.rng.standard_normal((rows, self.n_actions), dtype=np.float32)

    def act(self, random):
        """One vector step: uniform random actions during warm-up, else the policy's sample."""
        if random:
            low, high = self.bounds
            action = self.rng.uniform(low, high, (self.cfg.num_envs, self.n_actions)).astype(np.float32)
        else:
            action = self.policy(Tensor.from_numpy(self.obs), Tensor.from_numpy(self.noise(self.cfg.num_envs))).asnumpy()
        action = np.clip(action, *self.bounds)  # tanh may overshoot by 1e-5: store what the env ran
        self.step_and_store(action)

    def draw_critic(self, step):
        while self.buffer.size < self.cfg.learning_starts:
            self.act(random=True)
        self.act(random=False)
        self.batch = self.buffer.sample(self.rng, self.cfg.batch_size)
        inputs = self.batch + (self.noise(self.cfg.batch_size),)
        return self.critic_step.host_inputs(inputs, self.rng, self.scheduled_lr("critic", step))

    def draw_actor(self, step):
        obs = self.batch[0]  # the critic's batch, as CleanRL
        out = self.actor_step.host_inputs((obs, self.noise(len(obs))), self.rng, self.scheduled_lr("actor", step))
        if self.alpha_step:
            out += self.alpha_step.host_inputs((obs, self.noise(len(obs))), self.rng, self.scheduled_lr("alpha", step))
        return out

    def phases(self):
        k = self.cfg.policy_frequency
        actor_tags = ("losses/actor", "losses/entropy", "grad_norm/actor")
        if self.alpha_step:
            actor_tags += ("losses/alpha", "charts/alpha", "grad_norm/alpha")
        return [Phase("critic", self.draw_critic, self.critic_body(),
                      ("losses/critic", "losses/qf1", "losses/qf2", "losses/qf1_values", "grad_norm/critic")),
                Phase("actor", self.draw_actor, self.actor_body(), actor_tags, every=k, repeat=k)]

    def deterministic_action(self, obs):
        return np.clip(self.deterministic(Tensor.from_numpy(obs)).asnumpy(), *self.bounds)

    # ---- checkpoints ----
    def state(self):
        """Every Parameter a checkpoint holds: the three Learners', the targets', the replay buffer's."""
        learners = [m for m in (self.actor, self.critic, self.alpha) if m is not None]
        return all_state(*learners, self.target) + self.buffer.parameters()


AGENT = SAC


def input_count(step):
    """How many host inputs a two-input forward's step takes: obs, noise, [lr], [gradient noise]."""
    return 2 + int(step.takes_lr) + int(step.noise_size > 0)
