"""Recording a traced call into a Program (program.py), and the later calls of a
`symbolic=False` trace checked against it. Both are the core's tracer while the call runs
(`_core.start_tracing`): the core reports each op after its dispatch, each tensor made from
host data (a constant), each Tensor object rebound to a new value (an effect) and each read
of a tensor in Python (imperative/_tracing.pxi)."""
from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager

import numpy as np

from .. import _core
from .._core import READ_DATA, READ_SHAPE, READ_VALUE
from ..ops.rng import same_but_seed
from .bindings import ArgumentBinding, FixedBinding, GradBinding, TensorBinding
from .errors import READ_MESSAGES, TraceMismatchError, TraceReadError, TraceValueReadWarning
from .program import ARGUMENT, CONSTANT, EXTERNAL, INTERNAL, Program, Step
from .tree import kept_objects, tensors_inside, unflatten

_READ_FLAGS = {READ_SHAPE: "shape_read", READ_VALUE: "value_read", READ_DATA: "data_read"}


class Recording:
    """What one recorded call leaves: the program, where each of its external values is
    found at a later call, the `.grad` slots it writes, and its results' structure. The
    Program is built from the recorder's log when first asked for (`program`)."""

    def __init__(self, log, bindings, grad_effects, results_structure, symbolic, pattern):
        self._log = log
        self._program = None
        self.pattern = pattern              # grad_pattern() of the recorded call
        self.plan = None                    # compiler.Plan, for a symbolic trace (made at
        self.fast = None                    # the first replay); its _core.FastReplay
        # symbolic=False: the values a checked call's ops are served with must include
        # those the recorded call let outlive it or handed to excluded code (the plan
        # serving it: replay.served_values)
        self.outliving = set()
        self.serving_plan = None
        self.check_tables = None            # recorder._check_tables, for _core.CheckLog
        self.bindings = bindings            # external value id -> binding (bindings.py)
        self.grad_effects = grad_effects    # [(binding of the holder, value id or None)]
        self.results_structure = results_structure
        self.symbolic = symbolic

    @property
    def program(self):
        if self._program is None:
            self._program = _build_program(self._log)
            self._log = None
        return self._program

    def grad_pattern(self, args):
        """Which written `.grad` slots are empty now: code like GradManager's (`old + grad`
        or `grad`) takes another path when it changes, so it keys the cache too."""
        return tuple(_grad_is_none(b, args) for b, _ in self.grad_effects)


def _grad_is_none(binding, args):
    holder = binding.holder(args)
    return holder is None or holder._grad_slot is None


def _build_program(log):
    """The Program of a recorder's log (_core.RecordLog: descriptors, op tuples)."""
    program = Program()
    names, data = log.names, log.data
    for vid, (shape, dtype, device, kind, reads) in enumerate(
            zip(log.shapes, log.dtypes, log.devices, log.kinds, log.reads)):
        value = program.new_value(() if shape is None else shape, dtype, kind,
                                  names.get(vid, ""), data.get(vid))
        if shape is None:           # a value-dependent shape, known when its op runs
            value.shape = None
        value.device = device
        for read_kind, flag in _READ_FLAGS.items():
            if reads & (1 << read_kind):
                setattr(value, flag, True)
    site_text, wiring, at = _core.site_text, log.wiring, 0
    for op, code, lasti, node in zip(log.ops, log.codes, log.offsets, log.scopes):
        n_in = wiring[at]
        ins = tuple(wiring[at + 1:at + 1 + n_in])
        at += 1 + n_in
        n_out = wiring[at]
        outs = tuple(wiring[at + 1:at + 1 + n_out])
        at += 1 + n_out
        program.steps.append(Step(op, ins, outs, site_text(code, lasti),
                                  "" if node is None else node.path, node))
    for position, vid in enumerate(log.arguments):
        if not program.values[vid].name:
            program.values[vid].name = f"arg{position}"
    program.arguments = log.arguments
    program.results = log.results
    program.effects = log.effects
    return program


class _Tracer:
    """What recording and checking share: the exclusion depth and the calls' argument
    records."""

    def __init__(self, symbolic):
        self.symbolic = symbolic
        self.excluded_depth = 0
        self.excluded_records = set()    # records made inside exclude_from_trace blocks

    def exclude(self):
        if self.symbolic:
            raise ValueError("imp.jit.exclude_from_trace() in a symbolic trace: its code "
                             "would not run on later calls (the Python body does not); use "
                             "trace(symbolic=False)")
        self.excluded_depth += 1


