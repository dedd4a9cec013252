"""Backward rules of the indexing ops (imperative/ops/indexing.py): the gradient of a gather
is a scatter-add (IndexingIncrMultiAxisVec). See registry.py for the rule interface."""


from .. import functional as F
from .._core import apply
from ..ops import (IndexingMultiAxisVec, IndexingSetMultiAxisVec, MaskedIndexingMultiAxisVec,
                   SetSubtensor, Subtensor)
from ..ops.base import cached_op
from ..ops.indexing import TENSOR
from ..ops.indexing import IndexingIncrMultiAxisVec
from .registry import (as_input_grad, defgrad, is_float, no_grads, single_output, unbroadcast,
                       zeros_for_input)


# ---------------------------------------------------------------------------------------
# Indexing. The gradient of a gather is a scatter-add (repeated indices accumulate):
# IndexingIncrMultiAxisVec (imperative/ops/indexing.py), with its own rule below.


def _index_inputs(first):
    """Selector of the index inputs of an indexing op: those after the `first` fixed ones."""
    return lambda op: tuple(range(first, first + sum(item == TENSOR for item in op.items
                                                      if isinstance(item, str))))


def _gather(t, items, indices):
    """`t[index]` for an op's items and index tensors (basic or advanced)."""
    if not indices:
        # (slices are not hashable before Python 3.12: no cached_op here)
        return apply(Subtensor(tuple(_basic_index(items))), t)[0]
    masked = any(i.dtype.kind == "b" for i in indices)
    cls = MaskedIndexingMultiAxisVec if masked else IndexingMultiAxisVec
    return apply(cached_op(cls, items), t, *indices)[0]


def _basic_index(items):
    return (slice(*item[1:]) if isinstance(item, tuple) and item[0] == "slice" else item
            for item in items)


def scatter_add(shape, dtype, value, items, indices):
    """zeros(shape)[index] += value."""
    return apply(cached_op(IndexingIncrMultiAxisVec, items), F.zeros(shape, dtype),
                 value.astype(dtype), *indices)[0]


@defgrad(Subtensor)
@single_output
def _subtensor_backward(op, ctx, dy):
    # basic indices never repeat an element: a plain setitem into zeros
    zeros = zeros_for_input(ctx, 0)
    g = apply(cached_op(SetSubtensor, op.items), zeros, dy.astype(ctx.in_dtypes[0]))[0]
    return (as_input_grad(g, ctx, 0),)


@defgrad(IndexingMultiAxisVec, MaskedIndexingMultiAxisVec, inputs=_index_inputs(1))
@single_output
def _indexing_backward(op, ctx, dy):
    if not is_float(ctx.in_dtypes[0]):
        return no_grads(ctx)
    g = scatter_add(ctx.in_shapes[0], ctx.in_dtypes[0], dy, op.items, ctx.inputs[1:])
    return (g,) + (None,) * (len(ctx.in_shapes) - 1)


@defgrad(SetSubtensor, IndexingSetMultiAxisVec, IndexingIncrMultiAxisVec,
         inputs=_index_inputs(2))
@single_output
def _setitem_backward(op, ctx, dy):
    """x gets dy except where the value was written (a set) or all of dy (an add); the
    value gets dy at the index, summed over where it was broadcast."""
    indices = ctx.inputs[2:]
    gx = dy
    if type(op) is not IndexingIncrMultiAxisVec:
        cls = SetSubtensor if not indices else IndexingSetMultiAxisVec
        gx = apply(cached_op(cls, op.items), dy, F.zeros((), dy.dtype), *indices)[0]
    gv = unbroadcast(_gather(dy, op.items, indices), ctx.in_shapes[1])
    return (as_input_grad(gx, ctx, 0), as_input_grad(gv, ctx, 1)) + (None,) * len(indices)
