"""Creation ops: Fill, Arange, Linspace (no inputs; their infer names the device)."""
import math
import numbers

import numpy as np

from .. import dtype as D
from .._core import as_device, get_default_device
from .base import Op, check_arity
from .shape import check_shape_arg, check_size

_FLOAT32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Creation ops: no inputs, so infer names the output's device.


def _creation_dtype(dtype, *values):
    """An explicit dtype (plain, not quantized), or the dtype Python values default to."""
    if dtype is None:
        return D.dtype_promotion(list(values))
    dt = D.canonical_dtype(dtype)
    if D.is_quantize(dt):
        raise TypeError(f"creation ops make plain dtypes, got {D.dtype_name(dt)}; "
                        "create float32 values and use astype(...)")
    return dt


def _check_number(value, what):
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a Python number, got {type(value).__name__}")
    return value


def creation_shape(shape, what):
    shape = check_shape_arg(shape, what)
    if any(s < 0 for s in shape):
        raise ValueError(f"{what}: negative dimension in shape {shape}")
    return shape


def _device_name(device):
    return str(as_device(get_default_device() if device is None else device))


class _Creation(Op):
    """Shared infer of ops without inputs: the shape, dtype and device they were built with."""

    def _shape(self):
        return self.shape

    def infer(self, inputs):
        check_arity(self, inputs, 0)
        return ((self._shape(), self.dtype, self.device),)


class Fill(_Creation):
    """`Fill(shape, value, dtype=None, device=None)`: a tensor of one value (zeros, ones,
    full). dtype None: from the value (bool, int -> int32, float -> float32)."""

    _fields = ("shape", "value", "dtype", "device")

    def __init__(self, shape, value, dtype=None, device=None):
        value = _check_number(value, "fill value")
        dt = _creation_dtype(dtype, value)
        try:                            # a value the dtype cannot hold raises here, not later
            np.full((), value, dtype=dt)
        except OverflowError:
            raise OverflowError(f"full: the fill value {value} does not fit "
                                f"{D.dtype_name(dt)}") from None
        self._set(shape=creation_shape(shape, "full"), value=value, dtype=dt,
                  device=_device_name(device))

    def kernel(self):
        return np.full(self.shape, self.value, dtype=self.dtype)


class Arange(_Creation):
    """`Arange(start, stop, step=1, dtype=None, device=None)`: numpy.arange. dtype None:
    int32 when every argument is an int, else float32."""

    _fields = ("start", "stop", "step", "dtype", "device")

    def __init__(self, start, stop, step=1, dtype=None, device=None):
        start, stop, step = (_check_number(v, "arange argument") for v in (start, stop, step))
        what = f"arange({start}, {stop}, {step})"
        if step == 0:
            raise ValueError(f"{what}: step must not be zero")
        if not all(isinstance(v, int) or math.isfinite(v) for v in (start, stop, step)):
            raise ValueError(f"{what}: start, stop and step must be finite")
        check_size(self._length(start, stop, step, what), what)
        self._set(start=start, stop=stop, step=step,
                  dtype=_creation_dtype(dtype, start, stop, step), device=_device_name(device))

    @staticmethod
    def _length(start, stop, step, what="arange"):
        """numpy's length rule: ceil((stop - start) / step), at least 0."""
        try:
            span = (stop - start) / step
        except OverflowError:          # ints whose quotient is past a float's range
            span = math.inf
        if math.isinf(span):
            raise ValueError(f"{what}: too many elements for an array")
        return (max(0, math.ceil(span)),)

    def _shape(self):
        return self._length(self.start, self.stop, self.step)

    def kernel(self):
        # computed in numpy's default precision, then cast, so values equal numpy's
        return np.arange(self.start, self.stop, self.step).astype(self.dtype)


class Linspace(_Creation):
    """`Linspace(start, stop, num=50, endpoint=True, dtype=None, device=None)`:
    numpy.linspace; dtype None gives float32."""

    _fields = ("start", "stop", "num", "endpoint", "dtype", "device")

    def __init__(self, start, stop, num=50, endpoint=True, dtype=None, device=None):
        start, stop = (_check_number(v, "linspace argument") for v in (start, stop))
        if not isinstance(num, numbers.Integral) or isinstance(num, bool) or num < 0:
            raise ValueError(f"linspace: num must be a non-negative int, got {num!r}")
        check_size((num,), "linspace")
        self._set(start=start, stop=stop, num=int(num), endpoint=bool(endpoint),
                  dtype=_FLOAT32 if dtype is None else _creation_dtype(dtype),
                  device=_device_name(device))

    def _shape(self):
        return (self.num,)

    def kernel(self):
        return np.linspace(self.start, self.stop, self.num,
                           endpoint=self.endpoint).astype(self.dtype)
