"""Neural-network ops: convolution, pooling, the softmax family, cross entropy, batch and
layer normalisation, embedding and leaky ReLU.

Each is ONE op with a vectorised numpy kernel (so that autodiff can give each a single
backward rule). They are float-only functions: integer and bool inputs compute in float32,
float16 inputs compute in float32 and round once at the end (numpy has no float16 BLAS,
and float16 sums lose too much).
"""
import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import dtype as D
from ..backend import native
from ..backend.epilogue import finish
from .base import Op, check_arity, normalize_axis, reject_quantized, writable_view

__all__ = ["Convolution", "ConvolutionBackwardData", "ConvolutionBackwardFilter", "Pooling", "Softmax", "LogSoftmax", "CrossEntropy",
           "BatchNormForward", "LayerNormForward", "Embedding", "LeakyRelu"]

_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Shared helpers


def pair(value, name):
    """PyTorch's int-or-pair arguments (kernel_size, stride, ...) as a pair of ints."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (int(value), int(value))
    if (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)):
        return (int(value[0]), int(value[1]))
    raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")


def _positive_pair(value, name, minimum=1):
    p = pair(value, name)
    if min(p) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return p


def float_dtype(dtypes):
    """Result dtype of a float-only function of these input dtypes (ints and bools give
    float32, as the contract says)."""
    dt = D.dtype_promotion(list(dtypes))
    return _FLOAT32 if dt.kind in "biu" else dt


def _compute_dtype(out_dtype):
    return _FLOAT32 if out_dtype == _FLOAT16 else out_dtype


def _check_ndim(fn, arg, shape, ndim, layout):
    if len(shape) != ndim:
        raise ValueError(f"{fn}: {arg} must be {ndim}-D {layout}, got shape {shape}")


def _check_int_dtype(fn, arg, dtype):
    if dtype.kind not in "iu":
        raise TypeError(f"{fn}: {arg} must have an integer dtype, got {D.dtype_name(dtype)}")


def _output_size(fn, dim, size, kernel, stride, padding, dilation=1):
    """Output length along one spatial dimension (floor mode, like PyTorch)."""
    span = dilation * (kernel - 1) + 1
    if size + 2 * padding < span:
        raise ValueError(f"{fn}: kernel {dim} {kernel} (dilated span {span}) is larger than "
                         f"the padded input {dim} {size} + 2*{padding}")
    return (size + 2 * padding - span) // stride + 1


# ---------------------------------------------------------------------------------------
# Sliding windows (im2col) shared by convolution and pooling. The batch is processed in
# chunks whose working set stays cache-sized: one chunk is padded into a reused buffer
# (its border written once), windowed as a strided view, and handed to the caller.

_CHUNK_BYTES = 1 << 22


def _windows(padded, kernel, stride, dilation):
    """(n, C, Ho, Wo, kh, kw) strided view of the windows of a padded NCHW array."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    win = sliding_window_view(padded, span, axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw]


def window_chunks(x, kernel, stride, padding, dilation, pad_value, bytes_per_image, step=None):
    """Yield (start, stop, windows) over the batch of NCHW `x`, `windows` being the
    (stop - start, C, Ho, Wo, kh, kw) view of images start..stop, padded with `pad_value`.
    `bytes_per_image`: the caller's working set per image, which sets the chunk size
    (unless `step`, the images per chunk, is given)."""
    n, c, h, w = x.shape
    ph, pw = padding
    if step is None:
        step = _CHUNK_BYTES // max(1, bytes_per_image)
    step = max(1, min(n, step))
    if ph or pw:
        buf = np.full((step, c, h + 2 * ph, w + 2 * pw), pad_value, dtype=x.dtype)
    for start in range(0, n, step):
        stop = min(n, start + step)
        if ph or pw:
            padded = buf[:stop - start]
            padded[:, :, ph:ph + h, pw:pw + w] = x[start:stop]
        else:
            padded = x[start:stop]
        yield start, stop, _windows(padded, kernel, stride, dilation)


