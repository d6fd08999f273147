"""FusedAdam (one ops.Adam kernel per parameter) against mindspore.experimental.optim.Adam."""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, ops

from loops.optim import FusedAdam, make_optimizer


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_fused_adam_matches_experimental_adam(graph_mode, weight_decay):
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,)]]
    grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in start] for _ in range(5)]
    results = []
    for fused in (False, True):
        params = [Parameter(Tensor(a.copy()), f"w{i}") for i, a in enumerate(start)]
        if fused:
            opt = FusedAdam(params, 0.01, (0.5, 0.99), weight_decay=weight_decay)
        else:
            opt = make_optimizer("adam", params, 0.01, "m.", (0.5, 0.99), weight_decay)

        @ms.jit
        def update(g0, g1):
            return ops.depend(g0.sum(), opt((g0, g1)))
        for g in grads:
            update(Tensor(g[0]), Tensor(g[1]))
        results.append([p.asnumpy() for p in params])
        assert not np.allclose(results[-1][0], start[0])  # it moved
    for a, b in zip(*results):
        # ops.Adam adds eps to sqrt(v) before bias correction, torch-style Adam after: ~1e-7 apart
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
