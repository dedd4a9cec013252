"""The profile summary: tables of a Chrome trace that imperative.profiler wrote, like
torch.profiler's `key_averages().table()`.

    python -m imperative.profiler summary TRACE.json [--group-by op|shape|scope]
        [--sort total|self|count|mean|memory] [--top N] [--skip-steps N] [--all] [--json]

It prints the step times, a table of op time grouped by op, by op and input shapes, or by
scope, the time spent waiting, the memory peak and the memory manager's work. When the
trace has steps (`Profiler.step()`), only the ops issued inside them count (`--all`: every
op). This module reads only the JSON: it imports nothing from the package (and nothing
that the package's modules shadow when it runs as a script), so without a built core
`python imperative/profiler_summary.py summary TRACE.json` works too.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict

__all__ = ["summarize", "print_summary", "main", "output_bytes"]

GROUPINGS = ("op", "shape", "scope")
SORT_KEYS = {"total": "total_us", "self": "self_us", "count": "count", "mean": "mean_us",
             "memory": "out_bytes"}
NO_SCOPE = "(no scope)"
STEP_KEY = "step"              # imperative.profiler.STEP_KEY
_DESC = re.compile(r"([A-Za-z_]\w*)\(([\d, ]*)\)")      # "float32(2, 3)"
_VERSION = re.compile(r"\[\d+\]")                         # "block[3]" -> "block"


# ------------------------------------------------------------------ reading the trace


def _itemsize(dtype_name):
    """Bytes per element from a dtype's name: float32 -> 4, complex64 -> 8, bool -> 1."""
    bits = re.search(r"(\d+)$", dtype_name)
    return max(int(bits.group(1)) // 8, 1) if bits else 1


def output_bytes(described: str) -> int:
    """Bytes of the values an op slice's "out" argument describes ("float32(2, 3), bool(4,)"
    -> 28): elements times item size. Unknown shapes ("(?)") count 0."""
    total = 0
    for dtype, dims in _DESC.findall(described):
        n = 1
        for d in dims.split(","):
            if d.strip():
                n *= int(d)
        total += n * _itemsize(dtype)
    return total


def _slices(events, cat):
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == cat]


def _steps(events):
    """The ProfilerStep#N slices, by number: {n: (start µs, duration µs)}."""
    return {e["args"][STEP_KEY]: (e["ts"], e["dur"]) for e in _slices(events, "step")}


def _group_keys(op, group_by):
    """The rows an op slice counts in, each with whether its time is self time there: an op
    counts in its scope and in every enclosing scope (self only in its own)."""
    args = op.get("args", {})
    if group_by == "op":
        return [((op["name"],), True)]
    if group_by == "shape":
        return [((op["name"], args.get("in", "?")), True)]
    # versions (`block[3]`: the block's 4th call) are the same module: one row for all
    path = _VERSION.sub("", args.get("scope", ""))
    if not path:
        return [((NO_SCOPE,), True)]
    parts = path.split(".")
    return [((".".join(parts[:i]),), i == len(parts)) for i in range(1, len(parts) + 1)]


def _key_fields(key, group_by):
    if group_by == "shape":
        return {"op": key[0], "input_shapes": key[1]}
    return {"scope" if group_by == "scope" else "op": key[0]}


def _rows(ops, group_by, op_time_us):
    acc = defaultdict(lambda: {"count": 0, "total_us": 0.0, "self_us": 0.0, "out_bytes": 0})
    for op in ops:
        nbytes = output_bytes(op.get("args", {}).get("out", ""))
        for key, is_self in _group_keys(op, group_by):
            row = acc[key]
            row["count"] += 1
            row["total_us"] += op["dur"]
            row["out_bytes"] += nbytes
            if is_self:
                row["self_us"] += op["dur"]
    rows = []
    for key, r in acc.items():
        rows.append({**_key_fields(key, group_by), "count": r["count"],
                     "total_us": round(r["total_us"], 3), "self_us": round(r["self_us"], 3),
                     "mean_us": round(r["total_us"] / r["count"], 3),
                     "share": round(r["total_us"] / op_time_us, 4) if op_time_us else 0.0,
                     "out_bytes": r["out_bytes"]})
    return rows


