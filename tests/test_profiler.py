"""Scopes and the profiler: names, the Chrome trace's tracks, slices, flows and counters,
the summary command, and (when the trace viewer is set up) the real Perfetto UI."""
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

import imperative as imp
from imperative import profiler, profiler_summary

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIEWER = os.path.join(os.path.dirname(REPO), "shared", "tools", "trace_viewer",
                      "perfetto_headless.py")
VIEWER_PYTHON = os.environ.get("IMPERATIVE_TRACE_VIEWER_PYTHON",
                               "/tmp/trace-viewer-venv/bin/python")
# big enough for the worker: inputs and outputs of x @ x, y + 1, y @ w and its * 2 hold more
# than the host-compute limit of elements
BIG = (192, 192)
NARROW = (192, 176)
assert 2 * math.prod(NARROW) > imp._core.HOST_COMPUTE_MAX_ELEMENTS


# ---------------------------------------------------------------- scopes


def test_scopes_name_tensors_with_versions():
    with imp.scope("block"):
        with imp.scope("linear"):
            x = imp.Tensor([1.0, 2.0])
            y = x @ x
            z = x + x
    with imp.scope("block"):
        w = x * 2
    # versions count entries under the same parent over the whole process
    m = re.fullmatch(r"block(?:\[(\d+)\])?\.linear\.Tensor:0", x._name)
    assert m, x._name
    first = int(m.group(1) or 0)
    prefix = f"block[{first}]" if first else "block"
    assert y._name == f"{prefix}.linear.MatrixMul:0"
    assert z._name == f"{prefix}.linear.Elemwise.ADD:0"
    assert w._name == f"block[{first + 1}].Elemwise.MUL:0"
    assert (x + 1)._name == "Elemwise.ADD:0"
    assert y.name == ""          # the user name is separate and not inherited


def test_pop_scope_mismatch_and_empty_stack_leave_the_stack_alone():
    with pytest.raises(ValueError, match="empty"):
        imp.pop_scope("nothing")
    imp.push_scope("outer")
    try:
        with pytest.raises(ValueError, match=r"pop_scope\('inner'\).*'outer'"):
            imp.pop_scope("inner")
        assert (imp.Tensor([1.0]) + 1)._name.startswith("outer")
    finally:
        imp.pop_scope("outer")
    assert (imp.Tensor([1.0]) + 1)._name == "Elemwise.ADD:0"


def test_scope_context_is_balanced_when_the_body_raises():
    with pytest.raises(KeyError):
        with imp.scope("failing"):
            raise KeyError("x")
    assert (imp.Tensor([1.0]) * 1)._name == "Elemwise.MUL:0"
    with pytest.raises(TypeError):
        imp.push_scope("")


# ---------------------------------------------------------------- profiles


def run_profiled_steps(tmp_path, steps=3):
    """A small workload: queued big ops under scopes, host-computed tiny ops, a wait."""
    x = imp.Tensor(np.ones(BIG, np.float32))
    small = imp.Tensor(np.ones(4, np.float32))
    with imp.Profiler(path=str(tmp_path)) as prof:
        for _ in range(steps):
            with imp.scope("block"):
                with imp.scope("linear"):
                    y = x @ x
                    z = y + 1
                s = small * 2
            prof.step()
        z.numpy()
        s.numpy()
    assert prof.files == [os.path.join(str(tmp_path), f"{os.getpid()}.chrome_timeline.json")]
    with open(prof.files[0]) as f:
        return json.load(f), prof.files[0]


def tracks(trace):
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            slices[names[e["tid"]]].append(e)
    return names, slices


