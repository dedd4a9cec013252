"""The timing harness every tools/bench_*.py uses.

The project machine is shared and its speed drifts by 10% within a minute, so a benchmark
never times one contender and then the next: `interleaved` runs every contender once per
round, in turn, for several rounds, and the figures are the best round (`best`) or the
median of the per-round ratios of two contenders that ran back to back (`paired_median`).
A contender that must not share a process with the others (peak memory, a profiler's
aftermath, an MPI job) runs in a fresh child (`run_child` in the parent, `report` in the
child). Results go out as a table (`print_table`) and a JSON of ratios (`print_ratios`,
`check_targets`, `write_json`).

This module imports neither numpy nor imperative: benches call `one_blas_thread()` before
they import numpy.
"""
import json
import os
import statistics
import subprocess
import sys
import time

# one BLAS/OpenMP thread for every contender, so that benches compare runtimes, not pools
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
RESULT = "RESULT "      # the prefix of a child's record on its stdout


def one_blas_thread():
    """Ask for one BLAS thread (unless the caller's environment says otherwise); must run
    before numpy loads its BLAS."""
    for key, value in ONE_THREAD.items():
        os.environ.setdefault(key, value)


def child_env(**extra):
    """The environment of a child process: this one, one BLAS thread, and `extra`."""
    return dict(os.environ, **ONE_THREAD, **{k: str(v) for k, v in extra.items()})


def import_torch():
    """PyTorch with one intra-op thread, or None where it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


# ---------------------------------------------------------------------------------------
# Timing


def seconds(fn, finish=None, repeat=1):
    """Seconds per call of `fn()` over `repeat` calls, `finish()` (a sync) included once.
    The last call's result lives until the clock stops: freeing a large result is not the
    contender's work, and a runtime must not be able to skip an op nobody holds."""
    start = time.perf_counter()
    for _ in range(repeat - 1):
        fn()
    last = fn()
    if finish is not None:
        finish()
    elapsed = time.perf_counter() - start
    del last
    return elapsed / repeat


def call_times(fn, calls, warmup=1):
    """Seconds of each of `calls` calls of `fn()`, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def repeats_for(fns, target_s, most):
    """Calls per timing such that the fastest of `fns` takes about `target_s` seconds
    (1 to `most`; the slower ones take longer): enough calls that neither the clock's
    resolution nor the timing's own cost shows in the fastest contender's figure."""
    fastest = float("inf")
    for fn in fns:
        fn()                        # a warm-up (caches, lazy imports) before it is timed
        fastest = min(fastest, seconds(fn, repeat=20))
    return max(1, min(most, int(target_s / max(fastest, 1e-8))))


def interleaved(contenders, rounds, rotate=False, pause=0.0):
    """{name: [one result per round]}: each round runs every contender of `contenders`
    ({name: zero-argument callable returning its result}) once, in turn. `rotate` starts
    each round one contender later (no contender always runs first); `pause` sleeps that
    many seconds before each run (for work a contender leaves running behind it)."""
    order = list(contenders)
    results = {name: [] for name in order}
    for _ in range(rounds):
        if rotate:
            order = order[1:] + order[:1]
        for name in order:
            if pause:
                time.sleep(pause)
            results[name].append(contenders[name]())
    return results


def best(results, key=None):
    """The best (smallest) of one contender's results: seconds, or records by `key`."""
    return min(results, key=(lambda r: r[key]) if key else None)


def paired_median(mine, theirs, key=None):
    """The median over rounds of mine / theirs: the two ran back to back in each round, so
    this is less at the mercy of one lucky round than the ratio of the best rounds."""
    pick = (lambda r: r[key]) if key else (lambda r: r)
    return statistics.median(pick(a) / pick(b) for a, b in zip(mine, theirs))


# ---------------------------------------------------------------------------------------
# Child processes


def report(record):
    """In a child: hand `record` (JSON-able) to the parent's `run_child`."""
    print(RESULT + json.dumps(record), flush=True)


def run_child(argv, timeout=None, env=None):
    """Run `argv` (a child that calls `report`) and return (its last record, wall seconds).
    The record is {"timed_out": True} past `timeout` seconds and {"failed": the last line
    of its error output} when the child fails or reports nothing (the output's tail then
    goes to stderr)."""
    start = time.perf_counter()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                             env=child_env() if env is None else env)
    except subprocess.TimeoutExpired:
        return {"timed_out": True}, time.perf_counter() - start
    wall = time.perf_counter() - start
    records = [line[len(RESULT):] for line in out.stdout.splitlines() if line.startswith(RESULT)]
    if out.returncode or not records:
        print(f"{' '.join(argv)} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
        lines = out.stderr.strip().splitlines() or [f"exit status {out.returncode}, no record"]
        return {"failed": lines[-1]}, wall
    return json.loads(records[-1]), wall


def python_child(script, *args):
    """The argv that runs `script` with this Python."""
    return [sys.executable, os.path.abspath(script), *map(str, args)]


# ---------------------------------------------------------------------------------------
# Output


def _cell(value, spec):
    if value is None:
        return "-"
    return format(value, spec) if spec and not isinstance(value, str) else str(value)


def print_table(rows, columns, label="case"):
    """Print `rows` ({row name: {column: value}}) under `columns` ({column: format spec,
    e.g. ".2f"}), each column as wide as its widest cell; a missing value prints "-"."""
    cells = [[_cell(row.get(col), spec) for col, spec in columns.items()] for row in rows.values()]
    names = [str(name) for name in rows]
    first = max([len(label), *map(len, names)]) + 2
    widths = [max([len(col), *(len(line[i]) for line in cells)]) + 2
              for i, col in enumerate(columns)]
    print(label.ljust(first) + "".join(col.rjust(w) for col, w in zip(columns, widths)))
    for name, line in zip(names, cells):
        print(name.ljust(first) + "".join(cell.rjust(w) for cell, w in zip(line, widths)))


def _rounded(value, digits):
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    return round(value, digits) if isinstance(value, float) else value


def print_ratios(ratios, digits=3):
    """Print the JSON of ratios (rounded) on one line, as every bench does last."""
    print("ratios:", json.dumps(_rounded(ratios, digits)))


def check_targets(ratios, targets):
    """Print, for each {ratio name: upper limit}, whether the ratio met it."""
    for key, limit in targets.items():
        value = ratios.get(key)
        verdict = "n/a" if value is None else (
            f"{value:.3f} ({'ok' if value <= limit else 'MISSED'})")
        print(f"  target {key} <= {limit}: {verdict}")


def write_json(path, payload, indent=2):
    with open(path, "w") as f:
        json.dump(payload, f, indent=indent)
    print(f"wrote {path}")
