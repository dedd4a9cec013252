"""The profiler: Chrome trace JSON (Trace Event Format) that opens in Perfetto.

    with imp.Profiler(path="profile") as p:      # writes profile/<pid>.chrome_timeline.json
        for batch in data:
            train_step(batch)
            p.step()

    python -m imperative.profiler summary profile/<pid>.chrome_timeline.json [--json]

The core records compact tuples per thread while a profile runs (imperative/_record.pxi);
everything here happens at dump time.
"""
import argparse
import functools
import json
import os
import sys
import warnings
from collections import defaultdict

from . import _core
from .scope import op_name

__all__ = ["Profiler", "start_profile", "stop_profile", "summarize", "main"]

FORMATS = ("chrome_timeline.json",)
DEFAULT_OPTIONS = {"record_shapes": True, "record_memory": True}
WORKER_THREAD = "imperative-worker"
# A memory counter sample is written when the value moved by at least this much (or by 1%),
# so that a loop of tiny ops does not write a sample per op; the first and last always count.
COUNTER_MIN_STEP = 64 * 1024


def _check_options(options):
    unknown = set(options) - set(DEFAULT_OPTIONS)
    if unknown:
        raise ValueError(f"unknown profiler option(s) {sorted(unknown)}; valid: {sorted(DEFAULT_OPTIONS)}")
    merged = dict(DEFAULT_OPTIONS)
    merged.update(options)
    return merged


_active_options = None


def start_profile(options=None):
    """Start recording. `options`: {"record_shapes": bool, "record_memory": bool}."""
    global _active_options
    opts = _check_options(dict(options or {}))
    _core.start_recording()
    _active_options = opts


def stop_profile():
    """Stop recording; returns `dump(basename, format="chrome_timeline.json")`, which writes
    `<basename>.<format>` and returns its path."""
    global _active_options
    buffers, names, objects = _core.stop_recording()
    opts, _active_options = _active_options, None

    def dump(basename, format="chrome_timeline.json"):
        if format not in FORMATS:
            raise ValueError(f"unknown profile format {format!r}; supported: {FORMATS}")
        path = f"{basename}.{format}"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        trace = build_chrome_trace(buffers, names, objects, opts)
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
        """Mark the end of a training step in the trace."""
        self._steps += 1
        _core.record_instant(f"step {self._steps}", {"step": self._steps})

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
    def __init__(self, origin, options):
        self.origin = origin
        self.options = options
        self.pid = os.getpid()
        self.events = []
        self.flow_ids = {}          # command's profile id -> flow id
        self.counters = {}          # device -> last (allocated, swapped) written

    def slice(self, tid, name, t0, t1, cat, args=None):
        ev = {"ph": "X", "pid": self.pid, "tid": tid, "ts": _us(t0, self.origin),
              "dur": round(max(t1 - t0, 0) / 1000.0, 3), "name": name, "cat": cat}
        if args:
            ev["args"] = args
        self.events.append(ev)

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


def build_chrome_trace(buffers, names, objects, options=None):
    """Records → {"traceEvents": [...], "displayTimeUnit": "ms"}. `objects`: the ops and
    scope nodes that records name by index."""
    options = _check_options(options or {})
    all_records = [r for buf in buffers.values() for r in buf]
    origin = min((r[1] for r in all_records), default=0)
    b = _TraceBuilder(origin, options)
    tids = _number_threads(names)
    b.events.append({"ph": "M", "pid": b.pid, "name": "process_name", "args": {"name": "imperative"}})
    for ident, tid in tids.items():
        b.events.append({"ph": "M", "pid": b.pid, "tid": tid, "name": "thread_name",
                         "args": {"name": names.get(ident, str(ident))}})
    executed = {r[3] for r in all_records if r[0] == _core.EV_EXEC}
    dispatched = {r[3] for r in all_records if r[0] == _core.EV_DISPATCH}
    # a flow needs both ends: ops issued before the profile started have no dispatch slice
    for cmd_id in sorted(executed & dispatched):
        b.flow_ids[cmd_id] = len(b.flow_ids) + 1
    last_t = max((r[2] if r[0] in (0, 1, 2, 3, 7) else r[1] for r in all_records), default=origin)
    for ident, records in buffers.items():
        _thread_events(b, tids[ident], records, objects, executed, last_t)
    return {"traceEvents": b.events, "displayTimeUnit": "ms",
            "otherData": {"generator": "imperative.profiler"}}


def _number_threads(names):
    """Small tids: caller threads first (in order of first record), the worker last."""
    order = sorted(names, key=lambda ident: names[ident] == WORKER_THREAD)
    return {ident: i + 1 for i, ident in enumerate(order)}


