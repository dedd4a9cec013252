"""F.cumsum and F.cumprod (torch.cumsum, torch.cumprod; numpy's axis=None flattens) composed
of existing ops, so their gradients come with those ops (docs/api.md).

A scan in ceil(log2(n)) rounds (Hillis and Steele): each round combines every element with
the one `shift` places before it (the identity before the start), as a split, a concat and
one add or multiply, shift doubling. That is n log n work rather than a loop's n, but
log n ops rather than n, each one vectorized; and the gradient of a product is exact where
a value is 0 (no division by it, as exp(cumsum(log x)) or a quotient would need)."""
from __future__ import annotations

from . import ops as O
from ._core import apply, apply_one
from ._types import TensorLike
from .creation import _as_tensor, full
from .ops.base import cached_op, normalize_axis
from .tensor import Tensor

__all__ = ["cumsum", "cumprod"]

_IDENTITY = cached_op(O.Identity)


def _scan(fn, x, axis, combine, identity):
    x = _as_tensor(x)
    if x.dtype.kind == "b" or (x.dtype.kind in "iu" and x.dtype.itemsize < 4):
        x = x.astype("int32")          # as F.sum: bools and small ints count in int32
    if axis is None:
        x, axis = x.reshape(-1), 0
    elif x.ndim == 0:
        normalize_axis(axis, 0, fn)    # (0 or -1, as PyTorch: its one value)
        return apply_one(_IDENTITY, x)
    axis = normalize_axis(axis, x.ndim, fn)
    n = x.shape[axis]
    y = apply_one(_IDENTITY, x)        # a new Tensor even when nothing is combined
    shift = 1
    while shift < n:
        head = apply(cached_op(O.Split, axis, (n - shift,)), y)[0]
        before = full(x.shape[:axis] + (shift,) + x.shape[axis + 1:], identity, x.dtype,
                      x.device)
        y = combine(y, apply_one(cached_op(O.Concat, axis), before, head))
        shift *= 2
    return y


def cumsum(x: TensorLike, axis: int | None = None) -> Tensor:
    """The running sums along `axis` (None: of the flattened tensor), as torch.cumsum and
    numpy.cumsum; bools and small integers sum in int32."""
    return _scan("cumsum", x, axis, lambda a, b: a + b, 0)


def cumprod(x: TensorLike, axis: int | None = None) -> Tensor:
    """The running products along `axis` (None: of the flattened tensor), as torch.cumprod
    and numpy.cumprod; bools and small integers multiply in int32."""
    return _scan("cumprod", x, axis, lambda a, b: a * b, 1)
