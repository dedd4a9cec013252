"""Data-parallel throughput: 2 ranks vs 1 rank (same per-rank batch, one BLAS thread each)
on the bench_train MLP (8 x 1024, batch 256) and CNN (3 convs, batch 64), with imperative
(`make_allreduce_cb`) and, when torch is installed, PyTorch DDP over gloo side by side.
Every configuration runs under `mpiexec` in a fresh job; the configurations take turns for
--rounds rounds (interleaved: the machine's noise hits them alike); each keeps its best and
its median step time.

    python tools/bench_dp.py [--steps 8] [--rounds 3] [--json bench_dp.json]
"""
import argparse
import itertools
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import _harness  # noqa: E402
from bench_train import BATCH, CNN_BATCH, imp_mlp, mlp_data, torch_mlp  # noqa: E402


def imperative_step(model, comm, bucket_mb):
    import numpy as np
    import imperative as imp
    from imperative import F, nn, optim
    from imperative import distributed as dist
    from imperative.autodiff import GradManager
    dist.init()
    if model == "mlp":
        x, y, ws = mlp_data(np)
        net, head = imp_mlp(ws), None
    else:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((CNN_BATCH, 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, 10, CNN_BATCH).astype(np.int32)
        imp.random.seed(0)
        net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU())
        head = nn.Linear(64, 10)
    x, y = imp.Tensor(x), imp.Tensor(y)
    params = net.parameters() + (head.parameters() if head is not None else [])
    dist.broadcast_parameters(params)
    opt = optim.SGD(params, 0.01)
    cbs = [dist.make_allreduce_cb("mean", bucket_bytes=int(bucket_mb * (1 << 20)))] if comm else []
    gm = GradManager().attach(params, callbacks=cbs)

    def step():
        with gm:
            out = net(x)
            if head is not None:
                out = head(out.mean(axis=(2, 3)))
            loss = F.cross_entropy(out, y)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        imp.sync()
    return step, dist.get_rank(), dist.barrier


def torch_step(model, comm, bucket_mb):
    import numpy as np
    import torch
    import torch.distributed as tdist
    torch.set_num_threads(1)
    rank, size = int(os.environ.get("PMI_RANK", 0)), int(os.environ.get("PMI_SIZE", 1))
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['BENCH_PORT']}",
                             rank=rank, world_size=size)
    if model == "mlp":
        x, y, ws = mlp_data(np)
        net = torch_mlp(torch, ws)
    else:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((CNN_BATCH, 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, 10, CNN_BATCH).astype(np.int32)

        class CNN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.body = torch.nn.Sequential(
                    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                    torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU())
                self.head = torch.nn.Linear(64, 10)

            def forward(self, v):
                return self.head(self.body(v).mean(dim=(2, 3)))
        net = CNN()
    if comm:
        net = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=bucket_mb)
    x, y = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    opt = torch.optim.SGD(net.parameters(), 0.01)

    def step():
        loss = torch.nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step, rank, tdist.barrier


def worker(args):
    make = imperative_step if args.worker == "imp" else torch_step
    step, rank, barrier = make(args.model, args.comm, args.bucket_mb)
    step()
    step()                                  # warm-up
    barrier()
    times = _harness.call_times(step, args.steps, warmup=0)
    barrier()
    if rank == 0:
        _harness.report({"step_s": statistics.median(times)})


CONFIGS = [  # (name, engine, ranks, comm)
    ("imp 1 rank", "imp", 1, True),
    ("imp 2 ranks", "imp", 2, True),
    ("imp 2 ranks, no comm", "imp", 2, False),
    ("torch 1 rank", "torch", 1, True),
    ("torch DDP 2 ranks", "torch", 2, True),
]


def run_config(engine, ranks, comm, model, steps, bucket_mb, port):
    """Seconds per step (the median of rank 0's steps) of one configuration's MPI job."""
    env = _harness.child_env(BENCH_PORT=port,
                             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = ["mpiexec", "-n", str(ranks), *_harness.python_child(
        __file__, "--worker", engine, "--model", model, "--steps", steps,
        "--bucket-mb", bucket_mb, *([] if comm else ["--no-comm"]))]
    record, _ = _harness.run_child(cmd, timeout=600, env=env)
    if "step_s" not in record:
        raise RuntimeError(f"{' '.join(cmd)}: {record}")
    return record["step_s"]


def config_run(model, config, args, ports):
    """One round of a configuration: its seconds per step, printed as it comes."""
    name, engine, ranks, comm = config

    def run():
        t = run_config(engine, ranks, comm, model, args.steps, args.bucket_mb, next(ports))
        print(f"{model:3s} {name:22s} {t * 1e3:8.1f} ms/step", flush=True)
        return t
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--model", default="mlp", help=argparse.SUPPRESS)
    ap.add_argument("--no-comm", dest="comm", action="store_false", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if shutil.which("mpiexec") is None:
        sys.exit("bench_dp needs mpiexec: pip install 'imperative[mpi]'")
    try:
        import torch  # noqa: F401
        configs = CONFIGS
    except ImportError:
        print("torch not installed: PyTorch DDP is left out", file=sys.stderr)
        configs = [c for c in CONFIGS if c[1] != "torch"]
    models = args.models.split(",")
    ports = itertools.count(29501 + os.getpid() % 1000)     # a fresh one per job
    times = _harness.interleaved({(m, c[0]): config_run(m, c, args, ports)
                                  for m in models for c in configs}, args.rounds)
    batch = {"mlp": BATCH, "cnn": CNN_BATCH}
    result = {"steps": args.steps, "rounds": args.rounds, "bucket_mb": args.bucket_mb,
              "models": {}}
    rows = {}
    for m in models:
        entry = {}
        for name, _, ranks, _ in configs:
            ts = times[(m, name)]
            best, med = _harness.best(ts), statistics.median(ts)
            entry[name] = {"best_ms": best * 1e3, "median_ms": med * 1e3,
                           "samples_per_s": ranks * batch[m] / best}
            rows[f"{m} {name}"] = {"best ms": best * 1e3, "median ms": med * 1e3,
                                   "samples/s (best)": ranks * batch[m] / best}
        ratios = {"imp_2_over_1_throughput": entry["imp 2 ranks"]["samples_per_s"]
                  / entry["imp 1 rank"]["samples_per_s"],
                  "imp_step_2_ranks_over_no_comm": entry["imp 2 ranks"]["best_ms"]
                  / entry["imp 2 ranks, no comm"]["best_ms"],
                  "imp_2_over_1_throughput_median": 2 * entry["imp 1 rank"]["median_ms"]
                  / entry["imp 2 ranks"]["median_ms"]}
        if "torch DDP 2 ranks" in entry:
            ratios["torch_2_over_1_throughput"] = (entry["torch DDP 2 ranks"]["samples_per_s"]
                                                   / entry["torch 1 rank"]["samples_per_s"])
            ratios["imp_over_torch_ddp_throughput"] = (
                entry["imp 2 ranks"]["samples_per_s"]
                / entry["torch DDP 2 ranks"]["samples_per_s"])
        entry["ratios"] = ratios
        result["models"][m] = entry
    print()
    _harness.print_table(rows, {"best ms": ".1f", "median ms": ".1f", "samples/s (best)": ".0f"},
                         label="model configuration")
    _harness.print_ratios({m: result["models"][m]["ratios"] for m in models})
    if args.json:
        _harness.write_json(args.json, result, indent=1)


if __name__ == "__main__":
    main()
