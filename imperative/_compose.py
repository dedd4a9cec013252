"""The ops that the composed PyTorch functions (losses.py, distances.py, activations.py,
cumulative.py) call, as small functions on Tensors.

Those modules are re-exported by the functional API, so they cannot import it (no import
circle): they call the ops through these instead. Every function here issues one existing
op, so gradients, recomputation under a memory manager and traces come with it."""
from __future__ import annotations

from . import _core
from . import ops as O
from .creation import _as_tensor
from .ops.base import cached_op, float_dtype
from .tensor import Tensor

__all__ = ["elemwise", "exp", "log", "log1p", "softplus", "sigmoid", "sqrt", "maximum",
           "minimum", "where", "reduce", "along", "as_float", "scalar", "class_axis_shape"]

_apply1 = _core.apply_one


def elemwise(mode: str):
    """A function applying Elemwise `mode` to Tensors."""
    op = cached_op(O.Elemwise, mode)

    def fn(*tensors: Tensor) -> Tensor:
        return _apply1(op, *tensors)
    fn.__name__ = mode.lower()
    return fn


exp, log, log1p = elemwise("EXP"), elemwise("LOG"), elemwise("LOG1P")
softplus, sigmoid, sqrt = elemwise("SOFTPLUS"), elemwise("SIGMOID"), elemwise("SQRT")
_max, _min = elemwise("MAX"), elemwise("MIN")
_WHERE = cached_op(O.Where)


def scalar(value, like: Tensor) -> Tensor:
    """A 0-d Tensor of `value` in `like`'s dtype and on its device (it broadcasts)."""
    return Tensor(value, dtype=like.dtype, device=like.device)


def _operand(value, like):
    return value if isinstance(value, Tensor) else scalar(value, like)


def maximum(x: Tensor, y) -> Tensor:
    """Elementwise maximum; `y` may be a Python number."""
    return _max(x, _operand(y, x))


def minimum(x: Tensor, y) -> Tensor:
    """Elementwise minimum; `y` may be a Python number."""
    return _min(x, _operand(y, x))


def where(condition: Tensor, x, y) -> Tensor:
    """`x` where `condition`, else `y`; one of them may be a Python number (in the other's
    dtype). The gradient reaches only the branch taken."""
    like = x if isinstance(x, Tensor) else y
    return _apply1(_WHERE, condition, _operand(x, like), _operand(y, like))


def reduce(mode: str, x: Tensor, axis=None, keepdims: bool = False) -> Tensor:
    """Reduce `mode` ("SUM", "MEAN", "MAX", ...) over `axis` (an int, a tuple or None: all)."""
    return _apply1(cached_op(O.Reduce, mode, axis, bool(keepdims)), x)


def along(op_class, x: Tensor, axis: int) -> Tensor:
    """The op of `op_class` (Softmax, LogSoftmax) along `axis`."""
    return _apply1(cached_op(op_class, axis), x)


def as_float(x, device=None) -> Tensor:
    """x as a Tensor of a float dtype (integers and bools become float32)."""
    x = _as_tensor(x, device)
    dtype = float_dtype([x.dtype])
    return x if x.dtype == dtype else x.astype(dtype)


def class_axis_shape(ndim: int, axis: int) -> tuple[int, ...]:
    """The shape of a (classes,) vector laid along `axis` (non-negative) of an ndim-d
    tensor, to broadcast against it."""
    return (-1,) + (1,) * (ndim - 1 - axis)