class Recorder(_core.RecordLog, _Tracer):
    """The tracer of a first call: every op becomes a step, every tensor a value. The core
    calls the log's C methods for each op, constant, operand and read (_recording.pxi);
    what is left here happens a few times a call (arguments, externals, effects)."""

    def __init__(self, symbolic, capture_as_const):
        _Tracer.__init__(self, symbolic)
        self.capture_as_const = capture_as_const
        self.bindings = {}       # external value id -> binding
        self.rebound = {}        # id(tensor) -> (tensor, its record at the first rebinding)
        self.grad_writes = {}    # id(tensor) -> (tensor, its .grad before the first write)
        self.args = []
        self.arguments = []      # value ids of the tensor arguments, by position
        self.results = []        # value ids of the tensor results
        self.effects = []        # (external value id, value id whose contents it takes)

    # ---- what the core reports through Python

    def bind_arguments(self, tensors):
        self.args = tensors
        for position, t in enumerate(tensors):
            info = t._record
            vid = self.vid.get(info)
            if vid is None:            # (unnamed: "arg<position>" when the Program is built)
                vid = self.new_value(info, ARGUMENT, t.name, None)
                self.bindings[vid] = ArgumentBinding(position)
            self.arguments.append(vid)

    def rebind(self, tensor, old):
        self.rebound.setdefault(id(tensor), (tensor, old))

    def grad_write(self, tensor, old):
        self.grad_writes.setdefault(id(tensor), (tensor, old))

    # ---- values

    def _external(self, info, holder=None):
        excluded = info in self.excluded_records
        holder = self.holders.get(info) if holder is None else holder
        data = None
        if self.capture_as_const and not excluded:
            data = np.array(_core.channel().get_value(info), copy=True)
        name = getattr(holder, "name", "") or ""
        vid = self.new_value(info, EXTERNAL, name, data)
        self.bindings[vid] = (None if excluded else
                              FixedBinding(info) if holder is None else TensorBinding(holder))
        return vid

    # ---- the end of the call

    def finish(self, result_tensors, results_structure):
        if self.symbolic:
            self._check_rebuilds(result_tensors, results_structure)
        if self.value_read_at is not None:
            warnings.warn(f"imp.jit.trace(symbolic=True): the traced function read "
                          f"{self.value_read_what} (at {self.value_read_at}); later calls do "
                          "not run its Python body, so whatever it decided from it is "
                          "replayed as recorded (read it outside, or use symbolic=False)",
                          TraceValueReadWarning, stacklevel=4)
        for t in result_tensors:
            info = t._record
            vid = self.vid.get(info)
            self.results.append(vid if vid is not None else self._external(info, holder=t))
        for tensor, old in self.rebound.values():
            self._rebinding_effect(tensor, old)
        grad_effects = []
        for tensor, old in self.grad_writes.values():
            old_vid = None if old is None else self.vid.get(old._record)
            if old_vid is not None and self.kinds[old_vid] == EXTERNAL:
                # the call read the .grad it found (accumulation): read the slot afresh
                self.bindings[old_vid] = GradBinding(tensor)
            new = tensor._grad_slot
            grad_effects.append((self._holder_binding(tensor),
                                 None if new is None else self.value_of(new._record)))
        pattern = tuple(old is None for _, old in self.grad_writes.values())
        recording = Recording(self, self.bindings, grad_effects, results_structure,
                              self.symbolic, pattern)
        if not self.symbolic:
            recording.outliving = self.outliving() | self.read_by_excluded
        self.forget_records()
        self.args = self.rebound = self.grad_writes = None
        return recording

    def _check_rebuilds(self, result_tensors, structure):
        """A symbolic replay rebuilds the results from their structure: TypeError now where
        it could not (a container type whose constructor does not take its items), or where
        it would hand back an object holding a Tensor of the recorded call (one made in it,
        or an argument), which is kept as it is, not walked."""
        unflatten(structure, iter(result_tensors))
        for obj in kept_objects(structure):
            for t in tensors_inside(obj):
                vid = self.vid.get(t._record)
                if vid is not None and self.kinds[vid] != EXTERNAL:
                    raise TypeError(
                        f"imp.jit.trace(symbolic=True): a result of type "
                        f"{type(obj).__name__} holds a Tensor the call made or got as an "
                        "argument; its replays would hand back this object with the recorded "
                        "call's Tensors (only tuples, lists, dicts and their subclasses are "
                        "rebuilt): return the Tensors in one of those, or use symbolic=False")

    def _rebinding_effect(self, tensor, old):
        old_vid = self.vid.get(old)
        if old_vid is not None and self.kinds[old_vid] in (INTERNAL, CONSTANT):
            return                          # a tensor made inside the call
        if old_vid is None:                 # rebound without being read
            old_vid = self._external(old, holder=tensor)
        binding = self.bindings.get(old_vid)
        if not isinstance(binding, ArgumentBinding):
            self.bindings[old_vid] = TensorBinding(tensor)
        self.effects.append((old_vid, self.value_of(tensor._record)))

    def _holder_binding(self, tensor):
        for position, t in enumerate(self.args):
            if t is tensor:
                return ArgumentBinding(position)
        return TensorBinding(tensor)


