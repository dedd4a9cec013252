"""F.conv1d, F.conv_transpose2d, F.group_norm and F.instance_norm as PyTorch's, composed of
existing ops: conv1d is conv2d on a unit height, conv_transpose2d is the op that computes
conv2d's input gradient (ConvolutionBackwardData: a transposed convolution), and the two
norms are LayerNormForward over reshaped axes then a per-channel affine. So gradients,
recomputation and traces come with those ops. The functional API re-exports them."""
from __future__ import annotations

import math
import numbers

from . import _core
from . import ops as O
from ._types import PairLike, TensorLike
from .creation import _as_tensor
from .ops.base import cached_op
from .ops.nn_common import check_ndim, positive_pair
from .ops.norm import layer_norm_op
from .tensor import Tensor

__all__ = ["conv1d", "conv_transpose2d", "group_norm", "instance_norm"]

_apply1 = _core.apply_one


def single_int(value, name, minimum):
    """An int argument that PyTorch also takes as a 1-tuple (conv1d's stride, ...)."""
    if isinstance(value, (tuple, list)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int or a 1-tuple of ints, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def _with_bias(y, bias, fn):
    """y (N, C, ...) + bias (C,) broadcast over the other axes (None: y)."""
    if bias is None:
        return y
    bias = _as_tensor(bias, y.device)
    if bias.shape != (y.shape[1],):
        raise ValueError(f"{fn}: bias must have shape ({y.shape[1]},) (out_channels), "
                         f"got {bias.shape}")
    return y + bias.reshape((1, -1) + (1,) * (y.ndim - 2))


def conv1d(input: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
           stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1) -> Tensor:
    """1-D convolution as PyTorch's: input (N, C, L), weight (out_channels, C/groups, k),
    bias (out_channels,); stride, padding and dilation ints (or 1-tuples). It is conv2d on
    a unit height (kernel height 1)."""
    x, weight = _as_tensor(input), _as_tensor(weight)
    check_ndim("conv1d", "input", x.shape, 3, "(N, C, L)")
    check_ndim("conv1d", "weight", weight.shape, 3, "(out_channels, in_channels/groups, k)")
    stride = single_int(stride, "conv1d: stride", 1)
    padding = single_int(padding, "conv1d: padding", 0)
    dilation = single_int(dilation, "conv1d: dilation", 1)
    op = cached_op(O.Convolution, (1, stride), (0, padding), (1, dilation), groups)
    inputs = [_apply1(cached_op(O.AddAxis, 2), t) for t in (x, weight)]
    if bias is not None:
        inputs.append(_as_tensor(bias, x.device))
    return _apply1(cached_op(O.RemoveAxis, 2), _apply1(op, *inputs))


def conv_transpose2d(input: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
                     stride: PairLike = 1, padding: PairLike = 0, output_padding: PairLike = 0,
                     groups: int = 1, dilation: PairLike = 1) -> Tensor:
    """Transposed 2-D convolution as PyTorch's: input (N, C_in, H, W), weight (C_in,
    C_out/groups, kh, kw), bias (C_out,); output size (H - 1) * stride - 2 * padding +
    dilation * (kh - 1) + output_padding + 1. It is the gradient of conv2d(y, weight) with
    respect to y (so output_padding must be less than stride: PyTorch also allows one
    less than dilation)."""
    x, weight = _as_tensor(input), _as_tensor(weight)
    check_ndim("conv_transpose2d", "input", x.shape, 4, "(N, C_in, H, W)")
    check_ndim("conv_transpose2d", "weight", weight.shape, 4, "(C_in, C_out/groups, kh, kw)")
    s = positive_pair(stride, "conv_transpose2d: stride")
    p = positive_pair(padding, "conv_transpose2d: padding", 0)
    d = positive_pair(dilation, "conv_transpose2d: dilation")
    op_ = positive_pair(output_padding, "conv_transpose2d: output_padding", 0)
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise ValueError(f"conv_transpose2d: groups must be a positive int, got {groups!r}")
    if x.shape[1] != weight.shape[0] or weight.shape[0] % groups:
        raise ValueError(f"conv_transpose2d: weight {weight.shape} expects {weight.shape[0]} "
                         f"input channels divisible by groups={groups}, got input of shape "
                         f"{x.shape}")
    if any(o >= st for o, st in zip(op_, s)):
        raise ValueError(f"conv_transpose2d: output_padding {output_padding!r} must be less "
                         f"than stride {stride!r}")
    out_hw = tuple((size - 1) * st - 2 * pad + dil * (k - 1) + o + 1 for size, st, pad, dil, k, o
                   in zip(x.shape[2:], s, p, d, weight.shape[2:], op_))
    if min(out_hw) < 1:
        raise ValueError(f"conv_transpose2d: the output would be {out_hw} for input {x.shape}, "
                         f"weight {weight.shape}, stride {s}, padding {p}, dilation {d}")
    op = cached_op(O.ConvolutionBackwardData, s, p, d, int(groups), out_hw)
    return _with_bias(_apply1(op, x, weight), bias, "conv_transpose2d")


def channel_affine(y: Tensor, weight: TensorLike | None, bias: TensorLike | None,
                   fn: str) -> Tensor:
    """y (N, C, ...) * weight (C,) + bias (C,), each per channel (None: left out)."""
    if weight is not None:
        weight = _as_tensor(weight, y.device)
        if weight.shape != (y.shape[1],):
            raise ValueError(f"{fn}: weight must have shape ({y.shape[1]},) (channels), "
                             f"got {weight.shape}")
        y = y * weight.reshape((1, -1) + (1,) * (y.ndim - 2))
    return _with_bias(y, bias, fn)


def _normalized_last(x, size, eps):
    """x normalised over its last axis of `size` values (biased variance)."""
    return _apply1(layer_norm_op((size,), float(eps)), x)


def group_norm(input: TensorLike, num_groups: int, weight: TensorLike | None = None,
               bias: TensorLike | None = None, eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.group_norm: x (N, C, ...) normalised over each group of
    C/num_groups channels and every other axis but N, then scaled and shifted per channel."""
    x = _as_tensor(input)
    if x.ndim < 2:
        raise ValueError(f"group_norm: input must be at least 2-D (N, C, ...), got {x.shape}")
    if isinstance(num_groups, bool) or not isinstance(num_groups, numbers.Integral) \
            or num_groups < 1 or x.shape[1] % num_groups:
        raise ValueError(f"group_norm: num_groups must be a positive int dividing the "
                         f"{x.shape[1]} channels of input {x.shape}, got {num_groups!r}")
    size = math.prod(x.shape[1:]) // num_groups
    y = _normalized_last(x.reshape((x.shape[0], int(num_groups), size)), size, eps)
    return channel_affine(y.reshape(x.shape), weight, bias, "group_norm")


def instance_norm(input: TensorLike, running_mean: TensorLike | None = None,
                  running_var: TensorLike | None = None, weight: TensorLike | None = None,
                  bias: TensorLike | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.instance_norm with the input's statistics: x (N, C, ...)
    normalised over the spatial axes of each image and channel, then scaled and shifted
    per channel. Running statistics are not supported (NotImplementedError)."""
    if running_mean is not None or running_var is not None or not use_input_stats:
        raise NotImplementedError("instance_norm: running statistics (running_mean, "
                                  "running_var, use_input_stats=False) are not supported")
    x = _as_tensor(input)
    if x.ndim < 3:
        raise ValueError(f"instance_norm: input must be at least 3-D (N, C, ...), got {x.shape}")
    size = math.prod(x.shape[2:])
    if size < 2:
        raise ValueError(f"instance_norm: expected more than 1 spatial element, got input "
                         f"of shape {x.shape}")
    y = _normalized_last(x.reshape(x.shape[:2] + (size,)), size, eps)
    return channel_affine(y.reshape(x.shape), weight, bias, "instance_norm")
