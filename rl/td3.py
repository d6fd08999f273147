"""Twin delayed deep deterministic policy gradient (TD3, Fujimoto et al. 2018), as CleanRL's
td3_continuous_action.py: two Learners, each with its own optimizer and flags (--lr-actor,
--clip-norm-critic, ...), and their target networks (declared with `declare`, copied at the start):

  critic  twin Q networks (Q1, Q2, one optimizer) regressed on
            y = r + gamma (1 - terminated) min(Q1', Q2')(s', a~'),
            a~' = clip(mu'(s') + clip(policy_noise eps, -noise_clip, noise_clip) (high - low) / 2, low, high),
          eps ~ N(0, I) (target policy smoothing; Q', mu' the targets; no gradient through y):
            loss = mean (Q1(s, a) - y)^2 + mean (Q2(s, a) - y)^2,
  actor   a deterministic tanh policy mu(s) = tanh(f(s)) (high - low) / 2 + (high + low) / 2,
          maximising Q1(s, mu(s)): loss = -mean Q1(s, mu(s)).

One driver iteration = one vector step of the environments (after --learning-starts steps of uniform
random actions; then mu(s) + N(0, (sigma (high - low) / 2)^2), clipped to the bounds, sigma
falling linearly from --exploration-noise to 0 over the run with --anneal-noise) + one critic step on
a uniform replay batch; every --policy-frequency iterations (delayed policy
updates), one actor step on the same batch followed, in the same compiled call, by the Polyak
update of both targets (target <- (1 - tau) target + tau online: loops.ema.EMA with decay 1 - tau).
A terminated episode is terminal (y = r); a truncated one (Pendulum's time limit) bootstraps from
its final observation, stored as next_obs. Exploration and smoothing noise are drawn on the host
(self.rng), so the host RNG alone decides a run (exact resume).

Differences from CleanRL: the learning rate 1e-3 (the SB3 zoo's Pendulum value; CleanRL: 3e-4),
1000 warm-up steps (CleanRL: 25k, more than the whole default run) and a 100k-transition buffer
(CleanRL: 1e6; with 20k steps both hold every transition); target actions are clipped to each
action dimension's own bounds (CleanRL: to the first dimension's); the smoothing noise is drawn on
the host, not by torch; the first update follows --learning-starts random steps and one step of the
policy (CleanRL: two); the critic's loss is logged as losses/qf_loss = (qf1 + qf2) / 2, as CleanRL does, while the
optimised loss is their sum; the exploration noise anneals linearly to 0 over the run (--anneal-noise,
on by default: the last training episodes are the policy's own, as DQN's epsilon schedule does;
--no-anneal-noise is CleanRL's constant noise; docs/rl_td3_ddpg.md has both sweeps). Like CleanRL, the
learning rates are constant: --anneal-lr (linear to 0, the default of PPO and DQN here) is off by default.
Defaults: CleanRL's TD3 (two relu layers of 256, batch 256, tau 0.005, gamma 0.99, exploration noise
0.1, policy noise 0.2, noise clip 0.5, policy frequency 2) with the SB3 zoo's Pendulum lr 1e-3.

rl/ddpg.py reuses this module's agent with one Q network, no smoothing and no delay.
"""
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Tensor, nn, ops

from loops.config import opt
from loops.driver import Phase
from loops.ema import EMA
from loops.learner import Learner, all_state, declare
from loops.schedules import lr_at
from loops.step import maybe_jit
from rl.agent import ReplayAgent
from rl.config import algorithm_config
from rl.evaluate import EVALUATION  # noqa: F401  (python -m metrics RUN_DIR)
from rl.replay import ReplayBuffer
from rl.sac import TwinQ, relu_mlp

MODELS = {"actor": "the actor", "critic": "both Q networks"}
REPLAY_FLAGS = ("buffer_size", "batch_size", "learning_starts", "tau", "exploration_noise", "anneal_noise")
ANNEAL_NOISE_HELP = "the exploration noise falls linearly to 0 over the updates (as --anneal-lr does the rates)"
DEFAULTS = dict(lr=1e-3, env="Pendulum-v1", num_envs=1, total_steps=20_000, hidden=256, gamma=0.99, anneal_lr=False,
                log_every=250)


@dataclass
class Config(algorithm_config("td3", MODELS, **DEFAULTS)):
    HELP_GROUPS = {"TD3": REPLAY_FLAGS + ("policy_noise", "noise_clip", "policy_frequency")}
    buffer_size: int = opt(100_000, "replay buffer capacity (transitions; saved in every checkpoint)")
    batch_size: int = opt(256, "transitions per update")
    learning_starts: int = opt(1000, "uniform random environment steps before the first update")
    tau: float = opt(0.005, "Polyak rate of the target networks")
    exploration_noise: float = opt(0.1, "std of the Gaussian exploration noise, in half action ranges")
    anneal_noise: bool = opt(True, ANNEAL_NOISE_HELP)
    policy_noise: float = opt(0.2, "std of the target policy smoothing noise, in half action ranges")
    noise_clip: float = opt(0.5, "the smoothing noise is clipped to +-this, in half action ranges")
    policy_frequency: int = opt(2, "one actor step and target update every that many critic steps")

    def iterations(self):
        return replay_iterations(self)

    def validate(self):
        check_replay_flags(self)
        self.check_positive("policy_frequency")
        self.check_non_negative("policy_noise", "noise_clip")
        super().validate()


