"""ONNX forms of the neural-network ops: convolution, pooling, the softmax family, batch and
layer normalisation, embedding.

The NN ops are float functions: integer inputs compute in float32, float16 inputs compute
in float32 and round once at the end (ops/nn_common.py); their ONNX forms cast the same way.
"""
from __future__ import annotations

import numpy as np

from .. import ops as O
from ..ops.base import normalize_axis
from ..ops.nn_common import compute_dtype
from .onnx_graph import UnsupportedOp

_FLOAT64 = np.dtype(np.float64)
_INT64 = np.dtype(np.int64)
_UINT8 = np.dtype(np.uint8)


def _float_inputs(b, ins, outs):
    """The inputs' names cast to the compute dtype of the op's float output, and that
    dtype."""
    compute = compute_dtype(outs[0].dtype)
    return [b.cast(x.name, x.dtype, compute) for x in ins], compute


def convolution(b, op, ins, outs):
    names, compute = _float_inputs(b, ins, outs)
    (ph, pw), kernel = op.padding, list(ins[1].shape[2:])
    y = b.node("Conv", names, kernel_shape=kernel, strides=list(op.stride),
               pads=[ph, pw, ph, pw], dilations=list(op.dilation), group=op.groups)
    return [b.cast(y, compute, outs[0].dtype)]


def _max_pool_dtype(dtype):
    """A dtype MaxPool has kernels for that holds every value of `dtype` exactly (a max
    needs no rounding, so the kernel keeps the input's dtype)."""
    if dtype.kind == "f":
        return np.dtype(np.float32) if dtype == np.float16 else dtype
    return _UINT8 if dtype.kind == "b" else _FLOAT64


def pooling(b, op, ins, outs):
    (x,), out = ins, outs[0]
    (ph, pw) = op.padding
    attributes = dict(kernel_shape=list(op.window), strides=list(op.stride),
                      pads=[ph, pw, ph, pw])
    if op.mode == "MAX":
        compute = _max_pool_dtype(x.dtype)
        y = b.node("MaxPool", [b.cast(x.name, x.dtype, compute)], **attributes)
    else:
        (name,), compute = _float_inputs(b, ins, outs)
        exclude = op.mode == "AVERAGE_COUNT_EXCLUDE_PADDING"
        y = b.node("AveragePool", [name], count_include_pad=int(not exclude), **attributes)
    return [b.cast(y, compute, out.dtype)]


def _along_axis(op_type):
    """Softmax, LogSoftmax: a 0-d input is one value along one axis, as in PyTorch."""
    def form(b, op, ins, outs):
        (name,), compute = _float_inputs(b, ins, outs)
        x = ins[0]
        if x.ndim == 0:
            y = b.node(op_type, [b.node("Reshape", [name, b.ints([1])])], axis=0)
            y = b.node("Reshape", [y, b.ints([])])
        else:
            y = b.node(op_type, [name], axis=normalize_axis(op.axis, x.ndim, op_type))
        return [b.cast(y, compute, outs[0].dtype)]
    return form


def cross_entropy(b, op, ins, outs):
    logits, labels = ins
    compute = compute_dtype(outs[0].dtype)
    axis = normalize_axis(op.axis, logits.ndim, "cross_entropy")
    logp = b.node("LogSoftmax", [b.cast(logits.name, logits.dtype, compute)], axis=axis)
    index = b.node("Unsqueeze", [b.cast(labels.name, labels.dtype, _INT64), b.ints([axis])])
    picked = b.node("GatherElements", [logp, index], axis=axis)
    loss = b.node("Neg", [b.node("Squeeze", [picked, b.ints([axis])])])
    if op.reduction != "none":
        loss = b.reduce("ReduceSum" if op.reduction == "sum" else "ReduceMean", loss,
                        range(labels.ndim), False)
    return [b.cast(loss, compute, outs[0].dtype)]


def batch_norm(b, op, ins, outs):
    if op.training:
        raise UnsupportedOp("batch statistics (training=True) are not exported: put the "
                            "model in eval mode (model.eval()) before recording")
    names, compute = _float_inputs(b, ins, outs)
    y = b.node("BatchNormalization", names, epsilon=op.eps)
    return [b.cast(y, compute, outs[0].dtype)]


def layer_norm(b, op, ins, outs):
    names, compute = _float_inputs(b, ins, outs)
    shape = op.normalized_shape
    if len(names) == 1:     # no affine transform: scale 1, shift 0
        names += [b.const(np.ones(shape, compute)), b.const(np.zeros(shape, compute))]
    y = b.node("LayerNormalization", names, axis=-len(shape), epsilon=op.eps)
    return [b.cast(y, compute, outs[0].dtype)]


def embedding(b, op, ins, outs):
    indices, weight = ins
    return [b.node("Gather", [weight.name, b.cast(indices.name, indices.dtype, _INT64)], axis=0)]


TRANSLATIONS = {
    O.Convolution: convolution, O.Pooling: pooling, O.Softmax: _along_axis("Softmax"),
    O.LogSoftmax: _along_axis("LogSoftmax"), O.CrossEntropy: cross_entropy,
    O.BatchNormForward: batch_norm, O.LayerNormForward: layer_norm, O.Embedding: embedding,
}
