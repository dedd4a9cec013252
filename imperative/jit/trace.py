"""`imp.jit.trace` (API.md section 9): record a function's ops on its first call for a
signature, then replay them.

A signature is the structure of the arguments (tuples, lists, dicts, the non-tensor
values) with each Tensor's shape, dtype and device; an LRU of `cache_size` signatures keeps
one recording each. `symbolic=False`: later calls run the body again, checked op by op
against the record (recorder.py: Checker). `symbolic=True`: later calls run the compiled
plan (compiler.py) without the body."""
from __future__ import annotations

import functools
from collections import OrderedDict

import numpy as np

from .. import _core
from ..random import reseeded
from .compiler import Plan, fast_replay
from .errors import TraceMismatchError
from .recorder import Checker, Recorder, refuse_nesting, tracing
from .replay import StaleBinding, bound_inputs, finish_call, run_steps, served_values
from .tree import call_signature, flatten


_DECORATOR = object()      # trace's function when it is called as @trace(...), not trace(f)


def _check_options(symbolic=False, capture_as_const=False, cache_size=8, **unknown):
    """trace's options: flags are bools, cache_size an int >= 1 (API.md section 3's
    convention: TypeError for a value of another type, ValueError for one out of range).
    Unknown names are left to trace(), which names them when it is called."""
    for name, flag in (("symbolic", symbolic), ("capture_as_const", capture_as_const)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"imp.jit.trace: {name} must be a bool, got "
                            f"{type(flag).__name__} {flag!r}")
    if isinstance(cache_size, (bool, np.bool_)) or not isinstance(cache_size, (int, np.integer)):
        raise TypeError(f"imp.jit.trace: cache_size must be an int, got "
                        f"{type(cache_size).__name__} {cache_size!r}")
    if cache_size < 1:
        raise ValueError(f"imp.jit.trace: cache_size must be >= 1, got {cache_size!r}")