def test_trace_has_named_tracks_ops_flows_scopes_waits_and_memory(tmp_path):
    trace, _ = run_profiled_steps(tmp_path)
    assert trace["displayTimeUnit"] == "ms"
    names, slices = tracks(trace)
    at_async_0 = imp.get_async_level() == 0
    caller, worker = slices["MainThread"], slices.get("imperative-worker", [])

    def by(evs, cat):
        return [e for e in evs if e["cat"] == cat]
    # every op appears once as an execution: on the worker, or on the caller when run there
    executed = by(caller, "op") + by(worker, "op")
    assert (sorted(e["name"] for e in executed)
            == sorted(["MatrixMul", "Elemwise.ADD", "Elemwise.MUL"] * 3))
    matmuls = [e for e in executed if e["name"] == "MatrixMul"]
    assert all(e["args"]["in"] == f"float32{BIG}, float32{BIG}" for e in matmuls)
    assert all("MatrixMul(transpose_a=False" in e["args"]["op"] for e in matmuls)
    if not at_async_0:
        # queued ops: a dispatch slice on the caller, joined to the worker's by a flow
        assert (sorted(e["name"] for e in by(caller, "dispatch"))
                == sorted(["MatrixMul", "Elemwise.ADD"] * 3))
        starts = {e["id"] for e in trace["traceEvents"] if e["ph"] == "s"}
        ends = {e["id"] for e in trace["traceEvents"] if e["ph"] == "f"}
        assert starts == ends and len(starts) == 6
        worker_scopes = [e["args"]["path"] for e in by(worker, "scope")]
        assert len(worker_scopes) == 6
        assert all(re.fullmatch(r"block(\[\d+\])?(\.linear)?", p) for p in worker_scopes)
        assert any(e["name"].startswith("wait") for e in by(caller, "wait"))
    scopes = [e["args"]["path"] for e in by(caller, "scope")]
    assert len(scopes) == 6
    assert all(re.fullmatch(r"block(\[\d+\])?(\.linear)?", p) for p in scopes)
    marks = [e["name"] for e in trace["traceEvents"] if e["ph"] == "i"]
    assert marks == ["step 1", "step 2", "step 3"]
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert counters and all(e["name"] == "memory cpu0" and "allocated" in e["args"]
                            and "swapped" in e["args"] for e in counters)


