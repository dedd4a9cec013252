"""What recording recipes costs a training step, model by model (issue 12's overhead below
every budget: each point of tools/bench_dtr.py pays it before any eviction).

    python tools/bench_recording.py [--set unseen|fresh|...|twelfth] [--models lstm,cnn,...]
                                    [--steps 20] [--json bench_recording.json]

Each model trains in a process of its own (the zoo of imperative/models.py, or with --set
the models of tests/<set>_models.py at their BENCH_SIZES, one of bench_dtr.py's MODEL_SETS;
--unseen is --set unseen). After two warm-up steps
its steps alternate between recording on, as DTR runs it with a budget never reached
(`imp.dtr.enable(eviction_threshold=100 P)`: recipes recorded, nothing evicted), and
recording off, a settling step after each switch, the order flipped every round. The ratio
is the median over --steps rounds of on / off: two steps back to back in one process,
less at the mercy of a drifting machine than two processes apart (bench_dtr.py's "5 P"
point reads the same cost with more noise).
"""
import argparse
import importlib
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import _harness  # noqa: E402
_harness.one_blas_thread()
from bench_dtr import MODEL_SETS  # noqa: E402


def _model_set(name):
    """tests/<name>_models.py, or None for the zoo."""
    if name is None:
        return None
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    return importlib.import_module(f"{name}_models")


def _trainer(name, model_set):
    if model_set is None:
        from imperative.models import trainer
        return trainer(name)
    return _model_set(model_set).bench_trainer(name)


def measure(name, model_set, rounds):
    """In a child: the per-round step times with recording on and off, and the peak."""
    import imperative as imp
    step = _trainer(name, model_set)
    step()
    float(step())
    peak = imp.memory_stats()["peak_allocated"]
    times = {True: [], False: []}
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            if on:
                imp.dtr.enable(eviction_threshold=100 * peak)
            else:
                imp.dtr.disable()
            float(step())                     # settle after the switch
            start = time.perf_counter()
            float(step())
            times[on].append(time.perf_counter() - start)
    imp.dtr.disable()
    return {"on": times[True], "off": times[False], "peak": peak}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default=None, choices=MODEL_SETS,
                        help="a model set of tests/ instead of the zoo")
    parser.add_argument("--unseen", action="store_true", help="--set unseen")
    parser.add_argument("--models", default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", default="bench_recording.json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    model_set = "unseen" if args.unseen else args.set
    if args.child:
        _harness.report(measure(args.child[0], model_set, int(args.child[1])))
        return
    if model_set is None:
        from imperative.models import CONFIGS as names
    else:
        names = _model_set(model_set).BENCH_SIZES
    models = args.models.split(",") if args.models else list(names)
    rows, ratios = {}, {}
    for name in models:
        argv = _harness.python_child(__file__, *(["--set", model_set] if model_set else []),
                                     "--child", name, args.steps)
        record, _ = _harness.run_child(argv)
        if "on" not in record:
            rows[name] = {"result": str(record)}
            continue
        on, off = record["on"], record["off"]
        ratios[name] = _harness.paired_median(on, off)
        rows[name] = {"off ms": 1e3 * statistics.median(off), "on ms": 1e3 * statistics.median(on),
                      "on / off": ratios[name]}
        print(f"  {name}: {ratios[name]:.3f}x", flush=True)
    _harness.print_table(rows, {"off ms": ".1f", "on ms": ".1f", "on / off": ".3f",
                                "result": ""}, label="model")
    if ratios:
        ratios["median"] = statistics.median(ratios.values())
        print(f"median over the models: {ratios['median']:.3f}x")
    _harness.print_ratios(ratios)
    _harness.write_json(args.json, {"recording_on_over_off": ratios})


if __name__ == "__main__":
    main()
