"""Backward rules of the neural-network ops (imperative/ops/conv.py, pool.py, softmax.py,
norm.py, and Embedding and LeakyRelu); see registry.py for the rule interface. Like every
rule, these compute with imperative ops only."""
import numpy as np

from .. import _core
from .. import functional as F
from ..backend import native
from .._core import apply
from ..ops.base import cached_op
from ..ops.indexing import TENSOR
from ..ops.conv import Convolution, ConvolutionBackwardData, ConvolutionBackwardFilter
from ..ops.elemwise import LeakyRelu
from ..ops.indexing import Embedding
from ..ops.dropout import DropoutApply
from ..ops.norm import BatchNormBackward, BatchNormForward, LayerNormBackward, LayerNormForward
from ..ops.pool import MaxPoolGrad, Pooling, valid_counts
from ..ops.softmax import CrossEntropy, CrossEntropyGrad, LogSoftmax, Softmax, SoftmaxGrad
from ..tensor import Tensor
from .registry import as_input_grad, defgrad, is_float, no_grads, single_output, wants
from .rules_indexing import scatter_add

_FLOAT32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Convolution: its two gradients are dedicated ops (ConvolutionBackwardData / Filter)


def _conv_params(op):
    return (op.stride, op.padding, op.dilation, op.groups)


def _data_grad(params, dy, w, in_hw):
    return apply(cached_op(ConvolutionBackwardData, *params, tuple(in_hw)), dy, w)[0]


def _filter_grad(params, x, dy, kernel_hw, with_bias=False):
    """The weight gradient; with_bias: (weight gradient, bias gradient) from one op."""
    outs = apply(cached_op(ConvolutionBackwardFilter, *params, tuple(kernel_hw), with_bias), x, dy)
    return tuple(outs) if with_bias else outs[0]


def _conv(params, x, w):
    return apply(cached_op(Convolution, *params), x, w)[0]


@defgrad(Convolution, inputs=(0, 1), needed_by={0: (1,), 1: (0,)})
@single_output
def _conv_backward(op, ctx, dy):
    """gx = ConvolutionBackwardData(dy, w), gw = ConvolutionBackwardFilter(x, dy), each
    computed only when the engine uses it; the bias gradient (dy summed per channel) comes
    with the weight's from the same op when both are wanted."""
    x, w = ctx.inputs[:2]
    params = _conv_params(op)
    gx = gw = gb = None
    want_bias = len(ctx.in_shapes) == 3 and wants(ctx, 2)
    if wants(ctx, 1):
        gw = _filter_grad(params, x.astype(dy.dtype), dy, ctx.in_shapes[1][2:], want_bias)
        if want_bias:
            gw, gb = gw
    elif want_bias:
        gb = dy.sum(axis=(0, 2, 3))
    # the input's gradient last: next to the op that consumes it (a ReLU's gradient), which
    # its kernel can then do on the way out (backend/epilogue.py)
    if wants(ctx, 0):
        gx = _data_grad(params, dy, w.astype(dy.dtype), ctx.in_shapes[0][2:])
    grads = (gx, gw, gb)[:len(ctx.in_shapes)]
    return tuple(as_input_grad(gr, ctx, i) for i, gr in enumerate(grads))


# Both gradient ops are bilinear, and their gradients are the three ops again:
#   <G, BD(dy, w)> = <conv(G, w), dy>       so  d/d dy = conv(G, w),   d/dw = BF(G, dy)
#   <G, BF(x, dy)> = <conv(x, G), dy>       so  d/dx = BD(dy, G),      d/d dy = conv(x, G)


@defgrad(ConvolutionBackwardData, inputs=(0, 1))
@single_output
def _conv_data_backward(op, ctx, g):
    dy, w = ctx.inputs
    params = _conv_params(op)
    g_dy = _conv(params, g, w.astype(g.dtype)) if wants(ctx, 0) else None
    g_w = _filter_grad(params, g, dy.astype(g.dtype), ctx.in_shapes[1][2:]) \
        if wants(ctx, 1) else None
    return as_input_grad(g_dy, ctx, 0), as_input_grad(g_w, ctx, 1)


