"""imp.jit.trace's compiled replay against this project's eager run, numpy, PyTorch (eager
and torch.compile) and jax.jit, side by side in one process, interleaved over rounds (best
and median per contender; the JSON holds the ratios the targets of issue 15 are stated in).
A checked trace (symbolic=False: the body runs, its ops served from the plan) runs beside
them on the (16,) chain and the small step.

    python tools/bench_jit.py [--rounds 5] [--quick] [--no-compile] [--json bench_jit.json]
    python tools/bench_jit.py --leak-replays 1000000      # RSS and handles stay flat

Rows: a chain of 20 elementwise ops (x * y + 1, tanh, - y, exp(x * 0.25), / 2, four times)
on (16,) and on (1024, 1024) float32, each call reading its result back to numpy; a small
dispatch-bound training step (MLP 4x64, batch 8, Adam); bench_train.py's MLP step (8 layers
of 1024, batch 256, SGD); the cost of recording a call (the plan is compiled at the first
replay: recording with it is a row too) and of a cached signature's lookup.
jax and torch.compile are measured where installed (neither is a dependency); the first
call of each compiled contender (its compile time) is reported apart.
"""
import argparse
import json
import os
import statistics
import sys
import time

import _harness

_harness.one_blas_thread()

import numpy as np  # noqa: E402

ROOT = os.environ.get("IMPERATIVE_ROOT",
                      os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import imperative as imp  # noqa: E402
from imperative import F, nn, optim  # noqa: E402
from imperative.jit import trace  # noqa: E402
from imperative.models import training_step  # noqa: E402
from _dispatch_table import _chain  # noqa: E402  (the 20-op chain of bench_dispatch)
from bench_train import imp_mlp, mlp_data, torch_mlp  # noqa: E402

torch = _harness.import_torch()
try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None


def per_call(fn, n):
    """One timing: seconds per call of `fn` over n calls."""
    return lambda: _harness.seconds(fn, repeat=n)


def interleaved(contenders, n, rounds):
    """{name: (best, median)} seconds per call, the contenders taking turns each round."""
    for fn in contenders.values():
        fn()                                   # warm (and compile) outside the timing
    times = _harness.interleaved({name: per_call(fn, n) for name, fn in contenders.items()},
                                 rounds)
    return {name: (_harness.best(t), statistics.median(t)) for name, t in times.items()}


def first_call_seconds(fn):
    return _harness.seconds(fn)


def chain_contenders(shape, compile_torch):
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(shape).astype(np.float32)
    yv = rng.standard_normal(shape).astype(np.float32)
    x, y = imp.Tensor(xv), imp.Tensor(yv)
    replay = trace(lambda a, b: _chain(a, b, F.exp, F.tanh), symbolic=True)
    checked = trace(lambda a, b: _chain(a, b, F.exp, F.tanh), symbolic=False)
    c = {"numpy": lambda: _chain(xv, yv, np.exp, np.tanh),
         "imperative eager": lambda: _chain(x, y, F.exp, F.tanh).numpy(),
         "imperative replay": lambda: replay(x, y).numpy(),
         "imperative checked": lambda: checked(x, y).numpy()}
    compile_s = {"imperative replay": first_call_seconds(c["imperative replay"])}
    if jax is not None:
        jx, jy = jnp.asarray(xv), jnp.asarray(yv)
        jitted = jax.jit(lambda a, b: _chain(a, b, jnp.exp, jnp.tanh))
        c["jax.jit"] = lambda: np.asarray(jitted(jx, jy).block_until_ready())
        compile_s["jax.jit"] = first_call_seconds(c["jax.jit"])
    if torch is not None:
        tx, ty = torch.from_numpy(xv), torch.from_numpy(yv)
        c["torch eager"] = lambda: _chain(tx, ty, torch.exp, torch.tanh).numpy()
        if compile_torch:
            compiled = torch.compile(lambda a, b: _chain(a, b, torch.exp, torch.tanh))
            c["torch.compile"] = lambda: compiled(tx, ty).numpy()
            compile_s["torch.compile"] = first_call_seconds(c["torch.compile"])
    same = c["imperative replay"]().tobytes() == c["imperative eager"]().tobytes()
    return c, compile_s, same


def small_step_data():
    """The small step's weights (MLP 4x64) and batch (8 rows, 64 classes), as arrays."""
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((64, 64)) / 8).astype(np.float32) for _ in range(4)]
    xv = rng.standard_normal((8, 64)).astype(np.float32)
    yv = rng.integers(0, 64, 8).astype(np.int32)
    return ws, xv, yv


