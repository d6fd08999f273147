"""Classic-control environments as MindSpore array programs, batched over N environments, so that a
whole rollout can live inside one compiled graph (no host round trip per environment step).

Each environment follows gymnasium 1.x's source (gymnasium/envs/classic_control/) step for step:

    env = NATIVE_ENVS["CartPole-v1"]()
    noise = env.reset_noise(rng, n)            # host-drawn initial-state noise (the run's RNG)
    carry = env.initial(Tensor(noise))          # one (n, state_dim + 2) tensor: states, elapsed, return
    carry, out = env.step(carry, actions, Tensor(env.reset_noise(rng, n)))
    out["obs"], out["reward"], out["terminated"], out["truncated"], out["final_obs"], out["episode_return"], ...

`step` is pure (tensors in, tensors out) and compiles inside `@mindspore.jit`. It does what
gymnasium's TimeLimit, RecordEpisodeStatistics and a vector env in SAME_STEP autoreset mode do
together: `truncated` when the elapsed steps reach the time limit (as TimeLimit, also on the step that
terminates), an environment that ends is reset in the same step from the noise passed in (`obs` is the
new episode's first observation, `final_obs` the last one of the ended episode), and
`episode_return` / `episode_length` hold the ended episode's totals where `terminated | truncated`.
Initial states are drawn on the host from the run's seeded generator (`reset_noise`), so a run stays a
function of its seed and a resume replays it bit for bit.

`out` is a dict: obs, reward, terminated, truncated, final_obs, episode_return, episode_length.

Precision: gymnasium integrates CartPole, Acrobot and Pendulum in float64 (their states are float64
arrays; observations are cast to float32) and MountainCarContinuous in float64 rounded to a float32
state every step. These run in `dtype`: float32 by default (the speed that matters: one step from
gymnasium's own states agrees to float32 rounding), float64 where the tests compare whole episodes
with gymnasium's (equal to 1e-12; MountainCar's per-step float32 rounding is reproduced).
Every non-integer constant of the dynamics is a Tensor of `dtype` made here (`self.k["tau"]`): in
MindSpore 2.10 a bare Python float meets a float64 tensor as a float32 (x * 0.2 is off by 4e-10
relative, x > 2.4 compares with 2.4000001), constant arithmetic inside a compiled graph is float32
too, and a Tensor cannot be built inside a graph.
"""
import math

import mindspore as ms
import numpy as np
from mindspore import ops


class NativeEnv:
    """The time limit, autoreset and episode statistics around one environment's dynamics."""
    state_dim = obs_dim = max_steps = 0
    actions = 0  # Discrete(n); 0: a Box of `action_dim` continuous actions in [low, high]
    action_dim, low, high = 0, 0.0, 0.0
    reset_low, reset_high = (), ()  # initial states: uniform in [low, high) per state component
    CONSTANTS = {}  # name -> value, computed in Python (float64); the dynamics read self.k[name]

    def __init__(self, dtype=ms.float32):
        self.dtype = dtype
        self.k = {name: ms.Tensor(value, dtype) for name, value in self.CONSTANTS.items()}

    def reset_noise(self, rng, n):
        """(n, state_dim) initial states drawn on the host, as gymnasium's reset draws them."""
        return rng.uniform(self.reset_low, self.reset_high, size=(n, self.state_dim)).astype(
            np.float64 if self.dtype == ms.float64 else np.float32)

    def initial(self, noise):
        """The carry of N fresh environments: ONE (N, state_dim + 2) tensor of `dtype`, columns the
        state, the elapsed steps and the episode's return so far. One tensor because a graph-mode
        while loop that carries a tuple of tensors gives wrong results in MindSpore 2.10 (CPU,
        measured: Pendulum returns off by 8000 after 1000 steps, no error); one tensor is exact."""
        return ops.concat([noise.astype(self.dtype), ops.zeros((noise.shape[0], 2), self.dtype)], 1)

    def step(self, carry, action, noise):
        d = self.state_dim
        states, tail = carry[:, :d], carry[:, d:]  # tail: (elapsed, return so far)
        states, reward, terminated = self.dynamics(states, action)
        tail = tail + ops.stack([ops.ones_like(reward), reward], 1)  # elapsed + 1, return + reward
        elapsed = tail[:, 0]
        truncated = elapsed >= self.max_steps
        done = ops.logical_or(terminated, truncated)
        # an environment that ended starts its next episode from the noise, with elapsed and return 0
        fresh = ops.concat([noise.astype(self.dtype), ops.zeros_like(tail)], 1)
        next_carry = ops.where(done.reshape(-1, 1), fresh, ops.concat([states, tail], 1))
        out = {"obs": self.observe(next_carry[:, :d]), "reward": reward, "terminated": terminated,
               "truncated": truncated, "final_obs": self.observe(states), "episode_return": tail[:, 1],
               "episode_length": elapsed.astype(ms.int32)}
        return next_carry, out

    def observe(self, states):
        return states.astype(ms.float32)

    def dynamics(self, states, action):
        """(states, actions) -> (next states, rewards, terminated), gymnasium's step."""
        raise NotImplementedError


