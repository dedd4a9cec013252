"""PyTorch's 1-D pooling layers (imperative.nn re-exports them): MaxPool1d, AvgPool1d,
AdaptiveAvgPool1d and AdaptiveMaxPool1d, each its functional (imperative/composed_pool1d.py)
with the arguments checked when the module is made."""
from __future__ import annotations

from typing import Sequence

from .composed_pool1d import (adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d,
                              check_output_size1d, check_pool1d, max_pool1d)
from .module import Module
from ._types import TensorLike
from .tensor import Tensor

__all__ = ["MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d"]


class MaxPool1d(Module):
    """The max over windows of x (N, C, L) or (C, L) (F.max_pool1d)."""

    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0,
                 dilation: int = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        check_pool1d("MaxPool1d", kernel_size, stride, padding, ceil_mode, dilation,
                     return_indices)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: TensorLike) -> Tensor:
        return max_pool1d(x, self.kernel_size, self.stride, self.padding)


class AvgPool1d(Module):
    """The mean over windows of x (N, C, L) or (C, L) (F.avg_pool1d; the padding counts as
    zeros unless count_include_pad=False, as PyTorch's)."""

    def __init__(self, kernel_size: int, stride: int | None = None, padding: int = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        check_pool1d("AvgPool1d", kernel_size, stride, padding, ceil_mode)
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x: TensorLike) -> Tensor:
        return avg_pool1d(x, self.kernel_size, self.stride, self.padding,
                          count_include_pad=self.count_include_pad)


class AdaptiveAvgPool1d(Module):
    """The mean over PyTorch's adaptive windows along the last axis."""

    def __init__(self, output_size: int | Sequence[int]) -> None:
        super().__init__()
        check_output_size1d(output_size, "AdaptiveAvgPool1d")
        self.output_size = output_size

    def forward(self, x: TensorLike) -> Tensor:
        return adaptive_avg_pool1d(x, self.output_size)


class AdaptiveMaxPool1d(Module):
    """The max over PyTorch's adaptive windows along the last axis."""

    def __init__(self, output_size: int | Sequence[int], return_indices: bool = False) -> None:
        super().__init__()
        check_output_size1d(output_size, "AdaptiveMaxPool1d")
        if return_indices:
            raise NotImplementedError("AdaptiveMaxPool1d: return_indices=True is not supported")
        self.output_size = output_size

    def forward(self, x: TensorLike) -> Tensor:
        return adaptive_max_pool1d(x, self.output_size)