def _step_times(steps, ops):
    """Per step: its wall time (from the previous `step()` call to this one) and the time
    of the ops issued in it."""
    op_us = defaultdict(float)
    for op in ops:
        n = op.get("args", {}).get(STEP_KEY)
        if n is not None:
            op_us[n] += op["dur"]
    return [{"step": n, "ms": round(dur / 1e3, 3), "op_ms": round(op_us[n] / 1e3, 3)}
            for n, (_, dur) in sorted(steps.items())]


def _median(values):
    # (not statistics.median: statistics imports random, which imperative/random.py
    # shadows when this file runs as a script)
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _in_steps(ts, steps, counted):
    return any(steps[n][0] <= ts < steps[n][0] + steps[n][1] for n in counted)


def summarize(trace: dict, group_by: str = "op", sort: str = "total", skip_steps: int = 0,
              all_ops: bool = False) -> dict:
    """The summary of a trace dict (see the module's doc); a JSON-ready dict."""
    if group_by not in GROUPINGS:
        raise ValueError(f"group_by must be one of {GROUPINGS}, got {group_by!r}")
    if sort not in SORT_KEYS:
        raise ValueError(f"sort must be one of {tuple(SORT_KEYS)}, got {sort!r}")
    events = trace["traceEvents"]
    steps = _steps(events)
    all_op_slices = _slices(events, "op")
    counted = sorted(steps)[skip_steps:]
    if steps and not all_ops:
        in_steps = set(counted)
        ops = [op for op in all_op_slices if op.get("args", {}).get(STEP_KEY) in in_steps]
        waits = [w for w in _slices(events, "wait") if _in_steps(w["ts"], steps, counted)]
        scope = f"ops issued in steps {counted[0]}-{counted[-1]}" if counted else "no steps left"
    else:
        ops, waits = all_op_slices, _slices(events, "wait")
        scope = "all ops"
    op_time_us = sum(op["dur"] for op in ops)
    rows = _rows(ops, group_by, op_time_us)
    rows.sort(key=lambda r: -r[SORT_KEYS[sort]])
    step_list = _step_times(steps, all_op_slices)
    counted_ms = [s["ms"] for s in step_list if s["step"] in set(counted)]
    return {
        "counted": scope, "group_by": group_by, "sort": sort,
        "steps": step_list,
        "step_ms": ({"median": _median(counted_ms), "min": min(counted_ms),
                     "max": max(counted_ms)} if counted_ms else None),
        "ops": rows,
        "op_time_us": round(op_time_us, 3),
        "uncounted_op_time_us": round(sum(op["dur"] for op in all_op_slices) - op_time_us, 3),
        "wait_us": round(sum(w["dur"] for w in waits), 3),
        "peak_allocated_bytes": _memory_peaks(events),
        "memory_work": _memory_work(events),
    }


def _memory_peaks(events):
    """The highest `allocated` sample of each device's memory counter (the whole profile)."""
    peak = {}
    for ev in events:
        if ev.get("ph") == "C" and ev.get("name", "").startswith("memory"):
            device = ev["name"].split(" ", 1)[1] if " " in ev["name"] else "?"
            peak[device] = max(peak.get(device, 0), ev["args"].get("allocated", 0))
    return peak


def _memory_work(events):
    """Drops, swaps, evictions, recomputations: count and time of each (the whole profile)."""
    work = defaultdict(lambda: [0, 0.0])
    for ev in _slices(events, "memory"):
        entry = work[ev["name"].split(" ", 1)[0]]
        entry[0] += 1
        entry[1] += ev["dur"]
    return {k: {"count": c, "total_us": round(t, 3)} for k, (c, t) in work.items()}


# ------------------------------------------------------------------ printing

MAX_STEP_LINES = 30
MAX_NAME = 60


def _cut(text, width):
    return text if len(text) <= width else text[:width - 3] + "..."


