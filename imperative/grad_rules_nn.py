"""Backward rules of the neural-network ops (imperative/ops/nn.py); see grad_rules.py for
the rule interface. Like every rule, these compute with imperative ops only."""
import numpy as np

from . import functional as F
from .grad_rules import (_as_input_grad, _is_float, _no_grads, _scatter_add, _single_output,
                         defgrad)
from .ops.indexing import TENSOR
from .ops.nn import (BatchNormForward, Convolution, CrossEntropy, Embedding, LayerNormForward,
                     LeakyRelu, LogSoftmax, Pooling, Softmax, _valid_counts)
from .tensor import Tensor


# ---------------------------------------------------------------------------------------
# Convolution: both gradients are convolutions again


def _conv_input_grad(dy, w, in_hw, stride, padding, dilation, groups):
    """The transposed convolution of dy: dy is stuffed with stride-1 zeros between its
    values and bordered by a window span of zeros, then convolved with the weight flipped
    in space and with in/out channels swapped. That yields the gradient of the padded
    input, which is cropped to the input."""
    n, o, ho, wo = dy.shape
    _, cg, kh, kw = w.shape
    spans = [d * (k - 1) + 1 for d, k in zip(dilation, (kh, kw))]
    # input rows/cols past the last window get no gradient: zeros at the far end
    tails = [size + 2 * p - span - (out - 1) * s
             for size, p, span, out, s in zip(in_hw, padding, spans, (ho, wo), stride)]
    big = F.zeros((n, o) + tuple(2 * (span - 1) + (out - 1) * s + 1 + tail for span, out, s, tail
                                 in zip(spans, (ho, wo), stride, tails)), dy.dtype)
    (sh, sw), (bh, bw) = stride, (spans[0] - 1, spans[1] - 1)
    big[:, :, bh:bh + (ho - 1) * sh + 1:sh, bw:bw + (wo - 1) * sw + 1:sw] = dy
    g = groups
    swapped = w.reshape(g, o // g, cg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(cg * g, o // g, kh, kw)
    full = F.conv2d(big, swapped[:, :, ::-1, ::-1], dilation=dilation, groups=g)
    (ph, pw), (h, wd) = padding, in_hw
    return full[:, :, ph:ph + h, pw:pw + wd]


def _conv_weight_grad(x, dy, kernel_hw, stride, padding, dilation):
    """dW[o, c, i, j] = sum over n, h, w of dy[n, o, h, w] xpad[n, c, h s + i d, w s + j d]:
    a convolution of x by dy with the batch as channels, stride and dilation exchanged.
    (Its output may overhang the kernel by the rows no window reached: cropped.)"""
    kh, kw = kernel_hw
    g = F.conv2d(x.transpose(1, 0, 2, 3), dy.transpose(1, 0, 2, 3),
                 stride=dilation, padding=padding, dilation=stride)
    return g[:, :, :kh, :kw].transpose(1, 0, 2, 3)


def _grouped_weight_grad(x, dy, w_shape, op):
    g = op.groups
    cg, og = w_shape[1], w_shape[0] // g
    parts = [_conv_weight_grad(x[:, i * cg:(i + 1) * cg], dy[:, i * og:(i + 1) * og],
                               w_shape[2:], op.stride, op.padding, op.dilation)
             for i in range(g)]
    return parts[0] if g == 1 else F.concat(parts, 0)


@defgrad(Convolution, inputs=(0, 1))
@_single_output
def _conv_backward(op, ctx, dy):
    x, w = (t.astype(dy.dtype) for t in ctx.inputs[:2])
    gx = gw = gb = None
    if _is_float(ctx.in_dtypes[0]):
        gx = _conv_input_grad(dy, w, ctx.in_shapes[0][2:], op.stride, op.padding,
                              op.dilation, op.groups)
    if _is_float(ctx.in_dtypes[1]):
        gw = _grouped_weight_grad(x, dy, ctx.in_shapes[1], op)
    if len(ctx.in_shapes) == 3:
        gb = dy.sum(axis=(0, 2, 3))
    grads = (gx, gw, gb)[:len(ctx.in_shapes)]
    return tuple(_as_input_grad(gr, ctx, i) for i, gr in enumerate(grads))


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
        counts = [_valid_counts(size, o, k, s, p) for size, o, k, s, p in
                  zip(shape[2:], out_hw, op.window, op.stride, op.padding)]
        share = dy / Tensor(np.outer(*counts).astype(dy.dtype), device=dy.device)
    for tap in _taps(op, out_hw):
        yield tap, share


@defgrad(Pooling, inputs=lambda op: (0,) if op.mode == "MAX" else (),
         outputs=lambda op: (0,) if op.mode == "MAX" else ())
@_single_output
def _pooling_backward(op, ctx, dy):
    if not _is_float(ctx.in_dtypes[0]):
        return (None,)
    contributions = (_max_pool_contributions if op.mode == "MAX"
                     else _average_pool_contributions)(op, ctx, dy)
    gpad = F.zeros(_padded_shape(op, ctx.in_shapes[0]), dy.dtype)
    for tap, contribution in contributions:
        gpad[tap] = gpad[tap] + contribution
    return (_as_input_grad(gpad[_crop_index(op, ctx.in_shapes[0])], ctx, 0),)


# ---------------------------------------------------------------------------------------
# Softmax family


def _class_axis(op, ctx):
    # a 0-d input is one value along its one axis: reduce over everything
    return None if not ctx.in_shapes[0] else op.axis


@defgrad(Softmax, outputs=(0,))
@_single_output
def _softmax_backward(op, ctx, dy):
    y = ctx.outputs[0]
    dx = y * (dy - (dy * y).sum(axis=_class_axis(op, ctx), keepdims=True))
    return (_as_input_grad(dx, ctx, 0),)


@defgrad(LogSoftmax, outputs=(0,))
@_single_output
def _log_softmax_backward(op, ctx, dy):
    y = ctx.outputs[0]
    dx = dy - F.exp(y) * dy.sum(axis=_class_axis(op, ctx), keepdims=True)
    return (_as_input_grad(dx, ctx, 0),)


@defgrad(CrossEntropy, inputs=(0, 1))
@_single_output
def _cross_entropy_backward(op, ctx, dy):
    """d loss_k / d logits = softmax(logits) - onehot(label_k), times dy_k (divided by the
    number of items for a mean)."""
    if not _is_float(ctx.in_dtypes[0]):
        return _no_grads(ctx)
    logits, labels = ctx.inputs
    axis = op.axis % len(ctx.in_shapes[0])
    classes = ctx.in_shapes[0][axis]
    class_ids = F.arange(classes, device=logits.device).reshape(
        tuple(classes if d == axis else 1 for d in range(logits.ndim)))
    onehot = (F.expand_dims(labels, axis) == class_ids).astype(dy.dtype)
    if op.reduction == "none":
        dy = F.expand_dims(dy, axis)
    elif op.reduction == "mean":
        dy = dy * (1 / max(int(np.prod(ctx.in_shapes[1], dtype=np.int64)), 1))
    dx = (F.softmax(logits.astype(dy.dtype), axis) - onehot) * dy
    return _as_input_grad(dx, ctx, 0), None


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
@_single_output
def _layer_norm_backward(op, ctx, dy):
    k = len(op.normalized_shape)
    ndim = len(ctx.in_shapes[0])
    axes, batch = tuple(range(ndim - k, ndim)), tuple(range(ndim - k))
    xhat, rstd = _normalized(ctx.inputs[0].astype(dy.dtype), axes, op.eps)
    affine = len(ctx.in_shapes) == 3
    dxhat = dy * ctx.inputs[1] if affine else dy
    grads = [_normalized_input_grad(dxhat, xhat, rstd, axes)]
    if affine:
        grads += [(dy * xhat).sum(axis=batch), dy.sum(axis=batch)]
    return tuple(_as_input_grad(g, ctx, i) for i, g in enumerate(grads))


@defgrad(BatchNormForward, inputs=lambda op: (0, 1) if op.training else (0, 1, 3, 4))
@_single_output
def _batch_norm_backward(op, ctx, dy):
    """Gradients of x, weight and bias from the normalised output; the running statistics
    (inputs 3, 4, and the updated ones, outputs 1, 2) are buffers without gradients."""
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
    return tuple(_as_input_grad(g, ctx, i) for i, g in enumerate(grads)) + \
        (None,) * (len(ctx.in_shapes) - 3)


# ---------------------------------------------------------------------------------------
# Embedding and leaky ReLU


@defgrad(Embedding, inputs=(0,))
@_single_output
def _embedding_backward(op, ctx, dy):
    # rows picked several times accumulate: a scatter-add
    if not _is_float(ctx.in_dtypes[1]):
        return _no_grads(ctx)
    g = _scatter_add(ctx.in_shapes[1], ctx.in_dtypes[1], dy, (TENSOR,), (ctx.inputs[0],))
    return None, g


@defgrad(LeakyRelu, inputs=(0,))
@_single_output
def _leaky_relu_backward(op, ctx, dy):
    x = ctx.inputs[0]
    return (_as_input_grad(F.where(x >= 0, dy, dy * op.negative_slope), ctx, 0),)
