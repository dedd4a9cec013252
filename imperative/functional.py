"""The functional API (`imperative.functional`, also `imperative.F`).

Each function builds its op (interned with `cached_op`, so the core reuses the op's
inference cache) and applies it. Names and arguments follow numpy (`axis`, `keepdims`)
and, for the NN set, PyTorch. Python scalars and numpy arrays are accepted wherever a
tensor is: scalars take the dtype the contract's promotion gives them (`int8 tensor + 1`
stays int8, `int32 tensor + 1.5` is float32), arrays keep theirs (float64 -> float32).
"""
from __future__ import annotations

import inspect
from typing import Callable, Sequence

import numpy as np

from . import _core
from . import dtype as D
from . import random as _random
from . import ops as O
from ._core import TensorBase
from .device import get_device
from .ops.base import cached_op, check_real, float_dtype, normalize_axis, remember
from .ops.shape import check_int_tuple, check_shape_arg, roll_cuts
from .ops.shape import check_permutation as _check_permutation   # (not an F function)
from .creation import (_as_tensor, arange, copy, full, full_like, linspace, ones,  # noqa: F401
                       ones_like, zeros, zeros_like)
from ._types import AxisLike, PairLike, ShapeLike, TensorLike
from .composed import logsumexp, one_hot, pad
from .composed_activations import mish, prelu
from .composed_conv_norm import conv1d, conv_transpose2d, group_norm, instance_norm
from .composed_resize import (adaptive_avg_pool2d, adaptive_max_pool2d, interpolate,
                              pixel_shuffle, pixel_unshuffle)
from .composed_pool1d import (adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d,
                              max_pool1d)
from .losses import (binary_cross_entropy, binary_cross_entropy_with_logits,  # noqa: F401
                     composed_cross_entropy, huber_loss, kl_div, l1_loss, mse_loss, nll_loss,
                     smooth_l1_loss)
from .distances import cdist, cosine_similarity, normalize, pairwise_distance  # noqa: F401
from .activations import glu, gumbel_softmax, logaddexp, logsigmoid, softsign  # noqa: F401
from .norms import std, var  # noqa: F401
from .tensor_ops import (argsort, cumprod, cumsum, einsum, flip, gather, index_add,  # noqa: F401
                         index_select, norm, outer, scatter, scatter_add, sort, topk, tril, triu)
from .tensor import Tensor
from .torch_hints import keyword_hints

__all__ = [
    # elementwise
    "add", "sub", "mul", "div", "floor_div", "mod", "pow", "maximum", "minimum", "neg", "abs",
    "sign", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "erf",
    "floor", "ceil", "round", "trunc", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift", "right_shift",
    "subtract", "multiply", "divide", "true_divide", "remainder", "power", "negative",
    "where", "clip",
    # reductions
    "sum", "mean", "max", "min", "prod", "argmax", "argmin", "var", "std", "logsumexp",
    # linear algebra and shapes
    "matmul", "reshape", "transpose", "broadcast_to", "expand_dims", "squeeze", "flatten",
    "concat", "stack", "split", "roll", "pad",
    # creation and devices
    "zeros", "ones", "full", "arange", "linspace", "zeros_like", "ones_like", "full_like", "copy",
    # neural networks
    "relu", "gelu", "sigmoid", "softplus", "silu", "hardswish", "hardsigmoid", "leaky_relu", "elu",
    "softmax", "log_softmax", "cross_entropy", "linear", "conv2d", "max_pool2d", "avg_pool2d",
    "batch_norm", "layer_norm", "embedding", "dropout", "mse_loss", "one_hot",
    # PyTorch layers composed of the ops above (composed_*.py)
    "mish", "prelu", "conv1d", "conv_transpose2d", "group_norm", "instance_norm",
    "interpolate", "pixel_shuffle", "pixel_unshuffle", "adaptive_avg_pool2d",
    "adaptive_max_pool2d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    # PyTorch's losses (losses.py), distances, activations and scans
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "nll_loss", "kl_div", "normalize", "cosine_similarity",
    "pairwise_distance", "cdist", "logaddexp", "softsign", "logsigmoid", "glu",
    "gumbel_softmax",
    # PyTorch tensor functions (imperative/tensor_ops.py)
    "gather", "scatter", "scatter_add", "index_select", "index_add", "sort", "argsort", "topk",
    "cumsum", "cumprod", "flip", "tril", "triu", "einsum", "outer", "norm",
]