def _print_steps(s):
    if not s["steps"]:
        print("steps: none marked (Profiler.step()); every op counts")
        return
    m = s["step_ms"]
    times = (f"median {m['median']:.3f} ms, min {m['min']:.3f}, max {m['max']:.3f}" if m
             else "none counted")
    print(f"steps: {len(s['steps'])}; step time {times}")
    print(f"{'step':>6}{'ms':>12}{'op ms':>12}")
    for st in s["steps"][:MAX_STEP_LINES]:
        print(f"{st['step']:>6}{st['ms']:>12.3f}{st['op_ms']:>12.3f}")
    if len(s["steps"]) > MAX_STEP_LINES:
        print(f"  ... {len(s['steps']) - MAX_STEP_LINES} more steps (--json lists them all)")


def _print_table(s, limit):
    rows = s["ops"][:limit]
    key = "scope" if s["group_by"] == "scope" else "op"
    width = min(max([len(key)] + [len(r[key]) for r in rows]) + 2, MAX_NAME)
    shapes = "  input shapes" if s["group_by"] == "shape" else ""
    print(f"{key:<{width}}{'count':>8}{'total ms':>11}{'self ms':>11}{'mean us':>11}"
          f"{'share':>8}{'out MiB':>10}{shapes}")
    for r in rows:
        line = (f"{_cut(r[key], width - 2):<{width}}{r['count']:>8}{r['total_us'] / 1e3:>11.3f}"
                f"{r['self_us'] / 1e3:>11.3f}{r['mean_us']:>11.3f}{r['share'] * 100:>7.1f}%"
                f"{r['out_bytes'] / 2**20:>10.2f}")
        print(line + (f"  {r['input_shapes']}" if shapes else ""))
    if len(s["ops"]) > limit:
        print(f"  ... {len(s['ops']) - limit} more rows (--top)")


def print_summary(s: dict, limit: int = 20) -> None:
    """The summary as text: steps, the table (the first `limit` rows), waits and memory."""
    _print_steps(s)
    print()
    print(f"{s['counted']}, grouped by {s['group_by']}, sorted by {s['sort']}:")
    _print_table(s, limit)
    left_out = (f"; not counted: {s['uncounted_op_time_us'] / 1e3:.3f} ms of ops issued outside "
                f"the counted steps (--all counts them)" if s["uncounted_op_time_us"] > 0 else "")
    print(f"op time {s['op_time_us'] / 1e3:.3f} ms{left_out}; waiting {s['wait_us'] / 1e3:.3f} ms")
    for device, peak in s["peak_allocated_bytes"].items():
        print(f"memory peak on {device}: {peak / 2**20:.2f} MiB (whole profile)")
    if s["memory_work"]:
        for action, v in s["memory_work"].items():
            print(f"{action}: {v['count']} in {v['total_us'] / 1e3:.3f} ms")
    else:
        print("memory manager work: none")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m imperative.profiler")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary",
                       help="step times, the busiest ops, waits and the memory peak of a trace")
    p.add_argument("file")
    p.add_argument("--group-by", choices=GROUPINGS, default="op",
                   help="op (default), shape (op and input shapes) or scope (module scopes)")
    p.add_argument("--sort", choices=tuple(SORT_KEYS), default="total",
                   help="by total time (default), self time, count, mean time or output memory")
    p.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    p.add_argument("--skip-steps", type=int, default=0, metavar="N",
                   help="leave out the first N steps (warm-up)")
    p.add_argument("--all", action="store_true", dest="all_ops",
                   help="count every op, also those issued outside the steps")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if args.skip_steps < 0 or args.top < 0:
        parser.error("--skip-steps and --top take a number >= 0")
    try:
        with open(args.file) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        parser.error(f"cannot read the trace {args.file!r}: {e}")
    summary = summarize(trace, args.group_by, args.sort, args.skip_steps, args.all_ops)
    if args.json:
        json.dump(summary, sys.stdout, indent=2)
        print()
    else:
        print_summary(summary, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
