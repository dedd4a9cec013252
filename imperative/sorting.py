"""F.sort, F.argsort and F.topk: PyTorch's functions (`axis` for `dim`), stable.

The positions come from the Argsort op (imperative/ops/sort.py); the values are a gather at
them (gathering.take_along), so a value's gradient goes back to the position it came from
(a scatter of dy) through the indexing ops' own rules."""
from __future__ import annotations

import operator

from . import _core
from ._types import TensorLike
from .creation import _as_tensor
from .gathering import take_along
from .ops.base import cached_op, normalize_axis
from .ops.sort import Argsort
from .tensor import Tensor

__all__ = ["sort", "argsort", "topk"]


def _positions(fn, x, axis, descending, k=None):
    """(x, axis as a non-negative int, Argsort's int32 positions); a 0-d x counts as one
    value along one axis, as in PyTorch."""
    x = _as_tensor(x)
    axis_ = normalize_axis(axis, x.ndim, fn)
    flat = x.reshape(1) if x.ndim == 0 else x
    order = _core.apply_one(cached_op(Argsort, axis_, bool(descending), k), flat)
    return x, axis_, order.reshape(()) if x.ndim == 0 else order


def argsort(x: TensorLike, axis: int = -1, descending: bool = False) -> Tensor:
    """int32 positions that sort x along axis; stable (equal values keep their order),
    NaN sorting as the largest value, as torch.sort(stable=True)."""
    return _positions("argsort", x, axis, descending)[2]


def sort(x: TensorLike, axis: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices): x sorted along axis and the int32 positions the values came from,
    as torch.sort(stable=True). The values' gradient goes back to those positions."""
    x, axis_, order = _positions("sort", x, axis, descending)
    return take_along(x, axis_, order), order


def topk(x: TensorLike, k: int, axis: int = -1, largest: bool = True,
         sorted: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (smallest when not `largest`) elements along
    axis, as torch.topk, largest (smallest) first. Ties are broken by position: of equal
    values the lower position comes first and is the one kept (the first k of a stable
    sort; PyTorch does not specify which). `sorted=False` is accepted and gives the same
    sorted result."""
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"topk: k must be an int, got {type(k).__name__}") from None
    x, axis_, order = _positions("topk", x, axis, largest, k)
    return take_along(x, axis_, order), order
