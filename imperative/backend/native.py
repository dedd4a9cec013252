"""When to run float32 products on the native kernels (`imperative._kernels`) instead of
numpy's BLAS.

The native sgemm and direct convolution are single-threaded AVX-512 or AVX2 code (with
FMA, chosen once per process, see `_kernels.isa()`; a CPU with neither leaves them to
numpy). With one BLAS thread they beat numpy's OpenBLAS on a training step's shapes
(measured by `tools/bench_train.py`); with more BLAS threads OpenBLAS uses them and the native
kernels would leave cores idle, so they are used only while numpy's BLAS runs one thread.
`IMPERATIVE_NATIVE_KERNELS` overrides the choice: `0`/`never` (to compare, or to rule them
out) or `1`/`always` (whatever the BLAS thread count; the tests use it).
"""
import os
import warnings

import numpy as np

try:
    from .. import _kernels
except ImportError:         # an old build without the extension: numpy does everything
    _kernels = None

from . import blas_threads as blas_threads_module
from .epilogue import AXPY, finish

_FLOAT32 = np.dtype(np.float32)
# below ~64^3 multiply-adds numpy's call overhead is smaller than packing panels (products
# only: numpy's convolution, an im2col of a dozen calls, took 10x the native kernel's time
# on a 1x8x8x8 image, so convolutions of any size run natively)
_MIN_MACS = 1 << 18
# a product with fewer columns fills under half of the AVX-512 kernel's 32-wide tile (a
# classifier head's 10 outputs: 0.19 ms native against numpy's 0.11 ms); the AVX2 tile is
# 16 wide
_MIN_COLUMNS = 16


_MODES = {"0": "never", "never": "never", "1": "always", "always": "always", "auto": "auto"}


def _mode_from_env():
    text = os.environ.get("IMPERATIVE_NATIVE_KERNELS", "auto")
    mode = _MODES.get(text.strip().lower())
    if mode is None:      # a typo must not pass silently for a choice ("alway" is "auto")
        warnings.warn(f"ignoring environment variable IMPERATIVE_NATIVE_KERNELS={text!r}: "
                      f"expected one of {', '.join(_MODES)}; using the default auto",
                      RuntimeWarning, stacklevel=1)   # the environment is at fault, no caller
        mode = "auto"
    return mode


_SUPPORTED = _kernels is not None and _kernels.supported()
# "auto": while numpy's BLAS runs one thread; "always" (tests, comparisons); "never"
_MODE = _mode_from_env()
_blas_threads = blas_threads_module.get_num_threads if _SUPPORTED else None


def active():
    """True when native kernels run now: a supported CPU, and the mode allows it ("auto":
    numpy's BLAS limited to one thread, read at each call since threadpoolctl may change it)."""
    if not _SUPPORTED or _MODE == "never":
        return False
    return _MODE == "always" or (_blas_threads is not None and _blas_threads() == 1)


def matmul(a, b, epilogue=None, streaming=False):
    """a @ b for 2-D float32 arrays on the native sgemm (with `epilogue`, a
    backend.epilogue.Epilogue, applied in its stores or else by `finish`; `streaming`: the
    result is read only much later, see _kernels.sgemm), or None when numpy should run it."""
    if (a.dtype != _FLOAT32 or b.dtype != _FLOAT32 or a.ndim != 2 or b.ndim != 2
            or a.shape[0] * a.shape[1] * b.shape[1] < _MIN_MACS or b.shape[1] < _MIN_COLUMNS
            or not active()):
        return None
    in_stores = _in_stores(epilogue)
    out = _kernels.sgemm(a, b, np.empty((a.shape[0], b.shape[1]), dtype=_FLOAT32),
                         epilogue=epilogue.kind if in_stores else None,
                         y=epilogue.y if in_stores else None, streaming=streaming,
                         alpha=epilogue.alpha if in_stores else 0.0)
    return out if in_stores else finish(out, epilogue)


def _in_stores(epilogue):
    """Whether a native kernel's stores can apply `epilogue`: its y (the worker gives one of
    the output's shape) must be a C-contiguous float32 array; else the follower's kernel runs
    on the output."""
    return epilogue is not None and (epilogue.y is None or (
        epilogue.y.dtype == _FLOAT32 and epilogue.y.flags.c_contiguous))


def blas_threads():
    """How many threads numpy's BLAS runs now (1 where that cannot be read): the threads a
    compiled plan shares a long elementwise chain among (imperative/_plan.pxi)."""
    return _blas_threads() if _blas_threads is not None else 1


def _loops_on():
    """The memory-bound native loops run unless the extension is missing or turned off
    (ReLU's gradient also needs AVX2 or AVX-512)."""
    return _kernels is not None and _MODE != "never"