# ---------------------------------------------------------------------------------------
# Arguments


_apply1 = _core.apply_one     # an op's (first) output: `_core.apply(op, *tensors)[0]`
_unary = _core.unary          # a one-input op on a Tensor, or None for other data


def _tensors(*args):
    """The arguments as Tensors on one device. Python scalars become constants of the
    dtype promotion gives them against the other arguments (API.md §5)."""
    for a in args:
        if not isinstance(a, TensorBase):
            break
    else:
        return args         # (a loop, not all() over a generator: the common case is fast)
    for i, a in enumerate(args):
        if a is None:
            raise TypeError(f"argument {i} is None; expected a Tensor, an array or a number")
    device = get_device(*args)
    scalar_dtype = D.dtype_promotion(list(args))
    return tuple(
        Tensor(a, dtype=scalar_dtype, device=device) if isinstance(a, (bool, int, float))
        else _as_tensor(a, device)
        for a in args)


def _hashable(value):
    """Op parameters must be hashable: lists become tuples."""
    return tuple(value) if isinstance(value, list) else value


# ---------------------------------------------------------------------------------------
# Elementwise


def _elemwise(mode: str, name: str, doc: str) -> Callable[..., Tensor]:
    op = cached_op(O.Elemwise, mode)
    if O.elemwise.arity(mode) == 1:
        def fn(x):
            out = _unary(op, x)     # a Tensor: the operators' path, host fast path first
            return out if out is not None else _apply1(op, *_tensors(x))
    else:
        def fn(x, y):
            return _apply1(op, *_tensors(x, y))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc} (Elemwise {mode})."
    return fn


add = _elemwise("ADD", "add", "x + y")
sub = _elemwise("SUB", "sub", "x - y")
mul = _elemwise("MUL", "mul", "x * y")
div = _elemwise("TRUE_DIV", "div", "x / y; integers divide in float32")
floor_div = _elemwise("FLOOR_DIV", "floor_div", "x // y")
mod = _elemwise("MOD", "mod", "x % y, with the sign of y as in numpy")
_pow = _elemwise("POW", "pow", "x ** y")


def pow(x: TensorLike, y: TensorLike) -> Tensor:
    """x ** y (Elemwise POW); a float32 Tensor to the power 2, 3 or 4 (a Python number) as
    products, as the operator computes it (docs/api.md)."""
    if isinstance(x, TensorBase) and (type(y) in (int, float) or isinstance(y, np.integer)):
        return x ** y           # (the operator: an int to a negative int raises at the call)
    return _pow(x, y)


