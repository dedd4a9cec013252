"""Backward rules of the arithmetic ops: Elemwise (a table by mode), ActivationGrad,
ScaledAdd, Reduce and the matrix products (imperative/ops/elemwise.py, reduce.py, matmul.py).
See registry.py for the rule interface."""
import math
from typing import Callable, NamedTuple

import numpy as np

from .. import functional as F
from .._core import apply
from ..ops import BatchedMatrixMul, Elemwise, MatrixMul, Reduce
from ..ops.base import cached_op, normalize_axes
from ..ops.elemwise import ActivationGrad, ScaledAdd
from .registry import (as_input_grad, defgrad, is_float, no_grads, single_output, unbroadcast,
                       wants, zeros_for_input)


# ---------------------------------------------------------------------------------------
# Elemwise: a table mode -> (saved inputs, saved outputs, derivative, needed_by (see
# registry.defgrad), skips_unwanted). A derivative gets (dy, *inputs, output), or (dy, x, y,
# want_x, want_y) where it skips unwanted gradients, the unsaved ones None, and returns one
# gradient per input (None where not wanted) in the output's (broadcast) shape, or _ZERO for
# a piecewise-constant function (zero gradient, as PyTorch gives). Modes not in the table
# (comparisons, logic, bits) get no gradient.

_ZERO = object()
_ELEMWISE = {}                 # mode -> _ElemwiseRule


class _ElemwiseRule(NamedTuple):
    inputs: tuple              # saved inputs
    outputs: tuple             # saved outputs
    derivative: Callable
    needed_by: dict            # see registry.defgrad, or None
    skips_unwanted: bool


_SQRT_2_PI = math.sqrt(2.0 * math.pi)
_GELU_TANH_C = math.sqrt(2.0 / math.pi)


def _elemwise_grad(*modes, inputs=(), outputs=(), needed_by=None, skips_unwanted=False):
    """`skips_unwanted`: the derivative takes (dy, x, y, want_x, want_y) instead of the
    output, and computes only the gradients wanted (a binary op's other product is as dear
    as the forward)."""
    def register(fn):
        for mode in modes:
            _ELEMWISE[mode] = _ElemwiseRule(inputs, outputs, fn, needed_by, skips_unwanted)
        return fn
    return register


@_elemwise_grad("ADD")
def _d_add(dy, x, y, out):
    return dy, dy


@_elemwise_grad("SUB")
def _d_sub(dy, x, y, out):
    return dy, -dy


@_elemwise_grad("MUL", inputs=(0, 1), needed_by={0: (1,), 1: (0,)}, skips_unwanted=True)
def _d_mul(dy, x, y, want_x, want_y):
    return (dy * y if want_x else None), (dy * x if want_y else None)


@_elemwise_grad("TRUE_DIV", inputs=(0, 1), needed_by={0: (1,)}, skips_unwanted=True)
def _d_div(dy, x, y, want_x, want_y):
    dx = dy / y
    return (dx if want_x else None), (-dx * x / y if want_y else None)


@_elemwise_grad("POW", inputs=(0, 1), skips_unwanted=True)
def _d_pow(dy, x, y, want_x, want_y):
    # d/dy x**y = x**y log x; where x <= 0 it is undefined, and we give 0 (log of 1)
    # rather than nan, as PyTorch does at x == 0. x**y is computed again (the same op on
    # the same inputs: the forward's bits) only for an exponent's gradient: keeping the
    # output for it kept the output of every `h ** 2` until backward.
    # x ** 0 is constant: its gradient is 0 where y * x ** (y - 1) reads 0 * inf at x == 0
    # (PyTorch masks the same case)
    gx = F.where(y == 0, 0, dy * y * x ** (y - 1)) if want_x else None
    if not want_y:
        return gx, None
    return gx, dy * x ** y * F.log(F.where(x > 0, x, 1))


@_elemwise_grad("MAX", inputs=(0, 1))
def _d_max(dy, x, y, out):
    return _share(dy, x, y, x < y, x > y)


@_elemwise_grad("MIN", inputs=(0, 1))
def _d_min(dy, x, y, out):
    return _share(dy, x, y, x > y, x < y)


def _share(dy, x, y, x_lost, y_lost):
    """dy to the input that won, half to each at a tie, and all of it to both where a NaN
    made neither lose, as PyTorch routes maximum's and minimum's gradient (and as a
    reduction's tied extremes share theirs)."""
    g = F.where(x == y, dy * 0.5, dy)
    return F.where(x_lost, 0, g), F.where(y_lost, 0, g)


@_elemwise_grad("MOD", inputs=(0, 1))
def _d_mod(dy, x, y, out):
    # x mod y = x - y * floor(x / y)
    return dy, -dy * F.floor_div(x, y)


