"""Programs that tests/test_distributed.py runs under `mpiexec -n 2`: `python
dp_programs.py NAME OUTDIR`. Each writes what the test checks into OUTDIR."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "..")))

import numpy as np  # noqa: E402

import imperative as imp  # noqa: E402
from imperative import F, nn, optim  # noqa: E402
from imperative import distributed as dist  # noqa: E402
from imperative.autodiff import GradManager  # noqa: E402


def _data(n):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((n, 16)).astype(np.float32),
            rng.integers(0, 4, n).astype(np.int32))


def train(params_out, batch, steps, bucket_bytes, dtr=False, seed_by_rank=False, width=32):
    """Per-rank batch `batch` of a global batch world*batch; returns the parameters."""
    rank, size = dist.get_rank(), dist.get_world_size()
    imp.random.seed(100 + rank if seed_by_rank else 0)
    net = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                        nn.Linear(width, 4))
    params = net.parameters()
    dist.broadcast_parameters(params)
    x, y = _data(batch * size)
    part = dist.shard(batch * size)
    x, y = imp.Tensor(x[part.start:part.stop]), imp.Tensor(y[part.start:part.stop])
    opt = optim.SGD(params, 0.1, momentum=0.9)
    gm = GradManager().attach(params, callbacks=[dist.make_allreduce_cb(
        "mean", bucket_bytes=bucket_bytes)])
    if dtr:
        imp.dtr.enable(eviction_threshold="64KB", evictee_minimum_size=0)
    for _ in range(steps):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
    if dtr:
        imp.sync()            # the queued steps run under the budget
        imp.dtr.disable()
    np.savez(params_out, *[p.numpy() for p in params])


def _all_reduce_after_a_failure(x, out, handling_s=0.0):
    """One more collective, which another rank's failure must end: write how long it took
    and the error to out/error.txt (after `handling_s` seconds of handling it), then fail
    too."""
    t0 = time.monotonic()
    try:
        dist.all_reduce(x).numpy()
    except RuntimeError as e:
        seconds = time.monotonic() - t0
        time.sleep(handling_s)
        with open(os.path.join(out, "error.txt"), "w") as f:
            f.write(f"{seconds:.2f}\n{e}\n{e.__cause__}")
        raise


def main():
    name, out = sys.argv[1], sys.argv[2]
    dist.init()
    rank = dist.get_rank()
    if name == "train":
        batch = int(sys.argv[3])
        train(os.path.join(out, f"params{rank}.npz"), batch, 4, bucket_bytes=600,
              seed_by_rank=True)
    elif name == "train_dtr":
        train(os.path.join(out, f"params{rank}.npz"), 64, 3, bucket_bytes=0, dtr=True,
              width=256)
        stats = imp.memory_stats()
        with open(os.path.join(out, f"dtr{rank}.json"), "w") as f:
            json.dump({"evictions": stats["evictions"]}, f)
    elif name == "profile":
        with imp.Profiler(path=out):
            x = imp.Tensor(np.ones((64, 64), np.float32) * (rank + 1))
            y = dist.all_reduce(x @ x)
            (y * 2).numpy()
    elif name in ("raise", "raise_handled_slowly"):
        x = imp.Tensor(np.ones(1000, np.float32))
        dist.all_reduce(x).numpy()
        if rank == 1:
            raise ValueError("rank 1 gives up")
        _all_reduce_after_a_failure(x, out, 1.0 if name == "raise_handled_slowly" else 0.0)
    elif name == "kill":
        x = imp.Tensor(np.ones(1000, np.float32))
        dist.all_reduce(x).numpy()
        if rank == 1:
            os.kill(os.getpid(), 9)
        _all_reduce_after_a_failure(x, out)
    elif name == "shapes":
        x = imp.Tensor(np.ones((3, 4) if rank == 0 else (4, 3), np.float32))
        try:
            dist.all_reduce(x).numpy()
        except (RuntimeError, ValueError) as e:    # level 0: the original ValueError
            with open(os.path.join(out, f"error{rank}.txt"), "w") as f:
                f.write(f"{e}\n{e.__cause__!r}")
        # the ranks stay in step after the error
        z = dist.all_reduce(imp.Tensor(np.float32(rank + 1)))
        with open(os.path.join(out, f"after{rank}.txt"), "w") as f:
            f.write(str(float(z)))
    elif name == "collectives":
        x = imp.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * (rank + 1))
        res = {"sum": dist.all_reduce(x).numpy().tolist(),
               "mean": dist.all_reduce(x, "mean").numpy().tolist(),
               "max": dist.all_reduce(x, "max").numpy().tolist(),
               "min": dist.all_reduce(x, op="min").numpy().tolist(),
               "bcast": dist.broadcast(imp.Tensor(np.full(3, rank, np.int32)), 1)
               .numpy().tolist(),
               "gather": dist.all_gather(imp.Tensor([rank, 10 + rank])).numpy().tolist(),
               "scalar": float(dist.all_reduce(imp.Tensor(np.float32(rank + 1)))),
               "shard": [list(dist.shard(10)), list(dist.shard(10, 4))],
               # (float values with all their bits: a mean scaled before the sum must
               # give the bits of the sum divided after it)
               "values_bits": _rank_values(rank).view(np.uint32).tolist(),
               "mean_bits": dist.all_reduce(imp.Tensor(_rank_values(rank)), "mean")
               .numpy().view(np.uint32).tolist()}
        dist.barrier()
        with open(os.path.join(out, f"coll{rank}.json"), "w") as f:
            json.dump(res, f)


def _rank_values(rank):
    """Float32 values of every magnitude (and sign) for rank `rank`'s mean."""
    rng = np.random.default_rng(rank)
    return (rng.standard_normal(64) * 10.0 ** rng.integers(-30, 30, 64)).astype(np.float32)


if __name__ == "__main__":
    main()
