"""The flags every RL algorithm has, and how an algorithm adds its own.

    MODELS = {"actor": "the actor", "critic": "the critic"}      # the models that learn
    @dataclass
    class Config(algorithm_config("ppo", MODELS, env="CartPole-v1", num_envs=8)):  # its own defaults
        HELP_GROUPS = {"PPO": ("num_steps", ...)}
        num_steps: int = opt(32, "steps per environment in each rollout")
        def iterations(self):                                      # --total-steps -> driver iterations
            return self.total_steps // (self.num_envs * self.num_steps)

Per-model flags (--lr-actor, --clip-norm-critic, ...) come from MODELS alone (loops/learner.py), so a
flag of another algorithm is an unknown flag here: this config does not have it.
"""
import copy
from dataclasses import dataclass

from loops import transforms
from loops.config import RunConfig, opt
from loops.learner import model_flags
from loops.memory import FLOAT, check_fits
from rl import ALGORITHMS

ENV_BYTES = 5000  # measured: a gymnasium CartPole-v1 or Pendulum-v1 in the vector env takes ~5.7 KB

SHARED = ("algo", "env", "num_envs", "total_steps", "steps", "hidden", "gamma", "anneal_lr", "eval_episodes",
          "log_every")


@dataclass
class RLConfig(RunConfig):
    """Flags of every algorithm; each algorithm's Config sets its own defaults."""
    RUNTIME_KEYS = RunConfig.RUNTIME_KEYS + ("total_steps", "eval_episodes")
    # the environments' saved state, the networks' shapes and the replay buffer's rows depend on these
    FIXED_ON_RESUME = ("env", "num_envs", "hidden", "buffer_size")
    HELP_GROUPS = {"algorithm and environment": SHARED}
    algo: str = opt("ppo", "algorithm (each has its own flags: train_rl.py --algo NAME --help)", sorted(ALGORITHMS))
    env: str = opt("CartPole-v1", "gymnasium environment id (a Box observation space)", auto=True)
    num_envs: int = opt(1, "environments stepped side by side", auto=True)
    total_steps: int = opt(100_000, "environment steps to train for (sets --steps when that is auto)", auto=True)
    steps: int = opt(0, "driver iterations (see above)", auto="from --total-steps")
    hidden: int = opt(64, "hidden units of every network's two layers", auto=True)
    gamma: float = opt(0.99, "discount", auto=True)
    anneal_lr: bool = opt(True, "anneal the learning rates linearly to 0 over the run")
    eval_episodes: int = opt(10, "episodes of the deterministic policy evaluated at the end")
    log_every: int = opt(10, "log every N iterations", auto=True)

    def owns_run(self, config):  # before recipes had configs of their own, one config named its algorithm
        return config.get("algo") == self.algo

    def iterations(self):
        """Driver iterations that --total-steps environment steps take (the algorithm's own rule)."""
        raise NotImplementedError

    def validate(self):
        own = type(self).__dataclass_fields__["algo"].default  # this Config is that algorithm's
        self.check(self.algo == own, f"--algo {self.algo}: this config is {own}'s (train_rl.py picks it by --algo)")
        self.check_positive("num_envs", "total_steps", "hidden", "eval_episodes", "gamma", "log_every")
        self.check(self.env.strip() != "", "--env must name a gymnasium environment (leave it out or pass auto for "
                                           "the algorithm's own)")
        self.check(0 < self.gamma <= 1, f"--gamma must be in (0, 1], got {self.gamma}")
        if self.steps == 0:
            self.steps = self.iterations()
            self.check(self.steps >= 1, f"--total-steps {self.total_steps} is less than one {self.algo} iteration, which "
                                        f"takes {self.least_total_steps()} environment steps with these flags "
                                        f"(train_rl.py --algo {self.algo} --help); pass at least that, or --steps N")
        super().validate()
        check_fits(self.memory_parts())  # before any environment or run dir exists

    def memory_parts(self):
        """Lower bounds of the memory this run's own arrays take (loops/memory.py): the environments
        with one forward pass over their observations, the hidden x hidden weights (every algorithm
        trains at least one such matrix: its weights, gradient and two optimizer slots, or a second
        network's), a replay buffer."""
        parts = [(f"--num-envs {self.num_envs} (the environments)", self.num_envs * (ENV_BYTES + 2 * self.hidden * FLOAT)),
                 (f"--hidden {self.hidden} (the networks' weights)", 4 * self.hidden ** 2 * FLOAT)]
        if hasattr(self, "buffer_size"):  # a replay buffer: every checkpoint writes all of it (>= 5 floats a row)
            parts.append((f"--buffer-size {self.buffer_size} (the replay buffer)", self.buffer_size * 5 * FLOAT))
        return parts

    def least_total_steps(self):
        """The smallest --total-steps that gives one whole iteration (iterations() grows with it)."""
        probe = copy.copy(self)  # iterations() reads total_steps from the config: try values on a copy

        def whole(total_steps):
            probe.total_steps = total_steps
            return probe.iterations() >= 1
        low, high = self.total_steps, max(1, self.total_steps)
        while not whole(high):
            high *= 2
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if whole(mid) else (mid + 1, high)
        return high


def algorithm_config(name, models, lr=1e-3, **defaults):
    """The base of algorithm `name`'s Config: RLConfig with --algo defaulting to `name`, this
    algorithm's `defaults` for the shared flags (env="Pendulum-v1", hidden=256, ...; a gradient
    intervention's shared flag too, e.g. clip_norm=0.5), and the per-model optimisation and
    gradient-intervention flags of `models` ({name: who})."""
    interventions = {t.flag: t for t in transforms.TRANSFORMS if t.flag in defaults}
    base = model_flags(RLConfig, models, lr=opt(lr, "learning rate of every model"), **{
        flag: opt(defaults.pop(flag), t.help.format(whose="every model's "), getattr(t, "choices", None))
        for flag, t in interventions.items()})
    shared = RLConfig.__dataclass_fields__
    fields = {key: opt(value, shared[key].metadata["help"], shared[key].metadata["choices"],
                       shared[key].metadata["auto"]) for key, value in dict(defaults, algo=name).items()}
    namespace = {"__annotations__": {k: shared[k].type for k in fields}, "__module__": __name__, **fields}
    return dataclass(type(f"{name.upper()}Base", (base,), namespace))