class trace(_core.TraceBase):
    """`@imp.jit.trace` or `@imp.jit.trace(symbolic=False, capture_as_const=False,
    cache_size=8)` on a function; the result is called like the function. (Its __call__
    is TraceBase's, in C: the most recent recording's fast replay, else `_call`.)"""

    def __new__(cls, function=_DECORATOR, **options):
        if function is _DECORATOR:           # @trace(...): the decorator
            _check_options(**options)
            return functools.partial(cls, **options)
        return super().__new__(cls)

    def __init__(self, function=_DECORATOR, *, symbolic=False, capture_as_const=False,
                 cache_size=8):
        if not callable(function):
            raise TypeError(f"imp.jit.trace: expected a function to trace, got "
                            f"{type(function).__name__}")
        _check_options(symbolic=symbolic, capture_as_const=capture_as_const,
                       cache_size=cache_size)
        self.function = function
        self.symbolic = bool(symbolic)
        self.capture_as_const = bool(capture_as_const)
        self.cache_size = cache_size
        self._cache = OrderedDict()          # signature -> [Recording] (by .grad pattern)
        self._last = None                    # the most recent Recording (for dump)
        # (served: symbolic=False calls whose ops the compiled plan served)
        self._counts = {"records": 0, "replays": 0, "mismatches": 0, "served": 0}
        functools.update_wrapper(self, function)

    @property
    def stats(self):
        """records, replays, mismatches (symbolic=False checks that failed), served
        (symbolic=False replays served from the compiled plan), signatures."""
        counts = dict(self._counts, signatures=len(self._cache))
        counts["replays"] += self._fast_replays
        return counts

    def _call(self, args, kwargs):
        refuse_nesting()        # (the C fast path leaves such a call to this one)
        signature, tensors = call_signature(args, kwargs)
        recordings = self._cache.get(signature)
        if recordings is not None:
            self._cache.move_to_end(signature)
            for recording in recordings:
                if recording.pattern == recording.grad_pattern(tensors):
                    return self._replay(signature, recording, tensors, args, kwargs)
        return self._record(signature, tensors, args, kwargs)

    # ---- the first call of a signature

    def _record(self, signature, tensors, args, kwargs):
        recorder = Recorder(self.symbolic, self.capture_as_const)
        with tracing(recorder):
            recorder.bind_arguments(tensors)
            result = self.function(*args, **kwargs)
            results = []
            structure = flatten(result, results)
            recording = recorder.finish(results, structure)
        self._counts["records"] += 1
        self._last = recording
        recordings = self._cache.setdefault(signature, [])
        recordings[:] = [r for r in recordings if r.pattern != recording.pattern]
        recordings.append(recording)
        self._cache.move_to_end(signature)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        self._fast = None
        return result

    # ---- later calls

    def _replay(self, signature, recording, tensors, args, kwargs):
        if not recording.symbolic:
            return self._check(signature, recording, tensors, args, kwargs)
        if recording.plan is None:
            # compiled at the first replay, not at record: a signature called once never
            # pays for it (the recording call costs about what an eager call does)
            recording.plan = Plan(recording)
            recording.fast = fast_replay(recording, args, kwargs)
        try:
            result = _run(recording, tensors)
        except StaleBinding:                 # a tensor it read is gone: record afresh
            self._discard(signature, recording)
            return self._record(signature, tensors, args, kwargs)
        self._counts["replays"] += 1
        self._fast = recording.fast
        return result

    def _check(self, signature, recording, tensors, args, kwargs):
        # the ops are checked as issued and served from the compiled plan, run here first
        served = served_values(recording, tensors, Plan)
        checker = Checker(recording, tensors, served)
        try:
            with tracing(checker):
                _core.serve_ops(served is not None)
                result = self.function(*args, **kwargs)
                checker.finish()
        except TraceMismatchError:
            self._counts["mismatches"] += 1
            self._discard(signature, recording)
            raise
        except BaseException:
            self._discard(signature, recording)
            raise
        self._counts["replays"] += 1
        self._counts["served"] += served is not None
        return result

    def _discard(self, signature, recording):
        self._fast = None
        recordings = self._cache.get(signature)
        if recordings is not None and recording in recordings:
            recordings.remove(recording)
            if not recordings:
                del self._cache[signature]

    # ---- export

    def dump(self, path, *, arg_names=None, output_names=None, opset=17):
        """Write the recorded forward program as an ONNX model (needs capture_as_const=True
        and one recorded call; the optional dependency `onnx`)."""
        if not self.capture_as_const:
            raise ValueError("trace.dump needs a trace made with capture_as_const=True "
                             "(external tensors become the model's initializers)")
        if self._last is None:
            raise ValueError("trace.dump: call the traced function once first (it records "
                             "the program to export)")
        try:
            from .onnx_export import export
        except ImportError as e:
            raise ImportError(f"trace.dump needs the ONNX exporter "
                              f"(imperative/jit/onnx_export.py) and the optional dependency "
                              f"onnx (pip install 'imperative[onnx]'): {e}") from e
        return export(self._last.program, path, arg_names=arg_names,
                      output_names=output_names, opset=opset)


def _run(recording, tensors):
    """One symbolic replay: the compiled plan as one op where nothing needs to see the ops
    one by one, else the steps through dispatch."""
    plan = recording.plan
    if plan.op is None or not _core.plan_may_run():
        return finish_call(recording, run_steps(recording, tensors), tensors)
    bound = bound_inputs(recording, tensors)
    infos = [bound[vid] for vid in plan.inputs]
    op, rng = plan.op, None
    if plan.rng_ops:             # the next seeds, in recorded order, as run_steps draws them
        rng = tuple(reseeded(r) for r in plan.rng_ops)
        op = op.drawing(rng)
    outs = _core.run_plan(op, plan.compiled, infos, plan.largest, rng)
    wrap = _core.wrap_info
    values = {vid: wrap(bound[vid]) for vid in plan.kept if vid in bound}
    values.update((vid, plan.constants[vid]) for vid in plan.kept if vid in plan.constant_ids)
    for vid, info in zip(plan.outputs, outs):
        values[vid] = wrap(info)
    return finish_call(recording, values, tensors)
