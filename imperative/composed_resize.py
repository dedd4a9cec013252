"""Resampling as PyTorch's, composed of existing ops: F.interpolate (gathers of rows along
each spatial axis, blended by constant weights for the linear modes), F.pixel_shuffle and
F.pixel_unshuffle (a reshape, a transpose and a reshape), F.adaptive_avg_pool2d and
F.adaptive_max_pool2d (the Pooling op where the windows tile the input, else one slice and
reduction per output row along each axis), and F.pad's reflect, replicate and circular
modes (one gather per padded axis). Gradients, recomputation and traces come with those
ops. The functional API re-exports them."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from . import _core
from . import ops as O
from ._types import TensorLike
from .creation import _as_tensor
from .ops.base import cached_op, check_real
from .ops.nn_common import check_positive_int
from .ops.shape import pad_widths
from .tensor import Tensor

__all__ = ["interpolate", "pixel_shuffle", "pixel_unshuffle", "adaptive_avg_pool2d",
           "adaptive_max_pool2d"]

_apply1 = _core.apply_one


def _take(x, indices, axis):
    """x's entries at the integer `indices` along `axis` (a gather; its gradient adds)."""
    return x[(slice(None),) * axis + (np.asarray(indices, np.int32),)]


# ---------------------------------------------------------------------------------------
# Padding modes other than constant (F.pad)

def _source_index(i, n, mode):
    """The input position that padded position i (-before .. n + after - 1) copies."""
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i > n - 1, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    return np.mod(i, n)                                   # circular


def index_pad(x: Tensor, pad: Sequence[int], mode: str) -> Tensor:
    """F.pad's reflect, replicate and circular modes: one gather per padded axis."""
    widths = pad_widths(pad, x.shape)
    for axis, before, after in widths:
        n = x.shape[axis]
        if before < 0 or after < 0:
            raise ValueError(f"pad: mode {mode!r} takes no negative width, got ({before}, "
                             f"{after}) for axis {axis}")
        if mode == "reflect" and max(before, after) >= n:
            raise ValueError(f"pad: reflect padding ({before}, {after}) must be less than the "
                             f"size {n} of axis {axis} (shape {x.shape})")
        if mode == "circular" and max(before, after) > n:
            raise ValueError(f"pad: circular padding ({before}, {after}) must be at most the "
                             f"size {n} of axis {axis} (shape {x.shape})")
        if mode == "replicate" and n == 0:
            raise ValueError(f"pad: replicate padding of an empty axis {axis} (shape {x.shape})")
        x = _take(x, _source_index(np.arange(-before, n + after), n, mode), axis)
    return x


# ---------------------------------------------------------------------------------------
# interpolate

_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}    # mode -> the input's ndim
INTERPOLATE_MODES = ("nearest", "nearest-exact") + tuple(_LINEAR_MODES)


def _per_axis(value, count, name, convert):
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * count
    if len(values) != count:
        raise ValueError(f"interpolate: {name} {value!r} must have {count} entries, one per "
                         f"spatial axis")
    return tuple(convert(v) for v in values)


def _scale_factor(v):
    v = check_real(v, "interpolate", "scale_factor")
    if not v > 0:
        raise ValueError(f"interpolate: scale_factor must be positive, got {v!r}")
    return v


def _sizes_and_scales(x, size, scale_factor, recompute_scale_factor):
    """The output's spatial sizes, and the scale each axis maps positions by (None: in/out)
    as PyTorch chooses them."""
    count = x.ndim - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = _per_axis(size, count, "size",
                          lambda v: check_positive_int("interpolate", "size", v))
        return sizes, (None,) * count
    factors = _per_axis(scale_factor, count, "scale_factor", _scale_factor)
    sizes = tuple(math.floor(n * f) for n, f in zip(x.shape[2:], factors))
    if min(sizes) < 1:
        raise ValueError(f"interpolate: scale_factor {scale_factor!r} makes an empty output "
                         f"{sizes} from input {x.shape}")
    return sizes, (None,) * count if recompute_scale_factor else factors


