"""The demo: train a small ResNet (or another zoo model) under a memory budget (DTR).

The models and their synthetic task come from `imperative.models`.

    python -m imperative.demo [--model cnn] [--budget 0.5] [--steps 20] [--policy dtr_eq]
                              [--profile profile]

(also installed as the `imperative-demo` command). First two unconstrained steps measure the
peak tensor memory P the model needs; then the model is trained with DTR keeping tensor
memory at `--budget` x P (a fraction, or a size such as "60MB"), evicting and recomputing
activations as needed. Prints progress, writes a Chrome trace of the last steps, and a
summary: loss, step time, peak memory with and without the budget, evictions and
recomputes. The losses equal an unconstrained run's.
"""
import argparse
import time

import imperative as imp
from imperative.models import CONFIGS, describe, trainer


def train(args, budget=None, steps=None, profile=None, quiet=False):
    """Train a fresh model; returns (losses, seconds per step after the first, memory
    stats, the trace file)."""
    step = trainer(args.model, lr=args.lr, batch=args.batch)
    if budget is not None:
        imp.dtr.enable(eviction_threshold=budget, evictee_minimum_size=args.min_evictee)
        imp.dtr.set_policy(args.policy)
    imp.sync()
    imp.reset_peak_memory_stats()
    start_stats = imp.memory_stats()
    steps = steps or args.steps
    losses, start, prof = [], time.perf_counter(), None
    try:
        for i in range(steps):
            if profile and i == steps - 3:
                imp.sync()
                prof = imp.Profiler(path=profile).__enter__()
            losses.append(float(step()))
            if i == 0:
                imp.sync()
                start = time.perf_counter()      # the first step warms up: not timed
            if prof is not None:
                prof.step()
            if not quiet and (i % 5 == 0 or i == steps - 1):
                s = imp.memory_stats()
                print(f"  step {i + 1:3d}/{steps}  loss {losses[-1]:.4f}  "
                      f"tensor memory {s['allocated'] / 2**20:6.1f} MiB  "
                      f"evictions {s['evictions'] - start_stats['evictions']:5d}  "
                      f"recomputes {s['recomputes'] - start_stats['recomputes']:5d}")
        imp.sync()
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)
        if budget is not None:
            imp.dtr.disable()
    elapsed = (time.perf_counter() - start) / max(steps - 1, 1)
    stats = imp.memory_stats()
    stats = {k: stats[k] - start_stats.get(k, 0) if k in ("evictions", "recomputes", "budget_overshoots")
             else stats[k] for k in stats}
    return losses, elapsed, stats, (prof.files[0] if prof is not None else None)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="0.5",
                        help="a fraction of the unconstrained peak (default 0.5) or a size like 20MB")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--policy", default="dtr_eq", choices=imp.dtr.policies())
    parser.add_argument("--profile", default="profile", help="folder for the trace ('' to skip)")
    parser.add_argument("--model", default="cnn", choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=None, help="default: the model's own")
    parser.add_argument("--lr", type=float, default=None, help="default: the model's own")
    parser.add_argument("--min-evictee", default="64KB")
    args = parser.parse_args(argv)

    print(f"{describe(args.model, batch=args.batch)}: measuring the unconstrained peak...")
    base_losses, base_time, base_stats, _ = train(args, steps=3, quiet=True)
    peak = base_stats["peak_allocated"]
    try:
        budget = int(float(args.budget) * peak)
    except ValueError:
        budget = imp.dtr.parse_size(args.budget)
    print(f"unconstrained: peak {peak / 2**20:.1f} MiB, {base_time * 1e3:.0f} ms/step; "
          f"training under a budget of {budget / 2**20:.1f} MiB ({budget / peak:.2f} x peak, "
          f"policy {args.policy})")
    losses, step_time, stats, trace = train(args, budget=budget, profile=args.profile or None)
    same = base_losses == losses[:len(base_losses)]
    print("summary")
    print(f"  loss            {losses[0]:.4f} -> {losses[-1]:.4f} "
          f"({'bit-identical to' if same else 'DIFFERS from'} the unconstrained run)")
    print(f"  step time       {step_time * 1e3:.0f} ms (unconstrained {base_time * 1e3:.0f} ms, "
          f"{step_time / base_time:.2f}x)")
    print(f"  peak memory     {stats['peak_allocated'] / 2**20:.1f} MiB under the budget, "
          f"{peak / 2**20:.1f} MiB without")
    print(f"  evictions       {stats['evictions']}, recomputes {stats['recomputes']} "
          f"({stats['recompute_seconds']:.2f} s), over-budget ops {stats['budget_overshoots']}")
    if trace:
        print(f"  profile         {trace}  (python -m imperative.profiler summary {trace})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
