"""Training steps with the runtime's BLAS thread count against OpenBLAS's own (one thread a
core), on the model zoo (imperative/models.py) and, with --set, a model set of tests/.

    python tools/bench_blas_threads.py [--models mlp,cnn,...] [--set seventh] [--steps 6]
                                       [--rounds 2] [--json bench_blas_threads.json]

`import imperative` leaves numpy's OpenBLAS one thread fewer than the usable cores
(imperative/backend/blas_threads.py), for the caller's thread that issues ops while the
worker computes. Each model trains in a child process per contender, the two contenders
alternating round by round: "runtime" (no thread variable set: the runtime's choice) and
"all cores" (OPENBLAS_NUM_THREADS = the usable cores, OpenBLAS's own default). A child
times --steps steps after two warm-up steps; the figures are the best step and the median
step of each contender, and the ratio runtime / all cores of the median steps (paired by
round, then the median over rounds). Unlike the other benches, no contender is limited to
one BLAS thread: the thread count is what is measured. On a 2-core machine the result
depends mostly on how busy the machine is (see the README's row).
"""
import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import _harness  # noqa: E402

DEFAULT_MODELS = "relu_wide,mlp,cnn,transformer,gru"


def _child_env(threads):
    from imperative.backend.blas_threads import THREAD_VARIABLES
    env = {k: v for k, v in os.environ.items()
           if k not in THREAD_VARIABLES and k != "MKL_NUM_THREADS"}
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    return env


def child(name, set_name, steps):
    """In a child: step times (seconds) of `name` and the BLAS thread count it ran on."""
    import time
    import imperative as imp
    from imperative.backend import blas_threads
    if set_name:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        import importlib
        step = importlib.import_module(f"{set_name}_models").bench_trainer(name)
    else:
        from imperative import models
        step = models.trainer(name)
    for _ in range(2):
        float(step())
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        float(step())
        imp.sync()
        times.append(time.perf_counter() - start)
    threads = blas_threads.get_num_threads() if blas_threads.get_num_threads else None
    _harness.report({"times": times, "threads": threads})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None)
    parser.add_argument("--set", default=None, help="a model set of tests/ (e.g. seventh)")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default="bench_blas_threads.json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, set_name = args.child
        return child(name, set_name if set_name != "-" else None, args.steps)
    from imperative.backend.blas_threads import usable_cores
    cores = usable_cores()
    names = (args.models or DEFAULT_MODELS).split(",")
    contenders = {"runtime": None, "all cores": cores}
    rows, ratios = {}, {}
    for name in names:
        argv = _harness.python_child(__file__, "--steps", args.steps, "--child", name,
                                     args.set or "-")
        runs = _harness.interleaved(
            {label: (lambda t=threads, a=argv: _harness.run_child(a, env=_child_env(t))[0])
             for label, threads in contenders.items()}, args.rounds, rotate=True)
        if any("times" not in r for rs in runs.values() for r in rs):
            rows[name] = {"runtime ms": "failed"}
            continue
        medians = {label: [statistics.median(r["times"]) for r in rs] for label, rs in runs.items()}
        best = {label: min(min(r["times"]) for r in rs) for label, rs in runs.items()}
        ratio = statistics.median(a / b for a, b in zip(medians["runtime"], medians["all cores"]))
        ratios[name] = ratio
        rows[name] = {label + suffix: value for label in contenders for suffix, value in (
            (" threads", runs[label][0]["threads"]),
            (" ms", f"{best[label] * 1e3:.0f} / {statistics.median(medians[label]) * 1e3:.0f}"))}
        rows[name]["runtime / all"] = ratio
    print(f"{cores} usable cores; step ms: best / median")
    _harness.print_table(rows, {"runtime threads": "", "runtime ms": "", "all cores threads": "",
                                "all cores ms": "", "runtime / all": ".2f"}, label="model")
    _harness.print_ratios(ratios)
    _harness.write_json(args.json, {"cores": cores, "ratios": ratios})


if __name__ == "__main__":
    main()
