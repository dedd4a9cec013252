"""Data-parallel training of a model of the zoo (imperative/models.py) over MPI.

    mpiexec -n 2 python tools/train_dp.py [--model relu_wide] [--batch 64] [--steps 20]
    mpiexec -n 1 python tools/train_dp.py          # the same run on one process

Each rank trains on its share (`imp.distributed.shard`) of every global batch of
ranks x --batch samples; gradients are averaged across ranks by
`make_allreduce_cb("mean", bucket_bytes)` while backward runs; parameters start from rank
0's (broadcast). Rank 0 prints every rank's progress and a summary: step time,
communication time, the share of it hidden behind computation, loss. --no-comm turns the
all-reduce off (each rank then trains alone: a measure of what communication costs).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))

import numpy as np  # noqa: E402

import imperative as imp  # noqa: E402
from imperative import F, models  # noqa: E402
from imperative import distributed as dist  # noqa: E402
from imperative.autodiff import GradManager  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="relu_wide", choices=sorted(models.CONFIGS))
    ap.add_argument("--batch", type=int, default=None, help="per-rank batch (default: the "
                    "model's batch)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--print-every", type=int, default=5)
    ap.add_argument("--bucket-mb", type=float, default=4.0,
                    help="gradient bucket size (MiB); small buckets start communicating "
                    "earlier in the backward pass (make_allreduce_cb's default is 25)")
    ap.add_argument("--no-comm", action="store_true", help="no gradient all-reduce")
    ap.add_argument("--json", default=None, help="write the summary here (rank 0)")
    args = ap.parse_args(argv)

    dist.init()
    rank, size = dist.get_rank(), dist.get_world_size()
    per_rank = args.batch or models.config(args.model)["batch"]
    model, x, labels = models.build(args.model, batch=per_rank * size)
    mine = dist.shard(per_rank * size, per_rank * size)
    x, labels = x[mine.start:mine.stop], labels[mine.start:mine.stop]
    params = model.parameters()
    dist.broadcast_parameters(params, root=0)
    opt = models.optimizer(args.model, params)
    callbacks = [] if args.no_comm else [
        dist.make_allreduce_cb("mean", bucket_bytes=int(args.bucket_mb * (1 << 20)))]
    gm = GradManager().attach(params, callbacks=callbacks)
    if rank == 0:
        print(f"{models.describe(args.model, batch=per_rank)} per rank; {size} rank(s), "
              f"global batch {per_rank * size}; {sum(p.size for p in params) * 4 / 1e6:.1f} MB "
              f"of gradients per step{' (all-reduce OFF)' if args.no_comm else ''}", flush=True)

    times, losses = [], []
    stats0 = dist.comm_stats()
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        with gm:
            loss = F.cross_entropy(model(x), labels)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        imp.sync()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
        if step == 1:
            stats0 = dist.comm_stats()          # the first step warms caches up: not counted
        if step % args.print_every == 0 or step == args.steps:
            row = dist.all_gather(imp.Tensor(np.array([times[-1], losses[-1]], np.float32)))
            row = row.numpy()
            if rank == 0:
                cells = "  ".join(f"rank {r}: {row[r, 0] * 1e3:6.1f} ms loss {row[r, 1]:.4f}"
                                  for r in range(size))
                print(f"step {step:4d}  {cells}", flush=True)

    stats = dist.comm_stats()
    counted = max(1, len(times) - 1)
    step_ms = float(np.mean(times[1:] if len(times) > 1 else times)) * 1e3
    comm_ms = (stats["comm_seconds"] - stats0["comm_seconds"]) / counted * 1e3
    blocked_ms = (stats["blocked_seconds"] - stats0["blocked_seconds"]) / counted * 1e3
    overlap = 1.0 - blocked_ms / comm_ms if comm_ms > 0 else 1.0
    mean_loss = float(dist.all_reduce(imp.Tensor(np.float32(losses[-1])), "mean"))
    digest = np.array([float(np.sum(p.numpy().astype(np.float64))) for p in params])
    digests = dist.all_gather(imp.Tensor(digest.astype(np.float32))).numpy()
    same = bool(np.all(digests == digests[0]))
    summary = {"model": args.model, "ranks": size, "per_rank_batch": per_rank,
               "steps": args.steps, "step_ms": step_ms,
               "samples_per_s": per_rank * size / step_ms * 1e3,
               "comm_ms_per_step": comm_ms, "blocked_ms_per_step": blocked_ms,
               "overlap_share": max(0.0, min(1.0, overlap)), "loss": mean_loss,
               "first_loss": losses[0], "params_identical_across_ranks": same,
               "all_reduce": not args.no_comm}
    if rank == 0:
        print(f"summary: {size} rank(s) x batch {per_rank}: step {step_ms:.1f} ms "
              f"({summary['samples_per_s']:.0f} samples/s); communication {comm_ms:.1f} ms per "
              f"step, the worker waited {blocked_ms:.1f} ms of it (overlap "
              f"{summary['overlap_share']:.0%}); loss {losses[0]:.4f} -> {mean_loss:.4f} "
              f"(mean over ranks); parameters identical across ranks: {same}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1)
    return summary


if __name__ == "__main__":
    main()