def _same_shape_float32(a, b):
    return (a.dtype == _FLOAT32 and b.dtype == _FLOAT32 and a.shape == b.shape
            and a.flags.c_contiguous and b.flags.c_contiguous)


def _fits(out, x):
    """`out` (the dying input's buffer the core offers, or None) can hold a result like x."""
    return (out is not None and out.shape == x.shape and out.dtype == _FLOAT32
            and out.flags.c_contiguous and out.flags.writeable)


def _output_like(out, x):
    """`out` when it fits a result like x, else a fresh C-ordered array (the kernels write
    C order: np.empty_like would keep a transposed x's order)."""
    return out if _fits(out, x) else np.empty(x.shape, x.dtype)


def relu_grad(dy, y, out):
    """dy * (y > 0) in one native pass for same-shape C-contiguous float32 arrays (whatever
    the BLAS threads: it is one memory-bound pass either way), or None."""
    if not (_SUPPORTED and _loops_on() and _same_shape_float32(dy, y)):
        return None
    return _kernels.relu_grad(dy, y, _output_like(out, dy))


def axpy(x, alpha, y, out):
    """x + alpha * y in one native pass for same-shape C-contiguous float32 arrays (an
    optimizer's update; `out` may be x), or None."""
    if not (_loops_on() and _same_shape_float32(x, y)):
        return None
    return _kernels.axpy(x, alpha, y, _output_like(out, x))


def adam(param, grad, m, v, constants):
    """AdamStep's (param', m', v') in one native pass (ops/optim.py; `constants` the float32
    array _kernels.adam takes), or None: the same bits as its numpy calls."""
    if not (_loops_on() and _same_shape_float32(param, grad) and _same_shape_float32(m, v)
            and param.shape == m.shape):
        return None
    return _kernels.adam(param, grad, m, v, constants)


def adam_steps(arrays, constants):
    """`adam` for every parameter of an AdamStep over several (`arrays`: its inputs, five a
    parameter) in one call, as a flat tuple of (param', m', v') per parameter, or None."""
    return _kernels.adam_steps(arrays, constants) if _loops_on() else None


def _channels_ok(x):
    return (_loops_on() and x.dtype == _FLOAT32 and x.ndim >= 2 and x.flags.c_contiguous
            and x.size > 0)


def channel_moments(x):
    """Per-channel (axis 1) mean and biased variance of float32 x in two contiguous passes
    (batch norm's statistics), or None."""
    return _kernels.channel_moments(x) if _channels_ok(x) else None


def batch_norm_grad(x, dy, weight, eps):
    """Batch norm's training gradients (dx, dw, db) of float32 x and dy (N, C, ...) in two
    native passes a channel after the statistics' (channel_moments'), or None."""
    if not (_channels_ok(x) and _same_shape_float32(x, dy) and weight.dtype == _FLOAT32):
        return None
    mean, var = _kernels.channel_moments(x)
    return _kernels.batch_norm_grad(x, dy, mean, var, weight, eps)


def channel_affine(x, mean, scale, shift):
    """(x - mean) * scale + shift per channel (axis 1), as numpy would compute it, or None."""
    return _kernels.channel_affine(x, mean, scale, shift) if _channels_ok(x) else None


def layer_norm_rows(rows, weight, bias, eps):
    """Layer normalisation of each row of a 2-D float32 array (then `* weight + bias` per
    column when weight is given), each row in L1 for all its passes, or None."""
    if not _channels_ok(rows) or (weight is not None and (weight.dtype != _FLOAT32
                                                          or bias.dtype != _FLOAT32)):
        return None
    return _kernels.layer_norm_rows(rows, weight, bias, eps)


_ROWS_ON = _SUPPORTED and _MODE != "never"      # the row loops may run (the mode is fixed)


def _rows_on(x, axis):
    """The native loops take x (C-contiguous float32, see _kernels.rows_apply) along axis."""
    return _ROWS_ON and _kernels.rows_apply(x, axis)


# The row kernels as direct kernels (OpDef.direct_kernel): one C call that falls back to
# the op's own kernel where the row loops do not take the input; None where they are off.
softmax_rows_or = _kernels.softmax_rows_or if _ROWS_ON else None
log_softmax_rows_or = _kernels.log_softmax_rows_or if _ROWS_ON else None
# numpy's where, in one branch-free pass where the operands allow (the same bits)
where_or_numpy = _kernels.where_or_numpy if _ROWS_ON else None

# Reduce's: a float32 sum, mean, max or min over all of a small array or its last axis
reduce_rows_or = _kernels.reduce_rows_or if _ROWS_ON else None
REDUCE_MODES = ({"SUM": _kernels.REDUCE_SUM, "MEAN": _kernels.REDUCE_MEAN,
                 "MAX": _kernels.REDUCE_MAX, "MIN": _kernels.REDUCE_MIN} if _ROWS_ON else {})
