"""PyTorch's convolution and normalisation layers (imperative.nn re-exports them): Conv1d,
Conv2d, ConvTranspose2d, BatchNorm1d, BatchNorm2d, GroupNorm and InstanceNorm2d, with
PyTorch's parameter names, shapes and initialisation, so that a PyTorch model's state dict
(as arrays) loads into them. BatchNorm keeps no `num_batches_tracked` (docs/api.md)."""
from __future__ import annotations

import math

from . import functional as F
from .composed_conv_norm import single_int
from .creation import _as_tensor
from .module import Module, check_divisible, check_positive_int, uniform_parameter
from .ops.base import check_real
from .ops.nn_common import pair
from ._types import PairLike, TensorLike
from .tensor import Parameter, Tensor

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d", "BatchNorm1d", "BatchNorm2d", "GroupNorm",
           "InstanceNorm2d"]


def _conv_parameters(module, in_channels, out_channels, kernel, groups, bias, transposed):
    """(weight, bias) as PyTorch makes them: weight (out, in/groups, *kernel), or (in,
    out/groups, *kernel) when transposed, and both from U(-b, b), b = 1/sqrt(fan_in), with
    fan_in = weight.shape[1] * prod(kernel)."""
    check_positive_int(module, "in_channels", in_channels)
    check_positive_int(module, "out_channels", out_channels)
    check_positive_int(module, "groups", groups)
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{module}: in_channels {in_channels} and out_channels {out_channels} "
                         f"must be divisible by groups {groups}")
    first, second = (in_channels, out_channels) if transposed else (out_channels, in_channels)
    shape = (first, second // groups) + tuple(kernel)
    bound = 1.0 / math.sqrt(math.prod(shape[1:]))
    return (uniform_parameter(shape, bound),
            uniform_parameter((out_channels,), bound) if bias else None)


_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class Conv1d(Module):
    """Convolution of x (N, C, L), weight (out, in/groups, kernel_size) (F.conv1d);
    padding_mode "zeros", or "reflect", "replicate" or "circular" (F.pad first)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros") -> None:
        super().__init__()
        kernel = single_int(kernel_size, "Conv1d: kernel_size", 1)
        self.stride = single_int(stride, "Conv1d: stride", 1)
        self.padding = single_int(padding, "Conv1d: padding", 0)
        self.dilation = single_int(dilation, "Conv1d: dilation", 1)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"Conv1d: padding_mode must be one of {_PADDING_MODES}, "
                             f"got {padding_mode!r}")
        self.padding_mode, self.groups = padding_mode, groups
        self.weight, self.bias = _conv_parameters("Conv1d", in_channels, out_channels,
                                                  (kernel,), groups, bias, False)

    def forward(self, x: TensorLike) -> Tensor:
        padding = self.padding
        if self.padding_mode != "zeros" and padding:
            x, padding = F.pad(x, (padding, padding), self.padding_mode), 0
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class Conv2d(Module):
    """NCHW convolution, weight (out, in/groups, kh, kw), PyTorch's init."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: PairLike,
                 stride: PairLike = 1, padding: PairLike = 0, dilation: PairLike = 1,
                 groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        self.weight, self.bias = _conv_parameters("Conv2d", in_channels, out_channels,
                                                  pair(kernel_size, "Conv2d: kernel_size"),
                                                  groups, bias, False)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def forward(self, x: TensorLike) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class ConvTranspose2d(Module):
    """Transposed convolution of x (N, C_in, H, W) (F.conv_transpose2d), weight (in,
    out/groups, kh, kw) as PyTorch's; output_padding must be less than stride."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: PairLike,
                 stride: PairLike = 1, padding: PairLike = 0, output_padding: PairLike = 0,
                 groups: int = 1, bias: bool = True, dilation: PairLike = 1,
                 padding_mode: str = "zeros") -> None:
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d: padding_mode must be 'zeros' (as PyTorch's), "
                             f"got {padding_mode!r}")
        self.stride = pair(stride, "ConvTranspose2d: stride")
        self.padding = pair(padding, "ConvTranspose2d: padding")
        self.output_padding = pair(output_padding, "ConvTranspose2d: output_padding")
        self.dilation = pair(dilation, "ConvTranspose2d: dilation")
        if any(o >= s for o, s in zip(self.output_padding, self.stride)):
            raise ValueError(f"ConvTranspose2d: output_padding {output_padding!r} must be less "
                             f"than stride {stride!r}")
        self.groups = groups
        self.weight, self.bias = _conv_parameters(
            "ConvTranspose2d", in_channels, out_channels,
            pair(kernel_size, "ConvTranspose2d: kernel_size"), groups, bias, True)

    def forward(self, x: TensorLike) -> Tensor:
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class _BatchNorm(Module):
    """Batch statistics in training (updating the running ones), running ones in eval;
    with track_running_stats=False no running statistics, batch statistics always."""
    input_ndims: tuple[int, ...] = ()      # the input ranks taken (empty: any)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, track_running_stats: bool = True) -> None:
        super().__init__()
        name = type(self).__name__
        check_positive_int(name, "num_features", num_features)
        self.eps = check_real(eps, name, "eps")
        self.momentum = check_real(momentum, name, "momentum")   # (PyTorch's None: no)
        self.weight = Parameter(F.ones((num_features,))) if affine else None
        self.bias = Parameter(F.zeros((num_features,))) if affine else None
        self.track_running_stats = bool(track_running_stats)
        self.running_mean = F.zeros((num_features,)) if track_running_stats else None
        self.running_var = F.ones((num_features,)) if track_running_stats else None

    def forward(self, x: TensorLike) -> Tensor:
        x = _as_tensor(x)
        if self.input_ndims and x.ndim not in self.input_ndims:
            raise ValueError(f"{type(self).__name__}: input must be "
                             f"{' or '.join(map(str, self.input_ndims))}-D (N, C, ...), "
                             f"got shape {x.shape}")
        training = self.training or self.running_mean is None
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=training, momentum=self.momentum, eps=self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of x (N, C) or (N, C, L) per channel."""
    input_ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of x (N, C, H, W) per channel."""


class GroupNorm(Module):
    """F.group_norm over num_groups groups of channels; weight and bias (num_channels,)
    (ones and zeros) when affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True) -> None:
        super().__init__()
        check_divisible("GroupNorm", "num_channels", num_channels, "num_groups", num_groups)
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        self.eps = check_real(eps, "GroupNorm", "eps")
        self.weight = Parameter(F.ones((num_channels,))) if affine else None
        self.bias = Parameter(F.zeros((num_channels,))) if affine else None

    def forward(self, x: TensorLike) -> Tensor:
        x = _as_tensor(x)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: input must be (N, {self.num_channels}, ...), "
                             f"got shape {x.shape}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


