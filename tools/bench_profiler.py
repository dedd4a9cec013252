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
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import imperative as imp  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.profiler  # noqa: E402
    torch.set_num_threads(1)
except ImportError:
    torch = None


def tiny_loop(a, b, n):
    for _ in range(n):
        a + b


def make_mlp(lib, width=512, batch=128, layers=4):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width)).astype(np.float32)
    ws = [(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32) for _ in range(layers)]
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


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_imperative(loop, profile, tmpdir):
    """Seconds for `loop()` (with a final sync), and the trace's bytes when profiled."""
    if not profile:
        return timed(lambda: (loop(), imp.sync())), None
    imp.start_profile({"record_shapes": True, "record_memory": True})
    elapsed = timed(lambda: (loop(), imp.sync()))
    dump = imp.stop_profile()
    path = dump(os.path.join(tmpdir, "bench"))
    size = os.path.getsize(path)
    with open(path) as f:
        n_ops = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "op")
    return elapsed, (size, n_ops)


def run_torch(loop, mode):
    if mode == "off":
        return timed(loop)
    kwargs = {"record_shapes": True, "profile_memory": True} if mode == "shapes+memory" else {}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kwargs):
        elapsed = timed(loop)
    return elapsed


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
    # (timed loop, short warm-up run before every timing: a torch.profiler session leaves
    # background work behind that otherwise lands on whatever runs next)
    cases = {
        "tiny": (lambda: tiny_loop(a, b, n_tiny), lambda: (tiny_loop(a, b, 1000), imp.sync())),
        "mlp": (lambda: [mlp_step(mx, mws, imp_relu) for _ in range(n_steps)],
                lambda: (mlp_step(mx, mws, imp_relu), imp.sync())),
    }
    if torch is not None:
        ta, tb = torch.from_numpy(x16.copy()), torch.from_numpy(x16.copy())
        tx, tws = make_mlp("torch")
        torch_cases = {
            "tiny": lambda: tiny_loop(ta, tb, n_tiny),
            "mlp": lambda: [mlp_step(tx, tws, torch.relu) for _ in range(n_steps)],
        }
    best = {}
    sizes = {}

    def keep(key, t):
        best[key] = min(best.get(key, t), t)

    cases = {args.case: cases[args.case]}
    for _ in range(rounds):
        for case, (loop, warm) in cases.items():
            warm()
            keep((case, "imperative off"), run_imperative(loop, False, tmpdir)[0])
            warm()
            t, size = run_imperative(loop, True, tmpdir)
            keep((case, "imperative on"), t)
            sizes[case] = size
            if torch is not None:
                for mode in ("off", "default", "shapes+memory"):
                    time.sleep(0.2)
                    keep((case, f"torch {mode}"), run_torch(torch_cases[case], mode))
            time.sleep(0.2)

    per = {"tiny": n_tiny, "mlp": n_steps}
    results = {}
    for case in cases:
        unit, scale = ("us/op", 1e6 / per[case]) if case == "tiny" else ("ms/step", 1e3 / per[case])
        for variant in ["imperative off", "imperative on", "torch off", "torch default", "torch shapes+memory"]:
            if (case, variant) not in best:
                continue
            t = best[(case, variant)] * scale
            base = best[(case, variant.split()[0] + " off")] * scale
            results[f"{case} {variant}"] = {"time": t, "unit": unit, "added": t - base, "ratio": t / base}
        size = sizes[case]
        results[f"{case} trace bytes per op"] = size[0] / size[1] if size and size[1] else None
    with open(args.json, "w") as f:
        json.dump(results, f)


def run_cases_in_subprocesses(args):
    results = {}
    for case in ("tiny", "mlp"):
        out = os.path.join(tempfile.mkdtemp(prefix="bench_profiler_"), f"{case}.json")
        cmd = [sys.executable, __file__, "--case", case, "--json", out] + (["--quick"] if args.quick else [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            results.update(json.load(f))
    print(f"{'case':<8}{'variant':<26}{'per op/step':>14}{'added':>12}")
    for key, r in results.items():
        if isinstance(r, dict):
            case, variant = key.split(" ", 1)
            print(f"{case:<8}{variant:<26}{r['time']:>10.3f} {r['unit']:<7}{r['added']:>+8.3f} ({r['ratio']:.3f}x)")
    bytes_per_op = {case: results.get(f"{case} trace bytes per op") for case in ("tiny", "mlp")}
    print("trace bytes per op:", {k: round(v, 1) if v else None for k, v in bytes_per_op.items()})
    ratios = {
        "tiny_on_added_us_per_op": results["tiny imperative on"]["added"],
        "mlp_on_ratio": results["mlp imperative on"]["ratio"],
        "trace_bytes_per_op_tiny": bytes_per_op["tiny"],
        "trace_bytes_per_op_mlp": bytes_per_op["mlp"],
    }
    targets = {"tiny_on_added_us_per_op": 0.5, "mlp_on_ratio": 1.02, "trace_bytes_per_op_tiny": 200}
    print("ratios:", json.dumps({k: round(v, 4) for k, v in ratios.items()}))
    for key, limit in targets.items():
        print(f"  target {key} <= {limit}: {'ok' if ratios[key] <= limit else 'MISSED'}")
    with open(args.json, "w") as f:
        json.dump({"results": results, "ratios": ratios, "targets": targets}, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