# a max pooling's input gradient in one pass (ops/pool.py:MaxPoolGrad; portable C, no
# instruction set needed), None without the extension
max_pool_grad = _kernels.max_pool_grad if _kernels is not None else None
# the forward 2x2 stride-2 max pooling of float32 (ops/pool.py), likewise
max_pool_2x2 = _kernels.max_pool_2x2 if _kernels is not None else None
# LayerNormForward's (with weight and bias): float32 rows of the trailing values
layer_norm_or = _kernels.layer_norm_or if _ROWS_ON else None
# CrossEntropy's: 2-D float32 logits' losses and their mean or sum (codes: mean, sum, none)
cross_entropy_or = _kernels.cross_entropy_or if _ROWS_ON else None
CROSS_ENTROPY_REDUCTIONS = ({"mean": _kernels.REDUCE_MEAN, "sum": _kernels.REDUCE_SUM,
                             "none": -1} if _ROWS_ON else {})


def depthwise_on():
    """The native depthwise convolution loops run (ops/depthwise.py)."""
    return _loops_on()


if _kernels is not None:
    depthwise_forward = _kernels.depthwise_forward
    depthwise_grad_input = _kernels.depthwise_grad_input
    depthwise_grad_weight = _kernels.depthwise_grad_weight


def rows_add(table, index, value):
    """numpy's add.at(table, index, value) natively where index is one integer array picking
    rows of a float32 table (the same sums, in the same order); False where it does not
    apply (the caller runs numpy's)."""
    return _ROWS_ON and len(index) == 1 and _kernels.rows_add(table, index[0], value)


def _along_rows(kernel, x, axis, *args, out=None):
    """`kernel(x, *args)`, a loop over rows along the last axis (or an elementwise one), of
    float32 x along its last axis whatever x's layout: a strided or transposed x copied
    contiguous first, a 0-d one as one row; None for another axis, where x is no float32
    array or is empty, or the loops are off. So that the bits do not depend on the layout:
    such inputs ran numpy's composite formulas, an ulp apart, and slowly (an LSTM's gates,
    strided views of one product: sigmoid 0.41 ms on (1024, 64) against 0.03 ms; a
    transposed (4096, 1000)'s softmax 33 ms against 18 ms copied). Along another axis of a
    contiguous array numpy's passes, which vectorise across rows, beat moving the axis
    last (5 ms to 24). With `out` (for an elementwise kernel, which takes `out=`), the
    result is written there where it fits a result like x (_fits), and `out` returned."""
    dest = {"out": out} if _fits(out, x) else {}
    if _rows_on(x, axis):
        return kernel(x, *args, **dest)
    if not (_ROWS_ON and type(x) is np.ndarray and x.dtype == _FLOAT32 and x.size
            and axis in (-1, max(x.ndim - 1, 0))):
        return None
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[-1] if x.ndim else 1)
    if dest:
        kernel(rows, *args, out=out.reshape(rows.shape))
        return out
    return kernel(rows, *args).reshape(x.shape)


def softmax_rows(x, axis):
    """softmax of float32 x along `axis` in one native pass per row (three over L1-resident
    data), or None (see _along_rows)."""
    return _along_rows(_kernels.softmax_rows, x, axis)


def log_softmax_rows(x, axis):
    """log_softmax of float32 x along `axis` natively, as softmax_rows, or None."""
    return _along_rows(_kernels.log_softmax_rows, x, axis)


def relu(x, out=None):
    """max(x, 0) of float32 x in one native pass (numpy's maximum against a scalar zero runs
    a scalar loop), into `out` where it fits a result like x, or None."""
    if not _rows_on(x, -1):
        return None
    return _kernels.relu(x, out if _fits(out, x) else None)   # (a new array made in C)


def sigmoid(x, out=None):
    """sigmoid of float32 x in one native pass (a vectorised exp), or None."""
    return _along_rows(_kernels.sigmoid, x, -1, out=out)


def silu(x, out=None):
    """x * sigmoid(x) of float32 x in one native pass, or None."""
    return _along_rows(_kernels.silu, x, -1, out=out)


def hardswish(x, out=None):
    """x * clip(x + 3, 0, 6) / 6 of float32 x in one native pass (numpy's bits), or None."""
    return _along_rows(_kernels.hardswish, x, -1, out=out)


def hardsigmoid(x, out=None):
    """clip(x + 3, 0, 6) / 6 of float32 x in one native pass (numpy's bits), or None."""
    return _along_rows(_kernels.hardsigmoid, x, -1, out=out)


