"""Issue 12's peak rules under other machines' timings: one model of the tests' model sets
trained under fractions of its unconstrained peak P, as
tests/test_memory_unseen_models.py trains it, once per seed with each measured run time
multiplied by a factor drawn from [e^-J, e^J] (imperative._core.set_cost_jitter), in one
process at async level 0. Counts the points whose losses differ from the unconstrained
run's, whose peak passed max(budget, floor) + one op's outputs, or whose peak passed
P + one op's outputs (DTR on above the same program with it off).

    python tools/peak_rules_jitter.py memwrite --seeds 0:700
    python tools/peak_rules_jitter.py highway --fractions 0.4,0.2 --jitter 1
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..")]

import imperative as imp          # noqa: E402  (after the path set-up above)
import test_memory_unseen_models as unseen  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a model of the tests' unseen sets, e.g. memwrite")
    ap.add_argument("--seeds", default="0:100", help="first:last (exclusive) jitter seed")
    ap.add_argument("--fractions", default="0.7,0.4", help="of the unconstrained peak P")
    ap.add_argument("--jitter", type=float, default=2.0, help="power of e either way")
    args = ap.parse_args()
    if args.model not in unseen.MODELS:
        ap.error(f"model {args.model!r}: expected one of {', '.join(sorted(unseen.MODELS))}")
    first, last = (int(s) for s in args.seeds.split(":"))
    fractions = [float(f) for f in args.fractions.split(",")]
    counts = {"points": 0, "losses differ": 0, "above max(budget, floor)": 0, "above P": 0}
    with imp.option("async_level", 0):
        _, peak, outputs = unseen.unconstrained(args.model, 0)
        for seed in range(first, last):
            imp._core.set_cost_jitter(args.jitter, seed)
            try:
                for fraction in fractions:
                    stats, broken = unseen.peak_rules_broken(args.model, fraction, 0)
                    counts["points"] += 1
                    for rule, yes in broken.items():
                        counts[rule] += yes
                    if any(broken.values()):
                        print(f"seed {seed} at {fraction} P: "
                              + ", ".join(rule for rule, yes in broken.items() if yes)
                              + f" (peak - P = {stats['peak_allocated'] - peak} bytes, "
                              f"one op's outputs {outputs})", flush=True)
            finally:
                imp._core.set_cost_jitter(0.0)
    print(", ".join(f"{what} {n}" for what, n in counts.items()))


if __name__ == "__main__":
    main()
