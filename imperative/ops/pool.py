"""Pooling: max and average over sliding windows."""
import numpy as np

from ..backend import native
from .base import Op, check_arity, float_dtype, reject_quantized
from .nn_common import check_ndim, compute_dtype, output_size, positive_pair, window_chunks


# ---------------------------------------------------------------------------------------
# Pooling

_POOL_MODES = ("MAX", "AVERAGE", "AVERAGE_COUNT_EXCLUDE_PADDING")
_FLOAT32 = np.dtype(np.float32)


def _lowest(dtype):
    """The value padding must have so that it never wins a max."""
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def valid_counts(size, out_size, kernel, stride, padding):
    """How many taps of each output position's window fall inside the unpadded input."""
    starts = np.arange(out_size) * stride - padding
    return np.clip(starts + kernel, 0, size) - np.clip(starts, 0, size)


class Pooling(Op):
    """`Pooling(mode, window, stride=None, padding=0)` over NCHW input; mode "MAX",
    "AVERAGE" (the padding counts as zeros) or "AVERAGE_COUNT_EXCLUDE_PADDING" (divides by
    the number of real input values in each window). `window` is PyTorch's kernel_size;
    stride None: the window size. padding at most half the window, as PyTorch requires
    (no window is all padding)."""

    _fields = ("mode", "window", "stride", "padding")

    def __init__(self, mode, window, stride=None, padding=0):
        if not isinstance(mode, str) or mode.upper() not in _POOL_MODES:
            raise ValueError(f"unknown Pooling mode {mode!r}; "
                             f"valid modes: {', '.join(_POOL_MODES)}")
        window = positive_pair(window, "pooling: kernel_size")
        stride = window if stride is None else positive_pair(stride, "pooling: stride")
        padding = positive_pair(padding, "pooling: padding", 0)
        if any(2 * p > k for p, k in zip(padding, window)):
            raise ValueError(f"pooling: padding {padding} must be at most half of the "
                             f"kernel size {window}")
        self._set(mode=mode.upper(), window=window, stride=stride, padding=padding)

    @property
    def name(self):
        return f"Pooling.{self.mode}"

    def _out_dtype(self, dtype):
        # a max is exact in any dtype; an average is float-only
        return dtype if self.mode == "MAX" else float_dtype([dtype])

    def _output_hw(self, h, w):
        return tuple(output_size("pooling", dim, size, k, s, p) for dim, size, k, s, p in zip(
            ("height", "width"), (h, w), self.window, self.stride, self.padding))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        (x,) = inputs
        check_ndim("pooling", "input", x.shape, 4, "(N, C, H, W)")
        n, c, h, w = x.shape
        return (((n, c) + self._output_hw(h, w), self._out_dtype(x.dtype)),)

    def kernel(self, x):
        if (self.mode == "MAX" and self.window == (2, 2) == self.stride
                and self.padding == (0, 0) and x.dtype == _FLOAT32 and x.flags.c_contiguous
                and native.max_pool_2x2 is not None and min(x.shape[2:]) >= 2):
            return native.max_pool_2x2(x)   # (the loop below, in one native pass)
        n, c, h, w = x.shape
        out_dtype = self._out_dtype(x.dtype)
        is_max = self.mode == "MAX"
        compute = x.dtype if is_max else compute_dtype(out_dtype)
        x = x.astype(compute, copy=False)
        out = np.empty((n, c) + self._output_hw(h, w), dtype=compute)
        combine = np.maximum if is_max else np.add
        pad_value = _lowest(compute) if is_max else 0
        (kh, kw), (ph, pw) = self.window, self.padding
        image_bytes = c * (h + 2 * ph) * (w + 2 * pw) * x.itemsize
        for start, stop, win in window_chunks(x, self.window, self.stride, self.padding, (1, 1),
                                              pad_value, image_bytes):
            # one whole-chunk ufunc call per window tap, not a reduction over tiny axes
            acc = out[start:stop]
            np.copyto(acc, win[..., 0, 0])
            for i in range(kh):
                for j in range(kw):
                    if i or j:
                        combine(acc, win[..., i, j], out=acc)
        if self.mode == "AVERAGE":
            out /= kh * kw
        elif self.mode == "AVERAGE_COUNT_EXCLUDE_PADDING":
            ch, cw = (valid_counts(size, o, k, s, p) for size, o, k, s, p in zip(
                (h, w), out.shape[2:], self.window, self.stride, self.padding))
            out /= np.outer(ch, cw).astype(compute)
        return out.astype(out_dtype, copy=False)


class MaxPoolGrad(Op):
    """`MaxPoolGrad(window, stride, padding)`: inputs (x, out, dy) of a float32 max
    Pooling (its input, output and the output's gradient), output the input's gradient, in
    one native pass: the bits of the composite rule of autodiff/rules_nn.py, which issues
    this op only for float32 and while nothing records the backward (it has no gradient)."""

    _fields = ("window", "stride", "padding")
    MAX_TAPS = 254      # taps a window may have (_windows.c keeps a tap's index in a byte)

    def __init__(self, window, stride, padding):
        self._set(window=tuple(window), stride=tuple(stride), padding=tuple(padding))

    def infer(self, inputs):
        check_arity(self, inputs, 3)
        reject_quantized(self, inputs)
        x, out, dy = inputs
        check_ndim("max_pool_grad", "input", x.shape, 4, "(N, C, H, W)")
        if out.shape != dy.shape or out.shape[:2] != x.shape[:2]:
            raise ValueError(f"max_pool_grad: output {out.shape} and its gradient {dy.shape} "
                             f"must match the pooling of an input {x.shape}")
        if any(t.dtype != _FLOAT32 for t in inputs):
            raise TypeError("max_pool_grad: float32 inputs only, got "
                            + ", ".join(str(t.dtype) for t in inputs))
        return ((x.shape, _FLOAT32),)

    def kernel(self, x, out, dy):
        return native.max_pool_grad(x, out, dy, self.window, self.stride, self.padding)
