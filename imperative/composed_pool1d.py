"""F.max_pool1d, F.avg_pool1d, F.adaptive_avg_pool1d and F.adaptive_max_pool1d as PyTorch's,
on (N, C, L) or unbatched (C, L), composed of the 2-D ops on a unit height: the Pooling op
with a (1, k) window, and F.adaptive_*_pool2d with output size (1, m). Gradients,
recomputation and traces come with those ops. The functional API re-exports them."""
from __future__ import annotations

from typing import Sequence

from . import _core
from . import ops as O
from ._types import TensorLike
from .composed_conv_norm import single_int
from .composed_resize import adaptive_avg_pool2d, adaptive_max_pool2d
from .creation import _as_tensor
from .ops.base import cached_op
from .tensor import Tensor

__all__ = ["max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
           "check_pool1d", "check_output_size1d"]

_apply1 = _core.apply_one


def check_pool1d(fn, kernel_size, stride, padding, ceil_mode=False, dilation=1,
                 return_indices=False):
    """(kernel, stride, padding) as ints, checked as PyTorch checks them; the options this
    package lacks are NotImplementedError."""
    k = single_int(kernel_size, f"{fn}: kernel_size", 1)
    s = k if stride is None or stride == () else single_int(stride, f"{fn}: stride", 1)
    p = single_int(padding, f"{fn}: padding", 0)
    if 2 * p > k:
        raise ValueError(f"{fn}: padding must be at most half of kernel_size, got "
                         f"padding={p}, kernel_size={k}")
    if ceil_mode:
        raise NotImplementedError(f"{fn}: ceil_mode=True is not supported")
    if single_int(dilation, f"{fn}: dilation", 1) != 1:
        raise NotImplementedError(f"{fn}: dilation other than 1 is not supported, got "
                                  f"{dilation!r}")
    if return_indices:
        raise NotImplementedError(f"{fn}: return_indices=True is not supported")
    return k, s, p


def _as_nc1l(x, fn):
    """x (N, C, L) or (C, L) as (N, C, 1, L), and the function giving the result its form."""
    if x.ndim not in (2, 3):
        raise ValueError(f"{fn}: input must be 2-D (C, L) or 3-D (N, C, L), got shape "
                         f"{x.shape}")
    batched = x.ndim == 3
    x4 = x.reshape((x.shape[0] if batched else 1, x.shape[-2], 1, x.shape[-1]))

    def back(y):
        return y.reshape((y.shape[0], y.shape[1], y.shape[3]) if batched else
                         (y.shape[1], y.shape[3]))
    return x4, back


def _pool1d(fn, mode, input, k, s, p):
    x = _as_tensor(input)
    x4, back = _as_nc1l(x, fn)
    if x.shape[-1] + 2 * p < k:
        raise ValueError(f"{fn}: input length {x.shape[-1]} with padding {p} on each side is "
                         f"shorter than kernel_size {k}")
    return back(_apply1(cached_op(O.Pooling, mode, (1, k), (1, s), (0, p)), x4))


def max_pool1d(input: TensorLike, kernel_size: int, stride: int | None = None,
               padding: int = 0, dilation: int = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor:
    """The max over windows of `kernel_size` along the last axis (stride None: kernel_size;
    the padding never wins). dilation 1, ceil_mode and return_indices False only."""
    k, s, p = check_pool1d("max_pool1d", kernel_size, stride, padding, ceil_mode, dilation,
                           return_indices)
    return _pool1d("max_pool1d", "MAX", input, k, s, p)


def avg_pool1d(input: TensorLike, kernel_size: int, stride: int | None = None,
               padding: int = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """The mean over windows of `kernel_size` along the last axis; the padding counts as
    zeros unless `count_include_pad=False` (PyTorch's default True; F.avg_pool2d here always
    excludes it). ceil_mode False only."""
    k, s, p = check_pool1d("avg_pool1d", kernel_size, stride, padding, ceil_mode)
    mode = "AVERAGE" if count_include_pad else "AVERAGE_COUNT_EXCLUDE_PADDING"
    return _pool1d("avg_pool1d", mode, input, k, s, p)


def check_output_size1d(output_size, fn):
    """Adaptive 1-D pooling's output_size: a positive int (or a 1-tuple; None keeps L)."""
    if isinstance(output_size, (tuple, list)) and len(output_size) == 1:
        output_size = output_size[0]
    return None if output_size is None else single_int(output_size, f"{fn}: output_size", 1)


def _adaptive1d(input, output_size, fn, pool2d):
    m = check_output_size1d(output_size, fn)
    x = _as_tensor(input)
    x4, back = _as_nc1l(x, fn)
    if x.shape[-1] < 1:
        raise ValueError(f"{fn}: input {x.shape} has an empty length axis")
    return back(pool2d(x4, (1, x.shape[-1] if m is None else m)))


def adaptive_avg_pool1d(input: TensorLike, output_size: int | Sequence[int]) -> Tensor:
    """The mean over each of PyTorch's adaptive windows along the last axis."""
    return _adaptive1d(input, output_size, "adaptive_avg_pool1d", adaptive_avg_pool2d)


def adaptive_max_pool1d(input: TensorLike, output_size: int | Sequence[int],
                        return_indices: bool = False) -> Tensor:
    """The max over each of PyTorch's adaptive windows along the last axis
    (return_indices is not supported)."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool1d: return_indices=True is not supported")
    return _adaptive1d(input, output_size, "adaptive_max_pool1d", adaptive_max_pool2d)
