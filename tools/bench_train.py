"""One training step (forward, backward, SGD) of an 8-layer MLP (width 1024, batch 256) and a
3-conv CNN (batch 64, 32x32): imperative vs PyTorch CPU eager (vs hand-written numpy for the
MLP). Each contender runs in a fresh subprocess (one BLAS thread each) so that its peak RSS
is its own; the contenders take turns for --rounds rounds and each keeps its best (the
JSON also gives the median of the per-round ratios, each round's pair run back to back).

Issue 16's dispatch-bound steps (with Adam) are the models `mlp_small` (4 x Linear 64,
batch 8) and `cnn_small` (two 3x3 convolutions of 16 and 32 channels on 8x8 images, a 2x2
max-pool, a linear head, batch 64); they run SMALL_STEPS steps at least. `mlp_ln` is the
demo's `--model mlp` (imperative.models: 32 x (Linear 256 -> LayerNorm -> ReLU), batch 1024,
SGD at its learning rate 0.02).

    python tools/bench_train.py [--steps 10] [--rounds 5]
                                [--models mlp,cnn,mlp_small,cnn_small,mlp_ln]
                                [--json bench_train.json]

It measures the checkout it lives in; IMPERATIVE_ROOT=/path/to/checkout measures another.
"""
import argparse
import os
import sys

import _harness

# the checkout this file lives in (not whichever imperative is installed); IMPERATIVE_ROOT
# measures another build (a before/after comparison); the children inherit it
sys.path.insert(0, os.environ.get("IMPERATIVE_ROOT",
                                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

WIDTH, DEPTH, BATCH = 1024, 8, 256
CNN_BATCH = 64
SMALL = ("mlp_small", "cnn_small")
SMALL_STEPS = 200        # a dispatch-bound step takes about a millisecond
MODELS = {"mlp": ("imperative", "torch", "numpy"), "cnn": ("imperative", "torch"),
          "mlp_small": ("imperative", "torch"), "cnn_small": ("imperative", "torch"),
          "mlp_ln": ("imperative", "torch")}
LN = dict(width=256, depth=32, batch=1024, lr=0.02)     # imperative.models.CONFIGS["mlp"]


def small_data(np, model):
    """(x, labels) of a dispatch-bound model: (8, 64) rows or (64, 3, 8, 8) images."""
    rng = np.random.default_rng(0)
    shape = (8, 64) if model == "mlp_small" else (64, 3, 8, 8)
    return rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, shape[0])


def ln_data(np):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((LN["batch"], LN["width"])).astype(np.float32),
            rng.integers(0, 10, LN["batch"]))


def ln_net(nn):
    """imperative.models.mlp in `nn` (imperative.nn or torch.nn: the same names)."""
    layers = []
    for _ in range(LN["depth"]):
        layers += [nn.Linear(LN["width"], LN["width"]), nn.LayerNorm(LN["width"]), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(LN["width"], 10))


def small_net(nn, model):
    """The dispatch-bound model in `nn` (imperative.nn or torch.nn: the same names)."""
    if model == "mlp_small":
        return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                             nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 4 * 4, 10))


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
    elif model in SMALL:
        x, y = small_data(np, model)
        imp.random.seed(0)
        net = small_net(nn, model)
    elif model == "mlp_ln":
        x, y = ln_data(np)
        imp.random.seed(0)
        net = ln_net(nn)
    else:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((CNN_BATCH, 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, 10, CNN_BATCH).astype(np.int32)
        imp.random.seed(0)
        net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU())
        head = nn.Linear(64, 10)
    x, y = imp.Tensor(x), imp.Tensor(y.astype(np.int32))
    params = net.parameters() + (head.parameters() if model == "cnn" else [])
    opt = optim.Adam(params, 1e-3) if model in SMALL else optim.SGD(params, _sgd_lr(model))
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


def _sgd_lr(model):
    return LN["lr"] if model == "mlp_ln" else 0.01


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
    elif model in SMALL:
        x, y = small_data(np, model)
        torch.manual_seed(0)
        net = small_net(torch.nn, model)
        params = list(net.parameters())
    elif model == "mlp_ln":
        x, y = ln_data(np)
        torch.manual_seed(0)
        net = ln_net(torch.nn)
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
    opt = (torch.optim.Adam(params, 1e-3) if model in SMALL
           else torch.optim.SGD(params, _sgd_lr(model)))

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
    if model in SMALL:
        steps = max(steps, SMALL_STEPS)
    losses = []
    times = _harness.call_times(lambda: losses.append(step()), steps)
    _harness.report({"step_s": min(times), "median_s": sorted(times)[len(times) // 2],
                     "peak_rss": peak_rss(), "loss": losses[-1]})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="turns each contender takes")
    parser.add_argument("--json", default="bench_train.json")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child[0], args.child[1], args.steps)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    # every contender in a fresh process (one BLAS thread), so that its peak RSS is its own;
    # the contenders take turns, round after round (peak RSS: the largest of its rounds)
    contenders = {f"{model} {who}": child_run(who, model, args.steps)
                  for model in models for who in MODELS[model]}
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
    for model in models:
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
