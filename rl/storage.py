"""Rollout storage for on-policy algorithms, and generalised advantage estimation (host numpy)."""
import numpy as np


def gae(rewards, values, dones, next_value, gamma, lam):
    """Advantages and returns (Schulman et al. 2016), arrays of shape (T, N):
    delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t),  A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}.
    done_t marks a step that ENDED its episode (terminated; truncation is bootstrapped by the caller
    through `rewards`), so nothing flows across an episode boundary."""
    T = len(rewards)
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(next_value)
    for t in reversed(range(T)):
        following = next_value if t == T - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * following * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        advantages[t] = last
    return advantages, advantages + values


class Rollout:
    """T steps x N environments of observations, actions, log-probabilities, values, rewards, dones."""

    def __init__(self, steps, num_envs, obs_dim, action_shape, action_dtype):
        self.obs = np.zeros((steps, num_envs, obs_dim), np.float32)
        self.actions = np.zeros((steps, num_envs) + action_shape, action_dtype)
        self.logprobs = np.zeros((steps, num_envs), np.float32)
        self.values = np.zeros((steps, num_envs), np.float32)
        self.rewards = np.zeros((steps, num_envs), np.float32)
        self.dones = np.zeros((steps, num_envs), np.float32)
