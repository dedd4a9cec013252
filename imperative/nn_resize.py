"""PyTorch's layers that pad, reshape or resample (imperative.nn re-exports them): ZeroPad2d,
ConstantPad2d, ReflectionPad2d, ReplicationPad2d, Unflatten, PixelShuffle, PixelUnshuffle,
Upsample, AdaptiveAvgPool2d and AdaptiveMaxPool2d. Each is its functional (F.pad,
F.interpolate, ...) with the arguments checked when the module is made."""
from __future__ import annotations

import math
import numbers
from typing import Sequence

from . import functional as F
from .composed_resize import INTERPOLATE_MODES, check_output_size
from .creation import _as_tensor
from .module import Module, check_positive_int
from .ops.base import check_real, normalize_axis
from ._types import TensorLike
from .tensor import Tensor

__all__ = ["ZeroPad2d", "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d", "Unflatten",
           "PixelShuffle", "PixelUnshuffle", "Upsample", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool2d"]


def _int_tuple(value, length, module, name, minimum=None):
    """An int (repeated `length` times) or a tuple of `length` ints, checked."""
    values = (value,) * length if isinstance(value, numbers.Integral) else value
    if (not isinstance(values, (tuple, list)) or len(values) != length
            or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in values)):
        raise TypeError(f"{module}: {name} must be an int or a tuple of {length} ints, "
                        f"got {value!r}")
    if minimum is not None and min(values) < minimum:
        raise ValueError(f"{module}: {name} must be >= {minimum}, got {value!r}")
    return tuple(int(v) for v in values)


class _Pad2d(Module):
    """F.pad of the last two axes of a 3-D or 4-D input by padding (left, right, top,
    bottom), or one int for all four."""
    mode = "constant"

    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__()
        self.padding = _int_tuple(padding, 4, type(self).__name__, "padding")

    def forward(self, x: TensorLike) -> Tensor:
        x = _as_tensor(x)
        if x.ndim not in (3, 4):
            raise ValueError(f"{type(self).__name__}: input must be 3-D (C, H, W) or 4-D "
                             f"(N, C, H, W), got shape {x.shape}")
        return self._pad(x)

    def _pad(self, x):
        return F.pad(x, self.padding, self.mode)


class ConstantPad2d(_Pad2d):
    """Pads with `value`; a negative width crops (as F.pad)."""

    def __init__(self, padding: int | Sequence[int], value: float) -> None:
        super().__init__(padding)
        self.value = check_real(value, "ConstantPad2d", "value")

    def _pad(self, x):
        return F.pad(x, self.padding, "constant", self.value)


class ZeroPad2d(_Pad2d):
    """Pads with zeros; a negative width crops (as F.pad)."""


class ReflectionPad2d(_Pad2d):
    """Pads with the reflection of the input about its edges (each width < that size)."""
    mode = "reflect"


class ReplicationPad2d(_Pad2d):
    """Pads by repeating the input's edge values."""
    mode = "replicate"


class Unflatten(Module):
    """Splits axis `dim` into `unflattened_size` (one entry may be -1), as PyTorch's."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"Unflatten: dim must be an int, got {dim!r}")
        sizes = tuple(unflattened_size) if isinstance(unflattened_size, (tuple, list)) else None
        if (not sizes or any(isinstance(s, bool) or not isinstance(s, numbers.Integral)
                             or s < -1 or s == 0 for s in sizes)
                or sum(s == -1 for s in sizes) > 1):
            raise ValueError(f"Unflatten: unflattened_size must be a non-empty tuple of "
                             f"positive ints (one may be -1), got {unflattened_size!r}")
        self.dim, self.unflattened_size = int(dim), sizes

    def forward(self, x: TensorLike) -> Tensor:
        x = _as_tensor(x)
        axis = normalize_axis(self.dim, x.ndim, "Unflatten")
        known = math.prod(s for s in self.unflattened_size if s != -1)
        if (x.shape[axis] % known if -1 in self.unflattened_size
                else x.shape[axis] != known):
            raise ValueError(f"Unflatten: axis {self.dim} of input {x.shape} (size "
                             f"{x.shape[axis]}) does not split into {self.unflattened_size}")
        return x.reshape(x.shape[:axis] + self.unflattened_size + x.shape[axis + 1:])


class PixelShuffle(Module):
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r) (F.pixel_shuffle)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = check_positive_int("PixelShuffle", "upscale_factor", upscale_factor)

    def forward(self, x: TensorLike) -> Tensor:
        return F.pixel_shuffle(x, self.upscale_factor)


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W) (F.pixel_unshuffle)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = check_positive_int("PixelUnshuffle", "downscale_factor",
                                                   downscale_factor)

    def forward(self, x: TensorLike) -> Tensor:
        return F.pixel_unshuffle(x, self.downscale_factor)


class Upsample(Module):
    """F.interpolate(x, size, scale_factor, mode, align_corners) as a layer."""

    def __init__(self, size: int | Sequence[int] | None = None,
                 scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        if (size is None) == (scale_factor is None):
            raise ValueError("Upsample: give exactly one of size and scale_factor")
        if mode not in INTERPOLATE_MODES:
            raise ValueError(f"Upsample: mode must be one of {INTERPOLATE_MODES}, got {mode!r}")
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: TensorLike) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)


class AdaptiveAvgPool2d(Module):
    """The mean over PyTorch's adaptive windows (F.adaptive_avg_pool2d)."""

    def __init__(self, output_size: int | Sequence[int | None]) -> None:
        super().__init__()
        check_output_size(output_size, "AdaptiveAvgPool2d")
        self.output_size = output_size

    def forward(self, x: TensorLike) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool2d(Module):
    """The maximum over PyTorch's adaptive windows (F.adaptive_max_pool2d); return_indices
    is not supported."""

    def __init__(self, output_size: int | Sequence[int | None],
                 return_indices: bool = False) -> None:
        super().__init__()
        if return_indices:
            raise NotImplementedError("AdaptiveMaxPool2d: return_indices=True is not supported")
        check_output_size(output_size, "AdaptiveMaxPool2d")
        self.output_size = output_size

    def forward(self, x: TensorLike) -> Tensor:
        return F.adaptive_max_pool2d(x, self.output_size)
