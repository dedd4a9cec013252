"""The demo: train a 16-layer MLP on a synthetic task under a memory budget (DTR).

    python tools/demo.py [--budget 0.5] [--steps 30] [--policy dtr_eq] [--profile profile]

First one unconstrained step measures the peak tensor memory P the model needs; then the
model is trained with DTR keeping tensor memory at `--budget` x P (a fraction, or a size
such as "20MB"), evicting and recomputing activations as needed. Prints progress, writes a
Chrome trace of the last steps, and a summary: loss, step time, peak memory with and
without the budget, evictions and recomputes. The losses equal an unconstrained run's.
"""
import argparse
import time

import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager


def make_task(batch, width, classes, seed=0):
    """Gaussian clusters: learnable, so the loss visibly falls."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, width)).astype(np.float32)
    labels = rng.integers(0, classes, batch)
    x = centers[labels] + 0.5 * rng.standard_normal((batch, width)).astype(np.float32)
    return imp.Tensor(x), imp.Tensor(labels.astype(np.int32))


def make_model(width, depth, classes):
    imp.random.seed(0)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def train(args, budget=None, steps=None, profile=None, quiet=False):
    """Train a fresh model; returns (losses, seconds per step, memory stats)."""
    x, y = make_task(args.batch, args.width, args.classes)
    model = make_model(args.width, args.depth, args.classes)
    opt = optim.Adam(model.parameters(), args.lr)
    gm = GradManager().attach(model.parameters())
    if budget is not None:
        imp.dtr.enable(eviction_threshold=budget, evictee_minimum_size=args.min_evictee)
        imp.dtr.set_policy(args.policy)
    imp.sync()
    imp.reset_peak_memory_stats()
    start_stats = imp.memory_stats()
    steps = steps or args.steps
    losses, start, prof = [], time.perf_counter(), None

    def step():
        with gm:
            loss = F.cross_entropy(model(x), y)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss

    try:
        for i in range(steps):
            if profile and i == steps - 3:
                imp.sync()
                prof = imp.Profiler(path=profile).__enter__()
            losses.append(float(step()))
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
    elapsed = (time.perf_counter() - start) / steps
    stats = imp.memory_stats()
    stats = {k: stats[k] - start_stats.get(k, 0) if k in ("evictions", "recomputes", "budget_overshoots")
             else stats[k] for k in stats}
    return losses, elapsed, stats, (prof.files[0] if prof is not None else None)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="0.5",
                        help="a fraction of the unconstrained peak (default 0.5) or a size like 20MB")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--policy", default="dtr_eq", choices=imp.dtr.policies())
    parser.add_argument("--profile", default="profile", help="folder for the trace ('' to skip)")
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--min-evictee", default="64KB")
    args = parser.parse_args()

    print(f"MLP {args.depth}x{args.width}, batch {args.batch}: measuring the unconstrained peak...")
    base_losses, base_time, base_stats, _ = train(args, steps=2, quiet=True)
    peak = base_stats["peak_allocated"]
    try:
        budget = int(float(args.budget) * peak)
    except ValueError:
        budget = imp.dtr.parse_size(args.budget)
    print(f"unconstrained: peak {peak / 2**20:.1f} MiB, {base_time * 1e3:.0f} ms/step; "
          f"training under a budget of {budget / 2**20:.1f} MiB ({budget / peak:.2f} x peak, "
          f"policy {args.policy})")
    losses, step_time, stats, trace = train(args, budget=budget, profile=args.profile or None)
    check, _, _, _ = train(args, steps=2, quiet=True)
    same = check == losses[:2]
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
