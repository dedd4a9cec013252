"""F.cumsum and F.cumprod (torch's, `axis` for `dim`) on the Cumulative op
(imperative/ops/scan.py), whose rules (autodiff/rules_scan.py) give a cumsum the reversed
cumsum of dy as gradient and a cumprod the exact one, zeros included."""
from __future__ import annotations

from . import _core
from ._types import TensorLike
from .creation import _as_tensor
from .ops.base import cached_op, normalize_axis
from .ops.scan import Cumulative
from .tensor import Tensor

__all__ = ["cumsum", "cumprod"]


def _cumulative(mode, fn, x, axis):
    x = _as_tensor(x)
    if axis is None:            # numpy's: over the flattened tensor
        x, axis = x.reshape(-1), 0
    axis_ = normalize_axis(axis, x.ndim, fn)
    if x.ndim == 0:             # one value along one axis, as in PyTorch
        return _cumulative(mode, fn, x.reshape(1), 0).reshape(())
    return _core.apply_one(cached_op(Cumulative, mode, axis_), x)


def cumsum(x: TensorLike, axis: int | None = None) -> Tensor:
    """Running sums along axis (torch.cumsum; None: of the flattened tensor, as
    numpy.cumsum); integers and bools sum in int32 (PyTorch:
    int64). The gradient is the running sum of dy from the end."""
    return _cumulative("SUM", "cumsum", x, axis)


def cumprod(x: TensorLike, axis: int | None = None) -> Tensor:
    """Running products along axis (torch.cumprod; None: of the flattened tensor);
    integers and bools in int32. The
    gradient is exact where x has zeros (no division by x); it is not differentiable
    twice."""
    return _cumulative("PROD", "cumprod", x, axis)
