"""The long run of the differential fuzzer against PyTorch (tests/torch_differential.py):
thousands of random programs and optimizer runs, each compared with PyTorch in float32
and float64 and between async levels 0 and 2. Prints counts of programs, ops, checks and
mismatches by kind, a few examples of each, and one JSON line.

    python tools/fuzz_torch.py --programs 3000 --trainings 300 --seed 0
"""
import argparse
import json
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import torch_differential as D  # noqa: E402


def run(strategy, check, examples, rng_seed, tally):
    """Check `examples` cases drawn from `strategy`, recording into `tally` (never stops
    at a mismatch: the point is to count them)."""
    if examples <= 0:
        return

    @seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(case):
        check(case, tally)

    one()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=3000, help="random op programs")
    parser.add_argument("--trainings", type=int, default=300, help="nn model + optimizer runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=3, help="examples shown per kind")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    tally = D.Tally()
    start = time.perf_counter()
    run(D.programs(), D.check_program, args.programs, args.seed, tally)
    run(D.trainings(), D.check_training, args.trainings, args.seed + 1, tally)
    seconds = time.perf_counter() - start
    print(f"programs {tally.programs}, ops {tally.ops}, trainings {tally.trainings}, "
          f"checks {tally.checks}, skipped {tally.skipped}, "
          f"mismatches {sum(tally.mismatches.values())} in {seconds:.0f} s")
    for kind in sorted(tally.mismatches):
        print(f"  {kind}: {tally.mismatches[kind]}")
        for text in tally.examples[kind][:args.examples]:
            print(f"    {text[:400]}")
    print(json.dumps({"programs": tally.programs, "ops": tally.ops, "trainings": tally.trainings,
                      "checks": tally.checks, "skipped": tally.skipped,
                      "mismatches": tally.mismatches,
                      "seconds": round(seconds, 1), "seed": args.seed}))
    return 1 if tally.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
