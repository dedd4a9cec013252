"""numpy's protocols for Tensors: `np.add(t, 1)`, `np.sum(t)`, `ndarray + t` give Tensors.

* A ufunc or function with a runtime equivalent (the tables below) runs as ops: it stays
  asynchronous and is recorded for gradients like the operator or `F` call it stands for.
* Anything else runs in numpy on the tensors' values (waiting for them) and its array result
  comes back as a Tensor (the contract's dtype rules apply: float64 → float32); results that
  are not arrays (`np.allclose` → bool, `np.shape` → tuple) come back as they are.
* `out=` takes numpy arrays (the result is written into them, as numpy does); a Tensor as
  `out=` raises TypeError: values are immutable, so assign the result instead.

The Tensor's hooks (`__array_ufunc__`, `__array_function__`) are defined here, above
functional.py whose functions they call, and installed on the Tensor class when this module
is imported (imperative/__init__.py imports it with the rest of the package).
"""
import inspect
import operator

import numpy as np

from . import functional as F
from ._core import TensorBase
from .tensor import Tensor

# ufunc → (method on a Tensor on the left, method on a Tensor on the right)
_BINARY_UFUNCS = {
    np.add: ("__add__", "__radd__"), np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"), np.true_divide: ("__truediv__", "__rtruediv__"),
    np.floor_divide: ("__floordiv__", "__rfloordiv__"), np.remainder: ("__mod__", "__rmod__"),
    np.power: ("__pow__", "__rpow__"), np.matmul: ("__matmul__", "__rmatmul__"),
    np.bitwise_and: ("__and__", "__rand__"), np.bitwise_or: ("__or__", "__ror__"),
    np.bitwise_xor: ("__xor__", "__rxor__"),
    np.equal: ("__eq__", "__eq__"), np.not_equal: ("__ne__", "__ne__"),
    np.less: ("__lt__", "__gt__"), np.less_equal: ("__le__", "__ge__"),
    np.greater: ("__gt__", "__lt__"), np.greater_equal: ("__ge__", "__le__"),
}

_FUNCTIONAL_UFUNCS = {
    np.negative: F.neg, np.positive: operator.pos, np.absolute: F.abs, np.sign: F.sign,
    np.exp: F.exp, np.expm1: F.expm1, np.log: F.log, np.log1p: F.log1p, np.sqrt: F.sqrt,
    np.sin: F.sin, np.cos: F.cos, np.tan: F.tan, np.tanh: F.tanh, np.floor: F.floor,
    np.ceil: F.ceil, np.trunc: F.trunc, np.maximum: F.maximum, np.minimum: F.minimum,
    np.logical_and: F.logical_and, np.logical_or: F.logical_or, np.logical_xor: F.logical_xor,
    np.logical_not: F.logical_not, np.invert: F.bitwise_not,
}

# numpy function → (F function, {numpy argument name: F argument name})
_REDUCTION_ARGS = {"a": "x", "axis": "axis", "keepdims": "keepdims"}
_FUNCTIONS = {
    np.sum: (F.sum, _REDUCTION_ARGS), np.mean: (F.mean, _REDUCTION_ARGS),
    np.max: (F.max, _REDUCTION_ARGS), np.amax: (F.max, _REDUCTION_ARGS),
    np.min: (F.min, _REDUCTION_ARGS), np.amin: (F.min, _REDUCTION_ARGS),
    np.prod: (F.prod, _REDUCTION_ARGS),
    np.argmax: (F.argmax, _REDUCTION_ARGS), np.argmin: (F.argmin, _REDUCTION_ARGS),
    np.var: (F.var, dict(_REDUCTION_ARGS, ddof="ddof")),
    np.std: (F.std, dict(_REDUCTION_ARGS, ddof="ddof")),
    np.reshape: (F.reshape, {"a": "x", "shape": "shape"}),
    np.transpose: (F.transpose, {"a": "x", "axes": "axes"}),
    np.squeeze: (F.squeeze, {"a": "x", "axis": "axis"}),
    np.expand_dims: (F.expand_dims, {"a": "x", "axis": "axis"}),
    np.broadcast_to: (F.broadcast_to, {"array": "x", "shape": "shape"}),
    np.concatenate: (F.concat, {"arrays": "tensors", "axis": "axis"}),
    np.stack: (F.stack, {"arrays": "tensors", "axis": "axis"}),
    np.where: (F.where, {"condition": "condition", "x": "x", "y": "y"}),
    np.clip: (F.clip, {"a": "x", "a_min": "lower", "a_max": "upper", "min": "lower",
                       "max": "upper"}),
}


