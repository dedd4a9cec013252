"""Look for recomputation storms: every model of the tests' model sets, at the tests' sizes,
two steps under DTR at several budgets and evictee minimums, in one process (seconds a
point), measured as tests/test_memory_regimes.py measures them. Counts what a storm shows
(recomputations, and those of a value its restore had brought back already), checks the
losses against a run without DTR and flags a peak above the unconstrained one. Counts, not
times: a sweep is a minute or two, and two sweeps of two builds compare point by point
(--compare). Budgets below the floor, a small evictee minimum and async level 0 are where
storms were found (sessions 44-47).

    python tools/storm_sweep.py --json new.json                  # all sets, async level 0
    python tools/storm_sweep.py --sets tenth --level 2 --json l2.json
    python tools/storm_sweep.py --compare old.json new.json      # what changed, model by model
    python tools/storm_sweep.py --jitter 2 --seed 3              # other machines' timings

Decisions follow measured run times; --jitter J multiplies each by a factor drawn from
[e^-J, e^J] (imperative._core.set_cost_jitter), to meet the decisions other timings take.
"""
import argparse
import collections
import functools
import importlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..")]

import imperative as imp          # noqa: E402  (after the path set-up above)
from bench_dtr import MODEL_SETS as SETS, largest_op_outputs  # noqa: E402
from test_memory_regimes import _beside_reference  # noqa: E402


def measure(make, fraction, minimum):
    """Two steps of a fresh `make()` under `fraction` of an unconstrained step's peak P,
    beside the same steps of another run without DTR, as the memory tests measure them
    (tests/test_memory_regimes.py:_beside_reference)."""
    identical, ops, recomputes, repeats, peak, floor, budget = _beside_reference(
        make, fraction, evictee_minimum_size=minimum)
    return {"identical": identical, "ops": ops, "recomputes": recomputes, "repeats": repeats,
            "peak": peak, "floor": floor, "P": budget / fraction}


def sweep(sets, fractions, minimums, level):
    points = {}
    for set_name in sets:
        models = importlib.import_module(f"{set_name}_models")
        for name in models.CONFIGS:
            with imp.option("async_level", level):
                outputs = largest_op_outputs(models.trainer(name), 3)
            for fraction in fractions:
                for minimum in minimums:
                    t0 = time.perf_counter()
                    with imp.option("async_level", level):
                        point = measure(functools.partial(models.trainer, name), fraction,
                                        minimum)
                    point["seconds"] = round(time.perf_counter() - t0, 2)
                    point["outputs"] = outputs
                    points[f"{set_name}/{name}/{fraction}/{minimum}"] = point
        summarize({k: p for k, p in points.items() if k.startswith(set_name + "/")}, set_name)
    return points


def summarize(points, label):
    total = collections.Counter()
    for p in points.values():
        total.update(recomputes=p["recomputes"], repeats=p["repeats"], ops=p["ops"],
                     different=not p["identical"], above_P=p["peak"] > 1.1 * p["P"])
    print(f"{label:10s} points {len(points):4d}  ops {total['ops']:8d}  recomputes "
          f"{total['recomputes']:7d}  repeats {total['repeats']:6d}  losses differ "
          f"{total['different']}  peak > 1.1 P {total['above_P']}  tighter peaked higher "
          f"{len(tighter_peaked_higher(points))}", flush=True)


def tighter_peaked_higher(points):
    """[(excess over the looser point's peak + one op's outputs, as a fraction of P, the
    model and evictee minimum, tighter fraction, looser fraction)]: issue 12's first rule
    says a tighter budget never peaks higher than a looser one beyond one op's outputs.
    (Sweeps written before the outputs were measured count none.)"""
    by_model = collections.defaultdict(dict)
    for key, p in points.items():
        model, fraction, minimum = key.rsplit("/", 2)
        by_model[f"{model}/{minimum}"][float(fraction)] = p
    found = []
    for model, at in by_model.items():
        for tight in at:
            for loose in at:
                excess = at[tight]["peak"] - at[loose]["peak"] - at[tight].get("outputs", 1e18)
                if tight < loose and excess > 0:
                    found.append((round(excess / at[tight]["P"], 3), model, tight, loose))
    return sorted(found, reverse=True)


def compare(old, new, worse=1.25, better=0.8):
    """Totals of both, then the models whose recomputations (summed over their points) moved
    by more than the factors given and by 50 at least."""
    shared = {k: k in new for k in old}
    summarize({k: old[k] for k in old if shared[k]}, "old")
    summarize({k: new[k] for k in old if shared[k]}, "new")
    by_model = collections.defaultdict(lambda: [0, 0])
    for k in old:
        if shared[k]:
            model = k.rsplit("/", 2)[0]
            by_model[model][0] += old[k]["recomputes"]
            by_model[model][1] += new[k]["recomputes"]
    for label, keep in (("fewer", lambda a, b: b < better * a and a - b > 50),
                        ("more", lambda a, b: b > worse * a and b - a > 50)):
        moved = sorted((b - a, m, a, b) for m, (a, b) in by_model.items() if keep(a, b))
        print(f"{len(moved)} models recompute {label}:",
              ", ".join(f"{m} {a} -> {b}" for _, m, a, b in moved) or "none")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--fractions", default="0.7,0.5,0.3")
    ap.add_argument("--minimums", default="4096,65536,262144",
                    help="evictee minimum sizes, bytes")
    ap.add_argument("--level", type=int, default=0, help="async level")
    ap.add_argument("--json", help="write the points here")
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--jitter", type=float, default=0.0,
                    help="jitter the measured costs by up to this power of e either way")
    ap.add_argument("--seed", type=int, default=1, help="of the jitter")
    args = ap.parse_args()
    imp._core.set_cost_jitter(args.jitter, args.seed)
    if args.compare:
        old, new = (json.load(open(f)) for f in args.compare)
        compare(old, new)
        return
    points = sweep(args.sets.split(","), [float(f) for f in args.fractions.split(",")],
                   [int(m) for m in args.minimums.split(",")], args.level)
    summarize(points, "all")
    for excess, model, tight, loose in tighter_peaked_higher(points)[:10]:
        print(f"  {model}: at {tight} P the peak passed the one at {loose} P by one op's "
              f"outputs + {excess} P")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(points, f)


if __name__ == "__main__":
    main()