def _float_scale(n, m, factor):
    """PyTorch's compute_scales_value in float32: 1 / scale_factor when given, else n / m."""
    return np.float32(1.0 / factor) if factor is not None else np.float32(n) / np.float32(m)


def _nearest_along(x, axis, m, factor, exact):
    n = x.shape[axis]
    if m == n and not exact:
        return x
    dst = np.arange(m)
    if m == 2 * n and not exact:
        src = dst >> 1
    elif exact:
        src = np.floor((dst + 0.5) * _float_scale(n, m, factor))
    else:
        src = np.floor(dst.astype(np.float32) * _float_scale(n, m, factor))
    return _take(x, np.minimum(src.astype(np.int64), n - 1), axis)


def _linear_along(x, axis, m, factor, align_corners):
    n = x.shape[axis]
    dst = np.arange(m, dtype=np.float32)
    if align_corners:
        src = dst * (np.float32(n - 1) / np.float32(m - 1) if m > 1 else np.float32(0))
    else:
        src = np.maximum(_float_scale(n, m, factor) * (dst + np.float32(0.5)) - np.float32(0.5),
                         np.float32(0))
    low = np.minimum(np.floor(src).astype(np.int64), n - 1)
    high = np.minimum(low + 1, n - 1)
    frac = np.clip(src - low, 0, 1).astype(np.float32)
    shape = (m,) + (1,) * (x.ndim - 1 - axis)
    y = _take(x, low, axis) * Tensor((1 - frac).reshape(shape), device=x.device)
    if frac.any():
        y = y + _take(x, high, axis) * Tensor(frac.reshape(shape), device=x.device)
    return y