maximum = _elemwise("MAX", "maximum", "Elementwise maximum, NaN-propagating")
minimum = _elemwise("MIN", "minimum", "Elementwise minimum, NaN-propagating")
neg = _elemwise("NEGATE", "neg", "-x")
abs = _elemwise("ABS", "abs", "|x|")
sign = _elemwise("SIGN", "sign", "-1, 0 or 1 by the sign of x")
exp = _elemwise("EXP", "exp", "e ** x")
expm1 = _elemwise("EXPM1", "expm1", "e ** x - 1, accurate near 0")
log = _elemwise("LOG", "log", "Natural logarithm")
log1p = _elemwise("LOG1P", "log1p", "log(1 + x), accurate near 0")
sqrt = _elemwise("SQRT", "sqrt", "Square root")
rsqrt = _elemwise("RSQRT", "rsqrt", "1 / sqrt(x)")
sin = _elemwise("SIN", "sin", "Sine")
cos = _elemwise("COS", "cos", "Cosine")
tan = _elemwise("TAN", "tan", "Tangent")
tanh = _elemwise("TANH", "tanh", "Hyperbolic tangent")
erf = _elemwise("ERF", "erf", "The error function")
floor = _elemwise("FLOOR", "floor", "Round down; integers unchanged")
ceil = _elemwise("CEIL", "ceil", "Round up; integers unchanged")
round = _elemwise("ROUND", "round", "Round half to even, as numpy.round; integers unchanged")
trunc = _elemwise("TRUNC", "trunc", "Round toward zero; integers unchanged")
equal = _elemwise("EQ", "equal", "x == y")
not_equal = _elemwise("NE", "not_equal", "x != y")
less = _elemwise("LT", "less", "x < y")
less_equal = _elemwise("LEQ", "less_equal", "x <= y")
greater = _elemwise("GT", "greater", "x > y")
greater_equal = _elemwise("GEQ", "greater_equal", "x >= y")
logical_and = _elemwise("LOGICAL_AND", "logical_and", "Truth of x and y")
logical_or = _elemwise("LOGICAL_OR", "logical_or", "Truth of x or y")
logical_xor = _elemwise("LOGICAL_XOR", "logical_xor", "Truth of x xor y")
logical_not = _elemwise("LOGICAL_NOT", "logical_not", "Truth of not x")
bitwise_and = _elemwise("AND", "bitwise_and", "x & y on integers and bools")
bitwise_or = _elemwise("OR", "bitwise_or", "x | y on integers and bools")
bitwise_xor = _elemwise("XOR", "bitwise_xor", "x ^ y on integers and bools")
bitwise_not = _elemwise("NOT", "bitwise_not", "~x on integers and bools")
left_shift = _elemwise("SHL", "left_shift", "x << y on integers")
right_shift = _elemwise("SHR", "right_shift", "x >> y on integers")

# numpy's spellings
subtract, multiply, divide, true_divide = sub, mul, div, div
remainder, power, negative = mod, pow, neg


_WHERE = cached_op(O.Where)


def where(condition: TensorLike, x: TensorLike, y: TensorLike) -> Tensor:
    """`x` where `condition` is true, else `y` (numpy.where, broadcasting; x and y are
    promoted to one dtype)."""
    out = _core.apply_tensors(_WHERE, (condition, x, y))     # (all Tensors: nothing to do)
    if out is not None:
        return out
    x, y = _tensors(x, y)
    if not isinstance(condition, TensorBase):
        condition = _as_tensor(condition, get_device(x, y))
    return _apply1(_WHERE, condition, x, y)


def clip(x: TensorLike, lower: TensorLike | None = None,
        upper: TensorLike | None = None) -> Tensor:
    """numpy.clip: bound x below by `lower` and above by `upper` (None: unbounded).
    Tensor bounds broadcast; a float bound on an integer tensor gives float32."""
    x = _as_tensor(x)
    if lower is None and upper is None:
        raise ValueError("clip: at least one of lower and upper must be given")
    if not ((lower is None or isinstance(lower, (bool, int, float)))
            and (upper is None or isinstance(upper, (bool, int, float)))):
        # tensor or array bounds: the same as numpy, maximum then minimum
        if lower is not None:
            x = maximum(x, lower)
        return x if upper is None else minimum(x, upper)
    dt = O.select.clip_dtype(x.dtype, lower, upper)
    if dt is not x.dtype and not D.same_dtype(dt, x.dtype):
        x = x.astype(dt)
    return _apply1(cached_op(O.Clip, lower, upper), x)


# ---------------------------------------------------------------------------------------
# Reductions


def _reduce(mode, x, axis, keepdims):
    return _apply1(cached_op(O.Reduce, mode, _hashable(axis), bool(keepdims)), _as_tensor(x))