def _thread_events(b, tid, records, objects, executed, last_t):
    shapes = b.options["record_shapes"]
    open_scopes = []                 # (node, t0) pushed on this thread
    worker_scopes = []               # (node, t0, t_last_end) derived from executed commands
    for r in records:
        kind = r[0]
        if kind == _core.EV_DISPATCH:
            _, t0, t1, cmd_id, op, ins, outs, device, allocated, swapped = r
            op = objects[op]
            if cmd_id in executed:
                b.slice(tid, op_name(op), t0, t1, "dispatch")
                if cmd_id in b.flow_ids:
                    b.flow("s", cmd_id, tid, t0)
            else:   # ran inline on this thread: the dispatch slice is the execution
                b.slice(tid, op_name(op), t0, t1, "op", _op_args(op, ins, outs, shapes))
                b.counter(t1, device, allocated, swapped)
        elif kind == _core.EV_HOST_OP:
            _, t0, t1, op, ins, outs, device, allocated, swapped = r
            op = objects[op]
            b.slice(tid, op_name(op), t0, t1, "op", _op_args(op, ins, outs, shapes))
            b.counter(t1, device, allocated, swapped)
        elif kind == _core.EV_EXEC:
            _, t0, t1, cmd_id, op, ins, outs, scope, device, allocated, swapped = r
            op, scope = objects[op], (objects[scope] if scope >= 0 else None)
            _follow_scopes(b, tid, worker_scopes, scope, t0)
            b.slice(tid, op_name(op), t0, t1, "op", _op_args(op, ins, outs, shapes))
            if cmd_id in b.flow_ids:
                b.flow("f", cmd_id, tid, t0)
            b.counter(t1, device, allocated, swapped)
            if worker_scopes:
                worker_scopes[-1] = worker_scopes[-1][:2] + (t1,)
        elif kind == _core.EV_WAIT:
            _, t0, t1, what = r
            b.slice(tid, f"wait {what}", t0, t1, "wait")
        elif kind == _core.EV_SCOPE_PUSH:
            open_scopes.append((objects[r[2]], r[1]))
        elif kind == _core.EV_SCOPE_POP:
            if open_scopes and open_scopes[-1][0] is objects[r[2]]:
                node, t0 = open_scopes.pop()
                b.slice(tid, node.label, t0, r[1], "scope", {"path": node.path})
        elif kind == _core.EV_INSTANT:
            ev = {"ph": "i", "s": "t", "pid": b.pid, "tid": tid, "ts": _us(r[1], b.origin),
                  "name": r[2], "cat": "mark"}
            if r[3]:
                ev["args"] = r[3]
            b.events.append(ev)
        elif kind == _core.EV_MEMORY:
            _, t0, t1, action, desc, reason = r
            b.slice(tid, f"{action} {_desc(*desc)}", t0, t1, "memory", {"reason": reason})
    end = records[-1][2] if records and records[-1][0] in (0, 1, 2, 3, 7) else last_t
    while open_scopes:               # scopes still open when the profile stopped
        node, t0 = open_scopes.pop()
        b.slice(tid, node.label, t0, max(end, last_t), "scope", {"path": node.path})
    _follow_scopes(b, tid, worker_scopes, None, None)


def _chain(node):
    out = []
    while node is not None and node.parent is not None:
        out.append(node)
        node = node.parent
    return out[::-1]


def _follow_scopes(b, tid, stack, node, t0):
    """Scope slices on the worker: the scopes of consecutive commands, properly nested.
    Each open entry is (node, start, end of its last command)."""
    target = _chain(node)
    keep = 0
    while keep < len(stack) and keep < len(target) and stack[keep][0] is target[keep]:
        keep += 1
    while len(stack) > keep:
        n, start, end = stack.pop()
        b.slice(tid, n.label, start, end, "scope", {"path": n.path})
        if stack:     # the parent lasts at least as long as its child
            stack[-1] = stack[-1][:2] + (max(stack[-1][2], end),)
    for n in target[keep:]:
        stack.append((n, t0, t0))


# ------------------------------------------------------------------ summary


def summarize(trace):
    """Busiest ops, waiting time, memory peak and memory-manager work of a trace dict."""
    ops = defaultdict(lambda: [0, 0.0])
    wait_us = 0.0
    memory_work = defaultdict(lambda: [0, 0.0])
    peak = {}
    busy_us = 0.0
    for ev in trace["traceEvents"]:
        ph, cat = ev.get("ph"), ev.get("cat")
        if ph == "X" and cat == "op":
            entry = ops[ev["name"]]
            entry[0] += 1
            entry[1] += ev["dur"]
            busy_us += ev["dur"]
        elif ph == "X" and cat == "wait":
            wait_us += ev["dur"]
        elif ph == "X" and cat == "memory":
            entry = memory_work[ev["name"].split(" ", 1)[0]]
            entry[0] += 1
            entry[1] += ev["dur"]
        elif ph == "C" and ev.get("name", "").startswith("memory"):
            device = ev["name"].split(" ", 1)[1] if " " in ev["name"] else "?"
            peak[device] = max(peak.get(device, 0), ev["args"].get("allocated", 0))
    rows = sorted(({"op": name, "count": c, "total_us": round(t, 3), "mean_us": round(t / c, 3),
                    "share": round(t / busy_us, 4) if busy_us else 0.0}
                   for name, (c, t) in ops.items()), key=lambda r: -r["total_us"])
    return {"ops": rows, "op_time_us": round(busy_us, 3), "wait_us": round(wait_us, 3),
            "peak_allocated_bytes": peak,
            "memory_work": {k: {"count": c, "total_us": round(t, 3)} for k, (c, t) in memory_work.items()}}


def _print_summary(s, limit):
    print(f"{'op':<32}{'count':>9}{'total ms':>12}{'mean us':>11}{'share':>8}")
    for r in s["ops"][:limit]:
        print(f"{r['op']:<32}{r['count']:>9}{r['total_us'] / 1e3:>12.3f}{r['mean_us']:>11.3f}"
              f"{r['share'] * 100:>7.1f}%")
    print(f"op time {s['op_time_us'] / 1e3:.3f} ms; waiting {s['wait_us'] / 1e3:.3f} ms")
    for device, peak in s["peak_allocated_bytes"].items():
        print(f"memory peak on {device}: {peak / 2**20:.2f} MiB")
    if s["memory_work"]:
        for action, v in s["memory_work"].items():
            print(f"{action}: {v['count']} in {v['total_us'] / 1e3:.3f} ms")
    else:
        print("memory manager work: none")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m imperative.profiler")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="the busiest ops, waits and the memory peak of a trace")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    with open(args.file) as f:
        summary = summarize(json.load(f))
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        _print_summary(summary, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
