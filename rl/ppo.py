"""PPO (Schulman et al. 2017) with a separate actor and critic, each a Learner with its own optimizer,
gradient transform and flags (--lr-actor, --clip-norm-critic, ...).

One driver iteration is one PPO update: the actor phase's first draw collects a rollout of
--num-steps x --num-envs environment steps with the current policy (actions sampled on the device
from host-drawn noise, so the host RNG alone decides them), computes GAE advantages and returns,
and shuffles the minibatches of --update-epochs epochs; the actor phase then runs one clipped
surrogate step per minibatch, and the critic phase one value-regression step per minibatch (the
actor's loss does not depend on the critic's weights nor the reverse, so the two phases commute).
train_rl.py runs all of an iteration's steps in one compiled call (the driver's fuse mode).
Defaults: tuned on CartPole-v1 (docs/rl.md: 500/500 on seeds 0-4).
"""
import math
from dataclasses import dataclass

import mindspore as ms
import numpy as np
from mindspore import Parameter, Tensor, nn, ops
from mindspore.common.initializer import Orthogonal

from loops import transforms
from loops.config import check_seed, opt
from loops.driver import Phase
from loops.learner import Learner, all_state, settings
from loops.memory import FLOAT
from loops.step import maybe_jit
from rl.agent import Agent
from rl.config import ENV_BYTES, RLConfig, algorithm_config
from rl.evaluate import EVALUATION  # noqa: F401  (python -m metrics RUN_DIR)
from rl.storage import Rollout, gae

MODELS = {"actor": "the actor", "critic": "the critic"}


