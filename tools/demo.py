"""The demo: fit a linear model by gradient descent on imperative tensors.

    python tools/demo.py [--steps 200] [--async-level 2]

Gradients are written by hand here (autodiff is its own piece of work); the point is the
runtime: ops return at once while the worker computes, errors surface at sync points, and
memory is accounted per device.
"""
import argparse
import time

import numpy as np

import imperative as imp


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--async-level", type=int, default=2, choices=(0, 1, 2))
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--profile", default="profile",
                        help="folder for the Chrome trace of the last 5 steps ('' to skip)")
    args = parser.parse_args()
    imp.config_async_level(args.async_level)

    rng = np.random.default_rng(0)
    true_w = rng.standard_normal((args.features, 1)).astype(np.float32)
    x_np = rng.standard_normal((args.samples, args.features)).astype(np.float32)
    y_np = x_np @ true_w + 0.01 * rng.standard_normal((args.samples, 1)).astype(np.float32)

    x, y = imp.Tensor(x_np), imp.Tensor(y_np)
    w = imp.Parameter(np.zeros((args.features, 1), np.float32))
    lr = 0.1
    def train_step():
        with imp.scope("forward"):
            err = x @ w - y                               # (n, 1)
        with imp.scope("backward"):
            grad = (x.T @ err) * (2.0 / args.samples)     # d mean(err^2) / dw
        with imp.scope("sgd"):
            w.__isub__(grad * lr)
        return err

    profiled = max(args.steps - 5, 0) if args.profile else args.steps
    start = time.perf_counter()
    for step in range(1, profiled + 1):
        err = train_step()
        if step % 50 == 0 or step == args.steps:
            loss = float((err * err).mean())              # a sync point
            print(f"step {step:4d}  loss {loss:.6f}")
    if profiled < args.steps:
        imp.sync()       # the profile shows only the profiled steps, not the queue before them
        with imp.Profiler(path=args.profile) as prof:
            for step in range(profiled + 1, args.steps + 1):
                err = train_step()
                prof.step()
            loss = float((err * err).mean())
        print(f"step {args.steps:4d}  loss {loss:.6f}  (profile: {prof.files[0]})")
    imp.sync()
    elapsed = time.perf_counter() - start
    w_err = float(np.abs(w.numpy() - true_w).max())
    stats = imp.memory_stats()
    print(f"{args.steps} steps in {elapsed * 1e3:.1f} ms ({elapsed / args.steps * 1e3:.2f} ms/step, "
          f"async level {args.async_level}); max |w - w_true| = {w_err:.4f}")
    print(f"memory: {stats['allocated'] / 2**20:.1f} MiB allocated now, "
          f"peak {stats['peak_allocated'] / 2**20:.1f} MiB, in-place reuses {stats['inplace_reuses']}")


if __name__ == "__main__":
    main()
