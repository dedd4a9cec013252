"""F.logsumexp, F.one_hot and F.pad: PyTorch habits composed of existing ops (docs/api.md).

Each is a few reductions, elementwise ops, concats and splits, so gradients, recomputation
under a memory manager, traces and the ONNX export come with those ops; no new op. The
functional API re-exports them (this module does not import it: no import circle)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import _core
from ._compose import reduce
from . import ops as O
from ._types import AxisLike, TensorLike
from .creation import _as_tensor, arange, full
from .ops.base import cached_op, check_real, float_dtype, normalize_axes
from .ops.shape import pad_widths
from .composed_resize import index_pad
from .tensor import Tensor

__all__ = ["logsumexp", "one_hot", "pad"]

_apply1 = _core.apply_one
_EXP = cached_op(O.Elemwise, "EXP")
_LOG = cached_op(O.Elemwise, "LOG")
_WHERE = cached_op(O.Where)
_IDENTITY = cached_op(O.Identity)
_INDEX_PAD_MODES = ("reflect", "replicate", "circular")


def logsumexp(x: TensorLike, axis: AxisLike, keepdims: bool = False) -> Tensor:
    """log(sum(exp(x), axis)), computed stably as torch.logsumexp: max(x) along axis is
    taken out first (detached: it cancels in the value, so the gradient is softmax(x)
    along axis). A shift of +-inf is taken as 0, so a row of -inf gives -inf (with a zero
    gradient) and a +inf gives +inf. Integers give float32; an axis of size 0 gives -inf."""
    x = _as_tensor(x)
    if x.dtype.kind not in "fc":
        x = x.astype(float_dtype([x.dtype]))
    axes = normalize_axes(tuple(axis) if isinstance(axis, list) else axis, x.ndim, "logsumexp")
    keepdims = bool(keepdims)
    if any(x.shape[a] == 0 for a in axes):
        return reduce("SUM", x, axes, keepdims) + float("-inf")    # still reads x
    top = reduce("MAX", x, axes, True).detach()
    zero, one = (Tensor(v, dtype=x.dtype, device=x.device) for v in (0, 1))
    shift = _apply1(_WHERE, abs(top) < float("inf"), top, zero)
    total = reduce("SUM", _apply1(_EXP, x - shift), axes, True)
    # a row of -inf sums to 0: log(1) + -inf instead, without log(0)'s numpy warning
    empty = top == float("-inf")
    out = (_apply1(_LOG, _apply1(_WHERE, empty, one, total))
           + _apply1(_WHERE, top < float("inf"), top, zero))
    if keepdims or not axes:
        return out
    return _apply1(cached_op(O.RemoveAxis, axes), out)


def _check_num_classes(num_classes):
    if (isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer))
            or num_classes < 1):
        raise (ValueError if isinstance(num_classes, (int, np.integer))
               and not isinstance(num_classes, bool) else TypeError)(
            f"one_hot: num_classes must be a positive int, got {num_classes!r} "
            f"({type(num_classes).__name__})")
    return int(num_classes)


def one_hot(labels: TensorLike, num_classes: int) -> Tensor:
    """float32 (*labels.shape, num_classes): 1 at each label's class, 0 elsewhere, as
    torch.nn.functional.one_hot (whose result is int64; float32 is what a loss multiplies
    by). The labels are read to check that they lie in [0, num_classes): one sync."""
    num_classes = _check_num_classes(num_classes)
    labels = _as_tensor(labels)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"one_hot: labels must be an integer tensor, got dtype "
                        f"{labels.dtype} of shape {labels.shape}")
    values = labels.numpy()
    bad = np.argwhere((values < 0) | (values >= num_classes))
    if len(bad):
        where = tuple(int(i) for i in bad[0])
        raise IndexError(f"one_hot: label {values[where]} (labels{list(where)}) is out of "
                         f"range for num_classes={num_classes}: labels must be in "
                         f"[0, {num_classes})")
    classes = arange(num_classes, dtype=labels.dtype, device=labels.device)
    hit = _apply1(cached_op(O.AddAxis, -1), labels) == classes
    return hit.astype("float32")


def pad(x: TensorLike, pad: Sequence[int], mode: str = "constant",
        value: float = 0.0) -> Tensor:
    """torch.nn.functional.pad: `pad` is (before, after) pairs from the last axis backwards
    ((left, right, top, bottom) for the last two). Constant mode: the new places hold
    `value`, and a negative width crops, as PyTorch's; composed of a split (cropping) and a
    concat with filled tensors per changed axis, so the gradient is the slice back. Modes
    "reflect", "replicate" and "circular" gather x's own values (composed_resize.py)."""
    if mode in _INDEX_PAD_MODES:
        return index_pad(_as_tensor(x), pad, mode)
    if mode != "constant":
        raise ValueError(f"pad: mode must be 'constant' or one of {_INDEX_PAD_MODES}, "
                         f"got {mode!r}")
    x = _as_tensor(x)
    value = _pad_value(value, x.dtype)
    widths = pad_widths(pad, x.shape)
    if not widths:
        return _apply1(_IDENTITY, x)        # a new Tensor: `y += 1` must not rebind x
    y = x
    for axis, before, after in widths:
        size = y.shape[axis]
        if before < 0 or after < 0:                 # crop: the middle of three pieces
            cuts = (max(-before, 0), size - max(-after, 0))
            y = _core.apply(cached_op(O.Split, axis, cuts), y)[1]
        fills = [full(y.shape[:axis] + (width,) + y.shape[axis + 1:], value, x.dtype,
                      x.device) if width > 0 else None for width in (before, after)]
        if fills[0] is not None or fills[1] is not None:
            parts = [t for t in (fills[0], y, fills[1]) if t is not None]
            y = _apply1(cached_op(O.Concat, axis), *parts)
    return y


def _pad_value(value, dtype):
    """F.pad's fill value, checked against x's dtype (an integer x takes integers only)."""
    real = check_real(value, "pad", "value")
    if dtype.kind in "iub":
        low, high = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        if not np.isfinite(real) or real != int(real):
            raise ValueError(f"pad: value {value!r} is not an integer, and x is {dtype}")
        if not low <= int(real) <= high:
            raise ValueError(f"pad: value {value!r} does not fit x's dtype {dtype} "
                             f"([{low}, {high}])")
        return int(real)
    return real
