"""Reductions: `Reduce(mode, axis, keepdims)` and `Argmax`/`Argmin`."""
import math

import numpy as np

from ..backend import native
from ..dtype import downcast
from .base import (Op, check_arity, normalize_axes, normalize_axis, reject_quantized,
                   remember)

_INT32 = np.dtype(np.int32)
_FLOAT32 = np.dtype(np.float32)
_FLOAT16 = np.dtype(np.float16)


def _reduce_with(ufunc):
    # ufunc.reduce directly: np.sum & co. add ~0.6 us of Python wrapping per call.
    def run(x, axis, keepdims, dtype):
        return ufunc.reduce(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return run


# (from 1024 slices: a batch of 256's bias gradient keeps numpy's pass)
_PAIRWISE_FROM = 1024
_CASCADE_BLOCK = 16        # slices added one after another before their sums are summed
#                            (16: the error of PyTorch's column sums, measured)
_CASCADE_MIN_WIDTH = 64    # kept values under which a transposed copy costs little
_FEW_SLICES = 16           # at most this many reduced values per result: add the slices
_MANY_RESULTS = 4096       # ... where there are at least this many results


def _own_sum(shape, axes, dtype):
    """Whether a float sum over `axes` of an array of `shape` takes one of _float_sum's own
    paths rather than np.add.reduce in one call: when a reduced axis other than the last
    is long (numpy's error would grow with it), or when few values make each of many
    results along the last axis (numpy's loop along it would be a few values long)."""
    if dtype.kind != "f" or not axes:
        return False
    if _long_axis(shape, axes):
        return True
    reduced = math.prod(shape[a] for a in axes)
    return (len(shape) - 1 in axes and 1 < reduced <= _FEW_SLICES
            and math.prod(shape) // reduced >= _MANY_RESULTS)


def _long_axis(shape, axes):
    """A reduced axis other than the last is long enough for numpy's error to show."""
    return any(shape[a] >= _PAIRWISE_FROM for a in axes if a != len(shape) - 1)


def _cascade_rows(rows, dtype):
    """The column sums of a C-contiguous 2-D array: blocks of _CASCADE_BLOCK rows summed
    one row after another (numpy's vectorised loop), then the blocks' sums the same way,
    level after level: the rounding error grows with the block and the number of levels,
    not with the number of rows, in one pass over the data (pairwise sums need a
    transposed copy, twenty times slower for a bias gradient)."""
    while rows.shape[0] > _CASCADE_BLOCK:
        whole = rows.shape[0] // _CASCADE_BLOCK * _CASCADE_BLOCK
        sums = np.add.reduce(rows[:whole].reshape(-1, _CASCADE_BLOCK, rows.shape[1]),
                             axis=1, dtype=dtype)
        if whole < rows.shape[0]:
            rest = np.add.reduce(rows[whole:], axis=0, dtype=dtype, keepdims=True)
            sums = np.concatenate([sums, rest])
        rows = sums
    return np.add.reduce(rows, axis=0, dtype=dtype)


def _sum_of_slices(x, axes, dtype):
    """The sum over `axes` (few values each) as the slices at each reduced index added one
    after another: a handful of passes, each a long loop (an upsampling's gradient, a sum
    over axes of length 2, was 17x faster than numpy's reduction)."""
    total = None
    for index in np.ndindex(*(x.shape[a] for a in axes)):
        where = [slice(None)] * x.ndim
        for a, i in zip(axes, index):
            where[a] = i
        part = x[tuple(where)]
        if total is None:
            total = part.astype(dtype or x.dtype, copy=True)
        else:
            np.add(total, part, out=total)
    return total


def _float_sum(x, axis, keepdims, dtype):
    """np.add.reduce, except where _own_sum says numpy's loop is inaccurate or slow. numpy
    sums pairwise along the last axis only; along the others it adds one slice after
    another, so the rounding error grows with the axis' length (a gradient summed over a
    4800-long broadcast axis was 30x further from float64 than PyTorch's): such sums are
    cascaded (_cascade_rows) where the reduced axes lead a C-contiguous array with wide
    rows, else pairwise over a copy with the reduced axes last. Few values per result are
    added slice by slice (_sum_of_slices)."""
    axes = normalize_axes(axis, x.ndim, "sum")
    long_axis = _long_axis(x.shape, axes)
    if not _own_sum(x.shape, axes, x.dtype) or long_axis and x.flags.c_contiguous and (
            axes == tuple(range(axes[0], x.ndim))):
        # (reduced axes that are the last ones of a C-contiguous array are already one run)
        return np.add.reduce(x, axis=axis, dtype=dtype, keepdims=keepdims)
    kept = [a for a in range(x.ndim) if a not in axes]
    kept_shape = [x.shape[a] for a in kept]
    width = math.prod(kept_shape)
    if not long_axis:
        total = _sum_of_slices(x, axes, dtype)
    elif x.flags.c_contiguous and axes == tuple(range(len(axes))) and (
            width >= _CASCADE_MIN_WIDTH):
        total = _cascade_rows(x.reshape(-1, width), dtype).reshape(kept_shape)
    else:
        runs = np.ascontiguousarray(x.transpose(kept + list(axes))).reshape(
            kept_shape + [x.size // max(width, 1)])
        total = np.add.reduce(runs, axis=-1, dtype=dtype)
    return total.reshape(_reduced_shape(x.shape, axes, True)) if keepdims else total


def _sum_sqr(x, axis, keepdims, dtype):
    return _float_sum(np.square(x), axis, keepdims, dtype)


def _mean_accumulator(dtype):
    """The dtype a float mean sums and divides in: float32 for float16, as numpy's mean
    (in float16 the sum overflows past 65504, and so does the count: n / inf gave 0)."""
    return _FLOAT32 if dtype == _FLOAT16 else None


def _mean(x, axis, keepdims, dtype):
    if x.dtype.kind != "f":
        return np.mean(x, axis=axis, keepdims=keepdims)
    count = int(np.prod([x.shape[a] for a in normalize_axes(axis, x.ndim, "mean")]))
    total = _float_sum(x, axis, keepdims, _mean_accumulator(x.dtype))
    with np.errstate(invalid="ignore", divide="ignore"):   # an empty mean is nan, as numpy's
        return np.true_divide(total, count, dtype=total.dtype).astype(x.dtype, copy=False)


# mode -> (kernel(x, axis, keepdims, accumulator dtype), needs a non-empty input, kind)
_MODES = {
    "SUM": (_float_sum, False, "sum"),
    "PRODUCT": (_reduce_with(np.multiply), False, "sum"),
    "SUM_SQR": (_sum_sqr, False, "sum"),
    "MEAN": (_mean, False, "mean"),
    "MAX": (_reduce_with(np.maximum), True, "same"),
    "MIN": (_reduce_with(np.minimum), True, "same"),
}


_OUT_DTYPES = {}   # (mode, input dtype) -> output dtype


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


class Reduce(Op):
    """`Reduce(mode, axis=None, keepdims=False)`; axis is None, an int or a tuple."""

    _fields = ("mode", "axis", "keepdims")

    def __init__(self, mode, axis=None, keepdims=False):
        if not isinstance(mode, str) or mode.upper() not in _MODES:
            raise ValueError(f"unknown Reduce mode {mode!r}; valid modes: {', '.join(_MODES)}")
        if isinstance(axis, list):
            axis = tuple(axis)
        self._set(mode=mode.upper(), axis=axis, keepdims=bool(keepdims), _plans={})

    @property
    def name(self):
        return f"Reduce.{self.mode}"

    def _out_dtype(self, dtype):
        found = _OUT_DTYPES.get((self.mode, dtype))
        if found is None:
            found = _OUT_DTYPES[(self.mode, dtype)] = self._find_out_dtype(dtype)
        return found

    def _find_out_dtype(self, dtype):
        kind = _MODES[self.mode][2]
        if kind == "sum" and dtype.kind in "biu":
            # sum/prod of bool and small ints give int32 (numpy would give int64)
            return _INT32
        if kind == "mean" and dtype.kind in "biu":
            return _FLOAT32
        return downcast(dtype)

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        (x,) = inputs
        axes = normalize_axes(self.axis, len(x.shape), f"Reduce {self.mode}")
        if _MODES[self.mode][1] and any(x.shape[a] == 0 for a in axes) or (
                _MODES[self.mode][1] and not axes and 0 in x.shape):
            raise ValueError(f"Reduce {self.mode} of an empty tensor {x.shape} along axis "
                             f"{self.axis}: the reduction has no identity")
        return ((_reduced_shape(x.shape, axes, self.keepdims), self._out_dtype(x.dtype)),)

    def _plan(self, shape, dtype):
        """(ufunc, axis, accumulator dtype, output dtype, mean's count) for the one-call
        reductions of inputs of this shape and dtype, or False: the plan the kernel runs
        without re-deriving axes and dtypes each call (issue 16)."""
        ndim = len(shape)
        axis = (self.axis if isinstance(self.axis, int) and ndim
                else normalize_axes(self.axis, ndim, self.mode))
        axes = normalize_axes(axis, ndim, "sum")
        own_sum = _own_sum(shape, axes, dtype)
        out = self._out_dtype(dtype)
        kind = _MODES[self.mode][2]
        if self.mode in ("SUM", "PRODUCT") and not (own_sum and self.mode == "SUM"):
            return (np.add if self.mode == "SUM" else np.multiply), axis, out, out, None
        if self.mode in ("MAX", "MIN"):
            return (np.maximum if self.mode == "MAX" else np.minimum), axis, None, out, None
        if kind == "mean" and dtype.kind == "f" and not own_sum:
            count = int(np.prod([shape[a] for a in axes]))
            return (np.add, axis, _mean_accumulator(dtype), out, count) if count else False
        return False

    def direct_kernel(self, inputs):
        # the planned one-call reductions: float32 over all axes or the last, the native
        # loop (numpy's bits; it falls back to the call below for other arrays); else the
        # ones whose result needs no division nor cast, the ufunc's reduce itself
        (x,) = inputs
        plan = self._plan(x.shape, x.dtype) if x.dtype.metadata is None else False
        if not plan:
            return None
        ufunc, axis, acc, out, count = plan
        native_mode = native.REDUCE_MODES.get(self.mode)
        if native_mode is not None and x.dtype == _FLOAT32 == out and x.shape:
            axes = normalize_axes(axis, len(x.shape), self.mode)
            if len(axes) == len(x.shape) or axes == (len(x.shape) - 1,):
                fallback = (self.kernel, ()) if count is not None else (
                    ufunc.reduce, (axis, acc, None, self.keepdims))
                return native.reduce_rows_or, (native_mode, len(axes) < len(x.shape),
                                               _reduced_shape(x.shape, axes, self.keepdims),
                                               *fallback)
        if count is not None or (acc is None and x.dtype != out):
            return None
        return ufunc.reduce, (axis, acc, None, self.keepdims)

    def kernel(self, x):
        plan = self._plans.get((x.shape, x.dtype))
        if plan is None and x.dtype.metadata is None:
            plan = self._plan(x.shape, x.dtype)
            remember(self._plans, (x.shape, x.dtype), plan, 64)
        if plan:
            ufunc, axis, acc, out, count = plan
            r = ufunc.reduce(x, axis, acc, None, self.keepdims)   # (positional: parsed faster)
            if count is not None:           # (in the accumulator's dtype: _mean_accumulator)
                r = np.true_divide(r, count, dtype=r.dtype)
            return r if r.dtype == out else r.astype(out)
        axis = (self.axis if isinstance(self.axis, int) and x.ndim
                else normalize_axes(self.axis, x.ndim, self.mode))
        run, _, kind = _MODES[self.mode]
        out = self._out_dtype(x.dtype)
        # sums accumulate in the output dtype (int32 for small ints, as the contract says)
        r = run(x, axis, self.keepdims, out if kind == "sum" else None)
        return r if r.dtype == out else r.astype(out)


class _ArgReduce(Op):
    _fields = ("axis", "keepdims")
    _fn = None

    def __init__(self, axis=None, keepdims=False):
        self._set(axis=axis, keepdims=bool(keepdims))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        (x,) = inputs
        if 0 in x.shape:
            raise ValueError(f"{type(self).__name__} of an empty tensor {x.shape}")
        if self.axis is None:
            shape = (1,) * len(x.shape) if self.keepdims else ()
        else:
            a = normalize_axis(self.axis, len(x.shape), type(self).__name__)
            shape = _reduced_shape(x.shape, (a,), self.keepdims)
        return ((shape, _INT32),)

    def kernel(self, x):
        fn = type(self)._fn
        if self.axis is None:
            r = fn(x.reshape(-1))
            r = np.reshape(r, (1,) * x.ndim) if self.keepdims else np.asarray(r)
        else:
            r = fn(x, axis=self.axis, keepdims=self.keepdims)
        return np.asarray(r).astype(_INT32)


class Argmax(_ArgReduce):
    _fn = staticmethod(np.argmax)


class Argmin(_ArgReduce):
    _fn = staticmethod(np.argmin)