class InstanceNorm2d(Module):
    """F.instance_norm of x (N, C, H, W) or (C, H, W): each image's channel normalised
    over its H x W values; weight and bias (num_features,) when affine. Running statistics
    (track_running_stats=True) are not supported."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False) -> None:
        super().__init__()
        check_positive_int("InstanceNorm2d", "num_features", num_features)
        if track_running_stats:
            raise NotImplementedError("InstanceNorm2d: track_running_stats=True is not "
                                      "supported")
        self.num_features = int(num_features)
        self.eps = check_real(eps, "InstanceNorm2d", "eps")
        self.momentum = momentum
        self.weight = Parameter(F.ones((num_features,))) if affine else None
        self.bias = Parameter(F.zeros((num_features,))) if affine else None

    def forward(self, x: TensorLike) -> Tensor:
        x = _as_tensor(x)
        if x.ndim not in (3, 4):
            raise ValueError(f"InstanceNorm2d: input must be 3-D (C, H, W) or 4-D (N, C, H, W), "
                             f"got shape {x.shape}")
        batched = x if x.ndim == 4 else x.reshape((1,) + x.shape)
        if self.weight is not None and batched.shape[1] != self.num_features:
            raise ValueError(f"InstanceNorm2d: input must have {self.num_features} channels, "
                             f"got shape {x.shape}")
        y = F.instance_norm(batched, weight=self.weight, bias=self.bias, eps=self.eps)
        return y if x.ndim == 4 else y.reshape(x.shape)
