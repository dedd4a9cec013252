"""Batch and layer normalisation: the forward ops, and their float32 gradients as one op
each (autodiff's composite rules otherwise)."""
import numbers

import numpy as np

from ..backend import native
from .base import Op, cached_op, float_dtype, reject_quantized, remember
from .nn_common import along_axis, compute_dtype
from .shape import check_shape_arg

_FLOAT32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Normalisation


def _check_vector(fn, arg, shape, size, what):
    if shape != (size,):
        raise ValueError(f"{fn}: {arg} must have shape ({size},) ({what}), got {shape}")


class BatchNormForward(Op):
    """`BatchNormForward(training=False, momentum=0.1, eps=1e-5)`: batch normalisation over
    every axis but 1 of x (N, C, ...). Inputs: x, weight (C,), bias (C,) and, optionally,
    running_mean and running_var (C,). Training normalises with the batch's statistics
    (biased variance) and, given running statistics, also outputs their update
    `(1 - momentum) * running + momentum * batch` (the variance unbiased), as PyTorch does.
    Otherwise it normalises with the running statistics, which are then required."""

    _fields = ("training", "momentum", "eps")

    def __init__(self, training=False, momentum=0.1, eps=1e-5):
        self._set(training=bool(training), momentum=float(momentum), eps=float(eps))

    def infer(self, inputs):
        if len(inputs) not in (3, 5):
            raise ValueError(f"op {self!r} takes 3 inputs (x, weight, bias) or 5 (x, weight, "
                             f"bias, running_mean, running_var), got {len(inputs)}")
        reject_quantized(self, inputs)
        x = inputs[0]
        if len(x.shape) < 2:
            raise ValueError(f"batch_norm: input must be at least 2-D (N, C, ...), "
                             f"got shape {x.shape}")
        c = x.shape[1]
        names = ("weight", "bias", "running_mean", "running_var")
        for name, t in zip(names, inputs[1:]):
            _check_vector("batch_norm", name, t.shape, c, f"channels of input {x.shape}")
        out = float_dtype([x.dtype] + [t.dtype for t in inputs[1:3]])
        if not self.training:
            if len(inputs) != 5:
                raise ValueError("batch_norm: running_mean and running_var are required when "
                                 "training=False")
            return ((x.shape, out),)
        if x.shape[0] * int(np.prod(x.shape[2:])) < 2:
            raise ValueError(f"batch_norm: training needs more than one value per channel, "
                             f"got input of shape {x.shape}")
        if len(inputs) == 3:
            return ((x.shape, out),)
        running = tuple((t.shape, float_dtype([t.dtype])) for t in inputs[3:])
        return ((x.shape, out),) + running

    # a recomputation under DTR normalises with the statistics of the recorded run: one
    # pass over x (the affine) instead of three (the moments take two)
    KEEPS_MEMO = True

    def kernel(self, x, weight, bias, running_mean=None, running_var=None):
        return self.kernel_keeping(x, weight, bias, running_mean, running_var)[0]

    def kernel_keeping(self, x, weight, bias, running_mean=None, running_var=None):
        """(the kernel's result, the batch's (mean, variance) in training, else None)."""
        return self._normalize(None, x, weight, bias, running_mean, running_var)

    def kernel_from(self, statistics, x, weight, bias, running_mean=None, running_var=None):
        """The kernel's bits on the same inputs, given kernel_keeping's statistics."""
        return self._normalize(statistics, x, weight, bias, running_mean, running_var)[0]

    def _normalize(self, statistics, x, weight, bias, running_mean, running_var):
        out_dtype = float_dtype([x.dtype, weight.dtype, bias.dtype])
        compute = compute_dtype(out_dtype)
        axes = (0,) + tuple(range(2, x.ndim))
        as_channels = (1, -1) + (1,) * (x.ndim - 2)
        x = x.astype(compute, copy=False)
        if not self.training:
            mean = running_mean.astype(compute)
            var = running_var.astype(compute)
        elif statistics is not None:
            mean, var = statistics
        else:
            statistics = _batch_moments(x, axes, as_channels)
            mean, var = statistics
        scale = weight.astype(compute) / np.sqrt(var + compute.type(self.eps))
        shift = bias.astype(compute)
        y = native.channel_affine(x, mean, scale, shift)
        if y is None:
            y = x - mean.reshape(as_channels)
            y *= scale.reshape(as_channels)
            y += shift.reshape(as_channels)
        y = y.astype(out_dtype, copy=False)
        if not self.training or running_mean is None:
            return y, statistics
        count = x.size // x.shape[1]
        m = self.momentum
        new_mean = (1 - m) * running_mean + m * mean
        new_var = (1 - m) * running_var + m * var * (count / (count - 1))
        return (y, new_mean.astype(float_dtype([running_mean.dtype])),
                new_var.astype(float_dtype([running_var.dtype]))), statistics