class Checker(_core.CheckLog, _Tracer):
    """The tracer of a later call of a `symbolic=False` trace: the body runs again, and
    each op it issues must be the recorded one, on the recorded values. Served from the
    compiled plan (`served`), the core asks the log's C method for each op's outputs
    before running it (_checking.pxi), which calls `_check` here for what is not the
    common case; otherwise each op runs and `op` checks it after."""

    def __init__(self, recording, args, served=None):
        _Tracer.__init__(self, False)
        self.recording = recording
        self.program = recording.program
        self.args = args
        self.served = served         # value id -> array: the ops' outputs, or None (run them)
        self.index = 0               # (vid: record -> value id, for the values of this call)
        self.puts = {}               # record -> data, for constants made by this call
        if served is not None:
            if recording.check_tables is None:
                recording.check_tables = _check_tables(self.program)
            self.set_record(*recording.check_tables)
        for position, vid in enumerate(self.program.arguments):
            self.vid.setdefault(args[position]._record, vid)

    def inputs(self, operands):
        pass

    def put(self, info):
        if self.excluded_depth:
            self.excluded_records.add(info)
        else:
            self.puts[info] = info.value

    def rebind(self, tensor, old):
        pass

    def grad_write(self, tensor, old):
        pass

    def op(self, op, inputs, outputs):
        if self.excluded_depth:
            self.excluded_records.update(outputs)
            return
        step = self._check(op, inputs)
        for info, vid in zip(outputs, step.outputs):
            self.vid[info] = vid

    def _check(self, op, inputs):
        """The recorded step `op` must be (TraceMismatchError otherwise); the next one."""
        steps = self.program.steps
        k = self.index
        if k >= len(steps):
            self._mismatch(f"the recorded call issued {len(steps)} ops; this call issued "
                           f"one more, op {k}: {op!r}")
        step = steps[k]
        if op is not step.op and (type(op) is not type(step.op) or op != step.op) \
                and not same_but_seed(op, step.op):     # (an RNG op draws its next seed)
            self._mismatch(f"op {k} differs: recorded {step.op!r} (at {step.where}), "
                           f"issued {op!r}")
        if len(inputs) != len(step.inputs):
            self._mismatch(f"op {k} ({op!r}) has {len(inputs)} inputs; recorded "
                           f"{len(step.inputs)} (at {step.where})")
        known = self.vid
        for i, (info, vid) in enumerate(zip(inputs, step.inputs)):
            if known.get(info) != vid and not self._same_input(info, vid):
                self._mismatch(f"op {k} ({op!r}) reads another value at input {i} than "
                               f"recorded (at {step.where}): {self._describe(info)}, "
                               f"recorded {self._describe_value(vid)}")
        self.index = k + 1
        return step

    def read(self, info, kind):
        vid = self.vid.get(info)
        if vid is None or self.excluded_depth:
            return
        value = self.program.values[vid]
        if value.kind == INTERNAL and not getattr(value, _READ_FLAGS[kind]):
            raise TraceReadError(READ_MESSAGES[kind])

    def finish(self):
        steps = self.program.steps
        if self.index != len(steps):
            step = steps[self.index]
            self._mismatch(f"this call issued {self.index} ops, the recorded one "
                           f"{len(steps)}: op {self.index} ({step.op!r}, recorded at "
                           f"{step.where}) was not issued", site=False)

    # ---- inputs

    def _same_input(self, info, vid):
        got = self.vid.get(info)
        if got is not None:
            return got == vid
        value = self.program.values[vid]
        if value.kind == CONSTANT:
            data = info.value if info.handle < 0 else self.puts.get(info)
            # (served from the plan, the recorded constant's bits are what the results
            # carry: -0.0 for 0.0 or another NaN would not give the eager bits)
            if data is None or not _same_array(data, value.data, self.served is not None):
                return False
        elif value.kind == EXTERNAL:
            binding = self.recording.bindings[vid]
            if binding is None:
                if info not in self.excluded_records:
                    return False
            elif binding.record(self.args) is not info:
                return False
        else:
            return False
        self.vid[info] = vid
        return True

    def _describe(self, info):
        """What a checked op read: its shape and dtype, and its value where it is a
        constant this call made."""
        data = info.value if info.handle < 0 else self.puts.get(info)
        text = f"a {info.shape} {info.dtype} tensor"
        return text if data is None else f"{text} of value {_shown(data)}"

    def _describe_value(self, vid):
        """What the record read there: the constant's value, the argument's or external
        tensor's name, or which op made it (not the program's value id)."""
        value = self.program.values[vid]
        desc = f"{value.shape} {value.dtype}"
        if value.kind == CONSTANT:
            return f"the constant {_shown(value.data)} ({desc})"
        if value.kind == INTERNAL:
            made_by = next(k for k, step in enumerate(self.program.steps) if vid in step.outputs)
            return f"the output of op {made_by} ({desc})"
        name = f" {value.name!r}" if value.name else ""
        return f"the {value.kind} tensor{name} ({desc})"

    def _mismatch(self, text, site=True):
        where = f" (issued at {_core.issue_site()})" if site else ""
        raise TraceMismatchError(f"imp.jit.trace: {text}{where}; the trace is discarded "
                                 "and the next call records afresh")