@defgrad(ConvolutionBackwardFilter, inputs=(0, 1))
def _conv_filter_backward(op, ctx, grads):
    """g (weight gradient's cotangent) reaches x and dy as above; g_b (the bias gradient's,
    with_bias) reaches dy broadcast over images and positions."""
    g, g_b = grads[0], grads[1] if op.with_bias else None
    if g is None and g_b is None:
        return no_grads(ctx)
    x, dy = ctx.inputs
    params = _conv_params(op)
    g_x = g_dy = None
    if g is not None and wants(ctx, 0):
        g_x = _data_grad(params, dy.astype(g.dtype), g, ctx.in_shapes[0][2:])
    if g is not None and wants(ctx, 1):
        g_dy = _conv(params, x.astype(g.dtype), g)
    if g_b is not None and wants(ctx, 1):
        by_channel = F.broadcast_to(g_b.reshape((1, -1, 1, 1)), ctx.in_shapes[1])
        g_dy = by_channel if g_dy is None else g_dy + by_channel
    return as_input_grad(g_x, ctx, 0), as_input_grad(g_dy, ctx, 1)


# ---------------------------------------------------------------------------------------
# Pooling: one pass per window tap. Tap (i, j) of every window reads the padded input at
# rows i, i + s, ..., which are distinct, so its gradient lands with one strided add.


def _taps(op, out_hw):
    (kh, kw), (sh, sw) = op.window, op.stride
    ho, wo = out_hw
    for i in range(kh):
        for j in range(kw):
            yield (slice(None), slice(None), slice(i, i + (ho - 1) * sh + 1, sh),
                   slice(j, j + (wo - 1) * sw + 1, sw))


def _padded_shape(op, shape):
    (ph, pw) = op.padding
    return shape[:2] + (shape[2] + 2 * ph, shape[3] + 2 * pw)


def _crop_index(op, shape):
    """The index of the unpadded input inside the padded one."""
    (ph, pw) = op.padding
    return (slice(None), slice(None), slice(ph, ph + shape[2]), slice(pw, pw + shape[3]))


def _max_pool_contributions(op, ctx, dy):
    """Per tap, dy where that tap holds its window's maximum; with ties only the first such
    tap in row-major order gets it, as in PyTorch."""
    x, out = ctx.inputs[0], ctx.outputs[0]
    shape = ctx.in_shapes[0]
    xpad = F.full(_padded_shape(op, shape), -np.inf, x.dtype)
    xpad[_crop_index(op, shape)] = x
    unclaimed = F.ones(out.shape, dy.dtype)
    for tap in _taps(op, out.shape[2:]):
        hit = (xpad[tap] == out).astype(dy.dtype) * unclaimed
        unclaimed = unclaimed - hit
        yield tap, dy * hit


def _average_pool_contributions(op, ctx, dy):
    shape, out_hw = ctx.in_shapes[0], ctx.out_shapes[0][2:]
    if op.mode == "AVERAGE":
        share = dy * (1 / (op.window[0] * op.window[1]))
    else:
        # the divisor depends on the shapes only: a constant
        counts = [valid_counts(size, o, k, s, p) for size, o, k, s, p in
                  zip(shape[2:], out_hw, op.window, op.stride, op.padding)]
        share = dy / Tensor(np.outer(*counts).astype(dy.dtype), device=dy.device)
    for tap in _taps(op, out_hw):
        yield tap, share


@defgrad(Pooling, inputs=lambda op: (0,) if op.mode == "MAX" else (),
         outputs=lambda op: (0,) if op.mode == "MAX" else ())