def leaky_relu(x, slope):
    """x where x >= 0, else x * slope, of float32 x in one native pass (numpy's where's
    bits), or None."""
    return _along_rows(_kernels.leaky_relu, x, -1, slope)


def erf(x, small, tail, out=None):
    """erf of float32 x in one native pass from its two expansions' float32 coefficients,
    or None."""
    return _along_rows(_kernels.erf, x, -1, small, tail, out=out)


def gelu(x, coefficients, out=None):
    """x * Phi(x) of float32 x in one native pass, Phi from the erfc polynomial
    `coefficients` (float32, lowest degree first), or None."""
    return _along_rows(_kernels.gelu, x, -1, coefficients, out=out)


def _grad_from_input(kernel, dy, x, out, *args):
    """`kernel(dy, x, *args, out)`, an activation's gradient from its input, for same-shape
    float32 arrays, into `out` where it fits, or None."""
    if not (_loops_on() and dy.dtype == _FLOAT32 and x.dtype == _FLOAT32
            and dy.shape == x.shape):
        return None
    # (strided operands copied first, as in _along_rows: the same bits on every layout)
    return kernel(np.ascontiguousarray(dy), np.ascontiguousarray(x), *args,
                  _output_like(out, dy))


def gelu_grad(dy, x, coefficients, out):
    """GELU's gradient dy * (Phi(x) + x phi(x)) in one native pass for same-shape float32
    arrays, into `out` where it fits, or None."""
    return _grad_from_input(_kernels.gelu_grad, dy, x, out, coefficients)


def silu_grad(dy, x, out):
    """SiLU's gradient dy * s * (1 + x * (1 - s)), s = sigmoid(x), in one native pass for
    same-shape float32 arrays, into `out` where it fits, or None."""
    return _grad_from_input(_kernels.silu_grad, dy, x, out)


def cross_entropy_rows(logits, labels, axis):
    """(loss per row, first row with a label out of range or -1) for 2-D float32 logits with
    classes along `axis`, each value the one log_softmax_rows has at the label, or None."""
    if logits.ndim != 2 or not _rows_on(logits, axis):
        return None
    return _kernels.cross_entropy_rows(logits, labels)


def layer_norm(x, weight, bias, size, eps, stats=None, stats_given=False):
    """Layer normalisation of float32 x over its trailing `size` values (then * weight + bias
    when given, float32 too), as layer_norm_rows computes it, or None. `stats` (float32, two
    values a row): the rows' statistics written there, or with `stats_given` read."""
    if not (_ROWS_ON and type(x) is np.ndarray and x.dtype == _FLOAT32 and x.ndim and x.size
            ) or (weight is not None and not (_kernels.rows_apply(weight, -1)
                                              and _kernels.rows_apply(bias, -1))):
        return None
    # (a strided x copied contiguous first: numpy's reshape of it into rows could be a
    # strided view, which the composite formula then normalised, to other bits)
    return _kernels.layer_norm_rows(np.ascontiguousarray(x).reshape(-1, size), weight, bias,
                                    eps, stats, stats_given).reshape(x.shape)


def layer_norm_grad(x, dy, weight, eps):
    """Layer norm's gradients (dx, or dx, dw, db) of 2-D float32 rows in two native passes
    per row after the statistics', or None (see _kernels.layer_norm_grad)."""
    if not (_loops_on() and _same_shape_float32(x, dy)):
        return None
    return _kernels.layer_norm_grad(x, dy, weight, eps)


def conv2d(x, w, stride, padding, dilation, groups, bias=None, epilogue=None):
    """A one-group, stride-1 float32 convolution on the native direct kernel (plus bias per
    channel, then `epilogue`, in its last copy of the output), or None."""
    if (stride != (1, 1) or groups != 1 or x.dtype != _FLOAT32 or w.dtype != _FLOAT32
            or not active()):
        return None
    in_stores = _in_stores(epilogue) and epilogue.kind != AXPY    # (a product's only)
    out = _kernels.conv2d_s1(x, w, padding, dilation, bias, epilogue.kind if in_stores else None,
                             epilogue.y if in_stores else None)
    return out if in_stores else finish(out, epilogue)


def conv2d_grad_weight(x, dy, kernel_hw, stride, padding, dilation, groups, with_bias=False):
    """The weight gradient of `conv2d` above on the native kernel (with_bias: and the bias
    gradient, as a pair), or None."""
    if (stride != (1, 1) or groups != 1 or x.dtype != _FLOAT32 or dy.dtype != _FLOAT32
            or not active()):
        return None
    return _kernels.conv2d_s1_grad_weight(x, dy, kernel_hw, padding, dilation, with_bias)
