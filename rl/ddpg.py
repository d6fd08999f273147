"""Deep deterministic policy gradient (DDPG, Lillicrap et al. 2016), after CleanRL's
ddpg_continuous_action.py: TD3's agent (rl/td3.py) with one Q network, no target policy smoothing
and no delay. Two Learners, each with its own optimizer and flags (--lr-actor, --clip-norm-critic,
...), and their target networks (declared with `declare`, copied at the start):

  critic  one Q network regressed on y = r + gamma (1 - terminated) Q'(s', mu'(s')) (Q', mu' the
          targets; no gradient through y): loss = mean (Q(s, a) - y)^2,
  actor   a deterministic tanh policy mu(s) = tanh(f(s)) (high - low) / 2 + (high + low) / 2,
          maximising Q(s, mu(s)): loss = -mean Q(s, mu(s)).

One driver iteration = one vector step of the environments (after --learning-starts steps of uniform
random actions; then mu(s) + N(0, (sigma (high - low) / 2)^2), clipped to the bounds, sigma falling
linearly from --exploration-noise to 0 over the run with --anneal-noise, on by default, as TD3's) +
one critic step on a uniform replay batch + one actor step on the same batch followed, in the same
compiled call, by the Polyak update of both targets (target <- (1 - tau) target + tau online:
loops.ema.EMA with decay 1 - tau). A terminated episode is terminal (y = r); a truncated one
bootstraps from its final observation. Exploration noise is drawn on the host (self.rng).

Differences from CleanRL: the actor and the targets update every iteration, as in the paper
(CleanRL's DDPG keeps TD3's policy_frequency 2); the learning rate 1e-3 (the SB3 zoo's Pendulum
value; CleanRL: 3e-4), 1000 warm-up steps (CleanRL: 25k, more than the whole default run) and a
100k-transition buffer (CleanRL: 1e6; with 20k steps both hold every transition), the exploration
noise annealed to 0 (CleanRL: constant; --no-anneal-noise). Like CleanRL, the
learning rates are constant: --anneal-lr (linear to 0, the default of PPO and DQN here) is off by
default. Differences from the paper, kept from CleanRL: Gaussian exploration noise (the paper: an
Ornstein-Uhlenbeck process); two relu layers of 256, no batch normalisation, no weight decay, one
learning rate, batch 256, tau 0.005 (the paper: 400 and 300 units, batch norm, L2 1e-2 on Q, actor lr
1e-4 and critic lr 1e-3, batch 64, tau 0.001).
"""
from dataclasses import dataclass

from mindspore import ops

from loops.config import opt
from rl.config import algorithm_config
from rl.evaluate import EVALUATION  # noqa: F401  (python -m metrics RUN_DIR)
from rl.td3 import ANNEAL_NOISE_HELP, DEFAULTS, REPLAY_FLAGS, DeterministicAgent, QNetwork, check_replay_flags, replay_iterations

MODELS = {"actor": "the actor", "critic": "the Q network"}


@dataclass
class Config(algorithm_config("ddpg", MODELS, **DEFAULTS)):
    HELP_GROUPS = {"DDPG": REPLAY_FLAGS}
    buffer_size: int = opt(100_000, "replay buffer capacity (transitions; saved in every checkpoint)")
    batch_size: int = opt(256, "transitions per update")
    learning_starts: int = opt(1000, "uniform random environment steps before the first update")
    tau: float = opt(0.005, "Polyak rate of the target networks")
    exploration_noise: float = opt(0.1, "std of the Gaussian exploration noise, in half action ranges")
    anneal_noise: bool = opt(True, ANNEAL_NOISE_HELP)

    def iterations(self):
        return replay_iterations(self)

    def validate(self):
        check_replay_flags(self)
        super().validate()


class DDPG(DeterministicAgent):
    NAME = "ddpg"
    critic_tags = ("losses/qf1_loss", "losses/qf1_values", "grad_norm/critic")

    def make_critic(self):
        return QNetwork(self.obs_dim, self.n_actions, self.cfg.hidden)

    def critic_loss_fn(self):
        critic, actor_target, critic_target = self.critic.net, self.actor_target, self.critic_target
        gamma = self.cfg.gamma

        def loss(obs, actions, rewards, next_obs, terminated):
            next_q = critic_target(next_obs, actor_target(next_obs))
            y = ops.stop_gradient(rewards + (1.0 - terminated) * gamma * next_q)
            q = critic(obs, actions)
            return ops.mean(ops.square(q - y)), ops.mean(q)
        return loss

    def actor_loss_fn(self):
        actor, critic = self.actor.net, self.critic.net

        def loss(obs):
            return -ops.mean(critic(obs, actor(obs)))
        return loss


AGENT = DDPG