def test_slices_on_each_track_nest_properly(tmp_path):
    trace, _ = run_profiled_steps(tmp_path)
    _, slices = tracks(trace)
    for track, evs in slices.items():
        spans = sorted(((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e["name"])
                        for e in evs), key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in spans:
            while stack and stack[-1][1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][1], f"{name} overlaps {stack[-1][2]} on {track}"
            stack.append((start, end, name))


def test_start_twice_fails_and_nothing_is_written_before_stop(tmp_path):
    imp.start_profile({"record_shapes": True})
    try:
        with pytest.raises(RuntimeError, match="already"):
            imp.start_profile()
        (imp.Tensor([1.0]) + 1).numpy()
        assert list(tmp_path.iterdir()) == []
    finally:
        dump = imp.stop_profile()
    path = dump(str(tmp_path / "low_level"))
    assert path.endswith("low_level.chrome_timeline.json") and os.path.exists(path)
    with pytest.raises(RuntimeError, match="no profile"):
        imp.stop_profile()
    with pytest.raises(ValueError, match="unknown profiler option"):
        imp.Profiler(path=str(tmp_path), colour=True)
    with pytest.raises(ValueError, match="format"):
        dump(str(tmp_path / "x"), "svg")


def test_profiler_as_a_decorator(tmp_path):
    @imp.Profiler(path=str(tmp_path))
    def work():
        return (imp.Tensor(np.ones(3, np.float32)) * 3).numpy()

    np.testing.assert_array_equal(work(), [3, 3, 3])
    assert os.path.exists(tmp_path / f"{os.getpid()}.chrome_timeline.json")


def test_drop_and_recompute_slices_name_the_tensor(tmp_path):
    # §7: they named only the shape and dtype, which several tensors shared
    a = np.ones((64, 64), np.float32)
    with imp.option("enable_drop", 1):
        with imp.Profiler(path=str(tmp_path)) as prof:
            with imp.scope("blk"):
                x = imp.Tensor(a)
                c = (x @ x + 1) * 2
                e = (x @ x + 1) - 3                   # (another `_name`: Elemwise.SUB:0)
                e.name = "mine"
                c._drop()
                e._drop()
                d = c + 1
                f = e + 1
            d.numpy()
            f.numpy()
        np.testing.assert_array_equal(d.numpy(), (a @ a + 1) * 2 + 1)   # values unchanged
        np.testing.assert_array_equal(f.numpy(), (a @ a + 1) - 3 + 1)
    with open(prof.files[0]) as fh:
        events = [ev for ev in json.load(fh)["traceEvents"] if ev.get("cat") == "memory"]
    by_action = defaultdict(list)
    for ev in events:
        assert ev["name"].split(" ", 1)[1] == "float32(64, 64)"      # the name as it was
        by_action[ev["name"].split(" ", 1)[0]].append(ev["args"])
    assert sorted(by_action) == ["drop", "recompute"]
    for action in ("drop", "recompute"):
        # (the memory manager drops dead intermediates too: each named by its `_name`)
        named = {args["tensor"]: args.get("name") for args in by_action[action]}
        assert named[c._name] is None and named[e._name] == "mine", action
        assert [n for n in named.values() if n] == ["mine"]
        assert all(args["reason"] and args["tensor"] for args in by_action[action]), \
            by_action[action]
    assert c._name.endswith(".Elemwise.MUL:0") and c._name.startswith("blk")


def test_tensor_names_are_strs():
    t = imp.Tensor([1.0])
    assert t.name == "" and (t + 1).name == "" and imp.Tensor([1.0], name="w").name == "w"
    for bad in (3, None, b"w", ["w"]):
        with pytest.raises(TypeError, match=f"name must be a str, got {type(bad).__name__}"):
            t.name = bad
        assert t.name == ""                                      # unchanged
    t.name = "weights"
    t += 1                                       # in place: still the named tensor
    assert t.name == "weights"
    np.testing.assert_array_equal(t.numpy(), [2.0])


def test_summary_command_prints_busiest_ops_and_the_memory_peak(tmp_path):
    _, path = run_profiled_steps(tmp_path)
    r = subprocess.run([sys.executable, "-m", "imperative.profiler", "summary", path, "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    counts = {row["op"]: row["count"] for row in summary["ops"]}
    assert counts == {"MatrixMul": 3, "Elemwise.ADD": 3, "Elemwise.MUL": 3}
    assert abs(sum(row["share"] for row in summary["ops"]) - 1) < 1e-3
    assert summary["peak_allocated_bytes"]["cpu0"] >= 2 * math.prod(BIG) * 4
    text = subprocess.run([sys.executable, "-m", "imperative.profiler", "summary", path],
                          capture_output=True, text=True, timeout=60)
    assert text.returncode == 0 and "MatrixMul" in text.stdout and "memory peak" in text.stdout


# ---------------------------------------------------------------- steps and the summary


def profile_with_work_after_the_steps(tmp_path, steps=3):
    """Steps of scoped work (two matmul shapes, a one-op scope), then a matmul after the
    last step() that the summary leaves out."""
    x = imp.Tensor(np.ones(BIG, np.float32))
    w = imp.Tensor(np.ones(NARROW, np.float32))
    with imp.Profiler(path=str(tmp_path)) as prof:
        for _ in range(steps):
            with imp.scope("model"):
                with imp.scope("square"):
                    y = x @ x                   # one op: its worker scope ends with it
                with imp.scope("narrow"):
                    z = (y @ w) * 2
            prof.step()
        z.numpy()
        (x @ w).numpy()                         # after the last step
    with open(prof.files[0]) as f:
        return json.load(f), prof.files[0]


def op_slices(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "op"]


def test_steps_are_slices_and_ops_know_the_step_they_were_issued_in(tmp_path):
    trace, _ = profile_with_work_after_the_steps(tmp_path)
    _, slices = tracks(trace)
    steps = sorted(slices["steps"], key=lambda e: e["ts"])
    assert [e["name"] for e in steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    for before, after in zip(steps, steps[1:]):     # each step starts where the last ended
        assert after["ts"] == pytest.approx(before["ts"] + before["dur"], abs=0.002)
    # by issue time: the worker may run a step's ops after the caller marked its end
    per_step = defaultdict(list)
    for e in op_slices(trace):
        per_step[e["args"].get("step")].append(e["name"])
    assert {k: sorted(v) for k, v in per_step.items()} == {
        **{n: ["Elemwise.MUL", "MatrixMul", "MatrixMul"] for n in (1, 2, 3)}, None: ["MatrixMul"]}
    scopes = {e["args"]["scope"] for e in op_slices(trace) if "scope" in e["args"]}
    assert {re.sub(r"\[\d+\]", "", p) for p in scopes} == {"model.square", "model.narrow"}


def test_summary_counts_only_the_steps_and_times_each(tmp_path):
    trace, _ = profile_with_work_after_the_steps(tmp_path)
    s = profiler.summarize(trace)
    assert {r["op"]: r["count"] for r in s["ops"]} == {"MatrixMul": 6, "Elemwise.MUL": 3}
    assert s["uncounted_op_time_us"] > 0 and "steps 1-3" in s["counted"]
    step_slices = {e["args"]["step"]: e["dur"] for e in trace["traceEvents"]
                   if e.get("cat") == "step"}
    assert [st["step"] for st in s["steps"]] == [1, 2, 3]
    assert [st["ms"] for st in s["steps"]] == [round(step_slices[n] / 1e3, 3) for n in (1, 2, 3)]
    assert sum(st["op_ms"] for st in s["steps"]) == pytest.approx(s["op_time_us"] / 1e3, abs=0.01)
    times = sorted(st["ms"] for st in s["steps"])
    assert s["step_ms"] == {"median": times[1], "min": times[0], "max": times[2]}
    everything = profiler.summarize(trace, all_ops=True)
    assert {r["op"]: r["count"] for r in everything["ops"]} == {"MatrixMul": 7, "Elemwise.MUL": 3}
    warm = profiler.summarize(trace, skip_steps=1)
    assert {r["op"]: r["count"] for r in warm["ops"]} == {"MatrixMul": 4, "Elemwise.MUL": 2}
    assert warm["step_ms"]["min"] >= s["step_ms"]["min"] and len(warm["steps"]) == 3


def test_summary_groups_by_input_shapes_and_by_scope(tmp_path):
    trace, _ = profile_with_work_after_the_steps(tmp_path)
    by_shape = {(r["op"], r["input_shapes"]): r["count"]
                for r in profiler.summarize(trace, group_by="shape")["ops"]}
    assert by_shape == {("MatrixMul", f"float32{BIG}, float32{BIG}"): 3,
                        ("MatrixMul", f"float32{BIG}, float32{NARROW}"): 3,
                        ("Elemwise.MUL", f"float32{NARROW}, float32()"): 3}
    # a scope's total holds its children's ops, its self time only its own; the versions
    # of a scope entered once per step (model, model[1], ...) are one row
    rows = {r["scope"]: r for r in profiler.summarize(trace, group_by="scope")["ops"]}
    assert set(rows) == {"model", "model.square", "model.narrow"}
    assert [rows[name]["count"] for name in ("model", "model.square", "model.narrow")] == [9, 3, 6]
    assert rows["model"]["self_us"] == 0
    assert rows["model"]["total_us"] == pytest.approx(
        rows["model.square"]["total_us"] + rows["model.narrow"]["total_us"], abs=0.01)
    assert rows["model.narrow"]["self_us"] == rows["model.narrow"]["total_us"]


def test_summary_memory_per_op_and_the_sort_orders(tmp_path):
    assert (profiler_summary.output_bytes("float32(2, 3), bool(4,), float16(?), int64()")
            == 24 + 4 + 8)
    trace, _ = profile_with_work_after_the_steps(tmp_path)
    s = profiler.summarize(trace, sort="memory")
    out = {r["op"]: r["out_bytes"] for r in s["ops"]}
    assert out == {"MatrixMul": 3 * (math.prod(BIG) + math.prod(NARROW)) * 4,
                   "Elemwise.MUL": 3 * math.prod(NARROW) * 4}
    for key, field in (("memory", "out_bytes"), ("count", "count"), ("total", "total_us"),
                       ("self", "self_us"), ("mean", "mean_us")):
        values = [r[field] for r in profiler.summarize(trace, group_by="shape", sort=key)["ops"]]
        assert values == sorted(values, reverse=True), key
    with pytest.raises(ValueError, match="sort"):
        profiler.summarize(trace, sort="name")


def test_summary_command_options(tmp_path):
    _, path = profile_with_work_after_the_steps(tmp_path)
    run = lambda *args: subprocess.run(     # noqa: E731
        [sys.executable, "-m", "imperative.profiler", "summary", path, *args],
        capture_output=True, text=True, timeout=60)
    r = run("--group-by", "shape", "--sort", "memory", "--top", "1")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("grouped by shape, sorted by memory:\n")[1].splitlines()
    assert "input shapes" in table[0] and "out MiB" in table[0]
    assert table[1].startswith("MatrixMul")
    assert table[1].endswith(f"float32{BIG}, float32{BIG}")
    assert table[2].startswith("  ... 2 more rows")
    assert re.search(r"steps: 3; step time median [\d.]+ ms", r.stdout)
    assert "not counted" in r.stdout and "--all" in r.stdout
    r = run("--group-by", "scope", "--skip-steps", "1", "--all", "--json")
    s = json.loads(r.stdout)
    assert s["group_by"] == "scope" and s["counted"] == "all ops" and s["uncounted_op_time_us"] == 0
    bad = subprocess.run([sys.executable, "-m", "imperative.profiler", "summary",
                          str(tmp_path / "none.json")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot read the trace" in bad.stderr


def test_worker_scopes_strictly_enclose_their_ops(tmp_path, async_level):
    """With equal times Perfetto may nest a scope under its op, and the op's flow arrow
    then lands on the scope: a worker scope opens before its first op and closes after
    its last, also when it holds one op (model.square)."""
    if async_level == 0:
        pytest.skip("no worker at async level 0")
    trace, _ = profile_with_work_after_the_steps(tmp_path)
    _, slices = tracks(trace)
    worker = slices["imperative-worker"]
    ns = lambda e: (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))    # noqa: E731
    ops = [ns(e) for e in worker if e["cat"] == "op"]
    scopes = [ns(e) for e in worker if e["cat"] == "scope"]
    assert len(scopes) == 9
    for s0, s1 in scopes:
        inside = [(t0, t1) for t0, t1 in ops if s0 <= t0 and t1 <= s1]
        assert inside and all(s0 < t0 and t1 < s1 for t0, t1 in inside)
    assert not {s0 for s0, _ in scopes} & {t0 for t0, _ in ops}
    assert not {s1 for _, s1 in scopes} & {t1 for _, t1 in ops}


def test_summary_needs_no_built_core(tmp_path):
    """From a source tree without the compiled core, `python -m imperative.profiler` says
    what to run (not Python's "circular import"), and the summary module runs as a script."""
    _, trace = profile_with_work_after_the_steps(tmp_path)
    tree = tmp_path / "tree"
    shutil.copytree(os.path.join(REPO, "imperative"), tree / "imperative",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "*.cpp", "__pycache__"))
    # -S: no site-packages, so neither an installed nor an editable imperative is found
    r = subprocess.run([sys.executable, "-S", "-m", "imperative.profiler", "summary", trace],
                       cwd=tree, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "compiled core is not built" in r.stderr and "pip install -e ." in r.stderr
    assert "circular" not in r.stderr
    r = subprocess.run([sys.executable, "-S", os.path.join("imperative", "profiler_summary.py"),
                        "summary", trace, "--json"], cwd=tree, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    counts = {row["op"]: row["count"] for row in json.loads(r.stdout)["ops"]}
    assert counts == {"MatrixMul": 6, "Elemwise.MUL": 3}


# ---------------------------------------------------------------- the real Perfetto UI

viewer_ready = os.path.exists(VIEWER) and os.path.exists(VIEWER_PYTHON) and shutil.which("chromium")


@pytest.mark.skipif(not viewer_ready, reason="trace viewer not set up (see .ci/run)")
def test_trace_loads_in_perfetto_with_the_slices_the_run_made(tmp_path, async_level):
    if async_level == 0:
        pytest.skip("one Perfetto load (about 12 s) is enough: async level 2 covers the worker")
    trace, path = run_profiled_steps(tmp_path)
    summary_path = tmp_path / "summary.json"
    sql = ("SELECT thread.name AS thread, slice.name AS name, COUNT(*) AS n FROM slice "
           "JOIN thread_track ON slice.track_id = thread_track.id "
           "JOIN thread USING (utid) GROUP BY 1, 2")
    r = subprocess.run([VIEWER_PYTHON, VIEWER, path, "--summary", str(summary_path), "--sql", sql,
                        "--png", str(tmp_path / "trace.png")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads(summary_path.read_text())
    assert s["loaded"]
    q = s["queries"]
    assert not [row for row in q["import_stats"] if row["severity"] in ("error", "data_loss")]
    got = {(row["thread"], row["name"]): row["n"] for row in q["sql_0"]}
    expected = defaultdict(int)
    names, slices = tracks(trace)
    for track, evs in slices.items():
        for e in evs:
            expected[(track, e["name"])] += 1
    for e in trace["traceEvents"]:
        if e["ph"] == "i":          # step marks: zero-length slices in Perfetto
            expected[(names[e["tid"]], e["name"])] += 1
    assert got == dict(expected)
    assert len(q["flows"]) == sum(1 for e in trace["traceEvents"] if e["ph"] == "s")
    # each arrow joins a dispatch to its op's execution, never to a scope around it
    assert all(row["from_slice"] == row["to_slice"] for row in q["flows"])
