"""Backward rules of the shape, conversion and selection ops (imperative/ops/shape.py,
convert.py, select.py). See registry.py for the rule interface."""
import numpy as np

from .. import functional as F
from ..ops import (AddAxis, Broadcast, Concat, Copy, Dimshuffle, FastpathCopy, Identity, RemoveAxis,
                   Reshape, Split, TypeCvt, Where, Clip)
from .registry import as_input_grad, defgrad, is_float, single_output, unbroadcast


# ---------------------------------------------------------------------------------------
# Shapes, casts, copies: they save nothing but shapes (Copy the input, for its device)


@defgrad(Reshape, AddAxis, RemoveAxis)
@single_output
def _reshape_backward(op, ctx, dy):
    return (as_input_grad(dy.reshape(ctx.in_shapes[0]), ctx, 0),)


@defgrad(Broadcast)
@single_output
def _broadcast_backward(op, ctx, dy):
    return (as_input_grad(unbroadcast(dy, ctx.in_shapes[0]), ctx, 0),)


@defgrad(Dimshuffle)
@single_output
def _dimshuffle_backward(op, ctx, dy):
    inverse = tuple(int(i) for i in np.argsort(op.pattern))
    return (as_input_grad(F.transpose(dy, inverse), ctx, 0),)


@defgrad(Identity, FastpathCopy)
@single_output
def _identity_backward(op, ctx, dy):
    return (as_input_grad(dy, ctx, 0),)


@defgrad(TypeCvt)
@single_output
def _typecvt_backward(op, ctx, dy):
    # a cast to an integer type is a step function: no gradient flows through it
    if not is_float(ctx.out_dtypes[0]):
        return (None,)
    return (as_input_grad(dy, ctx, 0),)


@defgrad(Copy, inputs=(0,))
@single_output
def _copy_backward(op, ctx, dy):
    # the input is saved only for its device: GradContext carries no devices
    return (as_input_grad(F.copy(dy, ctx.inputs[0].device), ctx, 0),)


# ---------------------------------------------------------------------------------------
# Concat, Split, Where, Clip


@defgrad(Concat)
@single_output
def _concat_backward(op, ctx, dy):
    axis = op.axis % len(ctx.out_shapes[0])
    points = tuple(np.cumsum([s[axis] for s in ctx.in_shapes[:-1]], dtype=np.int64).tolist())
    pieces = F.split(dy, points, axis)
    return tuple(as_input_grad(p, ctx, i) for i, p in enumerate(pieces))


@defgrad(Split)
def _split_backward(op, ctx, grads):
    if all(g is None for g in grads) or not is_float(ctx.in_dtypes[0]):
        return (None,)
    # outputs without a gradient contribute zeros to their piece
    pieces = [F.zeros(shape, dt) if g is None else g
              for g, shape, dt in zip(grads, ctx.out_shapes, ctx.out_dtypes)]
    return (as_input_grad(F.concat(pieces, op.axis), ctx, 0),)


@defgrad(Where, inputs=(0,))
@single_output
def _where_backward(op, ctx, dy):
    cond = ctx.inputs[0]
    gx, gy = F.where(cond, dy, 0), F.where(cond, 0, dy)
    return (None, as_input_grad(unbroadcast(gx, ctx.in_shapes[1]), ctx, 1),
            as_input_grad(unbroadcast(gy, ctx.in_shapes[2]), ctx, 2))


@defgrad(Clip, inputs=(0,))
@single_output
def _clip_backward(op, ctx, dy):
    # inside the closed interval [lower, upper] the gradient passes, as PyTorch's clamp
    x = ctx.inputs[0]
    inside = None
    if op.lower is not None:
        inside = x >= op.lower
    if op.upper is not None:
        below = x <= op.upper
        inside = below if inside is None else inside & below
    return (as_input_grad(F.where(inside, dy, 0), ctx, 0),)
