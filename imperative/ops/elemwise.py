"""Elementwise ops: one `Elemwise(mode)` op over a table of modes."""
import numpy as np

from ..dtype import downcast, dtype_promotion
from .base import Op, check_arity, reject_quantized

_FLOAT32 = np.dtype(np.float32)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


# mode -> (function, number of inputs, kind)
#   "arith":   result in the promoted dtype (numpy's own loop decides, then downcast)
#   "float":   float-only math: integer and bool inputs compute in float32
#   "compare": bool result
_MODES = {
    "ADD": (np.add, 2, "arith"),
    "SUB": (np.subtract, 2, "arith"),
    "MUL": (np.multiply, 2, "arith"),
    "TRUE_DIV": (np.true_divide, 2, "float"),
    "FLOOR_DIV": (np.floor_divide, 2, "arith"),
    "MOD": (np.remainder, 2, "arith"),
    "POW": (np.power, 2, "arith"),
    "MAX": (np.maximum, 2, "arith"),
    "MIN": (np.minimum, 2, "arith"),
    "AND": (np.bitwise_and, 2, "arith"),
    "OR": (np.bitwise_or, 2, "arith"),
    "XOR": (np.bitwise_xor, 2, "arith"),
    "EQ": (np.equal, 2, "compare"),
    "NE": (np.not_equal, 2, "compare"),
    "LT": (np.less, 2, "compare"),
    "LEQ": (np.less_equal, 2, "compare"),
    "GT": (np.greater, 2, "compare"),
    "GEQ": (np.greater_equal, 2, "compare"),
    "NEGATE": (np.negative, 1, "arith"),
    "ABS": (np.absolute, 1, "arith"),
    "NOT": (np.invert, 1, "arith"),
    "RELU": (_relu, 1, "arith"),
    "EXP": (np.exp, 1, "float"),
    "LOG": (np.log, 1, "float"),
    "SQRT": (np.sqrt, 1, "float"),
    "TANH": (np.tanh, 1, "float"),
    "SIGMOID": (_sigmoid, 1, "float"),
}


def modes():
    return tuple(_MODES)


class Elemwise(Op):
    """`Elemwise(mode)`: numpy broadcasting; inputs promoted to one dtype first."""

    _fields = ("mode",)
    INPLACE_CAPABLE = True

    def __init__(self, mode):
        if not isinstance(mode, str) or mode.upper() not in _MODES:
            raise ValueError(f"unknown Elemwise mode {mode!r}; valid modes: {', '.join(_MODES)}")
        mode = mode.upper()
        fn, nin, kind = _MODES[mode]
        self._set(mode=mode, _fn=fn, _nin=nin, _kind=kind, _dtypes={})
        if isinstance(fn, np.ufunc):
            self._set(ufunc=fn)   # the core's fast path: equal shapes and dtypes

    @property
    def name(self):
        return f"Elemwise.{self.mode}"

    def _dtypes_for(self, in_dtypes):
        """(compute dtype, output dtype) for these input dtypes; TypeError if unsupported."""
        key = in_dtypes
        found = self._dtypes.get(key)
        if found is not None:
            return found
        compute = dtype_promotion(list(in_dtypes))
        if self._kind == "float" and compute.kind in "biu":
            compute = _FLOAT32
        if isinstance(self._fn, np.ufunc):
            try:
                out = self._fn.resolve_dtypes((compute,) * self._nin + (None,))[-1]
            except TypeError as e:
                raise TypeError(f"Elemwise {self.mode} does not support dtype {compute}: {e}") from None
            out = downcast(out)
        else:
            out = compute
        found = (compute, out)
        if len(self._dtypes) < 256:
            self._dtypes[key] = found
        return found

    def infer(self, inputs):
        check_arity(self, inputs, self._nin)
        reject_quantized(self, inputs)
        try:
            shape = np.broadcast_shapes(*(t.shape for t in inputs))
        except ValueError:
            raise ValueError(f"Elemwise {self.mode}: shapes "
                             + " and ".join(str(t.shape) for t in inputs)
                             + " cannot be broadcast together") from None
        _, out = self._dtypes_for(tuple(t.dtype for t in inputs))
        return ((shape, out),)

    def kernel(self, *arrays, out=None):
        """`out`: a buffer of the output's shape and dtype the result may be written to
        (the runtime passes a dying input's storage); the returned array is the result."""
        compute, out_dtype = self._dtypes_for(tuple(a.dtype for a in arrays))
        arrays = [a if a.dtype == compute else a.astype(compute) for a in arrays]
        if out is not None and compute == out_dtype and isinstance(self._fn, np.ufunc):
            return self._fn(*arrays, out=out)
        r = np.asarray(self._fn(*arrays))
        return r if r.dtype == out_dtype else r.astype(out_dtype)
