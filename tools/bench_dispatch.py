"""Per-op dispatch cost: imperative (async levels 0 and 2) vs raw numpy vs PyTorch CPU eager.

    python tools/bench_dispatch.py [--quick] [--table-only] [--json bench_dispatch.json]

First the table of >= 20 common eager calls at tiny size (issue 16; the rows are in
tools/_dispatch_table.py): microseconds per call for numpy, imperative (level 2) and torch,
interleaved, best and median over rounds, with the ratios imp/torch and imp/numpy of the
medians. Then a + b, a * b, a @ b, a.sum() at two sizes and async levels 0 and 2.

Every contender runs the same loop in the same process, interleaved over several rounds;
the table shows the best round (microseconds per op, end to end: the loop plus a final
sync), and the JSON holds the ratios the targets are stated in.
"""
import argparse
import os
import sys
import time

import _harness

# One BLAS thread for everyone, so that the comparison is of dispatch, not of thread pools.
_harness.one_blas_thread()

import numpy as np  # noqa: E402

# the checkout this file lives in (not whichever imperative is installed); IMPERATIVE_ROOT
# measures another build (a before/after comparison)
sys.path.insert(0, os.environ.get("IMPERATIVE_ROOT",
                                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import imperative as imp  # noqa: E402
from imperative import functional as F  # noqa: E402

import _dispatch_table  # noqa: E402  (next to this file, on sys.path as the script's folder)

torch = _harness.import_torch()

# each builds, from the operands, the zero-argument call that is timed
OPS = {
    "a + b": lambda a, b: lambda: a + b,
    "a * b": lambda a, b: lambda: a * b,
    "a @ b": lambda a, b: lambda: a @ b,
    "a.sum()": lambda a, b: lambda: a.sum(),
}
SHAPES = [(16,), (32, 32)]


def contenders(shape):
    """{name: (operands, the final sync or None, the async level or None)}."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = {"numpy": ((x, y), None, None)}
    for level in (0, 2):
        out[f"imperative L{level}"] = ((imp.Tensor(x), imp.Tensor(y)), imp.sync, level)
    if torch is not None:
        out["torch"] = ((torch.from_numpy(x.copy()), torch.from_numpy(y.copy())), None, None)
    return out


def timed(call, finish, level, n):
    """One timing: seconds per call over n calls at async `level`, after a warm-up call
    (caches, and the op's inference cache)."""
    def run():
        if level is not None:
            imp.config_async_level(level)
        call()
        return _harness.seconds(call, finish, repeat=n)
    return run


def run_case(build, shape, n, rounds):
    """{contender: best seconds per call} for the op `build` makes at `shape`."""
    runs = {name: timed(build(*operands), finish, level, n)
            for name, (operands, finish, level) in contenders(shape).items()}
    times = _harness.interleaved(runs, rounds)
    imp.config_async_level(2)
    return {name: _harness.best(samples) for name, samples in times.items()}


def chain(level, n, host_compute=1):
    """n dependent tiny ops (each reads the previous result), one final numpy(); with
    host_compute=0 every op is queued for the worker (as ops on larger inputs are)."""
    imp.config_async_level(level)
    x = imp.Tensor(np.zeros(16, np.float32))
    one = imp.Tensor(np.full(16, 1e-3, np.float32))
    with imp.option("enable_host_compute", host_compute):
        start = time.perf_counter()
        for _ in range(n):
            x = x + one
        x.numpy()
        elapsed = time.perf_counter() - start
    imp.config_async_level(2)
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (for CI smoke runs)")
    parser.add_argument("--json", default="bench_dispatch.json", help="where to write the results")
    parser.add_argument("--table-only", action="store_true", help="only the table of common calls")
    args = parser.parse_args()
    table = _dispatch_table.main_table(imp, F, torch, args.quick, None)
    if args.table_only:
        _harness.write_json(args.json, {"table": table, "numpy": np.__version__,
                                        "torch": torch.__version__ if torch else None}, indent=1)
        return 0
    print()
    n = 2000 if args.quick else 50000
    rounds = 2 if args.quick else 5
    chain_n = 10000 if args.quick else 100000

    results = {}
    print(f"microseconds per op (best of {rounds} interleaved rounds of {n}); "
          f"torch {torch.__version__ if torch else 'not installed'}, numpy {np.__version__}")
    for shape in SHAPES:
        for label, build in OPS.items():
            best = run_case(build, shape, n, rounds)
            results[f"{label} {shape}"] = {k: v * 1e6 for k, v in best.items()}
    _harness.print_table(results, dict.fromkeys(next(iter(results.values())), ".3f"))

    chain_runs = _harness.interleaved({0: lambda: chain(0, chain_n),
                                       2: lambda: chain(2, chain_n),
                                       "queued": lambda: chain(2, chain_n, host_compute=0)}, 3)
    chain_times = {level: _harness.best(samples) for level, samples in chain_runs.items()}
    print(f"chain of {chain_n} dependent tiny adds + numpy(): "
          f"L0 {chain_times[0] * 1e3:.1f} ms, L2 {chain_times[2] * 1e3:.1f} ms "
          f"({chain_times[2] / chain_n * 1e6:.3f} us/op); every op queued for the worker "
          f"(enable_host_compute=0): {chain_times['queued'] / chain_n * 1e6:.3f} us/op")

    add16 = results["a + b (16,)"]
    ratios = {
        "add16_L2_over_numpy": add16["imperative L2"] / add16["numpy"],
        "add16_L2_over_torch": add16["imperative L2"] / add16["torch"] if torch else None,
        "chain_L2_over_L0": chain_times[2] / chain_times[0],
    }
    _harness.print_ratios(ratios)
    targets = {"add16_L2_over_torch": 0.7, "add16_L2_over_numpy": 2.5, "chain_L2_over_L0": 1.1}
    _harness.check_targets(ratios, targets)
    _harness.write_json(args.json, {
        "table": table, "us_per_op": results,
        "chain_seconds": {(f"L{k}" if isinstance(k, int) else k): v
                          for k, v in chain_times.items()}, "chain_ops": chain_n,
        "ratios": ratios, "targets": targets, "torch": torch.__version__ if torch else None,
        "numpy": np.__version__})


if __name__ == "__main__":
    sys.exit(main())