@single_output
def _pooling_backward(op, ctx, dy):
    if not is_float(ctx.in_dtypes[0]):
        return (None,)
    if (op.mode == "MAX" and native.max_pool_grad is not None and _core.get_grad_hook() is None
            and dy.dtype == np.float32 and ctx.in_dtypes[0] == np.float32
            and op.window[0] * op.window[1] <= MaxPoolGrad.MAX_TAPS):
        # nothing records this backward (no higher order): the ops below as one
        grad = apply(cached_op(MaxPoolGrad, op.window, op.stride, op.padding),
                     ctx.inputs[0], ctx.outputs[0], dy)[0]
        return (as_input_grad(grad, ctx, 0),)
    contributions = (_max_pool_contributions if op.mode == "MAX"
                     else _average_pool_contributions)(op, ctx, dy)
    gpad = F.zeros(_padded_shape(op, ctx.in_shapes[0]), dy.dtype)
    for tap, contribution in contributions:
        gpad[tap] = gpad[tap] + contribution
    return (as_input_grad(gpad[_crop_index(op, ctx.in_shapes[0])], ctx, 0),)


# ---------------------------------------------------------------------------------------
# Softmax family


def _class_axis(op, ctx):
    # a 0-d input is one value along its one axis: reduce over everything
    return None if not ctx.in_shapes[0] else op.axis


@defgrad(Softmax, outputs=(0,))
@single_output
def _softmax_backward(op, ctx, dy):
    y = ctx.outputs[0]
    axis = _class_axis(op, ctx)
    ndim = len(ctx.in_shapes[0])
    if (_core.get_grad_hook() is None and axis is not None and axis % ndim == ndim - 1
            and y.dtype == dy.dtype == np.float32):
        # nothing records this backward (no higher order): the ops below as one, which
        # never holds dy * y whole (SoftmaxGrad)
        return (as_input_grad(apply(cached_op(SoftmaxGrad), y, dy)[0], ctx, 0),)
    dx = y * (dy - (dy * y).sum(axis=axis, keepdims=True))
    return (as_input_grad(dx, ctx, 0),)


@defgrad(LogSoftmax, outputs=(0,))
@single_output
def _log_softmax_backward(op, ctx, dy):
    y = ctx.outputs[0]
    dx = dy - F.exp(y) * dy.sum(axis=_class_axis(op, ctx), keepdims=True)
    return (as_input_grad(dx, ctx, 0),)


@defgrad(CrossEntropy, inputs=(0, 1))
@single_output
def _cross_entropy_backward(op, ctx, dy):
    """d loss_k / d logits = softmax(logits) - onehot(label_k), times dy_k (divided by the
    number of items for a mean)."""
    if not is_float(ctx.in_dtypes[0]):
        return no_grads(ctx)
    logits, labels = ctx.inputs
    axis = op.axis % len(ctx.in_shapes[0])
    if op.reduction == "none":
        dy = F.expand_dims(dy, axis)
    elif op.reduction == "mean":
        dy = dy * (1 / max(int(np.prod(ctx.in_shapes[1], dtype=np.int64)), 1))
    if _core.get_grad_hook() is None:
        # nothing records this backward (no higher order): the ops below as one
        dx = apply(cached_op(CrossEntropyGrad, axis), logits, labels, dy)[0]
        return as_input_grad(dx, ctx, 0), None
    classes = ctx.in_shapes[0][axis]
    class_ids = F.arange(classes, device=logits.device).reshape(
        tuple(classes if d == axis else 1 for d in range(logits.ndim)))
    onehot = (F.expand_dims(labels, axis) == class_ids).astype(dy.dtype)
    dx = (F.softmax(logits.astype(dy.dtype), axis) - onehot) * dy
    return as_input_grad(dx, ctx, 0), None


# ---------------------------------------------------------------------------------------
# Normalisation: x_hat = (x - mean) * rstd over `axes`; y = x_hat * weight + bias


def _normalized(x, axes, eps):
    centered = x - x.mean(axis=axes, keepdims=True)
    rstd = F.rsqrt((centered * centered).mean(axis=axes, keepdims=True) + eps)
    return centered * rstd, rstd


def _normalized_input_grad(dxhat, xhat, rstd, axes):
    """Through the batch statistics: the mean and the variance depend on x too."""
    mean = lambda t: t.mean(axis=axes, keepdims=True)  # noqa: E731
    return rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))


