"""The profiler: Chrome trace JSON (Trace Event Format) that opens in Perfetto.

    with imp.Profiler(path="profile") as p:      # writes profile/<pid>.chrome_timeline.json
        for batch in data:
            train_step(batch)
            p.step()

    python -m imperative.profiler summary profile/<pid>.chrome_timeline.json [--json]

The core records compact tuples per thread while a profile runs (imperative/_trace.pxi);
everything here happens at dump time. The summary lives in imperative/profiler_summary.py,
which reads only the JSON.
"""
import bisect
import functools
import json
import os
import sys
import warnings

from . import _core
from .profiler_summary import main, summarize
from .scope import op_name, op_path

__all__ = ["Profiler", "start_profile", "stop_profile", "summarize", "main"]

FORMATS = ("chrome_timeline.json",)
DEFAULT_OPTIONS = {"record_shapes": True, "record_memory": True}
WORKER_THREAD = "imperative-worker"
# A memory counter sample is written when the value moved by at least this much (or by 1%),
# so that a loop of tiny ops does not write a sample per op; the first and last always count.
COUNTER_MIN_STEP = 64 * 1024
STEPS_TRACK = "steps"             # the track of the ProfilerStep#N slices
STEP_KEY = "step"                 # in args: a step mark's number, the step an op was issued in
# A worker scope opens this much before its first op and closes this much after its last
# (per level): with equal times, Perfetto may nest the scope under the op, and the op's
# flow arrow then lands on the scope. Timestamps have nanosecond resolution; 10 ns
# survive a reader's rounding of microseconds to nanoseconds.
HAIR_NS = 10


def _check_options(options):
    unknown = set(options) - set(DEFAULT_OPTIONS)
    if unknown:
        raise ValueError(f"unknown profiler option(s) {sorted(unknown)}; "
                         f"valid: {sorted(DEFAULT_OPTIONS)}")
    merged = dict(DEFAULT_OPTIONS)
    merged.update(options)
    return merged


_active_options = None
_start_ns = None                  # when the running profile started: step 1 begins there


def start_profile(options=None):
    """Start recording. `options`: {"record_shapes": bool, "record_memory": bool}."""
    global _active_options, _start_ns
    opts = _check_options(dict(options or {}))
    start = _core.now_ns()
    _core.start_recording()
    _active_options, _start_ns = opts, start


def stop_profile():
    """Stop recording; returns `dump(basename, format="chrome_timeline.json")`, which writes
    `<basename>.<format>` and returns its path."""
    global _active_options, _start_ns
    buffers, names, objects = _core.stop_recording()
    opts, _active_options = _active_options, None
    start, _start_ns = _start_ns, None

    def dump(basename, format="chrome_timeline.json"):
        if format not in FORMATS:
            raise ValueError(f"unknown profile format {format!r}; supported: {FORMATS}")
        path = f"{basename}.{format}"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        trace = build_chrome_trace(buffers, names, objects, opts, start)
        with open(path, "w") as f:
            json.dump(trace, f, separators=(",", ":"))
        return path

    return dump


class Profiler:
    """Context manager and decorator; writes `<path>/<pid>.<format>` for each format on exit."""

    def __init__(self, path="profile", formats=FORMATS, **options):
        self.path = path
        self.formats = (formats,) if isinstance(formats, str) else tuple(formats)
        for fmt in self.formats:
            if fmt not in FORMATS:
                raise ValueError(f"unknown profile format {fmt!r}; supported: {FORMATS}")
        self.options = _check_options(options)
        self._steps = 0
        self.files = []

    def __enter__(self):
        # A folder that cannot be made is reported now, before the work to be profiled,
        # and raised on exit: raising here would hide the body's own exception (if it has
        # one), and the body is what the user ran.
        problem = self._folder_problem()
        if problem is not None:
            warnings.warn(f"{problem}; the profile will not be written", RuntimeWarning,
                          stacklevel=2)
        start_profile(self.options)
        self._steps = 0
        return self

    def __exit__(self, exc_type, exc, tb):
        dump = stop_profile()
        base = os.path.join(self.path, str(os.getpid()))
        try:
            self.files = [dump(base, fmt) for fmt in self.formats]
        except OSError as e:
            error = OSError(f"Profiler: cannot write the profile into {self.path!r}: {e}")
            if exc is None:
                raise error from e
            # the body's own exception is the one the user must see; it says the profile is lost
            exc.add_note(str(error))
        return False

    def _folder_problem(self):
        """Why the profile folder cannot be made or written, or None."""
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            return f"Profiler: cannot create the profile folder {self.path!r}: {e}"
        if not os.access(self.path, os.W_OK | os.X_OK):
            return f"Profiler: the profile folder {self.path!r} is not writable"
        return None

    def step(self):
        """Mark the end of a training step in the trace. Step 1 runs from the start of the
        profile to the first call, step N from call N-1 to call N; each becomes a
        `ProfilerStep#N` slice, and `summary` counts only the work issued inside steps."""
        self._steps += 1
        _core.record_instant(f"step {self._steps}", {STEP_KEY: self._steps})

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