def small_step_contenders(compile_torch):
    """MLP 4x64 (batch 8), cross-entropy, Adam: dispatch-bound."""
    ws, xv, yv = small_step_data()
    x, y = imp.Tensor(xv), imp.Tensor(yv)

    def imp_step_fn():
        model = imp_mlp(ws)
        return training_step(model, optim.Adam(model.parameters(), lr=1e-3))

    eager_step = imp_step_fn()
    replay = trace(imp_step_fn(), symbolic=True)
    checked = trace(imp_step_fn(), symbolic=False)
    c = {"imperative eager": lambda: float(eager_step(x, y)),
         "imperative replay": lambda: float(replay(x, y)),
         "imperative checked": lambda: float(checked(x, y))}
    compile_s = {"imperative replay": first_call_seconds(c["imperative replay"])}
    if torch is not None:
        tx, ty = torch.from_numpy(xv), torch.from_numpy(yv.astype(np.int64))

        def torch_step_fn():
            net = torch_mlp(torch, ws)
            opt = torch.optim.Adam(net.parameters(), lr=1e-3)

            def step(x, y):
                loss = torch.nn.functional.cross_entropy(net(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                return loss
            return step
        torch_eager = torch_step_fn()
        c["torch eager"] = lambda: float(torch_eager(tx, ty))
        if compile_torch:
            compiled = torch.compile(torch_step_fn())
            c["torch.compile"] = lambda: float(compiled(tx, ty))
            compile_s["torch.compile"] = first_call_seconds(c["torch.compile"])
    return c, compile_s


def dropout_step_contenders():
    """The small step's MLP with a dropout (p 0.1) after each ReLU: a replay draws the
    next seeds and runs the compiled plan with them."""
    ws, xv, yv = small_step_data()
    x, y = imp.Tensor(xv), imp.Tensor(yv)

    def step_fn():
        layers = []
        for layer in imp_mlp(ws):
            layers += [layer, nn.Dropout(0.1)] if isinstance(layer, nn.ReLU) else [layer]
        model = nn.Sequential(*layers)
        return training_step(model, optim.Adam(model.parameters(), lr=1e-3))
    eager, replay = step_fn(), trace(step_fn(), symbolic=True)
    return {"imperative eager": lambda: float(eager(x, y)),
            "imperative replay": lambda: float(replay(x, y))}


def big_mlp_contenders():
    """bench_train.py's MLP step (SGD), eager and replayed."""
    xv, yv, ws = mlp_data(np)
    x, y = imp.Tensor(xv), imp.Tensor(yv)

    def step_fn():
        model = imp_mlp(ws)
        return training_step(model, optim.SGD(model.parameters(), 0.01))

    eager, replay = step_fn(), trace(step_fn(), symbolic=True)

    def synced(fn):
        def run():
            value = float(fn(x, y))
            imp.sync()
            return value
        return run
    return {"imperative eager": synced(eager), "imperative replay": synced(replay)}


def record_and_lookup(rounds):
    """Recording a call of the (16,) chain against an eager call (and recording with the
    first replay, which compiles the plan); a cached signature's lookup (the C check of the
    arguments against the recording, FastReplay.lookup, less the cost of calling it from
    Python) beside the replay call and its plan alone."""
    rng = np.random.default_rng(1)
    x = imp.Tensor(rng.standard_normal(16).astype(np.float32))
    y = imp.Tensor(rng.standard_normal(16).astype(np.float32))
    fn = lambda a, b: _chain(a, b, F.exp, F.tanh)  # noqa: E731
    replay = trace(fn, symbolic=True)
    replay(x, y)
    replay(x, y)                       # the first replay compiles the plan
    plan = replay._last.plan
    infos = [t._record for t in (x, y)]

    calls = 50
    # each timed call records on a trace made beforehand (making the decorator is not part
    # of recording a call) and dropped after it: warm-up plus `rounds` timings of `calls`
    # calls each
    fresh = [trace(fn, symbolic=True) for _ in range(2 * calls * (rounds + 1))]

    def record_and_replay():
        traced = fresh.pop()
        traced(x, y)
        return traced(x, y)
    record = interleaved({"eager call": lambda: fn(x, y),
                          "recording call": lambda: fresh.pop()(x, y),
                          "recording + 1st replay": record_and_replay}, calls, rounds)
    fast = replay._fast
    lookup = interleaved({"signature lookup": lambda: fast.lookup(x, y),
                          # (the same call declined at once, on its argument count: what
                          # calling it from Python costs, taken off the lookup's figure)
                          "lookup, no arguments": lambda: fast.lookup(),
                          "replay call": lambda: replay(x, y),
                          "its plan alone": lambda: imp._core.run_plan(
                              plan.op, plan.compiled, infos, plan.largest)}, 20000, rounds)
    return {**record, **lookup}


def replay_leak_check(n):
    """`n` replays of the (16,) chain, its result read each time: the process's RSS and the
    live handle count before and after (they must stay flat)."""
    def rss_mib():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    rng = np.random.default_rng(2)
    x = imp.Tensor(rng.standard_normal(16).astype(np.float32))
    y = imp.Tensor(rng.standard_normal(16).astype(np.float32))
    replay = trace(lambda a, b: _chain(a, b, F.exp, F.tanh), symbolic=True)
    for _ in range(1000):
        replay(x, y).numpy()
    imp.sync()
    before = (rss_mib(), imp._core._channel_stats()["live_handles"])
    start = time.perf_counter()
    for _ in range(n):
        replay(x, y).numpy()
    imp.sync()
    after = (rss_mib(), imp._core._channel_stats()["live_handles"])
    print(f"\n{n} replays in {time.perf_counter() - start:.1f} s: RSS {before[0]:.1f} -> "
          f"{after[0]:.1f} MiB, live handles {before[1]} -> {after[1]}")
    return {"replays": n, "rss_mib": [before[0], after[0]], "live_handles": [before[1], after[1]]}


def table(title, results, unit=1e6):
    print(f"\n{title} (us per call: best / median)")
    for name, (best, med) in results.items():
        print(f"  {name:22s} {best * unit:12.2f} / {med * unit:12.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default=None)
    ap.add_argument("--leak-replays", type=int, default=0, metavar="N",
                    help="only replay the (16,) chain N times (e.g. 1000000) and report RSS "
                         "and live handles before and after")
    args = ap.parse_args()
    if args.leak_replays:
        print(json.dumps(replay_leak_check(args.leak_replays)))
        return
    q = 10 if args.quick else 1
    compile_torch = torch is not None and not args.no_compile
    ratios, out = {}, {}

    c, compile_s, same = chain_contenders((16,), compile_torch)
    r = interleaved(c, 2000 // q, args.rounds)
    table("20-op chain, (16,) float32", r)
    rep = r["imperative replay"][0]
    ratios["chain16 replay / eager"] = rep / r["imperative eager"][0]
    ratios["chain16 checked (symbolic=False) / eager"] = (r["imperative checked"][0]
                                                          / r["imperative eager"][0])
    for other in ("jax.jit", "torch.compile", "torch eager", "numpy"):
        if other in r:
            ratios[f"chain16 replay / {other}"] = rep / r[other][0]
    out["chain16 bit-identical"] = same
    out["first call seconds"] = compile_s

    c, _, same = chain_contenders((1024, 1024), False)
    c = {k: v for k, v in c.items() if k in ("numpy", "imperative eager", "imperative replay")}
    r = interleaved(c, 3, args.rounds)
    table("20-op chain, (1024, 1024) float32", r)
    ratios["chain1M replay / eager"] = r["imperative replay"][0] / r["imperative eager"][0]
    out["chain1M bit-identical"] = same
    # the plan shares a long chain among as many threads as numpy's BLAS runs; this bench
    # asked for one (eager elementwise ops run one thread either way): the same chain with
    # the plan told there are as many as this process may use
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if cores > 1:
        from imperative.backend import native
        one_thread, native.blas_threads = native.blas_threads, lambda: cores
        try:
            c, _, same = chain_contenders((1024, 1024), False)
            c = {k: v for k, v in c.items() if k in ("imperative eager", "imperative replay")}
            r = interleaved(c, 3, args.rounds)
        finally:
            native.blas_threads = one_thread
        table(f"20-op chain, (1024, 1024) float32, the plan on {cores} threads", r)
        ratios[f"chain1M replay on {cores} threads / eager"] = (r["imperative replay"][0]
                                                               / r["imperative eager"][0])
        out[f"chain1M on {cores} threads bit-identical"] = same

    c, compile_s = small_step_contenders(compile_torch)
    r = interleaved(c, 100 // q, args.rounds)
    table("training step, MLP 4x64, batch 8, Adam", r)
    rep = r["imperative replay"][0]
    ratios["small step eager / replay"] = r["imperative eager"][0] / rep
    ratios["small step checked (symbolic=False) / eager"] = (r["imperative checked"][0]
                                                             / r["imperative eager"][0])
    for other in ("torch.compile", "torch eager"):
        if other in r:
            ratios[f"small step replay / {other}"] = rep / r[other][0]
    out["small step first call seconds"] = compile_s

    r = interleaved(dropout_step_contenders(), 100 // q, args.rounds)
    table("training step, MLP 4x64 with dropout, batch 8, Adam", r)
    ratios["small dropout step eager / replay"] = (r["imperative eager"][0]
                                                   / r["imperative replay"][0])

    # (a step is 0.1-0.2 s: every round, not half of them, since a few percent separate
    # the two and the machine's noise is larger)
    r = interleaved(big_mlp_contenders(), 2 if args.quick else 3, args.rounds)
    table("bench_train MLP step (8 x 1024, batch 256, SGD)", r, unit=1e3 * 1e3)
    ratios["mlp step replay / eager"] = r["imperative replay"][0] / r["imperative eager"][0]

    r = record_and_lookup(args.rounds)
    table("recording and lookup, (16,) chain", r)
    ratios["record / eager call"] = r["recording call"][0] / r["eager call"][0]
    ratios["record + first replay / eager call"] = (r["recording + 1st replay"][0]
                                                    / r["eager call"][0])
    out["signature lookup us"] = (r["signature lookup"][0] - r["lookup, no arguments"][0]) * 1e6

    out["ratios"] = ratios
    print("\n" + json.dumps(out, indent=1, default=str))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