@defgrad(LayerNormForward, inputs=(0, 1))   # (1: the weight, when given)
@single_output
def _layer_norm_backward(op, ctx, dy):
    affine = len(ctx.in_shapes) == 3
    if (_core.get_grad_hook() is None and dy.dtype == _FLOAT32
            and all(d == _FLOAT32 for d in ctx.in_dtypes)):
        # nothing records this backward (no higher order): the gradients as one op
        inputs = (ctx.inputs[0], dy) + ((ctx.inputs[1],) if affine else ())
        grads = apply(cached_op(LayerNormBackward, op.normalized_shape, op.eps), *inputs)
        return tuple(as_input_grad(g, ctx, i) if wants(ctx, i) else None
                     for i, g in enumerate(grads))
    k = len(op.normalized_shape)
    ndim = len(ctx.in_shapes[0])
    axes, batch = tuple(range(ndim - k, ndim)), tuple(range(ndim - k))
    xhat, rstd = _normalized(ctx.inputs[0].astype(dy.dtype), axes, op.eps)
    dxhat = dy * ctx.inputs[1] if affine else dy
    grads = [_normalized_input_grad(dxhat, xhat, rstd, axes)]
    if affine:
        grads += [(dy * xhat).sum(axis=batch), dy.sum(axis=batch)]
    return tuple(as_input_grad(g, ctx, i) for i, g in enumerate(grads))


_BATCH_NORM_SAVES = {True: (0, 1), False: (0, 1, 3, 4)}    # by op.training


@defgrad(BatchNormForward, inputs=lambda op: _BATCH_NORM_SAVES[op.training])
@single_output
def _batch_norm_backward(op, ctx, dy):
    """Gradients of x, weight and bias from the normalised output; the running statistics
    (inputs 3, 4, and the updated ones, outputs 1, 2) are buffers without gradients."""
    if (op.training and _core.get_grad_hook() is None and dy.dtype == _FLOAT32
            and all(d == _FLOAT32 for d in ctx.in_dtypes[:2])):
        # nothing records this backward (no higher order): the gradients as one op, where
        # the composite rule made eight temporaries of x's size
        grads = apply(cached_op(BatchNormBackward, op.eps), ctx.inputs[0], dy, ctx.inputs[1])
        return tuple(as_input_grad(g, ctx, i) if wants(ctx, i) else None
                     for i, g in enumerate(grads)) + (None,) * (len(ctx.in_shapes) - 3)
    x, weight = ctx.inputs[0].astype(dy.dtype), ctx.inputs[1].astype(dy.dtype)
    axes = (0,) + tuple(range(2, x.ndim))
    as_channels = lambda t: t.reshape((1, -1) + (1,) * (x.ndim - 2))  # noqa: E731
    if op.training:
        xhat, rstd = _normalized(x, axes, op.eps)
        gx = _normalized_input_grad(dy * as_channels(weight), xhat, rstd, axes)
    else:
        rstd = as_channels(F.rsqrt(ctx.inputs[4].astype(dy.dtype) + op.eps))
        xhat = (x - as_channels(ctx.inputs[3].astype(dy.dtype))) * rstd
        gx = dy * as_channels(weight) * rstd
    grads = (gx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes))
    return tuple(as_input_grad(g, ctx, i) for i, g in enumerate(grads)) + \
        (None,) * (len(ctx.in_shapes) - 3)


# ---------------------------------------------------------------------------------------
# Embedding and leaky ReLU


@defgrad(Embedding, inputs=(0,))
@single_output
def _embedding_backward(op, ctx, dy):
    # rows picked several times accumulate: a scatter-add
    if not is_float(ctx.in_dtypes[1]):
        return no_grads(ctx)
    g = scatter_add(ctx.in_shapes[1], ctx.in_dtypes[1], dy, (TENSOR,), (ctx.inputs[0],))
    return None, g


@defgrad(DropoutApply, inputs=(1,))
@single_output
def _dropout_backward(op, ctx, dy):
    # dy * mask / keep: the same op, the same rounding as the composite's gradient
    return apply(cached_op(DropoutApply, op.keep), dy, ctx.inputs[1])[0], None


@defgrad(LeakyRelu, inputs=(0,))
@single_output
def _leaky_relu_backward(op, ctx, dy):
    x = ctx.inputs[0]
    return (as_input_grad(F.where(x >= 0, dy, dy * op.negative_slope), ctx, 0),)
