"""F.gather, F.scatter, F.scatter_add, F.index_select and F.index_add: PyTorch's functions of
the same names (`axis` for `dim`), out of place, composed of the indexing ops.

torch.gather(x, axis, index) picks x[index[i][j]][j] (axis 0), which is numpy's advanced
index x[index, grid] with a grid of positions along every other axis; the scatters write or
add at that index (IndexingSetMultiAxisVec, IndexingIncrMultiAxisVec, whose kernel is
numpy.add.at: repeated indices accumulate). So gradients, recomputation under a memory
manager and traces come with those ops: a gather's gradient is a scatter-add into zeros, a
scatter-add's is dy for x and a gather of dy for src. No new op.

The index is checked where the function is called: an integer tensor (int32; other integer
dtypes are converted) whose values lie in [0, size) along the axis: reading them is one
sync. Negative indices are refused, as PyTorch refuses them."""
from __future__ import annotations

import numpy as np

from . import _core
from . import ops as O
from ._types import TensorLike
from .creation import _as_tensor
from .ops.base import cached_op, normalize_axis
from .ops.indexing import TENSOR, IndexingIncrMultiAxisVec
from .tensor import Tensor

__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add"]

_apply1 = _core.apply_one
_ALL = ("slice", None, None, None)        # the item of a `:`


# ---------------------------------------------------------------------------------------
# Checks at the call site


def as_index(index, fn, device=None, name="index"):
    """`index` as an int32 Tensor; TypeError unless it holds integers."""
    index = _as_tensor(index, device)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {name} must be an integer tensor, got dtype {index.dtype} "
                        f"(convert it with astype('int32'))")
    return index if index.dtype == np.int32 else index.astype("int32")


def check_range(index, size, fn, axis, name="index"):
    """IndexError naming the first value of `index` outside [0, size) (one sync)."""
    values = index.numpy()
    bad = np.argwhere((values < 0) | (values >= size))
    if len(bad):
        where = tuple(int(i) for i in bad[0])
        raise IndexError(f"{fn}: {name}{list(where)} = {values[where]} is out of range for "
                         f"axis {axis} of size {size}: it must lie in [0, {size})")


def _check_dims(fn, axis, index, *others):
    """PyTorch's shape rules of gather and the scatters: one number of dimensions, and the
    index no larger than each of `others` (name, shape, whether the axis itself counts)."""
    for name, shape, along_axis_too in others:
        if len(shape) != index.ndim:
            raise ValueError(f"{fn}: index has {index.ndim} dimension(s) and {name} "
                             f"{len(shape)}: they must have the same number")
        for d, (n, m) in enumerate(zip(index.shape, shape)):
            if n > m and (along_axis_too or d != axis):
                raise ValueError(f"{fn}: index {index.shape} is larger than {name} {shape} "
                                 f"along axis {d}")


def _same_dtype(fn, x, src):
    if src.dtype != x.dtype:
        raise TypeError(f"{fn}: src has dtype {src.dtype} and x {x.dtype}: convert src "
                        f"with astype('{x.dtype}') first")


def _prepared(fn, x, axis, index):
    """(x, its axis as a non-negative int, index as int32) for gather and the scatters."""
    x = _as_tensor(x)
    axis_ = normalize_axis(axis, x.ndim, fn)
    return x, axis_, as_index(index, fn, x.device)


# ---------------------------------------------------------------------------------------
# The index along an axis as a numpy advanced index


def _grid(index, axis, device):
    """The index arrays of `x[grid_0, ..., index, ..., grid_n]`: positions 0..n-1 along
    each other axis, shaped to broadcast against the index."""
    ndim = index.ndim
    arrays = [index if d == axis else
              Tensor(np.arange(n, dtype=np.int32).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1)),
                     device=device)
              for d, n in enumerate(index.shape)]
    return (TENSOR,) * ndim, arrays


def _as_1d(t):
    return t.reshape(1) if t.ndim == 0 else t


def take_along(x, axis, index):
    """torch.gather without the checks (the sorts call it with indices of their own)."""
    if x.ndim == 0:                         # one value along one axis, as in PyTorch
        return take_along(_as_1d(x), 0, _as_1d(index)).reshape(())
    items, arrays = _grid(index, axis, x.device)
    return _apply1(cached_op(O.IndexingMultiAxisVec, items), x, *arrays)


def _scatter_op(op_class, x, axis, index, src):
    """x with src written (or added) at index along axis, by the op given."""
    if x.ndim == 0:
        return _scatter_op(op_class, _as_1d(x), 0, _as_1d(index), _as_1d(src)).reshape(())
    if src.ndim and src.shape != index.shape:     # PyTorch uses the index's corner of src
        src = src[tuple(slice(0, n) for n in index.shape)]
    items, arrays = _grid(index, axis, x.device)
    return _apply1(cached_op(op_class, items), x, src, *arrays)


# ---------------------------------------------------------------------------------------
# The functions


