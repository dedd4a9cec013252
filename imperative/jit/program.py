"""A recorded program: what `imp.jit.trace` records, what replay runs and what ONNX export
reads. Plain data, no behaviour: the recorder fills it in, the compiler plans it, the
exporter translates it.

Every tensor the traced function touches is a `Value`, numbered in the order it was first
seen. Every op it issued is a `Step` that reads and writes values by number.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

# how a value entered the program (API.md §9): argument, external (a Parameter, a global),
# constant (a Python scalar or array literal) or internal (made by a step); the core's
# recording log (imperative/_recording.pxi) tags values with them
from .._core import ARGUMENT, CONSTANT, EXTERNAL, INTERNAL  # noqa: F401


@dataclass
class Value:
    id: int
    shape: tuple
    dtype: np.dtype
    kind: str
    # a readable name where one is known: the argument's or the Parameter's
    name: str = ""
    # CONSTANT: the value; EXTERNAL: its value at record time (kept only with
    # capture_as_const, which ONNX export needs); otherwise None
    data: Optional[np.ndarray] = None
    # read by Python during the recorded call (.shape; numpy()/item()/float()/print; _value())
    shape_read: bool = False
    value_read: bool = False
    data_read: bool = False
    device: object = None       # the Device it lives on


@dataclass
class Step:
    op: object                  # an imperative.ops Op instance (immutable, hashable)
    inputs: tuple               # value ids read, in the op's input order
    outputs: tuple              # value ids written, in the op's output order
    where: str = ""             # "file:line" of the user code that issued it
    scope: str = ""             # the scope path at record time (profiler slice names)
    scope_node: object = None   # that scope's ScopeNode (a replay names its ops in it)


@dataclass
class Program:
    values: dict = field(default_factory=dict)      # id -> Value
    steps: list = field(default_factory=list)       # in issue order
    arguments: list = field(default_factory=list)   # value ids of the tensor arguments, by position
    results: list = field(default_factory=list)     # value ids of the tensor results, in order
    # writes the call makes to tensors that outlive it: (external value id, value id whose
    # contents it takes), e.g. a Parameter's update or a `.grad`
    effects: list = field(default_factory=list)

    def new_value(self, shape, dtype, kind, name="", data=None) -> Value:
        value = Value(len(self.values), tuple(shape), np.dtype(dtype), kind, name, data)
        self.values[value.id] = value
        return value
