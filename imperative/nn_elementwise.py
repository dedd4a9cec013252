"""PyTorch's elementwise layers beyond the contract's: Identity, LeakyReLU, Softplus, Mish,
Hardswish, Hardsigmoid, PReLU, Softmax, LogSoftmax and Dropout2d (imperative.nn re-exports
them). PyTorch's `inplace=` is accepted and has no effect: values are immutable here, so
the result is always a new tensor."""
from __future__ import annotations

import numbers
from typing import Any

from . import functional as F
from . import random as R
from .composed_activations import softplus_beta
from .creation import _as_tensor
from .module import Module, check_positive_int
from .ops.base import check_real
from ._types import TensorLike
from .tensor import Parameter, Tensor

__all__ = ["Identity", "LeakyReLU", "Softplus", "Mish", "Hardswish", "Hardsigmoid", "PReLU",
           "Softmax", "LogSoftmax", "Dropout2d"]


def check_probability(module, p):
    """Dropout's p as a float in [0, 1), or a ValueError naming the module."""
    p = check_real(p, module, "p")
    if not 0 <= p < 1:
        raise ValueError(f"{module}: p must be in [0, 1), got {p}")
    return p


class Identity(Module):
    """Returns its input; any constructor arguments are ignored (as PyTorch's)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class LeakyReLU(Module):
    """x where x >= 0, else negative_slope * x (F.leaky_relu)."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = check_real(negative_slope, "LeakyReLU", "negative_slope")

    def forward(self, x: TensorLike) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, and x where beta * x > threshold, as PyTorch's."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = check_real(beta, "Softplus", "beta")
        self.threshold = check_real(threshold, "Softplus", "threshold")
        if self.beta == 0:
            raise ValueError("Softplus: beta must be non-zero, got 0")

    def forward(self, x: TensorLike) -> Tensor:
        return softplus_beta(x, self.beta, self.threshold)


class Mish(Module):
    """x * tanh(softplus(x)) (F.mish)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()

    def forward(self, x: TensorLike) -> Tensor:
        return F.mish(x)


class Hardswish(Module):
    """x * relu6(x + 3) / 6 (F.hardswish)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()

    def forward(self, x: TensorLike) -> Tensor:
        return F.hardswish(x)


class Hardsigmoid(Module):
    """relu6(x + 3) / 6 (F.hardsigmoid)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()

    def forward(self, x: TensorLike) -> Tensor:
        return F.hardsigmoid(x)


class PReLU(Module):
    """x where x > 0, else weight * x, with a learnt slope: one (num_parameters=1) or one
    per channel (axis 1); weight (num_parameters,) starts at `init`."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25) -> None:
        super().__init__()
        self.num_parameters = check_positive_int("PReLU", "num_parameters", num_parameters)
        self.weight = Parameter(F.full((self.num_parameters,), check_real(init, "PReLU", "init"),
                                       "float32"))

    def forward(self, x: TensorLike) -> Tensor:
        return F.prelu(x, self.weight)


class _AlongDim(Module):
    """A function along `dim` (PyTorch's keyword; `axis` here)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        if dim is None:
            # PyTorch guesses a dim with a deprecation warning; guessing hides mistakes
            raise ValueError(f"{name}: give dim (the axis to normalise over); PyTorch's "
                             f"implicit choice when dim is None is not supported")
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"{name}: dim must be an int, got {dim!r}")
        self.dim = int(dim)


class Softmax(_AlongDim):
    """exp(x) / sum(exp(x)) along dim (F.softmax)."""

    def forward(self, x: TensorLike) -> Tensor:
        return F.softmax(x, self.dim)


class LogSoftmax(_AlongDim):
    """log(softmax(x)) along dim (F.log_softmax)."""

    def forward(self, x: TensorLike) -> Tensor:
        return F.log_softmax(x, self.dim)


class Dropout2d(Module):
    """Zeroes whole channels in training: each (image, channel) of x (N, C, ...) with
    probability p, the rest scaled by 1 / (1 - p); x itself in eval mode. A 3-D input is
    taken as (N, C, L), as PyTorch does (it warns)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        self.p = check_probability("Dropout2d", p)

    def forward(self, x: TensorLike) -> Tensor:
        x = _as_tensor(x)
        if x.ndim not in (3, 4):
            raise ValueError(f"Dropout2d: input must be 3-D or 4-D (N, C, ...), got {x.shape}")
        if not self.training or self.p == 0:
            return x
        channels = F.zeros(x.shape[:2] + (1,) * (x.ndim - 2), x.dtype, x.device)
        return x * (R.dropout_mask(channels, self.p) * (1.0 / (1.0 - self.p)))
