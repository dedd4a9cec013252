"""The layers of a feed-forward block (imperative.nn re-exports them): Linear, LayerNorm and
Dropout, with PyTorch's parameters and initialisation."""
from __future__ import annotations

import math

from . import functional as F
from .module import Module, uniform_parameter
from ._types import TensorLike
from .tensor import Parameter, Tensor

__all__ = ["Linear", "LayerNorm", "Dropout"]


class Linear(Module):
    """`y = x @ weight.T + bias`, weight (out_features, in_features), PyTorch's init."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(n, bool) or not hasattr(n, "__index__"):
                raise TypeError(f"Linear: {name} must be an int, got {n!r} "
                                f"({type(n).__name__})")
            if n < 0:
                raise ValueError(f"Linear: {name} must be >= 0, got {n!r}")
        if in_features:
            bound = 1.0 / math.sqrt(in_features)
            self.weight = uniform_parameter((out_features, in_features), bound)
            self.bias = uniform_parameter((out_features,), bound) if bias else None
        else:       # as PyTorch: an empty weight, and a zero bias (its init bound is 0)
            self.weight = Parameter(F.zeros((out_features, 0)))
            self.bias = Parameter(F.zeros((out_features,))) if bias else None

    def forward(self, x: TensorLike) -> Tensor:
        return F.linear(x, self.weight, self.bias)


class LayerNorm(Module):
    """Normalise over the trailing normalized_shape axes, then scale by weight and shift by
    bias (ones and zeros) when elementwise_affine (bias=False: no bias, as PyTorch's)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True) -> None:
        super().__init__()
        shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                 else tuple(normalized_shape))
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(F.ones(shape)) if elementwise_affine else None
        self.bias = Parameter(F.zeros(shape)) if elementwise_affine and bias else None

    def forward(self, x: TensorLike) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Dropout(Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: TensorLike) -> Tensor:
        return F.dropout(x, self.p, training=self.training)
