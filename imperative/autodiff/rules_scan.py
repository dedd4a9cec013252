"""Backward rules of the cumulative ops (imperative/ops/scan.py). See registry.py for the
rule interface."""
from .._core import apply
from ..ops.base import cached_op
from ..ops.scan import Cumulative, CumprodGrad
from .registry import as_input_grad, defgrad, no_grads, single_output, wants


def _saves_for_prod(op):
    return (0,) if op.mode == "PROD" else ()


@defgrad(Cumulative, inputs=_saves_for_prod)
@single_output
def _cumulative_backward(op, ctx, dy):
    """A sum's gradient is the sum of dy accumulated the other way; a product's is
    CumprodGrad's (exact with zeros)."""
    if not wants(ctx, 0):
        return no_grads(ctx)
    dy = dy.astype(ctx.in_dtypes[0])
    if op.mode == "SUM":
        g = apply(cached_op(Cumulative, "SUM", op.axis, not op.reverse), dy)[0]
    else:
        g = apply(cached_op(CumprodGrad, op.axis), ctx.inputs[0], dy)[0]
    return (as_input_grad(g, ctx, 0),)