def _check_tables(program):
    """What _core.CheckLog compares and makes: per step its op, input ids and output ids,
    per value id its (shape, dtype, device), and the dtype and bits of each 0-d constant."""
    steps, values = program.steps, program.values
    descs = [None] * (max(values) + 1 if values else 0)
    scalars = {}
    for vid, v in values.items():
        descs[vid] = (v.shape, v.dtype, v.device)
        if v.kind == CONSTANT and v.data is not None and v.data.ndim == 0:
            scalars[vid] = (v.data.dtype, v.data.tobytes())
    return ([s.op for s in steps], [s.inputs for s in steps], [s.outputs for s in steps],
            descs, scalars)


def _shown(data, most=8):
    """A constant's value for a message: its numbers (signs of zeros and NaNs as they are),
    the first `most` of a larger one."""
    flat = np.asarray(data).reshape(-1)
    text = ", ".join(repr(x) for x in flat[:most].tolist())
    if flat.size > most:
        text += f", ... ({flat.size} values)"
    return text if np.ndim(data) == 0 else f"[{text}]"


def _same_array(a, b, bits=False):
    """Equal values (NaN equal to NaN), or with `bits`, equal bits. Equal bits answer at
    once (a Python scalar's constant: the common case)."""
    if b is None or a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.tobytes() == b.tobytes():
        return True
    return not bits and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


_local = threading.local()     # .tracer: the tracer of the call this thread runs now


@contextmanager
def exclude_from_trace():
    """Code inside runs eagerly on every call and is not recorded (symbolic=False traces
    only; in a symbolic trace ValueError at record)."""
    tracer = getattr(_local, "tracer", None)
    if tracer is None:
        yield
        return
    tracer.exclude()
    try:
        yield
    finally:
        tracer.excluded_depth -= 1


_one_at_a_time = threading.Lock()   # the core has one tracer: other threads wait their turn


def refuse_nesting():
    """RuntimeError (the core's) where a trace records or checks a call on this thread: a
    traced function called inside another's call, whatever it would do (record, check or
    replay: a replay would be one opaque plan step of the outer record)."""
    if getattr(_local, "tracer", None) is not None:
        _core.start_tracing(None)      # raises: nested traces are not supported


class tracing:
    """`with tracing(tracer):` makes `tracer` the core's for the body. A trace already
    active on this thread (a traced function called inside another) raises RuntimeError;
    one on another thread is waited for. (A class, not a generator: it runs at every
    recording and check.)"""
    __slots__ = ("tracer",)

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        tracer = self.tracer
        refuse_nesting()
        _one_at_a_time.acquire()
        try:
            _core.start_tracing(tracer)
        except BaseException:
            _one_at_a_time.release()
            raise
        _local.tracer = tracer
        return tracer

    def __exit__(self, *exc):
        _local.tracer = None
        _core.stop_tracing()
        _one_at_a_time.release()
        return False
