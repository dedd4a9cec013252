"""ONNX export of a recorded program (API.md §9, `trace.dump`).

`export(program, path)` translates a `Program` (program.py) into an ONNX model and saves it:
arguments become graph inputs, external and constant values initializers (their recorded
values), results graph outputs, and each step one ONNX node or a small subgraph (the
per-op forms are in onnx_elemwise.py, onnx_tensor_ops.py and onnx_nn_ops.py). An op with
no ONNX form is a ValueError naming it: nothing is approximated.

`onnx` is an optional dependency (`pip install 'imperative[onnx]'`), imported on the first
export.
"""
from __future__ import annotations

import os

import numpy as np

from .program import ARGUMENT, CONSTANT, EXTERNAL, INTERNAL, Program

# the oldest opset whose forms the translations use (LayerNormalization is new in 17)
MIN_OPSET = 17


def export(program, path, *, arg_names=None, output_names=None, opset=17):
    """Write `program` as an ONNX model to `path`; returns the ModelProto.

    arg_names: the graph inputs' names, one per argument (default: the values' own names,
    else arg0, arg1, ...). output_names: the graph outputs' names, one per result
    (default output0, ...). opset: the default-domain opset to target, from 17 to the
    newest the installed onnx knows."""
    onnx = _import_onnx()
    if not isinstance(program, Program):
        raise TypeError(f"export: program must be an imperative.jit.program.Program, got "
                        f"{type(program).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"export: path must be a str or os.PathLike, got {type(path).__name__}")
    _check_opset(opset, onnx.defs.onnx_opset_version())
    arg_names = _names("arg_names", arg_names, len(program.arguments),
                       [program.values[v].name or f"arg{i}"
                        for i, v in enumerate(program.arguments)], "argument")
    output_names = _names("output_names", output_names, len(program.results),
                          [f"output{i}" for i in range(len(program.results))], "result")
    model = _Translator(program, opset).model(arg_names, output_names)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.fspath(path))
    return model


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError("ONNX export needs the optional dependency onnx: "
                          "pip install 'imperative[onnx]'") from None
    return onnx


def _check_opset(opset, newest):
    if not isinstance(opset, int) or isinstance(opset, bool):
        raise TypeError(f"export: opset must be an int, got {type(opset).__name__}")
    if not MIN_OPSET <= opset <= newest:
        raise ValueError(f"export: opset must be between {MIN_OPSET} and {newest} (the newest "
                         f"the installed onnx knows), got {opset}")


def _names(what, given, count, default, noun):
    if given is None:
        return default
    if isinstance(given, str) or not all(isinstance(n, str) and n for n in given):
        raise TypeError(f"export: {what} must be a sequence of non-empty strings, got {given!r}")
    given = list(given)
    if len(given) != count:
        raise ValueError(f"export: {what} has {len(given)} name(s) but the program has "
                         f"{count} {noun}(s)")
    if len(set(given)) != len(given):
        raise ValueError(f"export: {what} repeats a name: {given!r}")
    return given


def _translations():
    from . import onnx_elemwise, onnx_nn_ops, onnx_tensor_ops
    return {**onnx_elemwise.TRANSLATIONS, **onnx_tensor_ops.TRANSLATIONS,
            **onnx_nn_ops.TRANSLATIONS}


class _Translator:
    """One export: value ids -> graph names, filled in step by step."""

    def __init__(self, program, opset):
        from .onnx_graph import GraphBuilder
        self.program = program
        self.builder = GraphBuilder(opset)
        self.names = {}         # value id -> the graph name holding it

    def model(self, arg_names, output_names):
        from .onnx_graph import Operand, UnsupportedOp
        b, program = self.builder, self.program
        for vid, name in zip(program.arguments, arg_names):
            self.names[vid] = b.reserve(name)
        reserved = [b.reserve(name) for name in output_names]
        table = _translations()
        for index, step in enumerate(program.steps):
            ins = [Operand(self._name_of(v, index), program.values[v].shape,
                           program.values[v].dtype) for v in step.inputs]
            outs = [Operand("", program.values[v].shape, program.values[v].dtype)
                    for v in step.outputs]
            translate = _lookup(table, step.op)
            try:
                if translate is None:
                    raise UnsupportedOp("it has no ONNX form")
                results = translate(b, step.op, ins, outs)
            except UnsupportedOp as e:
                where = f" (issued at {step.where})" if step.where else ""
                raise ValueError(f"export: op {step.op!r} (step {index}{where}) cannot be "
                                 f"exported to ONNX: {e}") from None
            self.names.update(zip(step.outputs, results))
        for vid, name in zip(program.results, reserved):
            # an Identity per output: a result may also be an input, an initializer or
            # another result, and the graph output needs its own name
            b.node("Identity", [self._name_of(vid, len(program.steps))], outputs=[name])
        value = program.values
        # the recorded shape and dtype of every internal value: the checker's shape
        # inference then confirms that each translation gives what the op gave
        declared = {self.names[v] for v in program.arguments} | b.initializer_names()
        internal = {}
        for step in program.steps:
            for v in step.outputs:
                name = self.names[v]
                if name not in declared:
                    internal.setdefault(name, (name, value[v].shape, value[v].dtype))
        return b.model(
            inputs=[(self.names[v], value[v].shape, value[v].dtype) for v in program.arguments],
            outputs=[(n, value[v].shape, value[v].dtype)
                     for v, n in zip(program.results, reserved)],
            value_info=list(internal.values()), graph_name="imperative_program")

    def _name_of(self, vid, index):
        """The graph name of value `vid`, read by step `index`: an external or constant
        value becomes an initializer on its first use."""
        found = self.names.get(vid)
        if found is not None:
            return found
        value = self.program.values.get(vid)
        if value is None:
            raise ValueError(f"export: step {index} reads value {vid}, which the program "
                             f"does not hold")
        if value.kind in (EXTERNAL, CONSTANT):
            if value.data is None:
                label = f" ({value.name})" if value.name else ""
                raise ValueError(f"export: the {value.kind} value {vid}{label} has no recorded "
                                 f"value; trace with capture_as_const=True to export it")
            data = np.asarray(value.data, dtype=value.dtype)
            if data.shape != value.shape:
                raise ValueError(f"export: the recorded value of value {vid} has shape "
                                 f"{data.shape}, but the value's shape is {value.shape}")
            hint = value.name or f"{value.kind}{vid}"
            self.names[vid] = self.builder.initializer(data, self.builder.fresh(hint))
            return self.names[vid]
        what = "an argument not listed in program.arguments" if value.kind == ARGUMENT else (
            "an internal value no earlier step wrote" if value.kind == INTERNAL else
            f"a value of unknown kind {value.kind!r}")
        raise ValueError(f"export: step {index} reads value {vid}, {what}")


def _lookup(table, op):
    """The translation of `op`'s class or of its nearest base that has one
    (BatchedMatrixMul is a MatrixMul, FastpathCopy an Identity)."""
    for cls in type(op).__mro__:
        found = table.get(cls)
        if found is not None:
            return found
    return None