@_elemwise_grad("FLOOR_DIV")
def _d_floor_div(dy, x, y, out):
    return _ZERO, _ZERO


@_elemwise_grad("SIGN", "FLOOR", "CEIL", "TRUNC", "ROUND")
def _d_step(dy, x, out):
    return (_ZERO,)


@_elemwise_grad("NEGATE")
def _d_neg(dy, x, out):
    return (-dy,)


@_elemwise_grad("ABS", inputs=(0,))
def _d_abs(dy, x, out):
    return (dy * F.sign(x),)


@_elemwise_grad("EXP", outputs=(0,))
def _d_exp(dy, x, out):
    return (dy * out,)


@_elemwise_grad("EXPM1", inputs=(0,))
def _d_expm1(dy, x, out):
    # exp(x) from x, not expm1(x) + 1: where x is well below 0 the output is -1 within a
    # few ulps, and adding 1 kept none of exp(x)'s digits (the gradient at -11.6 was off by
    # 0.14%, at -17 by 44%, from -20 on 0; F.elu is where and expm1)
    return (dy * F.exp(x),)


@_elemwise_grad("LOG", inputs=(0,))
def _d_log(dy, x, out):
    return (dy / x,)


@_elemwise_grad("LOG1P", inputs=(0,))
def _d_log1p(dy, x, out):
    return (dy / (x + 1),)


@_elemwise_grad("SQRT", outputs=(0,))
def _d_sqrt(dy, x, out):
    return (dy * 0.5 / out,)


@_elemwise_grad("RSQRT", outputs=(0,))
def _d_rsqrt(dy, x, out):
    # d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 out^3
    return (dy * -0.5 * out * out * out,)


@_elemwise_grad("SIN", inputs=(0,))
def _d_sin(dy, x, out):
    return (dy * F.cos(x),)


@_elemwise_grad("COS", inputs=(0,))
def _d_cos(dy, x, out):
    return (-dy * F.sin(x),)


@_elemwise_grad("TAN", outputs=(0,))
def _d_tan(dy, x, out):
    return (dy * (1 + out * out),)


@_elemwise_grad("TANH", outputs=(0,))
def _d_tanh(dy, x, out):
    return (_activation_grad("TANH", dy, out),)


@_elemwise_grad("ERF", inputs=(0,))
def _d_erf(dy, x, out):
    return (dy * (2 / math.sqrt(math.pi)) * F.exp(-x * x),)


@_elemwise_grad("RELU", outputs=(0,))
def _d_relu(dy, x, out):
    return (_activation_grad("RELU", dy, out),)


@_elemwise_grad("SIGMOID", outputs=(0,))
def _d_sigmoid(dy, x, out):
    return (_activation_grad("SIGMOID", dy, out),)


@_elemwise_grad("GELU", inputs=(0,))
def _d_gelu(dy, x, out):
    # d/dx x Phi(x) = Phi(x) + x phi(x), in one op
    return (_activation_grad("GELU", dy, x),)


@_elemwise_grad("GELU_TANH", inputs=(0,))
def _d_gelu_tanh(dy, x, out):
    # y = x/2 (1 + tanh u), u = c (x + 0.044715 x^3), so y' = (1 + tanh u)/2 + x/2 (1 -
    # tanh^2 u) u'. In sigmoids: (1 + tanh u)/2 = s(2u), (1 - tanh^2 u)/2 = 2 s(2u) s(-2u),
    # which do not cancel where tanh u is near -1 or 1 (as 1 + t and 1 - t * t did: 30% off
    # at x = -5, and the second derivative so in both tails)
    x2 = x * x
    two_u = (2 * _GELU_TANH_C) * x * (1 + 0.044715 * x2)
    rise, fall = F.sigmoid(two_u), F.sigmoid(-two_u)
    du = _GELU_TANH_C * (1 + 3 * 0.044715 * x2)
    return (dy * (rise + 2 * x * rise * fall * du),)


@_elemwise_grad("SOFTPLUS", inputs=(0,))
def _d_softplus(dy, x, out):
    return (dy * F.sigmoid(x),)


@_elemwise_grad("SILU", inputs=(0,))
def _d_silu(dy, x, out):
    return (_activation_grad("SILU", dy, x),)


@_elemwise_grad("HSWISH", inputs=(0,))
def _d_hswish(dy, x, out):
    # 0 below -3, 1 above 3, (2x + 3) / 6 between (PyTorch's x/3 + 1/2)
    return (dy * F.where(x < -3, 0, F.where(x > 3, 1, x * (1 / 3) + 0.5)),)