def interpolate(input: TensorLike, size: int | Sequence[int] | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """torch.nn.functional.interpolate on x (N, C, *spatial): modes "nearest" and
    "nearest-exact" (any number of spatial axes), "linear" (3-D input), "bilinear" (4-D)
    and "trilinear" (5-D), with align_corners False (the default) or True. Output sizes
    and source positions are computed as PyTorch's (in float32, with 1 / scale_factor
    where a scale_factor is given). bicubic, area and antialias are not supported."""
    x = _as_tensor(input)
    if x.dtype.kind != "f":
        x = x.astype("float32")
    if mode not in INTERPOLATE_MODES:
        raise (NotImplementedError if mode in ("bicubic", "area") else ValueError)(
            f"interpolate: mode must be one of {INTERPOLATE_MODES}, got {mode!r}")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if x.ndim < 3 or _LINEAR_MODES.get(mode, x.ndim) != x.ndim:
        raise ValueError(f"interpolate: mode {mode!r} takes a "
                         f"{_LINEAR_MODES.get(mode, '3-D or higher')}-D input (N, C, ...), "
                         f"got shape {x.shape}")
    if align_corners is not None and mode not in _LINEAR_MODES:
        raise ValueError(f"interpolate: align_corners can only be set with the linear modes "
                         f"{tuple(_LINEAR_MODES)}, not with {mode!r}")
    sizes, factors = _sizes_and_scales(x, size, scale_factor, recompute_scale_factor)
    for axis, (m, factor) in enumerate(zip(sizes, factors), 2):
        if mode in _LINEAR_MODES:
            x = _linear_along(x, axis, m, factor, bool(align_corners))
        else:
            x = _nearest_along(x, axis, m, factor, mode == "nearest-exact")
    return x


# ---------------------------------------------------------------------------------------
# pixel_shuffle, pixel_unshuffle


def _check_rank3(x, fn):
    if x.ndim < 3:
        raise ValueError(f"{fn}: input must be at least 3-D (*, C, H, W), got shape {x.shape}")


def pixel_shuffle(input: TensorLike, upscale_factor: int) -> Tensor:
    """(*, C * r * r, H, W) -> (*, C, H * r, W * r), r = upscale_factor, as PyTorch's."""
    x = _as_tensor(input)
    r = check_positive_int("pixel_shuffle", "upscale_factor", upscale_factor)
    _check_rank3(x, "pixel_shuffle")
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle: the {c} channels of input {x.shape} must be "
                         f"divisible by upscale_factor ** 2 = {r * r}")
    k = len(lead)
    y = x.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    y = y.transpose(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: TensorLike, downscale_factor: int) -> Tensor:
    """(*, C, H * r, W * r) -> (*, C * r * r, H, W), r = downscale_factor, as PyTorch's."""
    x = _as_tensor(input)
    r = check_positive_int("pixel_unshuffle", "downscale_factor", downscale_factor)
    _check_rank3(x, "pixel_unshuffle")
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle: the height and width of input {x.shape} must be "
                         f"divisible by downscale_factor {r}")
    k = len(lead)
    y = x.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    y = y.transpose(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape(tuple(lead) + (c * r * r, h // r, w // r))


# ---------------------------------------------------------------------------------------
# adaptive pooling


def check_output_size(output_size, fn):
    """Adaptive pooling's output_size: a positive int, or a pair of them (None: keep)."""
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    if len(sizes) != 2 or sizes == (None, None) and not isinstance(output_size, (tuple, list)):
        raise ValueError(f"{fn}: output_size must be a positive int or a pair of them (None "
                         f"keeps that input size), got {output_size!r}")
    return tuple(None if m is None else check_positive_int(fn, "output_size", m) for m in sizes)


def _output_pair(output_size, hw, fn):
    return tuple(n if m is None else m for m, n in zip(check_output_size(output_size, fn), hw))


def _adaptive_along(x, axis, m, reduce):
    """PyTorch's adaptive windows along `axis`: output i reduces input positions
    floor(i * n / m) .. ceil((i + 1) * n / m) - 1 (windows may overlap)."""
    n = x.shape[axis]
    windows = [x[(slice(None),) * axis + (slice(i * n // m, -(-(i + 1) * n // m)),)]
               for i in range(m)]
    pieces = [getattr(w, reduce)(axis=axis, keepdims=True) for w in windows]
    return pieces[0] if m == 1 else _apply1(cached_op(O.Concat, axis), *pieces)


def _adaptive_pool2d(input, output_size, fn, pool_mode, reduce_name):
    x = _as_tensor(input)
    if x.ndim not in (3, 4):
        raise ValueError(f"{fn}: input must be 3-D (C, H, W) or 4-D (N, C, H, W), "
                         f"got shape {x.shape}")
    hw = x.shape[-2:]
    out = _output_pair(output_size, hw, fn)
    if min(hw) < 1:
        raise ValueError(f"{fn}: input {x.shape} has an empty spatial axis")
    if all(n % m == 0 for n, m in zip(hw, out)):
        # the windows tile the input: one Pooling op (on a 4-D view)
        window = tuple(n // m for n, m in zip(hw, out))
        x4 = x if x.ndim == 4 else x.reshape((1,) + x.shape)
        y = _apply1(cached_op(O.Pooling, pool_mode, window, window, 0), x4)
        return y if x.ndim == 4 else y.reshape(y.shape[1:])
    y = x
    for axis, m in zip((x.ndim - 2, x.ndim - 1), out):
        y = _adaptive_along(y, axis, m, reduce_name)
    return y


def adaptive_avg_pool2d(input: TensorLike, output_size: int | Sequence[int | None]) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool2d: the mean of each of PyTorch's adaptive
    windows (None in output_size keeps that input size)."""
    return _adaptive_pool2d(input, output_size, "adaptive_avg_pool2d", "AVERAGE", "mean")


def adaptive_max_pool2d(input: TensorLike, output_size: int | Sequence[int | None],
                        return_indices: bool = False) -> Tensor:
    """torch.nn.functional.adaptive_max_pool2d (return_indices is not supported)."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices=True is not supported")
    return _adaptive_pool2d(input, output_size, "adaptive_max_pool2d", "MAX", "max")
