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
import json
import os
import sys
import time

# One BLAS thread for everyone, so that the comparison is of dispatch, not of thread pools.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

# the checkout this file lives in (not whichever imperative is installed); IMPERATIVE_ROOT
# measures another build (a before/after comparison)
sys.path.insert(0, os.environ.get("IMPERATIVE_ROOT",
                                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import imperative as imp  # noqa: E402
from imperative import functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _dispatch_table  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(1)
except ImportError:
    torch = None

OPS = {
    "a + b": lambda a, b: a + b,
    "a * b": lambda a, b: a * b,
    "a @ b": lambda a, b: a @ b,
    "a.sum()": lambda a, b: a.sum(),
}
SHAPES = [(16,), (32, 32)]


def time_loop(fn, a, b, n, finish):
    """Seconds per iteration of `fn(a, b)` over n iterations, plus one final `finish()`."""
    start = time.perf_counter()
    for _ in range(n):
        fn(a, b)
    finish()
    return (time.perf_counter() - start) / n


def contenders(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    out = {"numpy": ((x, y), lambda: None)}
    for level in (0, 2):
        out[f"imperative L{level}"] = ((imp.Tensor(x), imp.Tensor(y)), imp.sync, level)
    if torch is not None:
        out["torch"] = ((torch.from_numpy(x.copy()), torch.from_numpy(y.copy())), lambda: None)
    return out


def run_case(fn, shape, n, rounds):
    best = {}
    entries = contenders(shape)
    for _ in range(rounds):
        for name, entry in entries.items():
            (a, b), finish = entry[0], entry[1]
            level = entry[2] if len(entry) > 2 else None
            if level is not None:
                imp.config_async_level(level)
            fn(a, b)  # warm caches (and the op's inference cache)
            t = time_loop(fn, a, b, n, finish)
            best[name] = min(best.get(name, t), t)
    imp.config_async_level(2)
    return best


def chain(level, n):
    """n dependent tiny ops (each reads the previous result), one final numpy()."""
    imp.config_async_level(level)
    x = imp.Tensor(np.zeros(16, np.float32))
    one = imp.Tensor(np.full(16, 1e-3, np.float32))
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
        with open(args.json, "w") as f:
            json.dump({"table": table, "torch": torch.__version__ if torch else None,
                       "numpy": np.__version__}, f, indent=1)
        print(f"wrote {args.json}")
        return 0
    print()
    n = 2000 if args.quick else 50000
    rounds = 2 if args.quick else 5
    chain_n = 10000 if args.quick else 100000

    results = {}
    names = None
    print(f"microseconds per op (best of {rounds} interleaved rounds of {n}); "
          f"torch {'%s' % torch.__version__ if torch else 'not installed'}, numpy {np.__version__}")
    for shape in SHAPES:
        for label, fn in OPS.items():
            best = run_case(fn, shape, n, rounds)
            results[f"{label} {shape}"] = {k: v * 1e6 for k, v in best.items()}
            names = list(best)
    header = f"{'case':<22}" + "".join(f"{name:>16}" for name in names)
    print(header)
    for case, row in results.items():
        print(f"{case:<22}" + "".join(f"{row[name]:>16.3f}" for name in names))

    chain_times = {}
    for _ in range(3):
        for level in (0, 2):
            t = chain(level, chain_n)
            chain_times[level] = min(chain_times.get(level, t), t)
    print(f"chain of {chain_n} dependent tiny adds + numpy(): "
          f"L0 {chain_times[0] * 1e3:.1f} ms, L2 {chain_times[2] * 1e3:.1f} ms "
          f"({chain_times[2] / chain_n * 1e6:.3f} us/op)")

    add16 = results["a + b (16,)"]
    ratios = {
        "add16_L2_over_numpy": add16["imperative L2"] / add16["numpy"],
        "add16_L2_over_torch": add16["imperative L2"] / add16["torch"] if torch else None,
        "chain_L2_over_L0": chain_times[2] / chain_times[0],
    }
    print("ratios:", json.dumps({k: (round(v, 3) if v is not None else None) for k, v in ratios.items()}))
    targets = {"add16_L2_over_torch": 0.7, "add16_L2_over_numpy": 2.5, "chain_L2_over_L0": 1.1}
    for key, limit in targets.items():
        value = ratios[key]
        verdict = "n/a" if value is None else ("ok" if value <= limit else "MISSED")
        print(f"  target {key} <= {limit}: {verdict}")
    with open(args.json, "w") as f:
        json.dump({"table": table, "us_per_op": results, "chain_seconds": {f"L{k}": v for k, v in chain_times.items()},
                   "chain_ops": chain_n, "ratios": ratios, "targets": targets,
                   "torch": torch.__version__ if torch else None, "numpy": np.__version__}, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