# ------------------------------------------------------------------ building the trace


def _us(ns, origin):
    return round((ns - origin) / 1000.0, 3)


def _desc(shape, dtype):
    return f"{dtype}{tuple(shape) if shape is not None else '(?)'}"


def _descs(flat):
    """(shape0, dtype0, shape1, dtype1, ...) -> 'float32(16,), float32(16,)'."""
    return ", ".join(_desc(flat[i], flat[i + 1]) for i in range(0, len(flat), 2))


def _op_args(op, inputs, outputs, with_shapes):
    args = {}
    fields = getattr(op, "_fields", ())
    if fields and fields != ("mode",):
        args["op"] = repr(op)
    if with_shapes:
        args["in"] = _descs(inputs)
        args["out"] = _descs(outputs)
    return args


class _TraceBuilder:
    def __init__(self, origin, options, step_bounds):
        self.origin = origin
        self.options = options
        self.pid = os.getpid()
        self.events = []
        self.flow_ids = {}          # command's profile id -> flow id
        self.issued = {}            # command's profile id -> when its dispatch began
        self.counters = {}          # device -> last (allocated, swapped) written
        # [start of step 1, end of step 1, end of step 2, ...]; empty without step marks
        self.step_bounds = step_bounds

    def slice(self, tid, name, t0, t1, cat, args=None):
        ev = {"ph": "X", "pid": self.pid, "tid": tid, "ts": _us(t0, self.origin),
              "dur": round(max(t1 - t0, 0) / 1000.0, 3), "name": name, "cat": cat}
        if args:
            ev["args"] = args
        self.events.append(ev)

    def step_of(self, t):
        """The step (1-based) that work issued at `t` belongs to; None outside the steps."""
        if t is None:
            return None
        i = bisect.bisect_right(self.step_bounds, t)
        return i if 0 < i < len(self.step_bounds) else None

    def op_slice(self, tid, op, t0, t1, ins, outs, scope, issued_at):
        """An op's execution. Its args name what the summary groups and filters by: the
        scope it was issued in and the step it was issued in (by issue time, not by
        execution time: the worker may run a step's ops after the caller marked its end)."""
        args = _op_args(op, ins, outs, self.options["record_shapes"])
        if scope is not None:
            args["scope"] = scope.path
        step = self.step_of(issued_at)
        if step is not None:
            args[STEP_KEY] = step
        self.slice(tid, op_name(op), t0, t1, "op", args)

    def flow(self, phase, cmd_id, tid, t):
        ev = {"ph": phase, "id": self.flow_ids[cmd_id], "pid": self.pid, "tid": tid,
              "ts": _us(t, self.origin), "name": "dispatch", "cat": "flow"}
        if phase == "f":
            ev["bp"] = "e"
        self.events.append(ev)

    def counter(self, t, device, allocated, swapped, force=False):
        if not self.options["record_memory"]:
            return
        last = self.counters.get(device)
        if not force and last is not None:
            moved = max(abs(allocated - last[0]), abs(swapped - last[1]))
            if moved < max(COUNTER_MIN_STEP, 0.01 * max(last[0], 1)):
                return
        self.counters[device] = (allocated, swapped)
        self.events.append({"ph": "C", "pid": self.pid, "ts": _us(t, self.origin),
                            "name": f"memory {device}",
                            "args": {"allocated": allocated, "swapped": swapped}})


def _is_step_mark(record):
    return record[0] == _core.EV_INSTANT and isinstance(record[3], dict) and STEP_KEY in record[3]