def gather(x: TensorLike, axis: int, index: TensorLike) -> Tensor:
    """torch.gather: out[i][j] = x[index[i][j]][j] for axis 0 (x[i][index[i][j]] for axis
    1, ...). index has x's number of dimensions, no larger than x along the other axes;
    the result has index's shape. The gradient adds dy into zeros at the index (repeated
    indices accumulate)."""
    x, axis_, index = _prepared("gather", x, axis, index)
    _check_dims("gather", axis_, index, ("x", x.shape, False))
    check_range(index, x.shape[axis_] if x.ndim else 1, "gather", axis)
    return take_along(x, axis_, index)


def _checked_scatter(fn, x, axis, index, src):
    x, axis_, index = _prepared(fn, x, axis, index)
    _same_dtype(fn, x, src)
    _check_dims(fn, axis_, index, ("x", x.shape, False), ("src", src.shape, True))
    check_range(index, x.shape[axis_] if x.ndim else 1, fn, axis)
    return x, axis_, index


def scatter_add(x: TensorLike, axis: int, index: TensorLike, src: TensorLike) -> Tensor:
    """torch.scatter_add, out of place: a copy of x with src[i][j] added at
    [index[i][j]][j] (axis 0); repeated indices accumulate. src has x's dtype and number of
    dimensions; only its corner of index's shape is used. Gradients: dy for x, a gather of
    dy at the index for src."""
    src = _as_tensor(src)
    x, axis_, index = _checked_scatter("scatter_add", x, axis, index, src)
    return _scatter_op(IndexingIncrMultiAxisVec, x, axis_, index, src)


def scatter(x: TensorLike, axis: int, index: TensorLike, src: TensorLike | float) -> Tensor:
    """torch.scatter, out of place: a copy of x with src[i][j] written at [index[i][j]][j]
    (axis 0). src is a tensor as scatter_add's, or a number written everywhere the index
    points (PyTorch's `value`). Where the index repeats a position, which write wins is
    unspecified, as in PyTorch (here the last one, numpy's order). Gradients: dy for x
    except at the written positions, a gather of dy for src."""
    x = _as_tensor(x)
    if isinstance(src, (bool, int, float)):
        src = Tensor(src, dtype=x.dtype, device=x.device).broadcast_to(_as_tensor(index).shape)
    src = _as_tensor(src)
    x, axis_, index = _checked_scatter("scatter", x, axis, index, src)
    return _scatter_op(O.IndexingSetMultiAxisVec, x, axis_, index, src)


def _along_axis(fn, x, axis, index):
    """(x, axis, index as a checked 1-d int32 tensor, the items of x[:, ..., index])."""
    x = _as_tensor(x)
    axis_ = normalize_axis(axis, x.ndim, fn)
    index = as_index(index, fn, x.device)
    if index.ndim > 1:
        raise ValueError(f"{fn}: index must be 0-d or 1-d, got shape {index.shape}")
    index = _as_1d(index)
    if x.ndim == 0 and index.shape[0] != 1:
        raise ValueError(f"{fn}: x is 0-d, so the index must hold one value, got "
                         f"{index.shape[0]}")
    check_range(index, x.shape[axis_] if x.ndim else 1, fn, axis)
    return _as_1d(x), axis_, index, (_ALL,) * axis_ + (TENSOR,)


def index_select(x: TensorLike, axis: int, index: TensorLike) -> Tensor:
    """torch.index_select: the slices of x at the (0-d or 1-d) index along axis, in the
    index's order (repeats allowed). The gradient adds dy into zeros at the index."""
    ndim = _as_tensor(x).ndim
    x, axis_, index, items = _along_axis("index_select", x, axis, index)
    out = _apply1(cached_op(O.IndexingMultiAxisVec, items), x, index)
    return out.reshape(()) if ndim == 0 else out


def index_add(x: TensorLike, axis: int, index: TensorLike, src: TensorLike,
              alpha: float = 1) -> Tensor:
    """torch.index_add, out of place: a copy of x with alpha * src[..., i, ...] added at
    x[..., index[i], ...] along axis; repeated indices accumulate. src has x's dtype and
    shape except len(index) along axis. Gradients: dy for x, dy at the index (times
    alpha) for src."""
    x0, src = _as_tensor(x), _as_tensor(src)
    x, axis_, index, items = _along_axis("index_add", x0, axis, index)
    _same_dtype("index_add", x, src)
    want = x.shape[:axis_] + (index.shape[0],) + x.shape[axis_ + 1:]
    if _as_1d(src).shape != want:
        raise ValueError(f"index_add: src has shape {src.shape}; for x {x0.shape} and "
                         f"{index.shape[0]} indices along axis {axis} it must be {want}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or (
            x.dtype.kind in "iu" and not isinstance(alpha, int)):
        raise TypeError(f"index_add: alpha must be a number (an int for x of dtype "
                        f"{x.dtype}), got {alpha!r}")
    if alpha != 1:
        src = src * Tensor(alpha, dtype=src.dtype, device=src.device)
    out = _apply1(cached_op(IndexingIncrMultiAxisVec, items), x, _as_1d(src), index)
    return out.reshape(()) if x0.ndim == 0 else out