def sum(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Sum over `axis` (None: all; an int or a tuple). bool and small ints sum in int32."""
    return _reduce("SUM", x, axis, keepdims)


def mean(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Mean over `axis`; integers give float32."""
    return _reduce("MEAN", x, axis, keepdims)


def max(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Maximum over `axis`."""
    return _reduce("MAX", x, axis, keepdims)


def min(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Minimum over `axis`."""
    return _reduce("MIN", x, axis, keepdims)


def prod(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Product over `axis`."""
    return _reduce("PRODUCT", x, axis, keepdims)


def argmax(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Index of the maximum (of the flattened tensor when axis is None), int32."""
    return _apply1(cached_op(O.Argmax, axis, bool(keepdims)), _as_tensor(x))


def argmin(x: TensorLike, axis: AxisLike = None, keepdims: bool = False) -> Tensor:
    """Index of the minimum (of the flattened tensor when axis is None), int32."""
    return _apply1(cached_op(O.Argmin, axis, bool(keepdims)), _as_tensor(x))


# ---------------------------------------------------------------------------------------
# Matrix products and shapes


def matmul(a: TensorLike, b: TensorLike, transpose_a: bool = False,
        transpose_b: bool = False) -> Tensor:
    """numpy.matmul(a, b), optionally transposing the last two dimensions of an input."""
    return _apply1(cached_op(O.MatrixMul, bool(transpose_a), bool(transpose_b)), *_tensors(a, b))


def reshape(x: TensorLike, shape: ShapeLike) -> Tensor:
    """A tensor of the same values in `shape` (one -1 allowed)."""
    return _apply1(cached_op(O.Reshape, check_shape_arg(shape, "reshape")), _as_tensor(x))


def transpose(x: TensorLike, axes: Sequence[int] | None = None) -> Tensor:
    """Permute the axes (reverse them when axes is None), numpy.transpose."""
    x = _as_tensor(x)
    axes = (tuple(range(x.ndim))[::-1] if axes is None
            else _check_permutation(check_int_tuple(axes, "transpose"), x.ndim))
    return _apply1(cached_op(O.Dimshuffle, axes), x)


def broadcast_to(x: TensorLike, shape: ShapeLike) -> Tensor:
    """numpy.broadcast_to."""
    return _apply1(cached_op(O.Broadcast, check_shape_arg(shape, "broadcast_to")), _as_tensor(x))


def expand_dims(x: TensorLike, axis: int) -> Tensor:
    """Insert size-1 dimensions at `axis` (an int or a tuple) of the result."""
    return _apply1(cached_op(O.AddAxis, _hashable(axis)), _as_tensor(x))


def squeeze(x: TensorLike, axis: AxisLike = None) -> Tensor:
    """Remove size-1 dimensions: those at `axis`, or all of them when axis is None."""
    x = _as_tensor(x)
    if axis is None:
        axis = tuple(i for i, s in enumerate(x.shape) if s == 1)
    return _apply1(cached_op(O.RemoveAxis, _hashable(axis)), x)


def flatten(x: TensorLike, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """Merge dimensions start_axis..end_axis (inclusive) into one; a 0-d tensor gives (1,)."""
    x = _as_tensor(x)
    if x.ndim == 0:
        return reshape(x, (1,))
    start = normalize_axis(start_axis, x.ndim, "flatten")
    end = normalize_axis(end_axis, x.ndim, "flatten")
    if start > end:
        raise ValueError(f"flatten: start_axis {start_axis} comes after end_axis {end_axis} "
                         f"for shape {x.shape}")
    merged = int(np.prod(x.shape[start:end + 1], dtype=np.int64))
    return reshape(x, x.shape[:start] + (merged,) + x.shape[end + 1:])


def _tensor_list(tensors, what):
    if isinstance(tensors, TensorBase) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{what}: expected a list or tuple of tensors, "
                        f"got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{what}: needs at least one tensor, got an empty sequence")
    return _tensors(*tensors)


_concat_ops: dict = {}     # axis (a plain int) -> its Concat, without the op class's call


def concat(tensors: Sequence[TensorLike], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis (numpy.concatenate); dtypes are promoted."""
    op = _concat_ops.get(axis) if type(axis) is int else None
    if op is None:
        op = cached_op(O.Concat, axis)
        if type(axis) is int:
            remember(_concat_ops, axis, op, 64)
    out = _core.apply_tensors(op, tensors)       # (a list of Tensors: nothing to convert)
    return out if out is not None else _apply1(op, *_tensor_list(tensors, "concat"))


def stack(tensors: Sequence[TensorLike], axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis (numpy.stack)."""
    tensors = _tensor_list(tensors, "stack")
    first = tensors[0].shape
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != first:
            raise ValueError(f"stack: tensor {i} has shape {t.shape}, expected {first} "
                             "(all tensors must have the same shape)")
    axis = normalize_axis(axis, len(first) + 1, "stack")
    return concat([expand_dims(t, axis) for t in tensors], axis)


def split(x: TensorLike, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """numpy.split: an int N gives N equal pieces; a sequence of indices gives the pieces
    between them. Returns a list of tensors (views of x)."""
    op = cached_op(O.Split, axis, _hashable(indices_or_sections))
    return list(_core.apply(op, _as_tensor(x)))


_IDENTITY = cached_op(O.Identity)


def roll(x: TensorLike, shifts: int | Sequence[int], axis: AxisLike = None) -> Tensor:
    """numpy.roll / torch.roll: move each value `shifts` places along `axis` (an int, or a
    tuple as long as `shifts`), those past the end coming round to the front; axis None
    rolls the flattened tensor and restores its shape. Composed of split and concat (views
    and one copy an axis), so gradients, recomputation and traces come with them."""
    x = _as_tensor(x)
    flat = axis is None
    cuts = roll_cuts(shifts, axis, (x.size,) if flat else x.shape)
    if not cuts:
        return _apply1(_IDENTITY, x)        # a new Tensor: `y += 1` must not rebind x
    y = reshape(x, (-1,)) if flat else x
    for a, cut in cuts:
        head, tail = split(y, (cut,), a)
        y = concat([tail, head], a)
    return reshape(y, x.shape) if flat else y


# ---------------------------------------------------------------------------------------
# Neural networks

relu = _elemwise("RELU", "relu", "max(x, 0)")
sigmoid = _elemwise("SIGMOID", "sigmoid", "1 / (1 + exp(-x))")
softplus = _elemwise("SOFTPLUS", "softplus", "log(1 + exp(x)), without overflow")
silu = _elemwise("SILU", "silu", "x * sigmoid(x)")
hardswish = _elemwise("HSWISH", "hardswish", "x * relu6(x + 3) / 6")
hardsigmoid = _elemwise("HSIGMOID", "hardsigmoid", "relu6(x + 3) / 6")
_gelu_erf = _elemwise("GELU", "gelu", "x * Phi(x)")
_gelu_tanh = _elemwise("GELU_TANH", "gelu", "tanh approximation of gelu")


def gelu(x: TensorLike, approximate: str = "none") -> Tensor:
    """x * Phi(x) with the exact erf ("none"), or PyTorch's tanh approximation ("tanh")."""
    if approximate == "none":
        return _gelu_erf(x)
    if approximate == "tanh":
        return _gelu_tanh(x)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def leaky_relu(x: TensorLike, negative_slope: float = 0.01) -> Tensor:
    """x where x >= 0, else negative_slope * x."""
    return _apply1(cached_op(O.LeakyRelu, float(negative_slope)), _as_tensor(x))


def elu(x: TensorLike, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1), as torch.nn.functional.elu (integers give
    float32). Composed of where and expm1; expm1 sees min(x, 0) only, so that a large x
    gives no inf there, whose gradient (multiplied by 0 where x > 0) would be NaN."""
    alpha = check_real(alpha, "elu", "alpha")
    x = _as_tensor(x)
    positive = x > 0
    negative = expm1(where(positive, 0, x))
    return where(positive, x, negative if alpha == 1.0 else negative * alpha)


def _along(op_class, x, axis):
    """The op of `op_class` along `axis` on x: a Tensor straight to dispatch."""
    op = cached_op(op_class, axis)          # (the op checks the axis: an int)
    out = _unary(op, x)
    return out if out is not None else _apply1(op, _as_tensor(x))


def softmax(x: TensorLike, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis` (computed stably)."""
    return _along(O.Softmax, x, axis)


def log_softmax(x: TensorLike, axis: int = -1) -> Tensor:
    """log(softmax(x)) along `axis` (computed stably)."""
    return _along(O.LogSoftmax, x, axis)


def cross_entropy(logits: TensorLike, labels: TensorLike, axis: int = -1,
        reduction: str = "mean", weight: TensorLike | None = None,
        ignore_index: int | None = None, label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of `logits` (classes along `axis`) against integer class `labels`
    (the logits' shape without `axis`) or class probabilities (the logits' shape);
    reduction "mean", "sum" or "none". weight, ignore_index and label_smoothing as
    PyTorch's (losses.py), but ignore_index is None by default, where PyTorch's is -100:
    without them the loss is one fused op."""
    logits = _as_tensor(logits)
    labels = _as_tensor(labels, logits.device)
    if (weight is not None or ignore_index is not None or label_smoothing
            or (labels.dtype.kind == "f" and labels.shape == logits.shape)):
        return composed_cross_entropy(logits, labels, axis, reduction, weight, ignore_index,
                                      label_smoothing)
    return _apply1(cached_op(O.CrossEntropy, axis, reduction), logits, labels)


_MATMUL_WEIGHT_T = cached_op(O.MatrixMul, False, True)


def linear(x: TensorLike, weight: TensorLike, bias: TensorLike | None = None) -> Tensor:
    """x @ weight.T (+ bias), with weight (out_features, in_features) as in PyTorch."""
    x, weight = _as_tensor(x), _as_tensor(weight)
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), "
                         f"got shape {weight.shape}")
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input's last dimension must be in_features={weight.shape[1]} "
                         f"(weight {weight.shape}), got input of shape {x.shape}")
    y = _apply1(_MATMUL_WEIGHT_T, x, weight)      # matmul(x, weight, transpose_b=True)
    if bias is None:
        return y
    bias = _as_tensor(bias, x.device)
    if bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias must have shape ({weight.shape[0]},) (out_features), "
                         f"got {bias.shape}")
    return y + bias


def conv2d(x: TensorLike, weight: TensorLike, bias: TensorLike | None = None,
        stride: PairLike = 1, padding: PairLike = 0, dilation: PairLike = 1,
        groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) as PyTorch's: x (N, C, H, W), weight
    (out_channels, C/groups, kh, kw), bias (out_channels,); ints or pairs."""
    op = cached_op(O.Convolution, _hashable(stride), _hashable(padding), _hashable(dilation),
                   groups)
    inputs = (x, weight) if bias is None else (x, weight, bias)
    return _apply1(op, *(_as_tensor(t) for t in inputs))


def _pool(mode, x, kernel_size, stride, padding):
    op = cached_op(O.Pooling, mode, _hashable(kernel_size), _hashable(stride), _hashable(padding))
    return _apply1(op, _as_tensor(x))


def max_pool2d(x: TensorLike, kernel_size: PairLike, stride: PairLike | None = None,
        padding: PairLike = 0) -> Tensor:
    """Max over kernel_size windows of x (N, C, H, W); stride None: kernel_size; the
    padding never wins."""
    return _pool("MAX", x, kernel_size, stride, padding)


def avg_pool2d(x: TensorLike, kernel_size: PairLike, stride: PairLike | None = None,
        padding: PairLike = 0) -> Tensor:
    """Mean over kernel_size windows of x (N, C, H, W), counting only real input values
    (padding excluded from the count)."""
    return _pool("AVERAGE_COUNT_EXCLUDE_PADDING", x, kernel_size, stride, padding)


def _affine_defaults(weight, bias, shape, dtype, device):
    """Missing scale/shift parameters as ones/zeros (the identity transform)."""
    weight = ones(shape, dtype, device) if weight is None else _as_tensor(weight, device)
    bias = zeros(shape, dtype, device) if bias is None else _as_tensor(bias, device)
    return weight, bias


def batch_norm(x: TensorLike, running_mean: TensorLike | None, running_var: TensorLike | None,
        weight: TensorLike = None, bias: TensorLike | None = None, training: bool = False,
        momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation of x (N, C, ...) per channel, as PyTorch's. In training the
    batch statistics normalise, and `running_mean` / `running_var` (when given) are
    updated in place: rebound to `(1 - momentum) * running + momentum * batch`."""
    x = _as_tensor(x)
    if x.ndim < 2:
        raise ValueError(f"batch_norm: input must be at least 2-D (N, C, ...), got shape {x.shape}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("batch_norm: give both running_mean and running_var, or neither")
    weight, bias = _affine_defaults(weight, bias, (x.shape[1],), float_dtype([x.dtype]), x.device)
    inputs = [x, weight, bias]
    if running_mean is not None:
        running_mean = _as_tensor(running_mean, x.device)
        running_var = _as_tensor(running_var, x.device)
        inputs += [running_mean, running_var]
    op = cached_op(O.BatchNormForward, bool(training), float(momentum), float(eps))
    outputs = _core.apply(op, *inputs)
    if len(outputs) == 3:
        running_mean._set_info_from(outputs[1])
        running_var._set_info_from(outputs[2])
    return outputs[0]


def layer_norm(x: TensorLike, normalized_shape: ShapeLike, weight: TensorLike = None,
        bias: TensorLike | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing `normalized_shape` dimensions, then scale by weight and
    shift by bias (both of that shape) when given, as PyTorch's layer_norm."""
    x = _as_tensor(x)
    op = O.norm.layer_norm_op(normalized_shape, eps)
    if weight is None and bias is None:
        return _apply1(op, x)
    if not (isinstance(weight, TensorBase) and isinstance(bias, TensorBase)):
        weight, bias = _affine_defaults(weight, bias, op.normalized_shape,
                                        float_dtype([x.dtype]), x.device)
    return _apply1(op, x, weight, bias)


def embedding(indices: TensorLike, weight: TensorLike) -> Tensor:
    """Rows of weight (num_embeddings, dim) at the integer `indices`: indices.shape + (dim,)."""
    weight = _as_tensor(weight)
    return _apply1(cached_op(O.Embedding), _as_tensor(indices, weight.device), weight)


def dropout(x: TensorLike, p: float = 0.5, training: bool = True) -> Tensor:
    """Inverted dropout: in training, zero each element with probability p and scale the rest
    by 1/(1-p); otherwise return x. The mask is an RNG op (never recomputed, seeded by
    imperative.random.seed), boolean for a float x: what a memory manager keeps of it is
    one byte an element."""
    return _random.dropout(_as_tensor(x), p, training)


def _add_keyword_hints():
    """`F.sum(x, dim=1)` and the like: wrap each function that takes an axis-like keyword so
    that PyTorch's spelling raises a TypeError naming ours (imperative/torch_hints.py)."""
    axis_like = {"axis", "keepdims", "start_axis", "end_axis"}
    for name in __all__:
        fn = globals()[name]
        if axis_like & set(inspect.signature(fn).parameters):
            globals()[name] = keyword_hints(fn)


_add_keyword_hints()
