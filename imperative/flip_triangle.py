"""F.flip, F.tril and F.triu (PyTorch's, `axis` for `dims` and `k` for `diagonal`), composed:
a flip is a slice with step -1 (a view, whose gradient is the slice back), tril and triu a
`where` with a constant mask (the gradient is dy where the mask holds)."""
from __future__ import annotations

import operator

import numpy as np

from . import _core
from . import ops as O
from ._types import AxisLike, TensorLike
from .creation import _as_tensor
from .ops.base import cached_op, normalize_axes
from .tensor import Tensor
from .torch_hints import keyword_hints

__all__ = ["flip", "tril", "triu"]


def flip(x: TensorLike, axis: AxisLike) -> Tensor:
    """x with the order of its elements reversed along axis (an int, a tuple of them, or
    None for every axis), as torch.flip and numpy.flip."""
    x = _as_tensor(x)
    axes = normalize_axes(tuple(axis) if isinstance(axis, list) else axis, x.ndim, "flip")
    if not axes:
        return _core.apply_one(cached_op(O.Identity), x)  # a new Tensor, as for any flip
    return x[tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))]


def _triangle(fn, x, k, lower):
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"{fn}: x must have at least 2 dimensions (a matrix, or a batch of "
                         f"them), got shape {x.shape}")
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"{fn}: k must be an int, got {type(k).__name__}") from None
    rows, cols = x.shape[-2:]
    # np.tri(k): True on and below the k-th diagonal; triu keeps its complement at k - 1
    mask = np.tri(rows, cols, k if lower else k - 1, dtype=bool)
    mask = Tensor(mask if lower else ~mask, device=x.device)
    zero = Tensor(0, dtype=x.dtype, device=x.device)
    return _core.apply_one(cached_op(O.Where), mask, x, zero)


@keyword_hints
def tril(x: TensorLike, k: int = 0) -> Tensor:
    """The lower triangle of the last two axes, on and below the k-th diagonal (k > 0
    above the main one, k < 0 below); zeros elsewhere. torch.tril(x, diagonal=k)."""
    return _triangle("tril", x, k, True)


@keyword_hints
def triu(x: TensorLike, k: int = 0) -> Tensor:
    """The upper triangle of the last two axes, on and above the k-th diagonal; zeros
    elsewhere. torch.triu(x, diagonal=k)."""
    return _triangle("triu", x, k, False)
