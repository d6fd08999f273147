"""Replay buffer for off-policy algorithms: a host-side ring buffer of transitions, sampled with the
run's host RNG (so a seed decides every batch), and saved in checkpoints as Parameters named
`replay.*` in MindSpore's protobuf format (no pickle)."""
import numpy as np
from mindspore import Parameter, Tensor


class ReplayBuffer:
    def __init__(self, capacity, obs_dim, act_dim):
        self.capacity, self.pos, self.size = capacity, 0, 0
        self.arrays = {"obs": np.zeros((capacity, obs_dim), np.float32),
                       "actions": np.zeros((capacity, act_dim), np.float32),
                       "rewards": np.zeros((capacity,), np.float32),
                       "next_obs": np.zeros((capacity, obs_dim), np.float32),
                       "terminated": np.zeros((capacity,), np.float32)}
        self.params = {k: Parameter(Tensor(a), name=f"replay.{k}", requires_grad=False) for k, a in self.arrays.items()}

    def add(self, **batch):
        """Append one vector step's transitions (each array has one row per environment)."""
        n = len(batch["obs"])
        rows = (self.pos + np.arange(n)) % self.capacity
        for k, a in self.arrays.items():
            a[rows] = batch[k]
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.capacity, self.size + n)

    def sample(self, rng, batch_size):
        """A uniform batch (with replacement, as CleanRL's and SB3's buffers): obs, actions, rewards,
        next_obs, terminated."""
        rows = rng.integers(0, self.size, batch_size)
        return tuple(self.arrays[k][rows] for k in ("obs", "actions", "rewards", "next_obs", "terminated"))

    # ---- checkpoints: the arrays as Parameters, the cursor as JSON ----
    def parameters(self):
        return list(self.params.values())

    def sync_to_parameters(self):
        """Copy the host arrays into the Parameters (before a checkpoint is written)."""
        for k, p in self.params.items():
            p.set_data(Tensor(self.arrays[k]))

    def load_from_parameters(self, cursor):
        """The host arrays from the (just restored) Parameters and `cursor` (from state())."""
        for k, p in self.params.items():
            self.arrays[k][...] = p.asnumpy()
        self.pos, self.size = cursor["pos"], cursor["size"]

    def state(self):
        return {"pos": self.pos, "size": self.size}
