"""Selecting ops: Where (elementwise choice by a condition) and Clip."""
import numbers

import numpy as np

from ..backend import native
from ..dtype import dtype_promotion
from .base import (Op, check_arity, promote_inputs, promoted_dtype, reject_quantized,
                   remember, without_dispatch)

_clip = np._core.umath.clip


class Where(Op):
    """`Where()`: numpy.where(condition, x, y) with broadcasting; x and y promoted."""

    def __init__(self):
        pass

    def infer(self, inputs):
        check_arity(self, inputs, 3)
        reject_quantized(self, inputs)
        cond, x, y = inputs
        try:
            shape = np.broadcast_shapes(cond.shape, x.shape, y.shape)
        except ValueError:
            raise ValueError(f"where: condition {cond.shape}, x {x.shape} and y {y.shape} "
                             "cannot be broadcast together") from None
        return ((shape, promote_inputs(self, (x, y))),)

    def kernel(self, cond, x, y):
        dtype = promoted_dtype((x.dtype, y.dtype))
        if x.dtype == dtype == y.dtype:
            return _WHERE(cond, x, y)
        return np.where(cond, x, y).astype(dtype, copy=False)

    def direct_kernel(self, inputs):
        # operands of one dtype: np.where's result has it already, astype has nothing to do
        _, x, y = inputs
        same = x.dtype == y.dtype and promoted_dtype((x.dtype, y.dtype)) == x.dtype
        return (_WHERE, ()) if same else None


_WHERE = native.where_or_numpy or without_dispatch(np.where)
_CLIP_DTYPES = {}   # (plain dtype, type of lower, type of upper) -> the dtype clip computes in


def clip_dtype(dtype, lower, upper):
    """dtype_promotion of a tensor of `dtype` with Python-number bounds (functional.clip
    converts to it first): it depends on the bounds' types only (their category), so it
    is memoised by them."""
    key = (dtype, type(lower), type(upper))
    found = _CLIP_DTYPES.get(key) if dtype.metadata is None else None
    if found is None:
        found = dtype_promotion([dtype, lower, upper])
        if dtype.metadata is None:
            remember(_CLIP_DTYPES, key, found, 256)
    return found


def _check_bound(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"clip: {name} must be a number or None, got {type(value).__name__}")
    return value


class Clip(Op):
    """`Clip(lower=None, upper=None)`: numpy.clip with scalar bounds (None: unbounded) in
    the input's dtype. The bounds are cast to that dtype, so `functional.clip` promotes an
    integer tensor to float32 first when a bound is a float (as `int_tensor + 1.5` does);
    that keeps equal ops (`Clip(0, 1) == Clip(0.0, 1.0)`) equal in behaviour too."""

    _fields = ("lower", "upper")
    INPLACE_CAPABLE = True

    def __init__(self, lower=None, upper=None):
        if lower is None and upper is None:
            raise ValueError("clip: at least one of lower and upper must be given")
        self._set(lower=_check_bound(lower, "lower"), upper=_check_bound(upper, "upper"),
                  _bounds={})

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        return ((inputs[0].shape, inputs[0].dtype),)

    def _bound(self, value, dtype):
        # a 0-d array of x's dtype: numpy then neither upcasts nor overflows
        if value is None:
            return None
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            value = min(max(int(value), info.min), info.max)
        return np.asarray(value).astype(dtype)

    def _bounds_for(self, dtype):
        """(lower, upper) as _bound makes them, memoised per plain dtype."""
        found = self._bounds.get(dtype) if dtype.metadata is None else None
        if found is None:
            found = (self._bound(self.lower, dtype), self._bound(self.upper, dtype))
            if dtype.metadata is None:
                remember(self._bounds, dtype, found, 64)
        return found

    def _call(self, dtype):
        """(ufunc, bounds): the one call clipping a value of `dtype` makes, its bounds cast
        to that dtype. The ufuncs np.clip calls (numpy's _methods._clip), without its
        Python layers."""
        lower, upper = self._bounds_for(dtype)
        if lower is None:
            return np.minimum, (upper,)
        if upper is None:
            return np.maximum, (lower,)
        return _clip, (lower, upper)

    def direct_kernel(self, inputs):
        dtype = inputs[0].dtype
        return self._call(dtype) if dtype.metadata is None else None

    def kernel(self, x, out=None):
        ufunc, bounds = self._call(x.dtype)
        return ufunc(x, *bounds, out=out)