def replay_iterations(cfg):
    """One iteration: one vector step of the environments, after the random warm-up."""
    return (cfg.total_steps - cfg.learning_starts) // cfg.num_envs


def check_replay_flags(cfg):
    """The REPLAY_FLAGS' ranges (TD3's and DDPG's), each a one-line UserError."""
    cfg.check_positive("buffer_size", "batch_size")
    cfg.check_non_negative("learning_starts", "exploration_noise")
    cfg.check(0 < cfg.tau <= 1, f"--tau must be in (0, 1], got {cfg.tau}")
    cfg.check(cfg.learning_starts <= cfg.buffer_size,
              f"--learning-starts ({cfg.learning_starts}) must not exceed --buffer-size ({cfg.buffer_size})")
    cfg.check(cfg.steps > 0 or cfg.total_steps > cfg.learning_starts,
              f"--total-steps ({cfg.total_steps}) must exceed --learning-starts ({cfg.learning_starts})")


class DeterministicActor(nn.Cell):
    """obs -> action in [low, high]: tanh of a two-layer relu MLP, scaled to the bounds (CleanRL's actor)."""

    def __init__(self, obs_dim, act_dim, hidden, low, high):
        super().__init__()
        self.mlp = relu_mlp(obs_dim, act_dim, hidden)
        self.scale = Tensor((high - low) / 2, ms.float32)
        self.bias = Tensor((high + low) / 2, ms.float32)

    def construct(self, obs):
        return ops.tanh(self.mlp(obs)) * self.scale + self.bias


class QNetwork(nn.Cell):
    """(obs, action) -> Q, one network (DDPG's critic)."""

    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.q = relu_mlp(obs_dim + act_dim, 1, hidden)

    def construct(self, obs, action):
        return self.q(ops.concat((obs, action), -1)).reshape(-1)


