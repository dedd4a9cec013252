"""The ONNX graph under construction, as the per-op translations see it: nodes, initializers,
fresh names, constants and casts. Imports `onnx`, so only `onnx_export.export` imports this
module (lazily: onnx is an optional dependency)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..dtype import dtype_name, is_quantize


class UnsupportedOp(Exception):
    """Raised by a translation for an op (or a parameter of it) with no ONNX form; the
    exporter turns it into a ValueError naming the op and its step."""


@dataclass(frozen=True)
class Operand:
    """A tensor of the graph: its name, and the shape and dtype of the imperative value it
    holds (translations need both to choose casts and axes)."""
    name: str
    shape: tuple
    dtype: np.dtype

    @property
    def ndim(self):
        return len(self.shape)


def onnx_dtype(dtype, what):
    """The TensorProto element type of a numpy dtype; ValueError for the quantized dtypes,
    whose scale and zero point no plain ONNX tensor carries."""
    dtype = np.dtype(dtype)
    if is_quantize(dtype):
        raise ValueError(f"{what}: the quantized dtype {dtype_name(dtype)} has no ONNX tensor "
                         f"type; convert with astype('float32') before exporting")
    try:
        return helper.np_dtype_to_tensor_dtype(dtype)
    except (KeyError, ValueError, TypeError):
        raise ValueError(f"{what}: dtype {dtype_name(dtype)} has no ONNX tensor type") from None


class GraphBuilder:
    """Collects the nodes and initializers of one graph. `opset` is the target opset: the
    translations read it where an ONNX op's form changed between versions."""

    def __init__(self, opset):
        self.opset = opset
        self.nodes = []
        self.initializers = []
        self._used = set()
        self._constants = {}    # (dtype, shape, bytes) -> name: each constant stored once

    def fresh(self, hint):
        """A name not used yet in this graph, `hint` itself when free."""
        hint = "".join(c if c.isalnum() or c in "_./:-" else "_" for c in hint) or "t"
        name, n = hint, 1
        while name in self._used:
            name, n = f"{hint}_{n}", n + 1
        self._used.add(name)
        return name

    def reserve(self, name):
        """Claim an exact name (a graph input or output the caller chose)."""
        if name in self._used:
            raise ValueError(f"the name {name!r} is used twice in the exported graph")
        self._used.add(name)
        return name

    def node(self, op_type, inputs, n_outputs=1, outputs=None, **attributes):
        """Add a node; returns its output names (one name when n_outputs is 1), fresh ones
        unless `outputs` (reserved names) is given. An input may be "" for an optional
        input left out."""
        if outputs is None:
            outputs = [self.fresh(op_type.lower()) for _ in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs,
                                           name=self.fresh(f"{op_type}_node"), **attributes))
        return outputs[0] if len(outputs) == 1 else outputs

    def initializer(self, array, name):
        """Store `array` under the exact (reserved) name `name`."""
        array = np.asarray(array)
        onnx_dtype(array.dtype, name)
        self.initializers.append(numpy_helper.from_array(array.copy(order="C"), name))
        return name

    def initializer_names(self):
        return {t.name for t in self.initializers}

    def const(self, array, dtype=None):
        """The name of a constant holding `array` (in `dtype` when given)."""
        array = np.asarray(array, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        found = self._constants.get(key)
        if found is None:
            found = self._constants[key] = self.initializer(array, self.fresh("const"))
        return found

    def ints(self, values):
        """An int64 vector constant (shapes, axes, slice bounds: ONNX wants int64)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1))

    def cast(self, name, from_dtype, to_dtype):
        """`name` converted to `to_dtype` (itself when it has that dtype already)."""
        if np.dtype(from_dtype) == np.dtype(to_dtype):
            return name
        return self.node("Cast", [name], to=onnx_dtype(to_dtype, "Cast"))

    def reduce(self, op_type, name, axes, keepdims):
        """A Reduce* node over `axes` (non-negative ints; empty: every axis). Opset 18
        moved the axes of all but ReduceSum (moved at 13) from an attribute to an input."""
        axes = list(axes)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.node(op_type, [name, self.ints(axes)] if axes else [name],
                             keepdims=int(keepdims))
        if axes:
            return self.node(op_type, [name], axes=axes, keepdims=int(keepdims))
        return self.node(op_type, [name], keepdims=int(keepdims))

    def model(self, inputs, outputs, value_info, graph_name):
        """The ModelProto of everything added, with `inputs` / `outputs` / `value_info`
        as lists of (name, shape, dtype)."""
        def infos(entries):
            return [helper.make_tensor_value_info(n, onnx_dtype(d, n), list(s))
                    for n, s, d in entries]
        graph = helper.make_graph(self.nodes, graph_name, infos(inputs), infos(outputs),
                                  initializer=self.initializers, value_info=infos(value_info))
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="imperative")
        # the oldest IR version that can hold this opset: older runtimes load the model too
        model.ir_version = min(model.ir_version, _ir_version_for(self.opset))
        return model


def _ir_version_for(opset):
    for entry in onnx.helper.VERSION_TABLE:
        # rows are (release, IR version, default-domain opset, ...)
        if entry[2] >= opset:
            return entry[1]
    return onnx.IR_VERSION
