"""F.norm: vector norms (torch.linalg.vector_norm, `axis` for `dim`), and F.var / F.std,
composed of abs, sums, max/min and sqrt, so gradients come with those ops."""
from __future__ import annotations

import math

import numpy as np

from . import _core
from . import ops as O
from ._types import AxisLike, TensorLike
from ._compose import reduce
from .creation import _as_tensor
from .ops.base import cached_op, check_real, float_dtype, normalize_axes
from .tensor import Tensor

__all__ = ["norm", "var", "std"]


def _root(total, p):
    """total ** (1 / p), with a zero gradient where total is 0 (as PyTorch's norm at a zero
    vector): the root reads 1 there, its branch is not taken, and where's gradient of the
    branch not taken is 0, not 0 * inf. Only a total of 0 is masked: a nan (a nan in the
    vector) stays nan, as numpy's and PyTorch's norms give (masked on `total > 0`, it
    read 0)."""
    where = cached_op(O.Where)
    nonzero = total != 0
    one, zero = (Tensor(v, dtype=total.dtype, device=total.device) for v in (1, 0))
    safe = _core.apply_one(where, nonzero, total, one)
    root = _core.apply_one(cached_op(O.Elemwise, "SQRT"), safe) if p == 2 else safe ** (1 / p)
    return _core.apply_one(where, nonzero, root, zero)


def norm(x: TensorLike, ord: float = 2, axis: AxisLike = None,
         keepdims: bool = False) -> Tensor:
    """The vector `ord`-norm of x over axis (None: all elements as one vector):
    sum(|x| ** ord) ** (1 / ord) for ord > 0 (1 and 2 computed directly), max |x| for inf,
    min |x| for -inf, the count of non-zeros for 0. Integers give float32. The gradient at
    a zero vector is 0 (ord >= 1), as PyTorch's; for 0 < ord < 1 it is not finite there."""
    x = _as_tensor(x)
    if x.dtype.kind != "f":
        x = x.astype(float_dtype([x.dtype]))
    p = check_real(ord, "norm", "ord")
    if p < 0 and p != -math.inf:
        raise ValueError(f"norm: ord must be >= 0, inf or -inf for a vector norm, got {ord!r}")
    axes = normalize_axes(tuple(axis) if isinstance(axis, list) else axis, x.ndim, "norm")
    keepdims = bool(keepdims)
    if p == 0:
        return reduce("SUM", (x != 0).astype(x.dtype), axes, keepdims)
    if math.isinf(p):
        if any(x.shape[a] == 0 for a in axes):
            raise ValueError(f"norm: ord={ord} of an empty tensor {x.shape} is undefined")
        return reduce("MAX" if p > 0 else "MIN", abs(x), axes, keepdims)
    if p == 1:
        return reduce("SUM", abs(x), axes, keepdims)
    powered = x * x if p == 2 else abs(x) ** Tensor(np.asarray(p, x.dtype), device=x.device)
    return _root(reduce("SUM", powered, axes, keepdims), p)


def var(x: TensorLike, axis: AxisLike = None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """Variance over `axis`, numpy.var: mean squared deviation, divided by N - ddof."""
    x = _as_tensor(x)
    dtype = float_dtype([x.dtype])
    # float16 in float32, rounded once at the end (as PyTorch, and numpy's mean): in float16
    # the sums of squares overflow, and a count past 65504 is inf (docs/api.md §2)
    x = x.astype(np.float32 if dtype == np.float16 else dtype)
    axes = normalize_axes(tuple(axis) if isinstance(axis, list) else axis, x.ndim, "var")
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    deviation = x - reduce("MEAN", x, axes, True)
    # N - ddof <= 0 divides by zero: inf or nan, as in numpy
    result = reduce("SUM_SQR", deviation, axes, keepdims) / float(max(count - ddof, 0))
    return result.astype(dtype)


def std(x: TensorLike, axis: AxisLike = None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """Standard deviation over `axis`: sqrt(var(x, axis, keepdims, ddof)). Its gradient
    is 0 where the variance is 0 (a constant slice), as PyTorch's: sqrt's 1 / 0 there,
    times var's 0, was nan; _root masks it as the norm's at a zero vector."""
    return _root(var(x, axis, keepdims, ddof), 2)
