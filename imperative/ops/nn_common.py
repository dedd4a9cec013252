"""Helpers shared by the neural-network op families (conv.py, pool.py, softmax.py, norm.py):
int-or-pair arguments, shape and dtype checks, the float16 compute dtype, and the sliding
windows (im2col) of convolution and pooling.

The NN ops are float-only functions: integer and bool inputs compute in float32, float16
inputs compute in float32 and round once at the end (numpy has no float16 BLAS, and float16
sums lose too much)."""
import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import dtype as D
from .base import writable_view

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


def check_positive_int(where, name, value):
    """`value` as an int, which must be >= 1 (a bool is no int here)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{where}: {name} must be a positive int, got {value!r}")
    return int(value)


def positive_pair(value, name, minimum=1):
    p = pair(value, name)
    if min(p) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return p


def compute_dtype(out_dtype):
    return _FLOAT32 if out_dtype == _FLOAT16 else out_dtype


def check_ndim(fn, arg, shape, ndim, layout):
    if len(shape) != ndim:
        raise ValueError(f"{fn}: {arg} must be {ndim}-D {layout}, got shape {shape}")


def check_int_dtype(fn, arg, dtype):
    if dtype.kind not in "iu":
        raise TypeError(f"{fn}: {arg} must have an integer dtype, got {D.dtype_name(dtype)}")


def output_size(fn, dim, size, kernel, stride, padding, dilation=1):
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
# GEMM_COLUMNS output positions, its buffers at most _GEMM_CHUNK_BYTES.
GEMM_COLUMNS = 4096
_GEMM_CHUNK_BYTES = 1 << 24


def gemm_chunk(n, positions, bytes_per_image):
    """Images per chunk for a convolution sgemm over `positions` output positions each."""
    m = -(-GEMM_COLUMNS // max(1, positions))
    m = min(m, _GEMM_CHUNK_BYTES // max(1, bytes_per_image))
    return max(1, min(n, m))


def scratch(flat, shape):
    """A C-contiguous view of the first elements of the flat buffer `flat` as `shape`."""
    return flat[:int(np.prod(shape))].reshape(shape)


# ---------------------------------------------------------------------------------------
# Along one axis, in cache-sized blocks (softmax family, normalisation)


_BLOCK_BYTES = 1 << 18


def along_axis(fn, x, axis):
    """`fn(x, out, axis)` into a fresh array. Along the last axis the rows are processed in
    blocks of about _BLOCK_BYTES, so that fn's several numpy passes (max, subtract, exp,
    sum, divide) run over cache-resident data instead of streaming the whole tensor."""
    out = np.empty(x.shape, x.dtype)       # C-ordered, whatever x's layout: rows are views
    if axis not in (-1, x.ndim - 1) or x.ndim < 2:
        fn(x, out, axis)
        return out
    step = max(1, _BLOCK_BYTES // max(1, x.shape[-1] * x.itemsize))
    if 0 < x.size <= step * x.shape[-1] and x.flags.c_contiguous:
        fn(x, out, -1)      # one block: the same rows, without reshaping them (tiny inputs)
        return out
    rows, flat_out = x.reshape(-1, x.shape[-1]), writable_view(out, (-1, x.shape[-1]))
    for start in range(0, rows.shape[0], step):
        fn(rows[start:start + step], flat_out[start:start + step], -1)
    return out
