"""y = w*x + b: the regression baseline's model."""
from mindspore import nn


class Linear(nn.Cell):
    """One dense unit. Weights start at zero, as in the classic example, so runs differ only by data."""

    def __init__(self, in_features=1):
        super().__init__()
        self.dense = nn.Dense(in_features, 1, weight_init="zeros", bias_init="zeros")

    def construct(self, x):
        return self.dense(x)
