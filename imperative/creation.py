"""Creation and device functions of the functional API (`imperative.functional`, which
re-exports them): tensors filled with a value, ranges, copies to a device, and the
conversion of user data to a Tensor that every function of `F` starts with."""
from __future__ import annotations

from . import _core
from . import dtype as D
from . import ops as O
from ._core import TensorBase, as_device
from ._types import DTypeLike, DeviceLike, ShapeLike, TensorLike
from .ops.base import cached_op
from .ops.creation import creation_shape
from .tensor import Tensor

_apply1 = _core.apply_one


def _as_tensor(value, device=None):
    """A Tensor for `value`: Tensors unchanged, other data by Tensor()'s own dtype rules."""
    if isinstance(value, TensorBase):
        return value
    if value is None:
        raise TypeError("expected a Tensor, an array or a number, got None")
    return Tensor(value, device=device)


def _device_name(device):
    return str(as_device(_core.get_default_device() if device is None else device))


def _creation_dtype(dtype, *values):
    # resolved before interning: cached_op keys compare 1 == 1.0 == True
    return D.dtype_promotion(list(values)) if dtype is None else D.canonical_dtype(dtype)


def full(shape: ShapeLike, value: float, dtype: DTypeLike | None = None,
        device: DeviceLike | None = None) -> Tensor:
    """A tensor of `shape` filled with `value`; dtype None: from the value (bool, int ->
    int32, float -> float32)."""
    return _full(shape, value, dtype, device, "full")


def _full(shape, value, dtype, device, what):
    """`full`, its shape errors naming `what`, the function the user called."""
    return _apply1(cached_op(O.Fill, creation_shape(shape, what), value,
                             _creation_dtype(dtype, value), _device_name(device)))


def zeros(shape: ShapeLike, dtype: DTypeLike = "float32",
        device: DeviceLike | None = None) -> Tensor:
    """A tensor of zeros."""
    return _full(shape, 0, dtype, device, "zeros")


def ones(shape: ShapeLike, dtype: DTypeLike = "float32",
        device: DeviceLike | None = None) -> Tensor:
    """A tensor of ones."""
    return _full(shape, 1, dtype, device, "ones")


def full_like(x: TensorLike, value: float, dtype: DTypeLike | None = None,
        device: DeviceLike | None = None) -> Tensor:
    """A tensor of x's shape (and dtype and device unless given) filled with `value`."""
    x = _as_tensor(x)
    return full(x.shape, value, x.dtype if dtype is None else dtype,
                x.device if device is None else device)


def zeros_like(x: TensorLike, dtype: DTypeLike | None = None,
        device: DeviceLike | None = None) -> Tensor:
    """zeros of x's shape, dtype and device."""
    return full_like(x, 0, dtype, device)


def ones_like(x: TensorLike, dtype: DTypeLike | None = None,
        device: DeviceLike | None = None) -> Tensor:
    """ones of x's shape, dtype and device."""
    return full_like(x, 1, dtype, device)


def arange(start: float, stop: float | None = None, step: float = 1,
        dtype: DTypeLike | None = None, device: DeviceLike | None = None) -> Tensor:
    """numpy.arange: `arange(stop)` or `arange(start, stop, step)`; dtype None: int32 when
    every argument is an int, else float32."""
    if stop is None:
        start, stop = 0, start
    return _apply1(cached_op(O.Arange, start, stop, step, _creation_dtype(dtype, start, stop, step),
                             _device_name(device)))


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True,
        dtype: DTypeLike = "float32", device: DeviceLike | None = None) -> Tensor:
    """numpy.linspace: `num` evenly spaced values from start to stop."""
    return _apply1(cached_op(O.Linspace, start, stop, num, bool(endpoint),
                             _creation_dtype(dtype), _device_name(device)))


def copy(x: TensorLike, device: DeviceLike | None = None) -> Tensor:
    """A copy of x on `device` (x's own device when None)."""
    x = _as_tensor(x)
    return _apply1(cached_op(O.Copy, _device_name(x.device if device is None else device)), x)