def build_chrome_trace(buffers, names, objects, options=None, start_ns=None):
    """Records → {"traceEvents": [...], "displayTimeUnit": "ms"}. `objects`: the ops and
    scope nodes that records name by index; `start_ns`: when the profile started (step 1
    begins there; default: at the first record)."""
    options = _check_options(options or {})
    all_records = [r for buf in buffers.values() for r in buf]
    origin = min([r[1] for r in all_records] + ([start_ns] if start_ns is not None else []),
                 default=0)
    start = origin if start_ns is None else start_ns
    marks = sorted(r[1] for r in all_records if _is_step_mark(r))
    b = _TraceBuilder(origin, options, [start] + marks if marks else [])
    tids = _number_threads(names)
    b.events.append({"ph": "M", "pid": b.pid, "name": "process_name",
                     "args": {"name": "imperative"}})
    for ident, tid in tids.items():
        _name_track(b, tid, names.get(ident, str(ident)))
    executed = {r[3] for r in all_records if r[0] == _core.EV_EXEC}
    b.issued = {r[3]: r[1] for r in all_records if r[0] == _core.EV_DISPATCH}
    # a flow needs both ends: ops issued before the profile started have no dispatch slice
    for cmd_id in sorted(executed & b.issued.keys()):
        b.flow_ids[cmd_id] = len(b.flow_ids) + 1
    last_t = max((r[2] if r[0] in (0, 1, 2, 3, 7) else r[1] for r in all_records), default=origin)
    for ident, records in buffers.items():
        _thread_events(b, tids[ident], records, objects, executed, last_t)
    _step_slices(b, len(tids) + 1)
    return {"traceEvents": b.events, "displayTimeUnit": "ms",
            "otherData": {"generator": "imperative.profiler"}}


def _name_track(b, tid, name):
    b.events.append({"ph": "M", "pid": b.pid, "tid": tid, "name": "thread_name",
                     "args": {"name": name}})


def _step_slices(b, tid):
    """A ProfilerStep#N slice per step, on a track of their own: on the caller's track a
    scope left open across a `step()` call would overlap a step without nesting in it."""
    if not b.step_bounds:
        return
    _name_track(b, tid, STEPS_TRACK)
    for n in range(1, len(b.step_bounds)):
        b.slice(tid, f"ProfilerStep#{n}", b.step_bounds[n - 1], b.step_bounds[n], "step",
                {STEP_KEY: n})


def _number_threads(names):
    """Small tids: caller threads first (in order of first record), the worker last."""
    order = sorted(names, key=lambda ident: names[ident] == WORKER_THREAD)
    return {ident: i + 1 for i, ident in enumerate(order)}