class BatchNormBackward(Op):
    """`BatchNormBackward(eps=1e-5)`: batch norm's gradients in training in one op. Inputs
    x, dy (N, C, ...) and the weight (C,), float32; outputs dx and the weight's and the
    bias's gradients (dy * xhat and dy summed over every axis but 1). The batch's
    statistics are recomputed as BatchNormForward computes them. Not differentiable
    itself: autodiff's rule issues it only while no outer gradient records (higher orders
    take the composite rule)."""

    _fields = ("eps",)

    def __init__(self, eps=1e-5):
        self._set(eps=float(eps))

    def infer(self, inputs):
        if len(inputs) != 3:
            raise ValueError(f"op {self!r} takes 3 inputs (x, dy, weight), got {len(inputs)}")
        reject_quantized(self, inputs)
        x, dy, weight = inputs
        for name, t in zip(("x", "dy", "weight"), inputs):
            if t.dtype != _FLOAT32:
                raise TypeError(f"{self!r}: {name} must be float32, got {t.dtype}")
        if len(x.shape) < 2 or dy.shape != x.shape:
            raise ValueError(f"{self!r}: x {x.shape} and dy {dy.shape} must be of one shape "
                             f"(N, C, ...)")
        _check_vector("batch_norm", "weight", weight.shape, x.shape[1],
                      f"channels of input {x.shape}")
        return ((x.shape, _FLOAT32),) + ((weight.shape, _FLOAT32),) * 2

    def kernel(self, x, dy, weight):
        x, dy = np.ascontiguousarray(x), np.ascontiguousarray(dy)
        out = native.batch_norm_grad(x, dy, weight, self.eps)
        return out if out is not None else _batch_norm_grad(x, dy, weight, self.eps)


def _batch_moments(x, axes, as_channels):
    """The batch's (mean, biased variance) per channel of float x, natively where it can:
    BatchNormForward's statistics, and so its gradient's."""
    statistics = native.channel_moments(x)
    if statistics is None:
        mean = x.mean(axis=axes)
        statistics = (mean, np.square(x - mean.reshape(as_channels)).mean(axis=axes))
    return statistics


def _batch_norm_grad(x, dy, weight, eps):
    """BatchNormBackward's gradients with numpy (the native kernel's formula)."""
    axes = (0,) + tuple(range(2, x.ndim))
    as_channels = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = _batch_moments(x, axes, as_channels)
    centered = x - mean.reshape(as_channels)
    rstd = 1 / np.sqrt(var + np.float32(eps))
    db = dy.sum(axis=axes, dtype=np.float64)
    dw = (dy * centered).sum(axis=axes, dtype=np.float64) * rstd
    count = x.size // x.shape[1]
    k = (dw / count).astype(_FLOAT32) * rstd
    dx = (dy - (db / count).astype(_FLOAT32).reshape(as_channels)
          - centered * k.reshape(as_channels)) * (weight * rstd).reshape(as_channels)
    return dx.astype(_FLOAT32), dw.astype(_FLOAT32), db.astype(_FLOAT32)


