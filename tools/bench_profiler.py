"""What recording a profile costs: imperative's profiler off and on, and torch.profiler on
the same loops, in one run.

    python tools/bench_profiler.py [--quick] [--json bench_profiler.json]

Loops: N tiny `a + b` on (16,) float32 (the dispatch path), and a training step of a
4-layer MLP (width 512, batch 128) with hand-written backward (matmul-heavy). Each variant
runs interleaved over several rounds; the best round counts. Trace size is the dumped
JSON's bytes divided by the number of ops it holds.
"""
import argparse
import json
import os
import sys
import tempfile

import _harness

_harness.one_blas_thread()

import numpy as np  # noqa: E402

import imperative as imp  # noqa: E402

torch = _harness.import_torch()
if torch is not None:
    import torch.profiler


def tiny_loop(a, b, n):
    for _ in range(n):
        a + b


def make_mlp(lib, width=512, batch=128, layers=4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    ws = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
          for _ in range(layers)]
    if lib == "imperative":
        return imp.Tensor(x), [imp.Parameter(w) for w in ws]
    return torch.from_numpy(x), [torch.from_numpy(w.copy()) for w in ws]


def mlp_step(x, ws, relu):
    """Forward through relu layers, backward of 0.5*sum(out^2) by hand, SGD in place."""
    acts = [x]
    for w in ws:
        acts.append(relu(acts[-1] @ w))
    grad = acts[-1]
    for i in range(len(ws) - 1, -1, -1):
        grad = grad * (acts[i + 1] > 0)
        gw = acts[i].T @ grad
        grad = grad @ ws[i].T
        ws[i] -= gw * 1e-4


def imp_relu(t):
    return imp.apply(imp.ops.Elemwise("RELU"), t)[0]


def run_imperative(loop, profile, tmpdir):
    """Seconds for `loop()` (with a final sync), and the trace's bytes when profiled."""
    if not profile:
        return _harness.seconds(loop, imp.sync), None
    imp.start_profile({"record_shapes": True, "record_memory": True})
    elapsed = _harness.seconds(loop, imp.sync)
    dump = imp.stop_profile()
    path = dump(os.path.join(tmpdir, "bench"))
    size = os.path.getsize(path)
    with open(path) as f:
        n_ops = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "op")
    return elapsed, (size, n_ops)


def run_torch(loop, mode):
    """Seconds for `loop()` with torch.profiler off, on (default) or on with shapes+memory."""
    if mode == "off":
        return _harness.seconds(loop)
    kwargs = {"record_shapes": True, "profile_memory": True} if mode == "shapes+memory" else {}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kwargs):
        elapsed = _harness.seconds(loop)
    return elapsed


def variants(loop, warm, torch_loop, tmpdir):
    """{variant: one timing, (seconds, the trace's (bytes, ops) or None)}. Imperative's runs
    follow a short warm-up run: a torch.profiler session leaves background work behind
    that otherwise lands on whatever runs next."""
    def imperative(profile):
        def run():
            warm()
            return run_imperative(loop, profile, tmpdir)
        return run

    out = {"imperative off": imperative(False), "imperative on": imperative(True)}
    if torch_loop is not None:
        for mode in ("off", "default", "shapes+memory"):
            out[f"torch {mode}"] = lambda mode=mode: (run_torch(torch_loop, mode), None)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default="bench_profiler.json")
    parser.add_argument("--case", choices=("tiny", "mlp"),
                        help="measure one case only (the default runs each in a fresh process: "
                             "the aftermath of a 200k-op profile slowed a following MLP case 10x)")
    args = parser.parse_args()
    if args.case is None:
        return run_cases_in_subprocesses(args)
    n_tiny = 20000 if args.quick else 200000
    n_steps = 3 if args.quick else 20
    rounds = 2 if args.quick else 5
    tmpdir = tempfile.mkdtemp(prefix="bench_profiler_")

    x16 = np.ones(16, np.float32)
    a, b = imp.Tensor(x16), imp.Tensor(x16)
    mx, mws = make_mlp("imperative")
    # (timed loop, its short warm-up run)
    cases = {
        "tiny": (lambda: tiny_loop(a, b, n_tiny), lambda: (tiny_loop(a, b, 1000), imp.sync())),
        "mlp": (lambda: [mlp_step(mx, mws, imp_relu) for _ in range(n_steps)],
                lambda: (mlp_step(mx, mws, imp_relu), imp.sync())),
    }
    torch_loop = None
    if torch is not None:
        ta, tb = torch.from_numpy(x16.copy()), torch.from_numpy(x16.copy())
        tx, tws = make_mlp("torch")
        torch_loop = {
            "tiny": lambda: tiny_loop(ta, tb, n_tiny),
            "mlp": lambda: [mlp_step(tx, tws, torch.relu) for _ in range(n_steps)],
        }[args.case]
    case = args.case
    loop, warm = cases[case]
    # a pause before each run: torch.profiler's background work settles
    runs = _harness.interleaved(variants(loop, warm, torch_loop, tmpdir), rounds, pause=0.2)

    per = {"tiny": n_tiny, "mlp": n_steps}[case]
    unit, scale = ("us/op", 1e6 / per) if case == "tiny" else ("ms/step", 1e3 / per)
    best = {variant: _harness.best(samples, key=0)[0] * scale
            for variant, samples in runs.items()}
    results = {}
    for variant, t in best.items():
        base = best[variant.split()[0] + " off"]
        results[f"{case} {variant}"] = {"time": t, "unit": unit, "added": t - base,
                                        "ratio": t / base}
    size = runs["imperative on"][-1][1]         # the last round's trace
    results[f"{case} trace bytes per op"] = size[0] / size[1] if size and size[1] else None
    with open(args.json, "w") as f:
        json.dump(results, f)
    _harness.report(results)


def run_cases_in_subprocesses(args):
    results = {}
    for case in ("tiny", "mlp"):
        cmd = _harness.python_child(__file__, "--case", case, "--json", os.devnull,
                                    *(["--quick"] if args.quick else []))
        record, _ = _harness.run_child(cmd)
        if "failed" in record:
            sys.exit(f"bench_profiler: the {case} case failed: {record['failed']}")
        results.update(record)
    _harness.print_table({key: {"per op/step": f"{r['time']:.3f} {r['unit']}", "added": r["added"],
                                "ratio": r["ratio"]}
                          for key, r in results.items() if isinstance(r, dict)},
                         {"per op/step": None, "added": "+.3f", "ratio": ".3f"})
    bytes_per_op = {case: results.get(f"{case} trace bytes per op") for case in ("tiny", "mlp")}
    print("trace bytes per op:", {k: round(v, 1) if v else None for k, v in bytes_per_op.items()})
    ratios = {
        "tiny_on_added_us_per_op": results["tiny imperative on"]["added"],
        "mlp_on_ratio": results["mlp imperative on"]["ratio"],
        "trace_bytes_per_op_tiny": bytes_per_op["tiny"],
        "trace_bytes_per_op_mlp": bytes_per_op["mlp"],
    }
    targets = {"tiny_on_added_us_per_op": 0.5, "mlp_on_ratio": 1.02, "trace_bytes_per_op_tiny": 200}
    _harness.print_ratios(ratios, digits=4)
    _harness.check_targets(ratios, targets)
    _harness.write_json(args.json, {"results": results, "ratios": ratios, "targets": targets})


if __name__ == "__main__":
    sys.exit(main())