def _thread_events(b, tid, records, objects, executed, last_t):
    node = lambda index: objects[index] if index >= 0 else None    # noqa: E731 (-1: the root)
    open_scopes = []                 # (node, t0) pushed on this thread
    worker_scopes = _WorkerScopes(b, tid)
    for r in records:
        kind = r[0]
        if kind == _core.EV_DISPATCH:
            _, t0, t1, cmd_id, op, ins, outs, scope, device, allocated, swapped = r
            op = objects[op]
            if cmd_id in executed:
                b.slice(tid, op_name(op), t0, t1, "dispatch")
                if cmd_id in b.flow_ids:
                    b.flow("s", cmd_id, tid, t0)
            else:   # ran inline on this thread: the dispatch slice is the execution
                b.op_slice(tid, op, t0, t1, ins, outs, node(scope), t0)
                b.counter(t1, device, allocated, swapped)
        elif kind == _core.EV_HOST_OP:
            _, t0, t1, op, ins, outs, scope, device, allocated, swapped = r
            b.op_slice(tid, objects[op], t0, t1, ins, outs, node(scope), t0)
            b.counter(t1, device, allocated, swapped)
        elif kind == _core.EV_EXEC:
            _, t0, t1, cmd_id, op, ins, outs, scope, device, allocated, swapped = r
            worker_scopes.op(node(scope), t0, t1)
            b.op_slice(tid, objects[op], t0, t1, ins, outs, node(scope), b.issued.get(cmd_id))
            if cmd_id in b.flow_ids:
                b.flow("f", cmd_id, tid, t0)
            b.counter(t1, device, allocated, swapped)
        elif kind == _core.EV_WAIT:
            _, t0, t1, what = r
            b.slice(tid, f"wait {what}", t0, t1, "wait")
        elif kind == _core.EV_SCOPE_PUSH:
            open_scopes.append((objects[r[2]], r[1]))
        elif kind == _core.EV_SCOPE_POP:
            if open_scopes and open_scopes[-1][0] is objects[r[2]]:
                scope_node, t0 = open_scopes.pop()
                b.slice(tid, scope_node.label, t0, r[1], "scope", {"path": scope_node.path})
        elif kind == _core.EV_INSTANT:
            ev = {"ph": "i", "s": "t", "pid": b.pid, "tid": tid, "ts": _us(r[1], b.origin),
                  "name": r[2], "cat": "mark"}
            if r[3]:
                ev["args"] = r[3]
            b.events.append(ev)
        elif kind == _core.EV_MEMORY:
            _, t0, t1, action, desc, reason, where, user_name = r
            args = {"reason": reason, "tensor": op_path(*where)}     # the tensor's `_name`
            if user_name:
                args["name"] = user_name
            b.slice(tid, f"{action} {_desc(*desc)}", t0, t1, "memory", args)
            worker_scopes.other(t0, t1)
    end = records[-1][2] if records and records[-1][0] in (0, 1, 2, 3, 7) else last_t
    while open_scopes:               # scopes still open when the profile stopped
        scope_node, t0 = open_scopes.pop()
        b.slice(tid, scope_node.label, t0, max(end, last_t), "scope", {"path": scope_node.path})
    worker_scopes.finish()


def _chain(node):
    out = []
    while node is not None and node.parent is not None:
        out.append(node)
        node = node.parent
    return out[::-1]


class _WorkerScopes:
    """Scope slices on the worker: the scopes of consecutive commands, properly nested.

    A scope opens HAIR_NS per level before its first op and closes HAIR_NS per level after
    its last op (and after its children), so that it strictly encloses them: with equal
    times Perfetto may nest the scope under the op, and the op's flow arrow then lands on
    the scope. The hair never reaches the slices before or after on the track (drops,
    recomputations); where the gap is that narrow, it shrinks."""

    def __init__(self, b, tid):
        self.b, self.tid = b, tid
        self.stack = []              # [node, start, end of its last op or child]
        self.last_op_end = None
        self.others = []             # (t0, t1) of other slices since the last op

    def other(self, t0, t1):
        """A slice on the track that is not an op (a drop, a recomputation)."""
        self.others.append((t0, t1))

    def op(self, node, t0, t1):
        """The next op, [t0, t1], issued in scope `node`."""
        prev = self.last_op_end
        # closing scopes may reach the first slice after the previous op; opening ones the
        # last slice before this op; when nothing lies between, they share the gap
        ceiling = min([s for s, e in self.others if prev is None or s >= prev] + [t0])
        floor = max([e for s, e in self.others if e <= t0] + ([prev] if prev is not None else []),
                    default=None)
        if floor is not None and ceiling > floor:
            ceiling = floor = (floor + ceiling) // 2
        target = _chain(node)
        keep = 0
        while keep < len(self.stack) and keep < len(target) and self.stack[keep][0] is target[keep]:
            keep += 1
        self._close(keep, ceiling)
        new = target[keep:]
        for i, n in enumerate(new):      # the outermost opens first
            start = t0 - (len(new) - i) * HAIR_NS
            self.stack.append([n, start if floor is None else max(start, floor), t1])
        for entry in self.stack:
            entry[2] = t1
        self.last_op_end, self.others = t1, []

    def finish(self):
        starts = [s for s, e in self.others if self.last_op_end is None or s >= self.last_op_end]
        self._close(0, min(starts, default=None))

    def _close(self, keep, ceiling):
        while len(self.stack) > keep:
            n, start, end = self.stack.pop()
            end += HAIR_NS
            if ceiling is not None:
                end = min(end, ceiling)
            self.b.slice(self.tid, n.label, start, end, "scope", {"path": n.path})
            if self.stack:           # the parent closes after its child
                self.stack[-1][2] = max(self.stack[-1][2], end)


if __name__ == "__main__":
    sys.exit(main())