def _split(states):
    """The state's columns: one Unstack kernel (a slice per column costs a kernel launch each)."""
    return list(ops.unstack(states, 1))


def _cartpole_constants(gravity=9.8, masscart=1.0, masspole=0.1, length=0.5, tau=0.02, force_mag=10.0):
    total_mass = masspole + masscart
    return dict(gravity=gravity, masspole=masspole, length=length, tau=tau, total_mass=total_mass,
                polemass_length=masspole * length, four_thirds=4.0 / 3.0, x_limit=2.4,
                theta_limit=12 * 2 * math.pi / 360, forces=[-force_mag, force_mag])


class CartPole(NativeEnv):
    """CartPole-v1 (Barto et al. 1983): Euler integration, reward 1 every step, terminated when the
    cart leaves [-2.4, 2.4] or the pole leans beyond 12 degrees; 500 steps."""
    state_dim = obs_dim = 4
    max_steps, actions = 500, 2
    reset_low, reset_high = -0.05, 0.05
    CONSTANTS = _cartpole_constants()

    def dynamics(self, states, action):
        k = self.k
        x, x_dot, theta, theta_dot = _split(states)
        force = ops.gather(k["forces"], action, 0)  # action 0 pushes left, 1 right
        cos, sin = ops.cos(theta), ops.sin(theta)
        temp = (force + k["polemass_length"] * theta_dot * theta_dot * sin) / k["total_mass"]
        theta_acc = (k["gravity"] * sin - cos * temp) / (
            k["length"] * (k["four_thirds"] - k["masspole"] * cos * cos / k["total_mass"]))
        x_acc = temp - k["polemass_length"] * theta_acc * cos / k["total_mass"]
        # Euler: x + tau x_dot, x_dot + tau x_acc, theta + tau theta_dot, theta_dot + tau theta_acc, as one
        # multiply and one add over the stacked columns (the same arithmetic per element)
        states = states + k["tau"] * ops.stack([x_dot, x_acc, theta_dot, theta_acc], 1)
        x, theta = states[:, 0], states[:, 2]
        terminated = (ops.abs(x) > k["x_limit"]) | (ops.abs(theta) > k["theta_limit"])
        return states, ops.ones_like(x), terminated


def _acrobot_constants(dt=0.2, m1=1.0, m2=1.0, l1=1.0, lc1=0.5, lc2=0.5, moi=1.0, g=9.8):
    return dict(dt=dt, half_dt=dt / 2.0, half_pi=math.pi / 2.0, pi=math.pi,
                d1_base=m1 * lc1 ** 2 + m2 * (l1 ** 2 + lc2 ** 2) + 2 * moi, d1_cos=m2 * 2 * l1 * lc2,
                d2_base=m2 * lc2 ** 2 + moi, d2_cos=m2 * l1 * lc2, phi2=m2 * lc2 * g, m2_l1_lc2=m2 * l1 * lc2,
                phi1_gravity=(m1 * lc1 + m2 * l1) * g, denominator=m2 * lc2 ** 2 + moi,
                max_vel_1=4 * math.pi, max_vel_2=9 * math.pi)


class Acrobot(NativeEnv):
    """Acrobot-v1 (Sutton 1996, the book's dynamics): one RK4 step of 0.2 s, reward -1 until the tip
    swings above the bar (terminated); 500 steps."""
    state_dim, obs_dim, max_steps, actions = 4, 6, 500, 3
    reset_low, reset_high = -0.1, 0.1
    CONSTANTS = _acrobot_constants()

    def derivatives(self, s, torque):
        k = self.k
        theta1, theta2, dtheta1, dtheta2 = s
        d1 = k["d1_base"] + k["d1_cos"] * ops.cos(theta2)
        d2 = k["d2_base"] + k["d2_cos"] * ops.cos(theta2)
        phi2 = k["phi2"] * ops.cos(theta1 + theta2 - k["half_pi"])
        phi1 = (-k["m2_l1_lc2"] * dtheta2 * dtheta2 * ops.sin(theta2)
                - 2 * k["m2_l1_lc2"] * dtheta2 * dtheta1 * ops.sin(theta2)
                + k["phi1_gravity"] * ops.cos(theta1 - k["half_pi"]) + phi2)
        ddtheta2 = (torque + d2 / d1 * phi1 - k["m2_l1_lc2"] * dtheta1 * dtheta1 * ops.sin(theta2) - phi2) / (
            k["denominator"] - d2 * d2 / d1)
        ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
        return [dtheta1, dtheta2, ddtheta1, ddtheta2]

    def dynamics(self, states, action):
        k = self.k
        s = _split(states)
        torque = (action - 1).astype(self.dtype)
        k1 = self.derivatives(s, torque)
        k2 = self.derivatives([a + k["half_dt"] * b for a, b in zip(s, k1)], torque)
        k3 = self.derivatives([a + k["half_dt"] * b for a, b in zip(s, k2)], torque)
        k4 = self.derivatives([a + k["dt"] * b for a, b in zip(s, k3)], torque)
        s = [a + k["dt"] / 6 * (b1 + 2 * b2 + 2 * b3 + b4) for a, b1, b2, b3, b4 in zip(s, k1, k2, k3, k4)]
        theta1, theta2 = wrap(s[0], -k["pi"], k["pi"]), wrap(s[1], -k["pi"], k["pi"])
        dtheta1 = ops.clamp(s[2], -k["max_vel_1"], k["max_vel_1"])
        dtheta2 = ops.clamp(s[3], -k["max_vel_2"], k["max_vel_2"])
        terminated = -ops.cos(theta1) - ops.cos(theta2 + theta1) > 1
        reward = ops.where(terminated, ops.zeros_like(theta1), -ops.ones_like(theta1))
        return ops.stack([theta1, theta2, dtheta1, dtheta2], 1), reward, terminated

    def reset_noise(self, rng, n):  # gymnasium's Acrobot casts its initial state to float32
        return super().reset_noise(rng, n).astype(np.float32).astype(
            np.float64 if self.dtype == ms.float64 else np.float32)

    def observe(self, states):
        theta1, theta2, dtheta1, dtheta2 = _split(states)
        return ops.stack([ops.cos(theta1), ops.sin(theta1), ops.cos(theta2), ops.sin(theta2), dtheta1, dtheta2],
                         1).astype(ms.float32)