@_elemwise_grad("HSIGMOID", inputs=(0,))
def _d_hsigmoid(dy, x, out):
    return (F.where((x > -3) & (x < 3), dy * (1 / 6), 0),)


def _activation_grad(mode, dy, y):
    if dy.dtype != y.dtype:
        y = y.astype(dy.dtype)
    return apply(cached_op(ActivationGrad, mode), dy, y)[0]


@defgrad(ActivationGrad, inputs=(0, 1))
@single_output
def _activation_grad_backward(op, ctx, g):
    """Second order: ActivationGrad(dy, y) is linear in dy (the same op again); in y it is
    0 for RELU (piecewise constant), dy (1 - 2y) for SIGMOID, -2 dy y for TANH,
    dy phi(x) (2 - x^2) for GELU and dy s (1 - s) (2 + x (1 - 2s)), s = sigmoid(x), for
    SILU (whose y is their input x)."""
    dy, y = ctx.inputs
    gdy = _activation_grad(op.mode, g, y) if wants(ctx, 0) else None
    gy = None
    if wants(ctx, 1):
        if op.mode == "RELU":
            gy = F.zeros(ctx.in_shapes[1], ctx.in_dtypes[1])
        elif op.mode == "SIGMOID":
            gy = g * dy * (1 - 2 * y)
        elif op.mode == "GELU":
            gy = g * dy * F.exp(-0.5 * y * y) * (1 / _SQRT_2_PI) * (2 - y * y)
        elif op.mode == "SILU":
            s = F.sigmoid(y)
            gy = g * dy * s * (1 - s) * (2 + y * (1 - 2 * s))
        else:
            gy = g * dy * y * -2
        gy = unbroadcast(gy, ctx.in_shapes[1])
    if gdy is not None:
        gdy = unbroadcast(gdy, ctx.in_shapes[0])
    return as_input_grad(gdy, ctx, 0), as_input_grad(gy, ctx, 1)


@defgrad(ScaledAdd)
@single_output
def _scaled_add_backward(op, ctx, g):
    return (as_input_grad(g, ctx, 0) if wants(ctx, 0) else None,
            as_input_grad(g * op.alpha, ctx, 1) if wants(ctx, 1) else None)


def _elemwise_field(name, default):
    """op -> its mode's entry's field `name` (`default` for a mode without a gradient)."""
    return lambda op: getattr(_ELEMWISE[op.mode], name) if op.mode in _ELEMWISE else default


@defgrad(Elemwise, inputs=_elemwise_field("inputs", ()), outputs=_elemwise_field("outputs", ()),
         needed_by=_elemwise_field("needed_by", None))
@single_output
def _elemwise_backward(op, ctx, dy):
    entry = _ELEMWISE.get(op.mode)
    if entry is None or not any(map(is_float, ctx.in_dtypes)):
        return no_grads(ctx)
    if entry.skips_unwanted:
        raw = entry.derivative(dy, *ctx.inputs, wants(ctx, 0), wants(ctx, 1))
    else:
        raw = entry.derivative(dy, *ctx.inputs, ctx.outputs[0])
    return tuple(_elemwise_input_grad(g, ctx, i) for i, g in enumerate(raw))


def _elemwise_input_grad(g, ctx, i):
    if g is None or not is_float(ctx.in_dtypes[i]):
        return None
    if g is _ZERO:
        return zeros_for_input(ctx, i)
    return as_input_grad(unbroadcast(g, ctx.in_shapes[i]), ctx, i)


# ---------------------------------------------------------------------------------------
# Reduce


def _expand_reduced(g, in_shape, axes):
    """A reduction's output-shaped tensor broadcast back over the input's shape."""
    kept = tuple(1 if i in axes else n for i, n in enumerate(in_shape))
    return F.broadcast_to(g.reshape(kept), in_shape)


def _reduce_saved(op):
    return (0,) if op.mode in ("SUM_SQR", "PRODUCT", "MAX", "MIN") else ()


def _product_of_others(x, axes):
    """For each element of x, the product of the other elements of its slice along `axes`
    (prod's gradient), exact at zeros as PyTorch's: prod / x would give 0/0 there.

    The nonzero elements' product q_i = prod(x_nz) / x_nz_i (x_nz: x with its zeros made
    1) is multiplied by Z_i, the product of the *other* zeros, which is 1 when there are
    none and 0 otherwise. Z_i is written so that its derivative is right too (second
    order): with one other zero x_k, Z_i = x_k (value 0, derivative 1); with none, 1;
    with more, 0 (their product's derivatives are products of zeros)."""
    is_zero = x == 0
    x_nz = F.where(is_zero, 1, x)
    zeros_only = F.where(is_zero, x, 0)             # value 0, derivative 1 at the zeros
    zero_flags = is_zero.astype(x.dtype)
    other_zeros = F.sum(zero_flags, axis=axes, keepdims=True) - zero_flags
    z = ((other_zeros == 0).astype(x.dtype)
         + (other_zeros == 1).astype(x.dtype)
         * (F.sum(zeros_only, axis=axes, keepdims=True) - zeros_only))
    return F.prod(x_nz, axis=axes, keepdims=True) / x_nz * z