class _LayerNormOp(Op):
    """The parameters of the layer norm ops: the trailing shape normalised, and eps."""

    _fields = ("normalized_shape", "eps")

    def __init__(self, normalized_shape, eps=1e-5):
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        shape = tuple(int(s) for s in normalized_shape)
        # (the row length, once: np.prod costs microseconds at every kernel call)
        self._set(normalized_shape=shape, eps=float(eps), _size=int(np.prod(shape)))


class LayerNormForward(_LayerNormOp):
    """`LayerNormForward(normalized_shape, eps=1e-5)`: normalise over the trailing
    dimensions `normalized_shape` of x (biased variance), then, given weight and bias of
    that shape as inputs 2 and 3, scale and shift."""

    def infer(self, inputs):
        if len(inputs) not in (1, 3):
            raise ValueError(f"op {self!r} takes 1 input (x) or 3 (x, weight, bias), "
                             f"got {len(inputs)}")
        reject_quantized(self, inputs)
        x = inputs[0]
        k = len(self.normalized_shape)
        if x.shape[len(x.shape) - k:] != self.normalized_shape or len(x.shape) < k:
            raise ValueError(f"layer_norm: input shape {x.shape} must end with "
                             f"normalized_shape {self.normalized_shape}")
        for name, t in zip(("weight", "bias"), inputs[1:]):
            if t.shape != self.normalized_shape:
                raise ValueError(f"layer_norm: {name} must have shape {self.normalized_shape} "
                                 f"(normalized_shape), got {t.shape}")
        return ((x.shape, float_dtype(t.dtype for t in inputs)),)

    # a recomputation under DTR normalises with the rows' statistics of the recorded run
    # (two floats a row): one pass over x instead of three (native float32 rows only)
    KEEPS_MEMO = True

    def kernel_keeping(self, x, weight=None, bias=None):
        """(the kernel's result, the rows' statistics where the native loop ran, else None)."""
        statistics = np.empty(2 * (x.size // max(self._size, 1)), np.float32)
        y = native.layer_norm(x, weight, bias, self._size, self.eps, statistics)
        return (y, statistics) if y is not None else (self.kernel(x, weight, bias), None)

    def kernel_from(self, statistics, x, weight=None, bias=None):
        """The kernel's bits on the same inputs, given kernel_keeping's statistics."""
        y = native.layer_norm(x, weight, bias, self._size, self.eps, statistics, True)
        return y if y is not None else self.kernel(x, weight, bias)

    def direct_kernel(self, inputs):
        # float32 x, weight and bias: the native row loop in one C call (as kernel() calls
        # it first, without its Python frames); anything it does not take runs kernel()
        if (native.layer_norm_or is None or len(inputs) != 3
                or any(t.dtype != _FLOAT32 for t in inputs)):
            return None
        return native.layer_norm_or, (self._size, self.eps, self.kernel)

    def kernel(self, x, weight=None, bias=None):
        y = native.layer_norm(x, weight, bias, self._size, self.eps)    # (float32: the
        if y is not None:                                               # same call as below)
            return y
        out_dtype = float_dtype(a.dtype for a in (x, weight, bias) if a is not None)
        compute = compute_dtype(out_dtype)
        x = x.astype(compute, copy=False)
        if x.size == 0:
            return x.astype(out_dtype)
        # each normalised group as one row: the blocked row loop of along_axis applies
        size = self._size
        rows = x.reshape(-1, size)
        inv_size = compute.type(1.0 / size)
        affine = None if weight is None else (weight.astype(compute, copy=False).reshape(-1),
                                              bias.astype(compute, copy=False).reshape(-1))
        y = native.layer_norm_rows(rows, *(affine or (None, None)), self.eps)
        if y is not None:
            return y.reshape(x.shape).astype(out_dtype, copy=False)

        def normalize(block, out, axis):
            # row sums by einsum: one pass each and no squared temporary
            mean = np.einsum("ij->i", block)
            mean *= inv_size
            np.subtract(block, mean[:, None], out=out)
            var = np.einsum("ij,ij->i", out, out)
            var *= inv_size
            var += compute.type(self.eps)
            rstd = np.sqrt(var, out=var)
            np.reciprocal(rstd, out=rstd)
            out *= rstd[:, None]
            if affine is not None:
                out *= affine[0]
                out += affine[1]

        y = along_axis(normalize, rows, -1).reshape(x.shape)
        return y.astype(out_dtype, copy=False)


class LayerNormBackward(_LayerNormOp):
    """`LayerNormBackward(normalized_shape, eps=1e-5)`: layer norm's gradients in one op.
    Inputs x, dy and, for an affine layer norm, its weight (float32); outputs dx and, with
    the weight, the weight's and the bias's gradients (dy * xhat and dy summed over the
    leading axes). The statistics are recomputed as LayerNormForward computes them.
    Not differentiable itself: autodiff's rule issues it only while no outer gradient
    records (higher orders take the composite rule)."""

    def infer(self, inputs):
        if len(inputs) not in (2, 3):
            raise ValueError(f"op {self!r} takes 2 inputs (x, dy) or 3 (x, dy, weight), "
                             f"got {len(inputs)}")
        reject_quantized(self, inputs)
        x, dy = inputs[:2]
        k = len(self.normalized_shape)
        if dy.shape != x.shape or x.shape[len(x.shape) - k:] != self.normalized_shape:
            raise ValueError(f"{self!r}: x {x.shape} and dy {dy.shape} must be of one shape "
                             f"ending with {self.normalized_shape}")
        for name, t in zip(("x", "dy", "weight"), inputs):
            if t.dtype != _FLOAT32:
                raise TypeError(f"{self!r}: {name} must be float32, got {t.dtype}")
        if len(inputs) == 3 and inputs[2].shape != self.normalized_shape:
            raise ValueError(f"{self!r}: weight must have shape {self.normalized_shape}, "
                             f"got {inputs[2].shape}")
        outputs = ((x.shape, _FLOAT32),)
        return outputs if len(inputs) == 2 else outputs + ((self.normalized_shape, _FLOAT32),) * 2

    def kernel(self, x, dy, weight=None):
        rows, grads = x.reshape(-1, self._size), dy.reshape(-1, self._size)
        flat_weight = None if weight is None else weight.reshape(-1)
        out = native.layer_norm_grad(rows, grads, flat_weight, self.eps)
        if out is None:
            out = _layer_norm_grad(rows, grads, flat_weight, self.eps)
        if weight is None:
            return out.reshape(x.shape)
        dx, dw, db = out
        return dx.reshape(x.shape), dw.reshape(weight.shape), db.reshape(weight.shape)


def _layer_norm_grad(x, dy, weight, eps):
    """LayerNormBackward's gradients with numpy, of 2-D x and dy (rows normalised)."""
    mean = x.mean(axis=1, keepdims=True)
    centered = x - mean
    rstd = 1 / np.sqrt(np.square(centered).mean(axis=1, keepdims=True) + np.float32(eps))
    xhat = centered * rstd
    g = dy if weight is None else dy * weight
    dx = rstd * (g - g.mean(axis=1, keepdims=True)
                 - xhat * (g * xhat).mean(axis=1, keepdims=True))
    if weight is None:
        return dx
    return (dx, (dy * xhat).sum(axis=0, dtype=np.float64).astype(_FLOAT32),
            dy.sum(axis=0, dtype=np.float64).astype(_FLOAT32))


_LAYER_NORM_OPS = {}    # (normalized_shape, eps) as F.layer_norm's caller wrote them -> op


def layer_norm_op(normalized_shape, eps):
    """F.layer_norm's LayerNormForward, memoised by its arguments as written where they are
    a tuple of ints and a float (validated the first time, checked no more: the check cost
    as much as the op on a small input)."""
    key = None
    if type(normalized_shape) is tuple and type(eps) is float and all(
            type(d) is int for d in normalized_shape):
        key = (normalized_shape, eps)
        op = _LAYER_NORM_OPS.get(key)
        if op is not None:
            return op
    op = cached_op(LayerNormForward, check_shape_arg(normalized_shape, "layer_norm"), float(eps))
    if key is not None:
        remember(_LAYER_NORM_OPS, key, op, 64)
    return op
