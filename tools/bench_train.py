"""One training step (forward, backward, SGD) of an 8-layer MLP (width 1024, batch 256) and a
3-conv CNN (batch 64, 32x32): imperative vs PyTorch CPU eager (vs hand-written numpy for the
MLP). Each contender runs in a fresh subprocess (one BLAS thread each) so that its peak RSS
is its own; the contenders take turns for --rounds rounds and each keeps its best (the
JSON also gives the median of the per-round ratios, each round's pair run back to back).

    python tools/bench_train.py [--steps 10] [--rounds 5] [--json bench_train.json]
"""
import argparse
import sys

import _harness

WIDTH, DEPTH, BATCH = 1024, 8, 256
CNN_BATCH = 64


def mlp_data(np):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int32)
    ws = [(rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
          for _ in range(DEPTH - 1)]
    ws.append((rng.standard_normal((10, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32))
    return x, y, ws


def run_imperative(model, steps):
    import numpy as np
    import imperative as imp
    from imperative import F, nn, optim
    from imperative.autodiff import GradManager
    if model == "mlp":
        x, y, ws = mlp_data(np)
        net = imp_mlp(ws)
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
    params = net.parameters() + ([] if model == "mlp" else head.parameters())
    opt = optim.SGD(params, 0.01)
    gm = GradManager().attach(params)

    def step():
        with gm:
            out = net(x)
            if model == "cnn":
                out = head(out.mean(axis=(2, 3)))
            loss = F.cross_entropy(out, y)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        value = float(loss)
        imp.sync()          # the whole step, not just the forward pass that `loss` needs
        return value
    return step


def imp_mlp(ws):
    """The bench MLP in imperative with the weights `ws` (ReLU between the linear layers)."""
    import imperative as imp
    from imperative import nn
    layers = []
    for i, w in enumerate(ws):
        lin = nn.Linear(w.shape[1], w.shape[0], bias=False)
        lin.weight = imp.Parameter(w)
        layers += [lin, nn.ReLU()] if i < len(ws) - 1 else [lin]
    return nn.Sequential(*layers)


def torch_mlp(torch, ws):
    """The bench MLP in PyTorch with the weights `ws` (ReLU between the linear layers)."""
    layers = []
    for i, w in enumerate(ws):
        lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
        lin.weight.data = torch.from_numpy(w.copy())
        layers += [lin, torch.nn.ReLU()] if i < len(ws) - 1 else [lin]
    return torch.nn.Sequential(*layers)


def run_torch(model, steps):
    import numpy as np
    import torch
    torch.set_num_threads(1)
    if model == "mlp":
        x, y, ws = mlp_data(np)
        net = torch_mlp(torch, ws)
        params = list(net.parameters())
    else:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((CNN_BATCH, 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, 10, CNN_BATCH).astype(np.int32)
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                                  torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
                                  torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU())
        head = torch.nn.Linear(64, 10)
        params = list(net.parameters()) + list(head.parameters())
    x, y = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    opt = torch.optim.SGD(params, 0.01)

    def step():
        out = net(x)
        if model == "cnn":
            out = head(out.mean(dim=(2, 3)))
        loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss)
    return step


def run_numpy(model, steps):
    """Hand-written MLP step: forward, softmax cross-entropy, backward, SGD."""
    import numpy as np
    x, y, ws = mlp_data(np)

    def step():
        acts = [x]
        for w in ws[:-1]:
            acts.append(np.maximum(acts[-1] @ w.T, 0))
        logits = acts[-1] @ ws[-1].T
        z = logits - logits.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(BATCH), y]).mean()
        g = p
        g[np.arange(BATCH), y] -= 1
        g /= BATCH
        for i in range(len(ws) - 1, -1, -1):
            gw = g.T @ acts[i]
            g = g @ ws[i]
            if i:
                g *= acts[i] > 0
            ws[i] -= 0.01 * gw
        return float(loss)
    return step


def peak_rss():
    """This process's peak resident memory in bytes (VmHWM; the current RSS elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        import psutil
        return psutil.Process().memory_info().rss


def child(contender, model, steps):
    """Runs in the subprocess: times `steps` steps after one warm-up, reports peak RSS."""
    make = {"imperative": run_imperative, "torch": run_torch, "numpy": run_numpy}[contender]
    step = make(model, steps)
    losses = []
    times = _harness.call_times(lambda: losses.append(step()), steps)
    _harness.report({"step_s": min(times), "median_s": sorted(times)[len(times) // 2],
                     "peak_rss": peak_rss(), "loss": losses[-1]})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="turns each contender takes")
    parser.add_argument("--json", default="bench_train.json")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], args.child[1], args.steps)
    # every contender in a fresh process (one BLAS thread), so that its peak RSS is its own;
    # the contenders take turns, round after round (peak RSS: the largest of its rounds)
    contenders = {f"{model} {who}": child_run(who, model, args.steps)
                  for model, whos in (("mlp", ("imperative", "torch", "numpy")),
                                      ("cnn", ("imperative", "torch")))
                  for who in whos}
    rounds = _harness.interleaved(contenders, args.rounds)
    results = {}
    for key, runs in rounds.items():
        runs = [r for r in runs if "failed" not in r]
        if runs:
            results[key] = dict(_harness.best(runs, key="step_s"),
                                peak_rss=max(r["peak_rss"] for r in runs),
                                round_best_s=[r["step_s"] for r in runs])
    _harness.print_table({key: {"best ms": r["step_s"] * 1e3, "median ms": r["median_s"] * 1e3,
                                "peak RSS MiB": r["peak_rss"] / 2**20, "loss": r["loss"]}
                          for key, r in results.items()},
                         {"best ms": ".1f", "median ms": ".1f", "peak RSS MiB": ".1f",
                          "loss": ".4f"})
    ratios = {}
    for model in ("mlp", "cnn"):
        a, b = results.get(f"{model} imperative"), results.get(f"{model} torch")
        if a and b:
            ratios[f"{model}_step_over_torch"] = a["step_s"] / b["step_s"]
            ratios[f"{model}_step_over_torch_paired_median"] = _harness.paired_median(
                a["round_best_s"], b["round_best_s"])
            ratios[f"{model}_peak_rss_over_torch"] = a["peak_rss"] / b["peak_rss"]
    _harness.print_ratios(ratios)
    _harness.write_json(args.json, {"results": results, "ratios": ratios})


def child_run(who, model, steps):
    """One round of a contender: its child's record ({"failed": ...} where it failed)."""
    return lambda: _harness.run_child(_harness.python_child(
        __file__, "--child", who, model, "--steps", steps))[0]


if __name__ == "__main__":
    sys.exit(main())