# Convolutions run one sgemm per group over a chunk of images side by side: with OpenBLAS an
# (O, K) x (K, N) product with small O or K (a conv's usual shapes) only nears peak speed
# for N of a few thousand columns, far more than one image's Ho*Wo. The chunk holds about
# _GEMM_COLUMNS output positions, its buffers at most _GEMM_CHUNK_BYTES.
_GEMM_COLUMNS = 4096
_GEMM_CHUNK_BYTES = 1 << 24


def _gemm_chunk(n, positions, bytes_per_image):
    """Images per chunk for a convolution sgemm over `positions` output positions each."""
    m = -(-_GEMM_COLUMNS // max(1, positions))
    m = min(m, _GEMM_CHUNK_BYTES // max(1, bytes_per_image))
    return max(1, min(n, m))


def _scratch(flat, shape):
    """A C-contiguous view of the first elements of the flat buffer `flat` as `shape`."""
    return flat[:int(np.prod(shape))].reshape(shape)


# ---------------------------------------------------------------------------------------
# Convolution


def _conv_flops(y_shape, w_shape):
    """Multiply-adds of a convolution (either gradient costs the same): 2 x outputs x
    (C/groups x kh x kw); for the memory manager's recompute-cost estimate."""
    return 2.0 * float(np.prod(y_shape)) * float(np.prod(w_shape[1:]))


class Convolution(Op):
    """`Convolution(stride=1, padding=0, dilation=1, groups=1)`: 2-D cross-correlation as
    PyTorch's conv2d. Inputs: x (N, C, H, W), weight (O, C/groups, kh, kw) and optionally
    bias (O,); output (N, O, Ho, Wo). Ints or pairs for stride, padding, dilation."""

    _fields = ("stride", "padding", "dilation", "groups")
    # the worker may hand kernel() a following ReLU or ReLU gradient (backend/epilogue.py)
    EPILOGUE_CAPABLE = True

    def __init__(self, stride=1, padding=0, dilation=1, groups=1):
        if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
        self._set(stride=_positive_pair(stride, "conv2d: stride"),
                  padding=_positive_pair(padding, "conv2d: padding", 0),
                  dilation=_positive_pair(dilation, "conv2d: dilation"), groups=int(groups))

    def infer(self, inputs):
        if len(inputs) not in (2, 3):
            raise ValueError(f"op {self!r} takes 2 or 3 inputs (input, weight[, bias]), "
                             f"got {len(inputs)}")
        reject_quantized(self, inputs)
        x, w = inputs[:2]
        _check_ndim("conv2d", "input", x.shape, 4, "(N, C, H, W)")
        _check_ndim("conv2d", "weight", w.shape, 4, "(out_channels, in_channels/groups, kh, kw)")
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        g = self.groups
        if c != cg * g:
            raise ValueError(f"conv2d: weight {w.shape} with groups={g} expects {cg * g} input "
                             f"channels, got input of shape {x.shape} ({c} channels)")
        if o % g:
            raise ValueError(f"conv2d: out_channels {o} (weight {w.shape}) must be divisible "
                             f"by groups={g}")
        if len(inputs) == 3 and inputs[2].shape != (o,):
            raise ValueError(f"conv2d: bias must have shape ({o},) (out_channels), "
                             f"got {inputs[2].shape}")
        ho, wo = self._output_hw(h, wd, kh, kw)
        return (((n, o, ho, wo), float_dtype(t.dtype for t in inputs)),)

    def estimate_flops(self, in_shapes, out_shapes):
        return _conv_flops(out_shapes[0], in_shapes[1])

    def _output_hw(self, h, w, kh, kw):
        return tuple(_output_size("conv2d", dim, size, k, s, p, d) for dim, size, k, s, p, d in zip(
            ("height", "width"), (h, w), (kh, kw), self.stride, self.padding, self.dilation))

    def kernel(self, x, w, b=None, epilogue=None):
        """`epilogue` (a backend.epilogue.Epilogue): the output with it applied, in the native
        kernel's last copy of the output where it can be, else by the follower's kernel."""
        out_dtype = float_dtype(a.dtype for a in (x, w, b) if a is not None)
        compute = _compute_dtype(out_dtype)
        x, w = x.astype(compute, copy=False), w.astype(compute, copy=False)
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        g = self.groups
        ho, wo = self._output_hw(h, wd, kh, kw)
        k, l = cg * kh * kw, ho * wo
        out = native.conv2d(x, w, self.stride, self.padding, self.dilation, g,
                            None if b is None else b.astype(compute, copy=False), epilogue)
        if out is not None:
            return out.astype(out_dtype, copy=False)
        return self._finish(self._numpy_conv(x, w, n, c, o, k, l, ho, wo, compute), b,
                            n, o, ho, wo, compute, out_dtype, epilogue)

    def _numpy_conv(self, x, w, n, c, o, k, l, ho, wo, compute):
        """The product as (N, O, Ho*Wo) in `compute`, through im2col and numpy's sgemm."""
        g = self.groups
        kh, kw = w.shape[2:]
        weight = w.reshape(g, o // g, k)
        out = np.empty((n, o, l), dtype=compute)
        if k < 64 or l >= _GEMM_COLUMNS:
            # a short K (or a large image) gains nothing from wider products: one sgemm per
            # image and group (batched by np.matmul), landing directly in NCHW order
            step = _gemm_chunk(n, l, c * kh * kw * l * x.itemsize)
            cols = np.empty(c * kh * kw * step * l, dtype=compute)
            for start, stop, win in window_chunks(x, (kh, kw), self.stride, self.padding,
                                                  self.dilation, 0, 0, step=step):
                m = stop - start
                part = _scratch(cols, (m, c, kh, kw, ho, wo))
                np.copyto(part, win.transpose(0, 1, 4, 5, 2, 3))
                np.matmul(weight, part.reshape(m, g, k, l),
                          out=writable_view(out[start:stop], (m, g, o // g, l)))
            return out
        # One (O/g, K) x (K, m*Ho*Wo) sgemm per group over a chunk of m images side by side
        # (im2col in (C, kh, kw, m, Ho, Wo) order: the copy moves rows of Wo contiguous
        # values), then one copy of the product into NCHW order.
        step = _gemm_chunk(n, l, (c * kh * kw + o) * l * x.itemsize)
        cols = np.empty(c * kh * kw * step * l, dtype=compute)
        prod = np.empty(o * step * l, dtype=compute)
        for start, stop, win in window_chunks(x, (kh, kw), self.stride, self.padding,
                                              self.dilation, 0, 0, step=step):
            m = stop - start
            part = _scratch(cols, (c, kh, kw, m, ho, wo))
            np.copyto(part, win.transpose(1, 4, 5, 0, 2, 3))
            res = _scratch(prod, (g, o // g, m * l))
            np.matmul(weight, part.reshape(g, k, m * l), out=res)
            np.copyto(out[start:stop], res.reshape(o, m, l).transpose(1, 0, 2))
        return out

    @staticmethod
    def _finish(out, b, n, o, ho, wo, compute, out_dtype, epilogue):
        out = out.reshape(n, o, ho, wo)
        if b is not None:
            out += b.astype(compute).reshape(1, o, 1, 1)
        return finish(out.astype(out_dtype, copy=False), epilogue)


class _ConvolutionGrad(Op):
    """Shared parameters of the two convolution gradients (those of the forward op)."""

    _fields = ("stride", "padding", "dilation", "groups")

    def __init__(self, stride=1, padding=0, dilation=1, groups=1):
        if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
        self._set(stride=_positive_pair(stride, "conv2d: stride"),
                  padding=_positive_pair(padding, "conv2d: padding", 0),
                  dilation=_positive_pair(dilation, "conv2d: dilation"), groups=int(groups))

    def forward_op(self):
        return Convolution(self.stride, self.padding, self.dilation, self.groups)

    def _check(self, dy, x_shape, w_shape):
        fwd = self.forward_op()
        ((shape, _),) = fwd.infer((_Desc(x_shape, _FLOAT32), _Desc(w_shape, _FLOAT32)))
        if tuple(dy.shape) != tuple(shape):
            raise ValueError(f"{self!r}: output gradient of shape {dy.shape} does not match "
                             f"the convolution of {x_shape} by {w_shape} ({shape})")


class _Desc:
    """A shape/dtype description, to reuse Convolution.infer's checks."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


class ConvolutionBackwardData(_ConvolutionGrad):
    """`ConvolutionBackwardData(stride, padding, dilation, groups, in_hw)`: inputs dy
    (N, O, Ho, Wo) and weight (O, C/groups, kh, kw); the gradient of conv2d's input
    (N, C, H, W), H, W = in_hw (a transposed convolution). One sgemm per image and group
    (weight^T @ dy) then one strided add per kernel tap (col2im)."""

    _fields = ("stride", "padding", "dilation", "groups", "in_hw")
    EPILOGUE_CAPABLE = True        # as Convolution's

    def __init__(self, stride=1, padding=0, dilation=1, groups=1, in_hw=(1, 1)):
        super().__init__(stride, padding, dilation, groups)
        self._set(in_hw=_positive_pair(in_hw, "conv2d: input size"))

    def estimate_flops(self, in_shapes, out_shapes):
        return _conv_flops(in_shapes[0], in_shapes[1])

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        dy, w = inputs
        _check_ndim("conv2d backward", "dy", dy.shape, 4, "(N, O, Ho, Wo)")
        _check_ndim("conv2d backward", "weight", w.shape, 4, "(O, C/groups, kh, kw)")
        x_shape = (dy.shape[0], w.shape[1] * self.groups) + self.in_hw
        self._check(dy, x_shape, w.shape)
        return ((x_shape, float_dtype([dy.dtype, w.dtype])),)

    def kernel(self, dy, w, epilogue=None):
        out_dtype = float_dtype([dy.dtype, w.dtype])
        compute = _compute_dtype(out_dtype)
        dy, w = dy.astype(compute, copy=False), w.astype(compute, copy=False)
        n, o, ho, wo = dy.shape
        _, cg, kh, kw = w.shape
        g = self.groups
        c = cg * g
        h, wd = self.in_hw
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        k, l = cg * kh * kw, ho * wo
        if ((sh, sw) == (1, 1) and (c >= o or native.active()) and dh * (kh - 1) >= ph
                and dw * (kw - 1) >= pw):
            # a stride-1 transposed convolution is a convolution of dy by the flipped,
            # transposed weight: its im2col copy (O channels) costs less than col2im's adds
            # (C channels) when C >= O, and the native direct convolution copies nothing
            flipped = w.reshape(g, o // g, cg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(
                c, o // g, kh, kw)[:, :, ::-1, ::-1]
            conv = Convolution(1, (dh * (kh - 1) - ph, dw * (kw - 1) - pw), (dh, dw), g)
            if compute != out_dtype:
                # the epilogue belongs to the output's dtype
                return finish(conv.kernel(dy, flipped).astype(out_dtype), epilogue)
            return conv.kernel(dy, flipped, epilogue=epilogue)
        # per chunk of m images: cols (g, K, m*Ho*Wo) = weight^T @ dy, as one sgemm per group
        # over the images side by side, then one strided add per kernel tap into a padded
        # (C, m, Hp, Wp) buffer, cropped and copied into NCHW order
        wt = w.reshape(g, o // g, k).transpose(0, 2, 1)        # (g, K, O/g)
        gx = np.empty((n, c, h, wd), dtype=compute)
        hp, wp = h + 2 * ph, wd + 2 * pw
        step = _gemm_chunk(n, l, (o + c * kh * kw) * l * dy.itemsize + c * hp * wp * dy.itemsize)
        dy_buf = np.empty(o * step * l, dtype=compute)
        cols_buf = np.empty(c * kh * kw * step * l, dtype=compute)
        pad_buf = np.empty(c * step * hp * wp, dtype=compute)
        dy3 = dy.reshape(n, o, l)
        for start in range(0, n, step):
            stop = min(n, start + step)
            m = stop - start
            d = _scratch(dy_buf, (o, m, l))
            np.copyto(d, dy3[start:stop].transpose(1, 0, 2))
            cols = _scratch(cols_buf, (g, k, m * l))
            np.matmul(wt, d.reshape(g, o // g, m * l), out=cols)
            cols = cols.reshape(c, kh, kw, m, ho, wo)
            target = _scratch(pad_buf, (c, m, hp, wp))
            target.fill(0)
            for i in range(kh):
                for j in range(kw):
                    r0, c0 = i * dh, j * dw
                    target[:, :, r0:r0 + (ho - 1) * sh + 1:sh, c0:c0 + (wo - 1) * sw + 1:sw] \
                        += cols[:, i, j]
            np.copyto(gx[start:stop], target[:, :, ph:ph + h, pw:pw + wd].transpose(1, 0, 2, 3))
        return finish(gx.astype(out_dtype, copy=False), epilogue)


class ConvolutionBackwardFilter(_ConvolutionGrad):
    """`ConvolutionBackwardFilter(stride, padding, dilation, groups, kernel_hw,
    with_bias=False)`: inputs x (N, C, H, W) and dy (N, O, Ho, Wo); the gradient of conv2d's
    weight (O, C/groups, kh, kw), kh, kw = kernel_hw: one sgemm (dy @ im2col(x)^T) per group
    over a chunk of images. with_bias: a second output, the bias gradient (O,) = dy summed
    over images and positions, taken while dy is read for the weight's (a separate reduction
    cost 3% of a small CNN's training step)."""

    _fields = ("stride", "padding", "dilation", "groups", "kernel_hw", "with_bias")

    def __init__(self, stride=1, padding=0, dilation=1, groups=1, kernel_hw=(1, 1),
                 with_bias=False):
        super().__init__(stride, padding, dilation, groups)
        self._set(kernel_hw=_positive_pair(kernel_hw, "conv2d: kernel size"),
                  with_bias=bool(with_bias))

    def estimate_flops(self, in_shapes, out_shapes):
        return _conv_flops(in_shapes[1], out_shapes[0])

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        x, dy = inputs
        _check_ndim("conv2d backward", "input", x.shape, 4, "(N, C, H, W)")
        _check_ndim("conv2d backward", "dy", dy.shape, 4, "(N, O, Ho, Wo)")
        if x.shape[1] % self.groups:
            raise ValueError(f"{self!r}: input channels {x.shape[1]} not divisible by groups")
        w_shape = (dy.shape[1], x.shape[1] // self.groups) + self.kernel_hw
        self._check(dy, x.shape, w_shape)
        dtype = float_dtype([x.dtype, dy.dtype])
        return ((w_shape, dtype),) + ((((dy.shape[1],), dtype),) if self.with_bias else ())

    def kernel(self, x, dy):
        out_dtype = float_dtype([x.dtype, dy.dtype])
        compute = _compute_dtype(out_dtype)
        x, dy = x.astype(compute, copy=False), dy.astype(compute, copy=False)
        n, c, h, wd = x.shape
        _, o, ho, wo = dy.shape
        kh, kw = self.kernel_hw
        g = self.groups
        cg = c // g
        k, l = cg * kh * kw, ho * wo
        done = native.conv2d_grad_weight(x, dy, self.kernel_hw, self.stride, self.padding,
                                         self.dilation, g, self.with_bias)
        if done is not None:
            if self.with_bias:
                return tuple(gr.astype(out_dtype, copy=False) for gr in done)
            return done.astype(out_dtype, copy=False)
        gwt = np.zeros((g, k, o // g), dtype=compute)
        gb = np.zeros(o, dtype=compute) if self.with_bias else None
        step = _gemm_chunk(n, l, (c * kh * kw + o) * l * x.itemsize)
        cols = np.empty(c * kh * kw * step * l, dtype=compute)
        dy_buf = np.empty(o * step * l, dtype=compute)
        dy3 = dy.reshape(n, o, l)
        for start, stop, win in window_chunks(x, (kh, kw), self.stride, self.padding,
                                              self.dilation, 0, 0, step=step):
            m = stop - start
            # (C, kh, kw, m, Ho, Wo): the images side by side, so one sgemm covers the chunk
            part = _scratch(cols, (c, kh, kw, m, ho, wo))
            np.copyto(part, win.transpose(1, 4, 5, 0, 2, 3))
            d = _scratch(dy_buf, (o, m, l))
            np.copyto(d, dy3[start:stop].transpose(1, 0, 2))
            if gb is not None:
                gb += d.reshape(o, m * l).sum(axis=1)
            # gw^T (K, O/g) = cols @ dy^T: OpenBLAS runs this orientation ~20% faster
            gwt += np.matmul(part.reshape(g, k, m * l), d.reshape(g, o // g, m * l).transpose(0, 2, 1))
        gw = gwt.transpose(0, 2, 1).reshape(o, cg, kh, kw).astype(out_dtype, copy=False)
        return (gw, gb.astype(out_dtype, copy=False)) if self.with_bias else gw


# ---------------------------------------------------------------------------------------
# Pooling

_POOL_MODES = ("MAX", "AVERAGE", "AVERAGE_COUNT_EXCLUDE_PADDING")


def _lowest(dtype):
    """The value padding must have so that it never wins a max."""
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _valid_counts(size, out_size, kernel, stride, padding):
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
            raise ValueError(f"unknown Pooling mode {mode!r}; valid modes: {', '.join(_POOL_MODES)}")
        window = _positive_pair(window, "pooling: kernel_size")
        stride = window if stride is None else _positive_pair(stride, "pooling: stride")
        padding = _positive_pair(padding, "pooling: padding", 0)
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
        return tuple(_output_size("pooling", dim, size, k, s, p) for dim, size, k, s, p in zip(
            ("height", "width"), (h, w), self.window, self.stride, self.padding))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        (x,) = inputs
        _check_ndim("pooling", "input", x.shape, 4, "(N, C, H, W)")
        n, c, h, w = x.shape
        return (((n, c) + self._output_hw(h, w), self._out_dtype(x.dtype)),)

    def kernel(self, x):
        n, c, h, w = x.shape
        out_dtype = self._out_dtype(x.dtype)
        is_max = self.mode == "MAX"
        compute = x.dtype if is_max else _compute_dtype(out_dtype)
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
            ch, cw = (_valid_counts(size, o, k, s, p) for size, o, k, s, p in zip(
                (h, w), out.shape[2:], self.window, self.stride, self.padding))
            out /= np.outer(ch, cw).astype(compute)
        return out.astype(out_dtype, copy=False)


# ---------------------------------------------------------------------------------------
# Softmax family


def _softmax_into(x, out, axis):
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def _log_softmax_into(x, out, axis):
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))


_BLOCK_BYTES = 1 << 18


def along_axis(fn, x, axis):
    """`fn(x, out, axis)` into a fresh array. Along the last axis the rows are processed in
    blocks of about _BLOCK_BYTES, so that fn's several numpy passes (max, subtract, exp,
    sum, divide) run over cache-resident data instead of streaming the whole tensor."""
    out = np.empty(x.shape, x.dtype)       # C-ordered, whatever x's layout: rows are views
    if axis not in (-1, x.ndim - 1) or x.ndim < 2:
        fn(x, out, axis)
        return out
    rows, flat_out = x.reshape(-1, x.shape[-1]), writable_view(out, (-1, x.shape[-1]))
    step = max(1, _BLOCK_BYTES // max(1, x.shape[-1] * x.itemsize))
    for start in range(0, rows.shape[0], step):
        fn(rows[start:start + step], flat_out[start:start + step], -1)
    return out


class _AlongAxis(Op):
    """A float function of one tensor along one axis (PyTorch's `dim`)."""

    _fields = ("axis",)
    _fn = None

    def __init__(self, axis=-1):
        self._set(axis=int(axis))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        (x,) = inputs
        # a 0-d tensor counts as one value along one axis (0 or -1), as in PyTorch
        normalize_axis(self.axis, max(len(x.shape), 1), type(self).__name__.lower())
        return ((x.shape, float_dtype([x.dtype])),)

    def kernel(self, x):
        out_dtype = float_dtype([x.dtype])
        x = x.astype(_compute_dtype(out_dtype), copy=False)
        if x.size == 0:     # a max over an empty axis has no identity
            return x.astype(out_dtype)
        r = along_axis(type(self)._fn, np.atleast_1d(x), self.axis).reshape(x.shape)
        return r.astype(out_dtype, copy=False)


class Softmax(_AlongAxis):
    """`Softmax(axis=-1)`: exp(x - max) / sum, along `axis`."""

    _fn = staticmethod(_softmax_into)


class LogSoftmax(_AlongAxis):
    """`LogSoftmax(axis=-1)`: x - max - log(sum(exp(x - max))), along `axis`."""

    _fn = staticmethod(_log_softmax_into)


_REDUCTIONS = ("mean", "sum", "none")


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
        self._set(axis=int(axis), reduction=reduction)

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        logits, labels = inputs
        if not logits.shape:
            raise ValueError("cross_entropy: logits must have a class axis, got a 0-d tensor")
        axis = normalize_axis(self.axis, len(logits.shape), "cross_entropy")
        _check_int_dtype("cross_entropy", "labels", labels.dtype)
        expected = logits.shape[:axis] + logits.shape[axis + 1:]
        if labels.shape != expected:
            raise ValueError(f"cross_entropy: labels must have shape {expected} (logits "
                             f"{logits.shape} without axis {self.axis}), got {labels.shape}")
        shape = expected if self.reduction == "none" else ()
        return ((shape, float_dtype([logits.dtype])),)

    def kernel(self, logits, labels):
        out_dtype = float_dtype([logits.dtype])
        logits = logits.astype(_compute_dtype(out_dtype), copy=False)
        axis = normalize_axis(self.axis, logits.ndim, "cross_entropy")
        classes = logits.shape[axis]
        if labels.size and (labels.min() < 0 or labels.max() >= classes):
            bad = labels[(labels < 0) | (labels >= classes)].flat[0]
            raise IndexError(f"cross_entropy: label {bad} is out of range for {classes} classes")
        logp = along_axis(_log_softmax_into, logits, axis) if logits.size else logits
        picked = np.take_along_axis(logp, np.expand_dims(labels, axis).astype(np.intp), axis)
        loss = -np.squeeze(picked, axis)
        if self.reduction == "sum":
            loss = loss.sum()
        elif self.reduction == "mean":
            # the mean of no items is nan, as in PyTorch
            loss = loss.sum() / loss.size if loss.size else np.asarray(np.nan)
        return np.asarray(loss).astype(out_dtype, copy=False)


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
            raise ValueError(f"batch_norm: input must be at least 2-D (N, C, ...), got shape {x.shape}")
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

    def kernel(self, x, weight, bias, running_mean=None, running_var=None):
        out_dtype = float_dtype([x.dtype, weight.dtype, bias.dtype])
        compute = _compute_dtype(out_dtype)
        axes = (0,) + tuple(range(2, x.ndim))
        as_channels = (1, -1) + (1,) * (x.ndim - 2)
        x = x.astype(compute, copy=False)
        moments = native.channel_moments(x) if self.training else None
        if moments is not None:
            mean, var = moments
        elif self.training:
            mean = x.mean(axis=axes)
            var = np.square(x - mean.reshape(as_channels)).mean(axis=axes)
        else:
            mean = running_mean.astype(compute)
            var = running_var.astype(compute)
        scale = weight.astype(compute) / np.sqrt(var + compute.type(self.eps))
        shift = bias.astype(compute)
        y = native.channel_affine(x, mean, scale, shift)
        if y is None:
            y = x - mean.reshape(as_channels)
            y *= scale.reshape(as_channels)
            y += shift.reshape(as_channels)
        y = y.astype(out_dtype, copy=False)
        if not self.training or running_mean is None:
            return y
        count = x.size // x.shape[1]
        m = self.momentum
        new_mean = (1 - m) * running_mean + m * mean
        new_var = (1 - m) * running_var + m * var * (count / (count - 1))
        return (y, new_mean.astype(float_dtype([running_mean.dtype])),
                new_var.astype(float_dtype([running_var.dtype])))


class LayerNormForward(Op):
    """`LayerNormForward(normalized_shape, eps=1e-5)`: normalise over the trailing
    dimensions `normalized_shape` of x (biased variance), then, given weight and bias of
    that shape as inputs 2 and 3, scale and shift."""

    _fields = ("normalized_shape", "eps")

    def __init__(self, normalized_shape, eps=1e-5):
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self._set(normalized_shape=tuple(int(s) for s in normalized_shape), eps=float(eps))

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

    def kernel(self, x, weight=None, bias=None):
        out_dtype = float_dtype(a.dtype for a in (x, weight, bias) if a is not None)
        compute = _compute_dtype(out_dtype)
        x = x.astype(compute, copy=False)
        if x.size == 0:
            return x.astype(out_dtype)
        # each normalised group as one row: the blocked row loop of along_axis applies
        size = int(np.prod(self.normalized_shape))
        rows = x.reshape(-1, size)
        inv_size = compute.type(1.0 / size)
        affine = None if weight is None else (weight.astype(compute).reshape(-1),
                                              bias.astype(compute).reshape(-1))
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


# ---------------------------------------------------------------------------------------
# Embedding and leaky ReLU


class Embedding(Op):
    """`Embedding()`: inputs integer indices (any shape) and weight (num_embeddings, dim);
    output indices.shape + (dim,), the rows of weight. An index outside
    [0, num_embeddings) is an IndexError when the op runs (negative ones too, as in PyTorch)."""

    def __init__(self):
        pass

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        indices, weight = inputs
        _check_int_dtype("embedding", "indices", indices.dtype)
        _check_ndim("embedding", "weight", weight.shape, 2, "(num_embeddings, embedding_dim)")
        return ((indices.shape + weight.shape[1:], weight.dtype),)

    def kernel(self, indices, weight):
        rows = weight.shape[0]
        if indices.size and (indices.min() < 0 or indices.max() >= rows):
            bad = indices[(indices < 0) | (indices >= rows)].flat[0]
            raise IndexError(f"embedding: index {bad} is out of range for {rows} embeddings")
        return weight[indices]


class LeakyRelu(Op):
    """`LeakyRelu(negative_slope=0.01)`: x where x >= 0, negative_slope * x elsewhere."""

    _fields = ("negative_slope",)

    def __init__(self, negative_slope=0.01):
        self._set(negative_slope=float(negative_slope))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        return ((inputs[0].shape, float_dtype([inputs[0].dtype])),)

    def kernel(self, x):
        out_dtype = float_dtype([x.dtype])
        x = x.astype(out_dtype, copy=False)
        return np.where(x >= 0, x, x * out_dtype.type(self.negative_slope))