def array_ufunc(ufunc, method, inputs, kwargs):
    out = kwargs.pop("out", None)
    if method == "__call__" and not kwargs:
        result = _ufunc_as_ops(ufunc, inputs)
    else:
        result = _in_numpy(getattr(ufunc, method), inputs, kwargs)
    return result if out is None else _write_out(ufunc.__name__, result, out)


def _ufunc_as_ops(ufunc, inputs):
    if ufunc in _BINARY_UFUNCS and len(inputs) == 2:
        left, right = inputs
        forward, reflected = _BINARY_UFUNCS[ufunc]
        if isinstance(left, TensorBase):
            return getattr(left, forward)(right)
        return getattr(right, reflected)(left)
    if ufunc in _FUNCTIONAL_UFUNCS:
        return _FUNCTIONAL_UFUNCS[ufunc](*inputs)
    return _in_numpy(ufunc, inputs, {})


def array_function(func, args, kwargs):
    out = kwargs.pop("out", None)
    result = _function_as_ops(func, args, kwargs)
    if result is NotImplemented:
        result = _in_numpy(func, args, kwargs)
    return result if out is None else _write_out(func.__name__, result, (out,))


def _function_as_ops(func, args, kwargs):
    entry = _FUNCTIONS.get(func)
    if entry is None:
        return NotImplemented
    fn, names = entry
    try:
        bound = _signature(func).bind(*args, **kwargs).arguments
    except TypeError:
        return NotImplemented          # numpy will say what is wrong with the call
    if not set(bound) <= set(names):
        return NotImplemented          # dtype=, where=, ...: numpy does those
    ours = {names[k]: v for k, v in bound.items()}
    try:
        _signature(fn).bind(**ours)
    except TypeError:
        return NotImplemented          # a form F does not have, e.g. np.where(condition)
    return fn(**ours)


_signatures = {}


def _signature(fn):
    """inspect.signature, computed once per function (it costs tens of microseconds)."""
    sig = _signatures.get(fn)
    if sig is None:
        sig = _signatures[fn] = inspect.signature(fn)
    return sig


def _in_numpy(func, args, kwargs):
    result = func(*_to_numpy(args), **_to_numpy(kwargs))
    return _to_tensors(result)


def _to_numpy(obj):
    if isinstance(obj, TensorBase):
        return obj.numpy()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_numpy(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def _to_tensors(result):
    if isinstance(result, (np.ndarray, np.generic)):
        return Tensor(result)
    if isinstance(result, tuple):
        return tuple(_to_tensors(r) for r in result)
    return result


def _write_out(name, result, out):
    if any(isinstance(o, TensorBase) for o in out):
        raise TypeError(f"np.{name}(..., out=<Tensor>): a Tensor cannot be written into, its "
                        "value is immutable; assign the result instead (t = np."
                        f"{name}(...), or t += ... for an in-place rebind)")
    results = result if isinstance(result, tuple) else (result,)
    for target, value in zip(out, results):
        np.copyto(target, np.asarray(value), casting="same_kind")
    return out[0] if len(out) == 1 else out


# --------------------------------------------------------------------------- the Tensor's hooks


def _tensor_array_ufunc(self, ufunc, method, *inputs, **kwargs):
    return array_ufunc(ufunc, method, inputs, kwargs)


def _tensor_array_function(self, func, types, args, kwargs):
    return array_function(func, args, dict(kwargs))


for _name, _hook in (("__array_ufunc__", _tensor_array_ufunc),
                     ("__array_function__", _tensor_array_function)):
    _hook.__name__, _hook.__qualname__ = _name, f"Tensor.{_name}"
    setattr(Tensor, _name, _hook)