@dataclass
class Config(algorithm_config("ppo", MODELS, env="CartPole-v1", num_envs=8, total_steps=100_000, hidden=64,
                              gamma=0.98, log_every=10, clip_norm=0.5)):
    HELP_GROUPS = {"PPO": ("num_steps", "update_epochs", "num_minibatches", "gae_lambda", "clip_coef", "ent_coef",
                           "env_backend", "num_seeds")}
    num_steps: int = opt(32, "steps per environment in each rollout")
    update_epochs: int = opt(20, "passes over each rollout")
    num_minibatches: int = opt(1, "minibatches per pass")
    gae_lambda: float = opt(0.8, "GAE lambda")
    clip_coef: float = opt(0.2, "ratio clip epsilon")
    ent_coef: float = opt(0.0, "entropy bonus weight")
    env_backend: str = opt("", "where the environments run: gymnasium (host numpy, stepped from Python) or "
                           "mindspore (rl/native_envs.py: rollout, GAE and updates in one compiled call)",
                           ("gymnasium", "mindspore"), auto="mindspore where rl/native_envs.py has the environment "
                                                            "(CartPole, Acrobot, Pendulum, MountainCarContinuous), else gymnasium")
    num_seeds: int = opt(1, "independent agents (seeds --seed, --seed + 1, ...) trained side by side in one compiled "
                         "call with --env-backend mindspore (rl/ppo_seeds.py), each with its record in RUN/seed<S>/")

    @property
    def FIXED_ON_RESUME(self):
        """The environments' state is saved apart; the seeds are a dimension of every Parameter, and a
        group's first seed names its seed folders."""
        fixed = RLConfig.FIXED_ON_RESUME + ("env_backend", "num_seeds")
        return fixed + ("seed",) if self.num_seeds > 1 else fixed

    def canonical(self, config):
        """A run saved before --env-backend existed ran on gymnasium (auto, "", is resolved before saving)."""
        return super().canonical({**config, "env_backend": config.get("env_backend") or "gymnasium"})

    def iterations(self):  # one iteration: one rollout of num_steps x num_envs environment steps
        return self.total_steps // (self.num_envs * self.num_steps)

    def memory_parts(self):  # the rollout: observations, actions, log-probabilities, values, rewards, dones
        parts = super().memory_parts() + [(f"--num-steps {self.num_steps} x --num-envs {self.num_envs} x --num-seeds "
                                           f"{self.num_seeds} (the rollout)",
                                           self.num_steps * self.num_envs * self.num_seeds * 6 * FLOAT)]
        if self.num_seeds > 1:  # every further seed: the networks' weights again (as the --hidden part counts them)
            parts.append((f"--num-seeds {self.num_seeds} (each seed's networks)",
                          (self.num_seeds - 1) * (4 * self.hidden ** 2 * FLOAT + self.num_envs * ENV_BYTES)))
        return parts

    def validate(self):
        self.check_positive("num_steps", "update_epochs", "num_minibatches", "clip_coef")
        self.check(0 <= self.gae_lambda <= 1, f"--gae-lambda must be in [0, 1], got {self.gae_lambda}")
        self.check_non_negative("ent_coef")
        from rl.native_envs import NATIVE_ENVS
        if self.env_backend == "":  # auto: in the graph where it can be (both learn alike: docs/rl.md)
            self.env_backend = "mindspore" if self.env in NATIVE_ENVS else "gymnasium"
        if self.env_backend == "mindspore":
            self.check(self.env in NATIVE_ENVS, f"--env-backend mindspore has no {self.env}; it has "
                                                f"{', '.join(sorted(NATIVE_ENVS))} (or use --env-backend gymnasium)")
        self.check_positive("num_seeds")
        if self.num_seeds > 1:
            self.check(self.env_backend == "mindspore", f"--num-seeds {self.num_seeds} trains the seeds in one compiled "
                                                        "call: it needs --env-backend mindspore")
            check_seed(self.seed + self.num_seeds - 1, "--seed + --num-seeds - 1")
            # transforms that read all seeds' gradients at once would couple the seeds (loops/transforms.py
            # couples_members: one veto of every seed's update for one seed's NaN, one loss scale); the Learners
            # would refuse them too, this names the flags before anything is built
            coupled = []
            for flag in (t.flag for t in transforms.TRANSFORMS if t.couples_members):
                models = [m for m in self.MODELS if settings(self, m)[flag] not in (0, False, "none", "", None)]
                if models:
                    coupled.append(f"--{flag.replace('_', '-')} ({', '.join(models)})")
            self.check(not coupled, f"--num-seeds {self.num_seeds} does not take gradient transforms that see all seeds' "
                                    f"gradients at once (one skip, one loss scale for all): drop "
                                    f"{', '.join(coupled)}")
        batch = self.num_envs * self.num_steps
        self.check(batch % self.num_minibatches == 0,
                   f"--num-minibatches ({self.num_minibatches}) must divide --num-envs x --num-steps ({batch})")
        super().validate()

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def mlp(inputs, outputs, hidden, last_gain):
    """Two tanh layers of `hidden` units, orthogonal initialisation (gain sqrt 2, last layer `last_gain`),
    as CleanRL's PPO."""
    def dense(i, o, gain):
        return nn.Dense(i, o, weight_init=Orthogonal(gain), bias_init="zeros")
    return nn.SequentialCell(dense(inputs, hidden, math.sqrt(2)), nn.Tanh(), dense(hidden, hidden, math.sqrt(2)),
                             nn.Tanh(), dense(hidden, outputs, last_gain))


class Actor(nn.Cell):
    """Discrete: logits. Continuous: the Gaussian's mean, with a state-independent log std."""

    def __init__(self, obs_dim, n, hidden, discrete):
        super().__init__()
        self.net, self.discrete = mlp(obs_dim, n, hidden, 0.01), discrete
        self.log_std = Parameter(Tensor(np.zeros(n, np.float32)), name="log_std", requires_grad=not discrete)

    def construct(self, obs):
        return self.net(obs)

    def log_std_for(self, out):
        """The log std of each row of `out` (one vector for all; rl/ppo_seeds.py's actor has one per seed)."""
        return self.log_std