@defgrad(Reduce, inputs=_reduce_saved,
         outputs=lambda op: (0,) if op.mode in ("MAX", "MIN") else ())
@single_output
def _reduce_backward(op, ctx, dy):
    if not is_float(ctx.in_dtypes[0]):
        return (None,)
    in_shape = ctx.in_shapes[0]
    axes = normalize_axes(op.axis, len(in_shape), f"Reduce {op.mode}")
    expand = lambda t: _expand_reduced(t, in_shape, axes)  # noqa: E731
    if op.mode == "SUM":
        g = expand(dy)
    elif op.mode == "MEAN":
        count = int(np.prod([in_shape[a] for a in axes], dtype=np.int64))
        g = expand(dy * (1 / max(count, 1)))     # scale the small tensor, then broadcast
    elif op.mode == "SUM_SQR":
        g = expand(dy) * 2 * ctx.inputs[0]
    elif op.mode == "PRODUCT":
        g = expand(dy) * _product_of_others(ctx.inputs[0], axes)
    else:
        # MAX / MIN: ties share the gradient equally
        x = ctx.inputs[0]
        winners = (x == expand(ctx.outputs[0])).astype(x.dtype)
        ties = F.broadcast_to(winners.sum(axis=axes, keepdims=True), in_shape)
        g = expand(dy) * winners / ties
    return (as_input_grad(g, ctx, 0),)


# ---------------------------------------------------------------------------------------
# Matrix products


@defgrad(MatrixMul, BatchedMatrixMul, inputs=(0, 1), needed_by={0: (1,), 1: (0,)})
@single_output
def _matmul_backward(op, ctx, dy):
    """dA' = dy B'^T and dB' = A'^T dy for A' = op(a), B' = op(b); a 1-D operand is a row
    (a) or column (b) matrix, on which numpy ignores the transpose; batch dimensions that
    were broadcast are summed back."""
    a, b = ctx.inputs
    sa, sb = ctx.in_shapes
    sa2 = (1,) + sa if len(sa) == 1 else sa
    sb2 = sb + (1,) if len(sb) == 1 else sb
    ta, tb = op.transpose_a and len(sa) > 1, op.transpose_b and len(sb) > 1
    want_a, want_b = wants(ctx, 0), wants(ctx, 1)
    if len(sa) == 1 and want_b:
        a = a.reshape(sa2)
    if len(sb) == 1 and want_a:
        b = b.reshape(sb2)
    if len(sb) == 1:
        dy = F.expand_dims(dy, dy.ndim)
    if len(sa) == 1:
        dy = F.expand_dims(dy, dy.ndim - 1)
    ga = gb = None
    # b's gradient first: a's is then the last op issued, right before the op that consumes
    # it (a ReLU's gradient in an MLP), which the product can do in its epilogue
    if want_b and len(sa) > 2 and len(sb) == 2 and not ta:
        # a batch of rows times one matrix (a Linear layer on a sequence): the weight's
        # gradient is one product over all rows, not a product per batch entry summed
        # afterwards (that made a (batch, in, out) tensor: 8 MiB for a 2 MiB input)
        rows, grads = a.reshape((-1, sa[-1])), dy.reshape((-1, dy.shape[-1]))
        gb = (F.matmul(grads, rows, transpose_a=True) if tb
              else F.matmul(rows, grads, transpose_a=True))
    elif want_b:
        gb = _summed_to(F.matmul(dy, a, transpose_a=True, transpose_b=ta) if tb
                        else F.matmul(a, dy, transpose_a=not ta), sb2, sb)
    if want_a:
        ga = _summed_to(F.matmul(b, dy, transpose_a=tb, transpose_b=True) if ta
                        else F.matmul(dy, b, transpose_b=not tb), sa2, sa)
    return as_input_grad(ga, ctx, 0), as_input_grad(gb, ctx, 1)


def _summed_to(g, shape2, shape):
    """A product's gradient g summed over broadcast batch dimensions to `shape2` (the operand
    as a matrix), then given the operand's own `shape`."""
    g = unbroadcast(g, shape2)
    return g.reshape(shape) if g.shape != shape else g
