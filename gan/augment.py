"""DiffAugment (Zhao et al. 2020): the same differentiable augmentation on real and fake images,
inside D's forward function, so G gets gradients through it.

All randomness is drawn on the host (exact resume, and identical in multi-step mode) and turned into
dense tensors there; the device side is then plain differentiable arithmetic:
  color        brightness + U(-0.5, 0.5), saturation x U(0, 2), contrast x U(0.5, 1.5), per sample
  translation  shift by up to 1/8 of the size (rounded) in x and y, zero fill: x' = T_y @ x @ T_x^T with
               per-sample 0/1 shift matrices
  cutout       zero a square of half the size at a random place (a per-sample 0/1 mask)
A new policy is one host `draw_*`, one device `apply_*`, and a line in POLICIES.
"""
import numpy as np
from mindspore import ops


def draw_color(rng, n, shape):
    return (rng.uniform(size=(n, 3, 1, 1, 1)).astype(np.float32),)


def apply_color(x, factors):
    brightness, saturation, contrast = factors[:, 0], factors[:, 1], factors[:, 2]
    x = x + (brightness - 0.5)
    mean = x.mean(axis=1, keep_dims=True)
    x = (x - mean) * (saturation * 2.0) + mean
    mean = x.mean(axis=(1, 2, 3), keep_dims=True)
    return (x - mean) * (contrast + 0.5) + mean


def shift_matrices(shifts, size):
    """(n, size, size) 0/1 matrices M with (M @ v)[i] = v[i - shift] (zero where out of range)."""
    eye = np.eye(size, dtype=np.float32)
    out = np.zeros((len(shifts), size, size), np.float32)
    for k, s in enumerate(shifts):
        out[k] = np.roll(eye, s, axis=0)
        if s > 0:
            out[k, :s] = 0
        elif s < 0:
            out[k, s:] = 0
    return out


def draw_translation(rng, n, shape, ratio=0.125):
    h, w = shape[1], shape[2]
    # the reference implementation's rounding: int(size * ratio + 0.5) (28x28: +-4 px, 8x8: +-1 px)
    dy, dx = int(h * ratio + 0.5), int(w * ratio + 0.5)
    sy = rng.integers(-dy, dy + 1, n)
    sx = rng.integers(-dx, dx + 1, n)
    return shift_matrices(sy, h)[:, None], shift_matrices(sx, w)[:, None].transpose(0, 1, 3, 2)


def apply_translation(x, rows, cols_t):
    return ops.matmul(ops.matmul(rows, x), cols_t)


def draw_cutout(rng, n, shape, ratio=0.5):
    h, w = shape[1], shape[2]
    ch, cw = int(h * ratio + 0.5), int(w * ratio + 0.5)
    cy = rng.integers(0, h + (1 - ch % 2), n)
    cx = rng.integers(0, w + (1 - cw % 2), n)
    mask = np.ones((n, 1, h, w), np.float32)
    for k in range(n):
        mask[k, :, max(0, cy[k] - ch // 2):max(0, cy[k] - ch // 2 + ch), max(0, cx[k] - cw // 2):max(0, cx[k] - cw // 2 + cw)] = 0
    return (mask,)


def apply_cutout(x, mask):
    return x * mask


POLICIES = {
    "color": (draw_color, apply_color),
    "translation": (draw_translation, apply_translation),
    "cutout": (draw_cutout, apply_cutout),
}


def parse(spec):
    """'color,translation' -> ('color', 'translation'); unknown names raise ValueError."""
    names = tuple(n.strip() for n in spec.split(",") if n.strip())
    bad = [n for n in names if n not in POLICIES]
    if bad:
        raise ValueError(f"unknown DiffAugment policy {bad[0]!r} (valid: {', '.join(POLICIES)})")
    return names


def draw(rng, policies, n, shape):
    """Host tensors for one augmentation of n samples: a flat tuple, policy by policy."""
    out = ()
    for name in policies:
        out += POLICIES[name][0](rng, n, shape)
    return out


def arity(policies, shape=(1, 8, 8)):
    """How many host tensors one augmentation of `policies` takes (the same for every image shape)."""
    return len(draw(np.random.default_rng(0), policies, 1, shape))


def apply(x, params, policies):
    """Apply `policies` in order with the host-drawn params (graph-safe: a static unrolled loop)."""
    i = 0
    for name in policies:
        fn = POLICIES[name][1]
        if name == "translation":
            x = fn(x, params[i], params[i + 1])
            i += 2
        else:
            x = fn(x, params[i])
            i += 1
    return x