class DeterministicAgent(ReplayAgent):
    """What TD3 and DDPG share: a deterministic actor, a critic, their Polyak targets, a replay buffer,
    Gaussian exploration, and two phases: the critic's step every iteration, then every
    `policy_delay` iterations the actor's step and both targets' update in one compiled call.
    A subclass sets NAME and defines make_critic(), critic_loss_fn(), critic_tags, actor_loss_fn(),
    smoothing_noise (whether the critic step takes host noise) and policy_delay()."""
    NAME = ""
    ACTIONS = ("continuous",)
    PROGRESS_TAGS = ("charts/episodic_return_mean20", "losses/actor_loss")
    smoothing_noise = False

    def __init__(self, cfg, run):
        super().__init__(cfg, run)
        low, high = self.bounds
        act_dim, hidden = self.n_actions, cfg.hidden
        self.low, self.high = Tensor(low, ms.float32), Tensor(high, ms.float32)
        self.half_range = (high - low) / 2
        self.actor = Learner.from_config("actor", DeterministicActor(self.obs_dim, act_dim, hidden, low, high), cfg)
        self.critic = Learner.from_config("critic", self.make_critic(), cfg)
        self.actor_target = declare("actor_target", DeterministicActor(self.obs_dim, act_dim, hidden, low, high))
        self.critic_target = declare("critic_target", self.make_critic())
        for online, target in ((self.actor.net, self.actor_target), (self.critic.net, self.critic_target)):
            for s, t in zip(online.get_parameters(), target.get_parameters()):
                t.set_data(s.data.copy())  # the targets start as the online networks (a resume then loads both)
        self.polyak_actor = EMA(self.actor.net, self.actor_target, 1.0 - cfg.tau)
        self.polyak_critic = EMA(self.critic.net, self.critic_target, 1.0 - cfg.tau)
        self.buffer = ReplayBuffer(cfg.buffer_size, self.obs_dim, act_dim)
        self.policy = self.make_policy()
        self.critic_step = self.critic.step(self.critic_loss_fn(), has_aux=True, takes_lr=cfg.anneal_lr)
        self.actor_step = self.actor.step(self.actor_loss_fn(), takes_lr=cfg.anneal_lr)
        self.batch = None

    def make_policy(self):
        """Compiled obs -> mu(obs), for acting and evaluation."""
        actor = self.actor.net

        def policy(obs):
            return actor(obs)
        return maybe_jit(policy)

    def make_critic(self):
        raise NotImplementedError

    def critic_loss_fn(self):
        raise NotImplementedError

    def actor_loss_fn(self):
        raise NotImplementedError

    def policy_delay(self):
        return 1

    # ---- device side: the phase bodies ----
    def critic_body(self):
        return self.critic_step.scalars

    def actor_body(self):
        step, polyak_actor, polyak_critic = self.actor_step.scalars, self.polyak_actor, self.polyak_critic

        def body(*inputs):
            out = step(*inputs)  # loss, grad norm, grad norm after
            after = ops.depend(polyak_actor.decay, out[0])  # both targets move after the actor's update
            done = ops.depend(polyak_actor.body(after), polyak_critic.body(after))
            return (ops.depend(out[0], done),) + out[1:2]
        return body

    # ---- host side ----
    def exploration_noise(self, step):
        """The exploration noise's std (in half action ranges) at update `step`: --exploration-noise, falling
        linearly to 0 over the run with --anneal-noise."""
        scale = lr_at(step, 1.0, "linear", self.cfg.steps) if self.cfg.anneal_noise else 1.0
        return self.cfg.exploration_noise * scale

    def act(self, random, step=0):
        """One vector step: uniform random actions during warm-up, else mu(s) plus Gaussian noise."""
        low, high = self.bounds
        rows = (self.cfg.num_envs, self.n_actions)
        if random:
            action = self.rng.uniform(low, high, rows).astype(np.float32)
        else:
            action = self.policy(Tensor.from_numpy(self.obs)).asnumpy()
            action = action + (self.exploration_noise(step) * self.half_range
                               * self.rng.standard_normal(rows, dtype=np.float32)).astype(np.float32)
        action = np.clip(action, low, high)
        self.step_and_store(action)

    def draw_critic(self, step):
        while self.buffer.size < self.cfg.learning_starts:
            self.act(random=True)
        self.act(random=False, step=step)
        self.batch = self.buffer.sample(self.rng, self.cfg.batch_size)
        inputs = self.batch
        if self.smoothing_noise:
            inputs += (self.rng.standard_normal((self.cfg.batch_size, self.n_actions), dtype=np.float32),)
        return self.critic_step.host_inputs(inputs, self.rng, self.scheduled_lr("critic", step))

    def draw_actor(self, step):
        obs = self.batch[0]  # the critic's batch, as CleanRL
        return self.actor_step.host_inputs((obs,), self.rng, self.scheduled_lr("actor", step))

    def phases(self):
        k = self.policy_delay()
        return [Phase("critic", self.draw_critic, self.critic_body(), self.critic_tags),
                Phase("actor", self.draw_actor, self.actor_body(), ("losses/actor_loss", "grad_norm/actor"), every=k)]

    def deterministic_action(self, obs):
        return np.clip(self.policy(Tensor.from_numpy(obs)).asnumpy(), *self.bounds)

    # ---- checkpoints ----
    def state(self):
        """Every Parameter a checkpoint holds: the Learners', the targets', the replay buffer's."""
        return all_state(self.actor, self.critic, self.actor_target, self.critic_target) + self.buffer.parameters()


class TD3(DeterministicAgent):
    NAME = "td3"
    smoothing_noise = True
    critic_tags = ("losses/qf_loss", "losses/qf1_loss", "losses/qf2_loss", "losses/qf1_values", "losses/qf2_values",
                   "grad_norm/critic")

    def make_critic(self):
        return TwinQ(self.obs_dim, self.n_actions, self.cfg.hidden)

    def policy_delay(self):
        return self.cfg.policy_frequency

    def critic_loss_fn(self):
        critic, actor_target, critic_target = self.critic.net, self.actor_target, self.critic_target
        gamma, policy_noise, noise_clip = self.cfg.gamma, self.cfg.policy_noise, self.cfg.noise_clip
        scale, low, high = self.actor_target.scale, self.low, self.high

        def loss(obs, actions, rewards, next_obs, terminated, noise):
            smoothing = ops.clip_by_value(noise * policy_noise, -noise_clip, noise_clip) * scale
            next_action = ops.minimum(ops.maximum(actor_target(next_obs) + smoothing, low), high)
            t1, t2 = critic_target(next_obs, next_action)
            y = ops.stop_gradient(rewards + (1.0 - terminated) * gamma * ops.minimum(t1, t2))
            q1, q2 = critic(obs, actions)
            qf1, qf2 = ops.mean(ops.square(q1 - y)), ops.mean(ops.square(q2 - y))
            return qf1 + qf2, qf1, qf2, ops.mean(q1), ops.mean(q2)
        return loss

    def critic_body(self):
        step = self.critic_step.scalars

        def body(*inputs):
            out = step(*inputs)  # qf1 + qf2, qf1, qf2, Q1 mean, Q2 mean, grad norm, grad norm after
            return (out[0] * 0.5,) + out[1:6]  # losses/qf_loss as CleanRL logs it: the mean of the two
        return body

    def actor_loss_fn(self):
        actor, q1 = self.actor.net, self.critic.net.q1

        def loss(obs):
            return -ops.mean(q1(ops.concat((obs, actor(obs)), -1)))
        return loss


AGENT = TD3
