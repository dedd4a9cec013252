"""Ops that join, split, select and create tensors: Concat, Split, Where, Clip, and the
creation ops Fill, Arange, Linspace (no inputs; their infer names the device)."""
import math
import numbers

import numpy as np

from .. import dtype as D
from .._core import as_device, get_default_device
from .base import Op, check_arity, normalize_axis, reject_quantized
from .shape import check_shape_arg, check_size

__all__ = ["Concat", "Split", "Where", "Clip", "Fill", "Arange", "Linspace"]

_FLOAT32 = np.dtype(np.float32)


def _promote_inputs(op, inputs):
    """The one dtype several data inputs are promoted to (numpy's rule, then downcast)."""
    reject_quantized(op, inputs)
    return D.dtype_promotion([t.dtype for t in inputs])


class Concat(Op):
    """`Concat(axis=0)`: numpy.concatenate of one or more inputs, promoted to one dtype."""

    _fields = ("axis",)

    def __init__(self, axis=0):
        self._set(axis=int(axis))

    def infer(self, inputs):
        if not inputs:
            raise ValueError("concat: needs at least one tensor, got none")
        first = inputs[0].shape
        if not first:
            raise ValueError("concat: zero-dimensional tensors cannot be concatenated "
                             "(use stack)")
        axis = normalize_axis(self.axis, len(first), "concat")
        for i, t in enumerate(inputs[1:], 1):
            same_rest = len(t.shape) == len(first) and all(
                a == b for d, (a, b) in enumerate(zip(t.shape, first)) if d != axis)
            if not same_rest:
                raise ValueError(f"concat: tensor {i} has shape {t.shape}, expected the shape "
                                 f"of tensor 0 {first} except along axis {axis}")
        shape = list(first)
        shape[axis] = sum(t.shape[axis] for t in inputs)
        return ((tuple(shape), _promote_inputs(self, inputs)),)

    def kernel(self, *arrays):
        dt = D.dtype_promotion([a.dtype for a in arrays])
        return np.concatenate(arrays, axis=self.axis, dtype=dt)


def _split_points(spec, size, axis):
    """Start offsets of every piece after the first (numpy.split's convention)."""
    if isinstance(spec, int):
        if spec <= 0:
            raise ValueError(f"split: number of sections must be positive, got {spec}")
        if size % spec:
            raise ValueError(f"split: axis {axis} of size {size} does not divide into "
                             f"{spec} equal sections")
        return tuple(size // spec * k for k in range(1, spec))
    # numpy clips indices into [0, size]; a decreasing index gives an empty piece
    return tuple(min(max(i + size if i < 0 else i, 0), size) for i in spec)


class Split(Op):
    """`Split(axis, sections_or_indices)`: numpy.split. An int N gives N equal pieces; a
    tuple of indices gives the pieces between them. Outputs are views of the input."""

    _fields = ("axis", "sections_or_indices")
    ALIASES_INPUT = True

    def __init__(self, axis, sections_or_indices):
        spec = sections_or_indices
        if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
            spec = int(spec)
        elif isinstance(spec, (tuple, list)) and all(
                isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in spec):
            spec = tuple(int(i) for i in spec)
        else:
            raise TypeError(f"split: indices_or_sections must be an int or a sequence of ints, "
                            f"got {sections_or_indices!r}")
        self._set(axis=int(axis), sections_or_indices=spec)

    def _pieces(self, shape):
        axis = normalize_axis(self.axis, len(shape), "split")
        points = _split_points(self.sections_or_indices, shape[axis], axis)
        bounds = (0,) + points + (shape[axis],)
        return axis, [(lo, max(lo, hi)) for lo, hi in zip(bounds, bounds[1:])]

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        (x,) = inputs
        if not x.shape:
            raise ValueError("split: cannot split a zero-dimensional tensor")
        axis, pieces = self._pieces(x.shape)
        return tuple((x.shape[:axis] + (hi - lo,) + x.shape[axis + 1:], x.dtype)
                     for lo, hi in pieces)

    def kernel(self, x):
        axis, pieces = self._pieces(x.shape)
        head = (slice(None),) * axis
        return tuple(x[head + (slice(lo, hi),)] for lo, hi in pieces)


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
        return ((shape, _promote_inputs(self, (x, y))),)

    def kernel(self, cond, x, y):
        dt = D.dtype_promotion([x.dtype, y.dtype])
        return np.where(cond, x, y).astype(dt, copy=False)


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
        self._set(lower=_check_bound(lower, "lower"), upper=_check_bound(upper, "upper"))

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

    def kernel(self, x, out=None):
        return np.clip(x, self._bound(self.lower, x.dtype), self._bound(self.upper, x.dtype), out=out)


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


def _creation_shape(shape, what):
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
        self._set(shape=_creation_shape(shape, "full"), value=value, dtype=dt,
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
        return np.linspace(self.start, self.stop, self.num, endpoint=self.endpoint).astype(self.dtype)