def log_prob_and_entropy(out, log_std, actions, discrete):
    """log pi(a | s) per sample and the policy's entropy per sample."""
    if discrete:
        logp_all = ops.log_softmax(out, -1)
        logp = ops.gather_elements(logp_all, 1, actions.reshape(-1, 1).astype(ms.int32)).reshape(-1)
        return logp, -ops.sum(ops.exp(logp_all) * logp_all, -1)
    z = (actions - out) / ops.exp(log_std)
    logp = ops.sum(-0.5 * z * z - log_std - LOG_SQRT_2PI, -1)
    return logp, ops.sum(log_std + 0.5 + LOG_SQRT_2PI, -1).broadcast_to(logp.shape)


class PPO(Agent):
    seeds = 1  # agents side by side in one set of Parameters (rl/ppo_seeds.py: each Parameter's leading dimension)

    def __new__(cls, cfg, run):  # --env-backend mindspore: the whole iteration in the graph (rl/ppo_native.py)
        if cls is PPO and cfg.env_backend == "mindspore":
            from rl.ppo_native import NativePPO
            from rl.ppo_seeds import SeedsPPO
            cls = SeedsPPO if cfg.num_seeds > 1 else NativePPO
        return super().__new__(cls)

    def __init__(self, cfg, run):
        super().__init__(cfg, run)
        n, obs_dim = self.n_actions, self.obs_dim
        self.actor = Learner.from_config("actor", self.actor_net(), cfg, members=self.seeds)
        self.critic = Learner.from_config("critic", self.critic_net(), cfg, members=self.seeds)
        self.policy = maybe_jit(self.make_policy())
        self.actor_step = self.actor.step(self.actor_objective(), has_aux=True, takes_lr=True)
        self.critic_step = self.critic.step(self.critic_objective(), takes_lr=True)
        shape, dtype = ((), np.int32) if self.discrete else ((n,), np.float32)
        self.buffer = Rollout(cfg.num_steps, cfg.num_envs, obs_dim, shape, dtype)
        self.noise_shape = (cfg.num_envs, n)
        self.batches, self.cursor = [], {"actor": 0, "critic": 0}

    def actor_net(self):
        return Actor(self.obs_dim, self.n_actions, self.cfg.hidden, self.discrete)

    def critic_net(self):
        return mlp(self.obs_dim, 1, self.cfg.hidden, 1.0)

    def make_policy(self):
        """(obs, noise) -> (action, log pi(action), V(obs)). Discrete: Gumbel-max on host Gumbel noise;
        continuous: mean + std * host normal noise."""
        actor, critic, discrete = self.actor.net, self.critic.net, self.discrete

        def policy(obs, noise):
            out = actor(obs)
            if discrete:
                action = ops.argmax(out + noise, -1).astype(ms.int32)
            else:
                action = out + ops.exp(actor.log_std_for(out)) * noise
            logp, _ = log_prob_and_entropy(out, actor.log_std_for(out), action, discrete)
            return action, logp, critic(obs).reshape(-1)
        return policy

    def actor_objective(self):  # what the actor's step differentiates: its inputs are the host's minibatch arrays
        return self.actor_loss_fn()

    def critic_objective(self):
        return self.critic_loss_fn()

    def actor_loss_fn(self):
        """Clipped surrogate: -E[min(r A, clip(r, 1 - eps, 1 + eps) A)] - ent_coef * entropy."""
        actor, discrete, eps, ent_coef = self.actor.net, self.discrete, self.cfg.clip_coef, self.cfg.ent_coef

        def loss(obs, actions, old_logp, advantages):
            out = actor(obs)
            logp, entropy = log_prob_and_entropy(out, actor.log_std_for(out), actions, discrete)
            log_ratio = logp - old_logp
            ratio = ops.exp(log_ratio)
            surrogate = ops.minimum(ratio * advantages, ops.clamp(ratio, 1 - eps, 1 + eps) * advantages)
            approx_kl = ops.mean((ratio - 1) - log_ratio)  # k3 estimator of KL(old || new)
            clipfrac = ops.mean((ops.abs(ratio - 1) > eps).astype(ms.float32))
            return -ops.mean(surrogate) - ent_coef * ops.mean(entropy), approx_kl, clipfrac, ops.mean(entropy)
        return loss

    def critic_loss_fn(self):
        critic = self.critic.net

        def loss(obs, returns):  # value regression: 0.5 E (V(s) - R)^2
            return 0.5 * ops.mean(ops.square(critic(obs).reshape(-1) - returns))
        return loss

    # ---- host side ----
    def noise(self):
        if self.discrete:
            return self.rng.gumbel(size=self.noise_shape).astype(np.float32)
        return self.rng.standard_normal(self.noise_shape, dtype=np.float32)

    def collect(self):
        """One rollout with the current policy; then GAE and the minibatch schedule."""
        cfg, buf = self.cfg, self.buffer
        for t in range(cfg.num_steps):
            action, logp, value = (x.asnumpy() for x in self.policy(Tensor.from_numpy(self.obs),
                                                                     Tensor.from_numpy(self.noise())))
            env_action = action if self.discrete else np.clip(action, *self.bounds)
            obs, reward, terminated, truncated, info = self.step_envs(env_action)
            cut = truncated & ~terminated
            if cut.any():  # a time limit is not a terminal state: bootstrap from the final observation
                final = np.stack([info["final_obs"][i] if cut[i] else obs[i] for i in range(len(cut))])
                reward = reward + cfg.gamma * cut * self.values_of(final.astype(np.float32))
            buf.obs[t], buf.actions[t], buf.logprobs[t], buf.values[t] = self.obs, action, logp, value
            buf.rewards[t], buf.dones[t] = reward, (terminated | truncated)
            self.obs = obs
        next_value = self.values_of(self.obs)
        self.advantages, self.returns = gae(buf.rewards, buf.values, buf.dones, next_value, cfg.gamma, cfg.gae_lambda)
        n = cfg.num_steps * cfg.num_envs
        size = n // cfg.num_minibatches
        self.batches = [order[i * size:(i + 1) * size] for _ in range(cfg.update_epochs)
                        for order in [self.rng.permutation(n)] for i in range(cfg.num_minibatches)]

    def values_of(self, obs):
        return self.policy(Tensor.from_numpy(obs), Tensor.from_numpy(np.zeros(self.noise_shape, np.float32)))[2].asnumpy()

    def minibatch(self, who, *arrays):
        """`who`'s next minibatch of each (T, N, ...) rollout array, flattened to (T * N, ...) first."""
        i = self.cursor[who]
        self.cursor[who] = (i + 1) % len(self.batches)
        return tuple(a.reshape((-1,) + a.shape[2:])[self.batches[i]] for a in arrays)

    def draw_actor(self, step):
        if self.cursor["actor"] == 0:
            self.collect()
        obs, actions, logprobs, adv = self.minibatch("actor", self.buffer.obs, self.buffer.actions,
                                                     self.buffer.logprobs, self.advantages)
        adv = ((adv - adv.mean()) / (adv.std() + 1e-8)).astype(np.float32)  # per-minibatch normalisation
        inputs = (obs, actions, logprobs, adv)
        return self.actor_step.host_inputs(inputs, self.rng, self.scheduled_lr("actor", step))

    def draw_critic(self, step):
        obs, returns = self.minibatch("critic", self.buffer.obs, self.returns)
        inputs = (obs, returns.astype(np.float32))
        return self.critic_step.host_inputs(inputs, self.rng, self.scheduled_lr("critic", step))

    def phases(self):
        repeat = self.cfg.update_epochs * self.cfg.num_minibatches
        return [Phase("actor", self.draw_actor, self.actor_step.scalars,
                      ("losses/actor", "losses/approx_kl", "losses/clipfrac", "losses/entropy", "grad_norm/actor"),
                      repeat=repeat),
                Phase("critic", self.draw_critic, self.critic_step.scalars, ("losses/critic", "grad_norm/critic"),
                      repeat=repeat)]

    def deterministic_action(self, obs):
        out = self.actor.net(Tensor.from_numpy(obs)).asnumpy()
        return out.argmax(-1).astype(np.int32) if self.discrete else np.clip(out, *self.bounds)

    # ---- checkpoints: the rollout is not saved (a checkpoint falls between updates, where it is spent) ----
    def state(self):
        return all_state(self.actor, self.critic)


AGENT = PPO