def wrap(x, low, high):
    """gymnasium's acrobot.wrap (shift by whole periods into [low, high]) without its loops."""
    period = high - low
    shifted = x - period * ops.floor((x - low) / period)
    return ops.where((x >= low) & (x <= high), x, shifted)


class Pendulum(NativeEnv):
    """Pendulum-v1: the reward is the cost of the state the step starts from (angle, speed, torque);
    never terminates; 200 steps."""
    state_dim, obs_dim, max_steps = 2, 3, 200
    action_dim, low, high = 1, -2.0, 2.0
    reset_low, reset_high = (-math.pi, -1.0), (math.pi, 1.0)
    CONSTANTS = dict(pi=math.pi, two_pi=2 * math.pi, dt=0.05, max_speed=8.0, max_torque=2.0, speed_cost=0.1,
                     torque_cost=0.001, gravity_term=3 * 10.0 / (2 * 1.0), torque_term=3.0 / (1.0 * 1.0 ** 2))

    def dynamics(self, states, action):
        k = self.k
        th, thdot = _split(states)
        u = ops.clamp(action[:, 0].astype(self.dtype), -k["max_torque"], k["max_torque"])
        shifted = th + k["pi"]
        normalized = shifted - k["two_pi"] * ops.floor(shifted / k["two_pi"]) - k["pi"]  # ((th + pi) % 2pi) - pi
        costs = normalized * normalized + k["speed_cost"] * thdot * thdot + k["torque_cost"] * u * u
        thdot = thdot + (k["gravity_term"] * ops.sin(th) + k["torque_term"] * u) * k["dt"]
        thdot = ops.clamp(thdot, -k["max_speed"], k["max_speed"])
        th = th + thdot * k["dt"]
        return ops.stack([th, thdot], 1), -costs, ops.zeros_like(th).astype(ms.bool_)

    def observe(self, states):
        th, thdot = _split(states)
        return ops.stack([ops.cos(th), ops.sin(th), thdot], 1).astype(ms.float32)


class MountainCarContinuous(NativeEnv):
    """MountainCarContinuous-v0: reward 100 on reaching the flag (terminated) minus 0.1 action^2 every
    step; 999 steps. Initial position uniform in [-0.6, -0.4), velocity 0."""
    state_dim = obs_dim = 2
    max_steps, action_dim, low, high = 999, 1, -1.0, 1.0
    reset_low, reset_high = (-0.6, 0.0), (-0.4, 0.0)
    CONSTANTS = dict(min_position=-1.2, max_position=0.6, max_speed=0.07, goal_position=0.45, power=0.0015,
                     hill=0.0025, action_cost=0.1, one=1.0)

    def dynamics(self, states, action):
        k = self.k
        position, velocity = _split(states)
        a = action[:, 0].astype(self.dtype)
        force = ops.clamp(a, -k["one"], k["one"])
        velocity = ops.clamp(velocity + force * k["power"] - k["hill"] * ops.cos(3 * position),
                             -k["max_speed"], k["max_speed"])
        position = ops.clamp(position + velocity, k["min_position"], k["max_position"])
        velocity = ops.where((position == k["min_position"]) & (velocity < 0), ops.zeros_like(velocity), velocity)
        terminated = (position >= k["goal_position"]) & (velocity >= 0)
        reward = ops.where(terminated, ops.full_like(a, 100.0), ops.zeros_like(a)) - k["action_cost"] * a * a
        # gymnasium keeps this state as float32: round each step, as it does (a no-op in float32)
        return ops.stack([position, velocity], 1).astype(ms.float32).astype(self.dtype), reward, terminated


NATIVE_ENVS = {"CartPole-v1": CartPole, "Acrobot-v1": Acrobot, "Pendulum-v1": Pendulum,
               "MountainCarContinuous-v0": MountainCarContinuous}
