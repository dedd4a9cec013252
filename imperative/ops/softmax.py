"""The softmax family: Softmax, LogSoftmax and CrossEntropy (and the backward ops that
autodiff issues as one: SoftmaxGrad, CrossEntropyGrad)."""
import functools

import numpy as np

from ..backend import native
from .base import Op, check_arity, check_axis, float_dtype, normalize_axis, reject_quantized
from .nn_common import along_axis, check_int_dtype, compute_dtype

_FLOAT16, _FLOAT32 = np.dtype(np.float16), np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Softmax family


# (ufunc.reduce directly: what ndarray.max and .sum call, without ~0.5 us of Python
# wrapping each; the same reductions, so the same bits)
_max = np.maximum.reduce
_sum = np.add.reduce


def _softmax_into(x, out, axis):
    np.subtract(x, _max(x, axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= _sum(out, axis=axis, keepdims=True)


def _log_softmax_into(x, out, axis):
    np.subtract(x, _max(x, axis=axis, keepdims=True), out=out)
    out -= np.log(_sum(np.exp(out), axis=axis, keepdims=True))


class _AlongAxis(Op):
    """A float function of one tensor along one axis (PyTorch's `dim`)."""

    _fields = ("axis",)
    _fn = None
    _native = None      # the native loop over rows (float32, along the last axis), or None
    _native_or = None   # ... as a direct kernel with a fallback (backend.native), or None

    def __init__(self, axis=-1):
        self._set(axis=check_axis(axis, type(self).__name__.lower()))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        (x,) = inputs
        # a 0-d tensor counts as one value along one axis (0 or -1), as in PyTorch
        normalize_axis(self.axis, len(x.shape), type(self).__name__.lower())
        return ((x.shape, float_dtype([x.dtype])),)

    def kernel(self, x):
        y = type(self)._native(x, self.axis)
        if y is not None:
            return y
        out_dtype = float_dtype((x.dtype,))
        x = x.astype(compute_dtype(out_dtype), copy=False)
        if x.size == 0:     # a max over an empty axis has no identity
            return x.astype(out_dtype)
        r = along_axis(type(self)._fn, np.atleast_1d(x), self.axis).reshape(x.shape)
        return r.astype(out_dtype, copy=False)

    def direct_kernel(self, inputs):
        # float32 rows along the last axis: the native loop, which kernel() calls first,
        # without its Python frames; anything the loop does not take runs kernel()
        (x,) = inputs
        direct = type(self)._native_or
        if direct is None or x.dtype != _FLOAT32 or self.axis not in (-1, len(x.shape) - 1):
            return None
        return direct, (self.kernel,)


class Softmax(_AlongAxis):
    """`Softmax(axis=-1)`: exp(x - max) / sum, along `axis`."""

    _fn = staticmethod(_softmax_into)
    _native = staticmethod(native.softmax_rows)
    _native_or = native.softmax_rows_or


_ROWS_BLOCK = 16384        # elements of dy * y at a time in SoftmaxGrad (64 KiB of float32)


class SoftmaxGrad(Op):
    """`SoftmaxGrad()`: inputs y = softmax(x) along the last axis and dy (both float32, of
    one shape), outputs dx = y * (dy - sum(dy * y, last axis)): softmax's backward as one
    op, by blocks of rows, so that the product dy * y is never made whole. The composite
    rule made it beside y and dy, a third array of their size, and that moment was the
    floor of an attention block's backward under a memory budget. It may write dx over y
    or dy (each block is read before it is written). The same numpy calls, in the same
    order, as the composite rule of autodiff/rules_nn.py issues op by op: the same bits.
    Not differentiable itself: the rule issues it only while no outer gradient records."""

    _fields = ()
    INPLACE_CAPABLE = True

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        y, dy = inputs
        if y.shape != dy.shape or y.dtype != _FLOAT32 or dy.dtype != _FLOAT32 or not y.shape:
            raise ValueError(f"{self!r}: expected y and dy float32 of one shape (at least "
                             f"1-d), got {y.shape} {y.dtype} and {dy.shape} {dy.dtype}")
        return ((y.shape, _FLOAT32),)

    def kernel(self, y, dy, out=None):
        if out is None:
            out = np.empty(y.shape, _FLOAT32)
        if not y.size:
            return out
        if not (y.flags.c_contiguous and dy.flags.c_contiguous and out.flags.c_contiguous):
            # (a layout that blocks of rows do not fit: the composite's calls on the whole)
            product_sum = _sum(np.multiply(dy, y), axis=-1, keepdims=True)
            return np.multiply(y, np.subtract(dy, product_sum), out=out)
        width = y.shape[-1]
        rows_y, rows_dy, rows_out = (a.reshape(-1, width) for a in (y, dy, out))
        step = max(1, _ROWS_BLOCK // max(width, 1))
        block = np.empty((min(step, len(rows_y)), width), _FLOAT32)
        for r in range(0, len(rows_y), step):
            y_r, dy_r = rows_y[r:r + step], rows_dy[r:r + step]
            t = block[:len(y_r)]
            np.multiply(dy_r, y_r, out=t)
            np.subtract(dy_r, _sum(t, axis=-1, keepdims=True), out=t)
            np.multiply(y_r, t, out=rows_out[r:r + step])
        return out


class LogSoftmax(_AlongAxis):
    """`LogSoftmax(axis=-1)`: x - max - log(sum(exp(x - max))), along `axis`."""

    _fn = staticmethod(_log_softmax_into)
    _native = staticmethod(native.log_softmax_rows)
    _native_or = native.log_softmax_rows_or


_REDUCTIONS = ("mean", "sum", "none")


def _bad_label(label, classes):
    # PyTorch ignores -100 by default; here ignore_index is None by default (one fused op)
    hint = ("; to ignore it as PyTorch does by default, pass ignore_index=-100"
            if label == -100 else "")
    raise IndexError(f"cross_entropy: label {label} is out of range for {classes} classes"
                     f"{hint}")


class CrossEntropy(Op):
    """`CrossEntropy(axis=-1, reduction="mean")`: inputs logits (float) and integer class
    labels whose shape is the logits' without `axis`; -log_softmax(logits)[label],
    averaged ("mean"), summed ("sum") or per item ("none"). A label outside
    [0, classes) is an IndexError when the op runs."""

    _fields = ("axis", "reduction")

    def __init__(self, axis=-1, reduction="mean"):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"cross_entropy: reduction must be one of {_REDUCTIONS}, "
                             f"got {reduction!r}")
        self._set(axis=check_axis(axis, "cross_entropy"), reduction=reduction)

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        logits, labels = inputs
        if not logits.shape:
            raise ValueError("cross_entropy: logits must have a class axis, got a 0-d tensor")
        axis = normalize_axis(self.axis, len(logits.shape), "cross_entropy")
        check_int_dtype("cross_entropy", "labels", labels.dtype)
        expected = logits.shape[:axis] + logits.shape[axis + 1:]
        if labels.shape != expected:
            raise ValueError(f"cross_entropy: labels must have shape {expected} (logits "
                             f"{logits.shape} without axis {self.axis}), got {labels.shape}")
        shape = expected if self.reduction == "none" else ()
        return ((shape, float_dtype([logits.dtype])),)

    def direct_kernel(self, inputs):
        # 2-D float32 logits with classes last: one C call for the losses and their
        # reduction; anything it does not take (or a bad label) runs kernel()
        logits, _ = inputs
        if (native.cross_entropy_or is None or logits.dtype != _FLOAT32
                or len(logits.shape) != 2 or self.axis not in (-1, 1)):
            return None
        return native.cross_entropy_or, (native.CROSS_ENTROPY_REDUCTIONS[self.reduction],
                                         self.kernel)

    def kernel(self, logits, labels):
        rows = native.cross_entropy_rows(logits, labels, self.axis)    # (float32 logits)
        if rows is None and logits.dtype == _FLOAT16:       # computed in float32
            rows = native.cross_entropy_rows(logits.astype(_FLOAT32), labels, self.axis)
        out_dtype = float_dtype((logits.dtype,))
        if rows is not None:
            loss, bad = rows
            if bad >= 0:
                _bad_label(labels[bad], logits.shape[-1])
            return self._reduced(loss, out_dtype)
        logits = logits.astype(compute_dtype(out_dtype), copy=False)
        axis = normalize_axis(self.axis, logits.ndim, "cross_entropy")
        classes = logits.shape[axis]
        if labels.size and (np.minimum.reduce(labels, None) < 0
                            or np.maximum.reduce(labels, None) >= classes):
            _bad_label(labels[(labels < 0) | (labels >= classes)].flat[0], classes)
        logp = along_axis(_log_softmax_into, logits, axis) if logits.size else logits
        if logp.ndim == 2 and axis == 1:
            # a batch of rows: one gather, the values take_along_axis would pick
            loss = -logp[np.arange(logp.shape[0]), labels]
        else:
            picked = np.take_along_axis(logp, np.expand_dims(labels, axis).astype(np.intp), axis)
            loss = -np.squeeze(picked, axis)
        return self._reduced(loss, out_dtype)

    def _reduced(self, loss, out_dtype):
        """The per-item losses reduced as `reduction` says, in the output dtype."""
        if self.reduction == "sum":
            loss = _sum(loss, None)
        elif self.reduction == "mean":
            # the mean of no items is nan, as in PyTorch
            loss = _sum(loss, None) / loss.size if loss.size else np.asarray(np.nan)
        return np.asarray(loss).astype(out_dtype, copy=False)


@functools.lru_cache(maxsize=64)
def _class_ids(classes, ndim, axis):
    """0 .. classes - 1 (int32) along `axis` of `ndim` dimensions, the others of length 1:
    what a one-hot encoding compares labels with (kept: made once per shape, read-only)."""
    ids = np.arange(classes, dtype=np.int32).reshape(
        tuple(classes if d == axis else 1 for d in range(ndim)))
    ids.flags.writeable = False
    return ids


class CrossEntropyGrad(Op):
    """`CrossEntropyGrad(axis=-1)`: inputs (logits, labels, dy), outputs the gradient of
    cross entropy's logits, (softmax(logits) - onehot(labels)) * dy, dy broadcast against
    it (the 0-d upstream gradient of a mean or sum, already scaled; or the per-item one
    with a length-1 class axis). The same numpy calls, in the same order and dtypes, as the
    composite rule of autodiff/rules_nn.py issues op by op: the same bits in one dispatch.
    Not differentiable itself: the rule issues it only while no outer gradient records."""

    _fields = ("axis",)

    def __init__(self, axis=-1):
        self._set(axis=int(axis), _softmax=Softmax(axis))

    def infer(self, inputs):
        check_arity(self, inputs, 3)
        reject_quantized(self, inputs)
        logits, labels, dy = inputs
        axis = normalize_axis(self.axis, max(len(logits.shape), 1), "cross_entropy")
        check_int_dtype("cross_entropy", "labels", labels.dtype)
        if labels.shape != logits.shape[:axis] + logits.shape[axis + 1:]:
            raise ValueError(f"{self!r}: labels {labels.shape} do not fit logits "
                             f"{logits.shape}")
        return ((logits.shape, dy.dtype),)

    def kernel(self, logits, labels, dy):
        axis = normalize_axis(self.axis, logits.ndim, "cross_entropy")
        class_ids = _class_ids(logits.shape[axis], logits.ndim, axis)
        # (labels with a length-1 class axis: np.expand_dims' view, without its Python)
        onehot = (labels.reshape(labels.shape[:axis] + (1,) + labels.shape[axis:])
                  == class_ids).astype(dy.dtype)
        p = self._softmax.kernel(logits.astype(dy.dtype, copy=False))
        return np.multiply(np.subtract(p, onehot), dy)
