"""ONNX forms of the reductions, matrix products, shape ops, conversions and creation ops.

Programs are recorded with static shapes, so a shape an op computes (a reshape's -1, a
broadcast target, an index's result) is read from the recorded output instead of being
recomputed in the graph."""
from __future__ import annotations

import numpy as np

from .. import dtype as D
from .. import ops as O
from ..ops.base import normalize_axes, normalize_axis
from .onnx_graph import UnsupportedOp

_FLOAT64 = np.dtype(np.float64)
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)
_INT64_MIN = -2 ** 63


# ---------------------------------------------------------------------------------------
# Reductions

_REDUCE_OPS = {"SUM": "ReduceSum", "MEAN": "ReduceMean", "MAX": "ReduceMax",
               "MIN": "ReduceMin", "PRODUCT": "ReduceProd", "SUM_SQR": "ReduceSumSquare"}


def _reduce_compute_dtype(mode, x, out):
    if x.dtype == np.float16:
        return np.dtype(np.float32)
    if mode == "MEAN" and x.dtype.kind in "biu":
        return _FLOAT64             # numpy's mean of integers sums in float64
    if x.dtype.kind in "biu":
        return out if mode in ("SUM", "PRODUCT", "SUM_SQR") else _INT32
    return x.dtype


def reduce(b, op, ins, outs):
    (x,), out = ins, outs[0]
    compute = _reduce_compute_dtype(op.mode, x, out.dtype)
    name = b.cast(x.name, x.dtype, compute)
    axes = normalize_axes(op.axis, x.ndim, op.name)
    if not axes and x.ndim:
        # an explicitly empty axis tuple reduces nothing (ONNX would reduce everything)
        y = b.node("Mul", [name, name]) if op.mode == "SUM_SQR" else name
    else:
        y = b.reduce(_REDUCE_OPS[op.mode], name, axes, op.keepdims)
    return [b.cast(y, compute, out.dtype)]


def arg_reduce(b, op, ins, outs):
    (x,), out = ins, outs[0]
    compute = x.dtype if x.dtype.kind == "f" and x.dtype != np.float16 else _FLOAT64
    name = b.cast(x.name, x.dtype, compute)
    op_type = "ArgMax" if isinstance(op, O.Argmax) else "ArgMin"
    if op.axis is None or x.ndim == 0:     # over the flattened tensor, as numpy
        flat = b.node("Reshape", [name, b.ints([-1])])
        index = b.node(op_type, [flat], axis=0, keepdims=0)
        index = b.node("Reshape", [index, b.ints(out.shape)])
    else:
        axis = normalize_axis(op.axis, x.ndim, op_type)
        index = b.node(op_type, [name], axis=axis, keepdims=int(op.keepdims))
    return [b.cast(index, _INT64, out.dtype)]


# ---------------------------------------------------------------------------------------
# Products


def matmul(b, op, ins, outs):
    dt = outs[0].dtype
    names = []
    for x, transposed in zip(ins, (op.transpose_a, op.transpose_b)):
        name = b.cast(x.name, x.dtype, dt)
        if transposed and x.ndim >= 2:
            perm = list(range(x.ndim - 2)) + [x.ndim - 1, x.ndim - 2]
            name = b.node("Transpose", [name], perm=perm)
        names.append(name)
    return [b.node("MatMul", names)]


# ---------------------------------------------------------------------------------------
# Shapes


def to_recorded_shape(b, op, ins, outs):
    """Reshape, AddAxis, RemoveAxis: the same values in the recorded output shape."""
    return [b.node("Reshape", [ins[0].name, b.ints(outs[0].shape)], allowzero=1)]


def broadcast(b, op, ins, outs):
    return [b.node("Expand", [ins[0].name, b.ints(outs[0].shape)])]


def dimshuffle(b, op, ins, outs):
    return [b.node("Transpose", [ins[0].name], perm=list(op.pattern))]


def identity(b, op, ins, outs):
    return [ins[0].name]


def var_shape(b, op, ins, outs):
    return [b.cast(b.node("Shape", [ins[0].name]), _INT64, outs[0].dtype)]


def _expanded_items(items, ndim):
    """A basic index as one entry per input axis (an int or a slice), `...` expanded and
    None (new axes: the final Reshape makes them) left out."""
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    per_axis = []
    for it in items:
        if it is Ellipsis:
            per_axis += [("slice", None, None, None)] * (ndim - consumed)
        elif it is not None:
            per_axis.append(it)
    return per_axis + [("slice", None, None, None)] * (ndim - len(per_axis))


def subtensor(b, op, ins, outs):
    (x,), out = ins, outs[0]
    starts, ends, axes, steps = [], [], [], []
    for axis, (item, size) in enumerate(zip(_expanded_items(op.items, x.ndim), x.shape)):
        if isinstance(item, tuple):
            start, stop, step = slice(*item[1:]).indices(size)
            if step < 0 and stop < 0:
                stop = _INT64_MIN       # through index 0 (ONNX reads -1 as the last index)
            if (start, stop, step) == (0, size, 1):
                continue
        else:
            start = item + size if item < 0 else item
            stop, step = start + 1, 1
        starts.append(start), ends.append(stop), axes.append(axis), steps.append(step)
    name = x.name
    if axes:
        name = b.node("Slice", [name, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    # integer items drop their axis and None items add one: the recorded shape has both
    return [b.node("Reshape", [name, b.ints(out.shape)], allowzero=1)]


def concat(b, op, ins, outs):
    dt = outs[0].dtype
    axis = normalize_axis(op.axis, ins[0].ndim, "concat")
    return [b.node("Concat", [b.cast(x.name, x.dtype, dt) for x in ins], axis=axis)]


def split(b, op, ins, outs):
    (x,) = ins
    axis = normalize_axis(op.axis, x.ndim, "split")
    sizes = [o.shape[axis] for o in outs]
    if len(outs) == 1:
        return [x.name]
    pieces = b.node("Split", [x.name, b.ints(sizes)], n_outputs=len(outs), axis=axis)
    return list(pieces)


# ---------------------------------------------------------------------------------------
# Conversions and creation


def type_cvt(b, op, ins, outs):
    (x,) = ins
    if D.is_quantize(x.dtype) or D.is_quantize(op.dtype):
        raise UnsupportedOp("quantized dtypes have no ONNX tensor type")
    return [b.cast(x.name, x.dtype, op.dtype)]


def created(b, op, ins, outs):
    """Fill, Arange, Linspace: no inputs, so the value is the same on every call: a
    constant computed by the op's own kernel."""
    return [b.const(op.kernel())]


TRANSLATIONS = {
    O.Reduce: reduce, O.Argmax: arg_reduce, O.Argmin: arg_reduce, O.MatrixMul: matmul,
    O.Reshape: to_recorded_shape, O.AddAxis: to_recorded_shape, O.RemoveAxis: to_recorded_shape,
    O.Broadcast: broadcast, O.Dimshuffle: dimshuffle, O.Identity: identity, O.Copy: identity,
    O.GetVarShape: var_shape, O.Subtensor: subtensor, O.Concat: concat, O.Split: split,
    O.TypeCvt: type_cvt, O.Fill: created, O.Arange: created, O.Linspace: created,
}
