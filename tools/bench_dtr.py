"""DTR under budgets: for an MLP (and a small CNN), the unconstrained peak P, then budgets of
0.7, 0.5, 0.3 and 0.2 P for each eviction policy. Every point runs in a fresh subprocess
(so peak RSS is its own) and reports: step time against unconstrained, peak accounted
memory, peak RSS, evictions, recomputes, eviction bookkeeping as a share of the step, and
whether the losses equal the unconstrained run's bit for bit. With PyTorch installed,
`torch.utils.checkpoint` on the same MLP is measured too.

    python tools/bench_dtr.py [--steps 4] [--budgets 0.7,0.5,0.3,0.2] [--json bench_dtr.json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MLP = dict(batch=2048, width=256, depth=16, classes=10)


def point(policy, fraction, peak, steps):
    """One measurement, in this (fresh) process; prints a JSON line."""
    import psutil
    import imperative as imp
    from imperative import F, optim
    from imperative.autodiff import GradManager
    sys.path.insert(0, HERE)
    from demo import make_model, make_task      # the demo's model and task
    x, y = make_task(MLP["batch"], MLP["width"], MLP["classes"])
    model = make_model(MLP["width"], MLP["depth"], MLP["classes"])
    opt = optim.SGD(model.parameters(), 0.01)
    gm = GradManager().attach(model.parameters())
    if fraction is not None:
        imp.dtr.enable(eviction_threshold=int(fraction * peak), evictee_minimum_size=65536)
        imp.dtr.set_policy(policy)
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        with gm:
            loss = F.cross_entropy(model(x), y)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
        times.append(time.perf_counter() - start)
    s = imp.memory_stats()
    step = sorted(times)[len(times) // 2]
    print(json.dumps({"losses": losses, "step_s": step, "peak": s["peak_allocated"],
                      "rss": psutil.Process().memory_info().rss, "evictions": s["evictions"],
                      "recomputes": s["recomputes"], "overshoots": s["budget_overshoots"],
                      "bookkeeping_share": s["eviction_seconds"] / max(sum(times), 1e-9)}))


def torch_checkpoint(steps):
    import torch
    from torch.utils.checkpoint import checkpoint_sequential
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for _ in range(MLP["depth"]):
        layers += [torch.nn.Linear(MLP["width"], MLP["width"]), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(MLP["width"], MLP["classes"]))
    x = torch.randn(MLP["batch"], MLP["width"], requires_grad=True)
    y = torch.randint(0, MLP["classes"], (MLP["batch"],))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    out = {}
    for name, seg in (("torch", None), ("torch checkpoint (4 segments)", 4)):
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            logits = model(x) if seg is None else checkpoint_sequential(model, seg, x, use_reentrant=False)
            loss = torch.nn.functional.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start)
        out[name] = sorted(times)[len(times) // 2]
    print(json.dumps(out))


def run_child(args_list):
    out = subprocess.run([sys.executable, __file__] + args_list, capture_output=True, text=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--budgets", default="0.7,0.5,0.3,0.2")
    parser.add_argument("--policies", default="dtr_eq,lru,size")
    parser.add_argument("--json", default="bench_dtr.json")
    parser.add_argument("--point", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--torch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        policy, fraction, peak = args.point
        return point(policy, None if fraction == "none" else float(fraction), int(peak), args.steps)
    if args.torch:
        return torch_checkpoint(args.steps)

    base = run_child(["--point", "none", "none", "0", "--steps", str(args.steps)])
    peak = base["peak"]
    rows = [("unconstrained", "-", base)]
    for fraction in [float(f) for f in args.budgets.split(",")]:
        for policy in args.policies.split(","):
            r = run_child(["--point", policy, str(fraction), str(peak), "--steps", str(args.steps)])
            rows.append((policy, fraction, r))
            print(f"  {policy:<7} {fraction:.1f} P: {r['step_s'] / base['step_s']:.2f}x", flush=True)
    print(f"MLP {MLP['depth']}x{MLP['width']}, batch {MLP['batch']}; unconstrained peak P = "
          f"{peak / 2**20:.1f} MiB, step {base['step_s'] * 1e3:.0f} ms")
    print(f"{'policy':<14}{'budget':>7}{'step x':>8}{'peak MiB':>10}{'RSS MiB':>9}{'evict':>8}"
          f"{'recomp':>8}{'over':>6}{'book %':>8}  same loss")
    for policy, fraction, r in rows:
        print(f"{policy:<14}{fraction!s:>7}{r['step_s'] / base['step_s']:>8.2f}{r['peak'] / 2**20:>10.1f}"
              f"{r['rss'] / 2**20:>9.1f}{r['evictions']:>8}{r['recomputes']:>8}{r['overshoots']:>6}"
              f"{r['bookkeeping_share'] * 100:>8.2f}  {r['losses'] == base['losses']}")
    torch_rows = None
    try:
        torch_rows = run_child(["--torch", "--steps", str(args.steps)])
        for name, t in torch_rows.items():
            print(f"{name}: {t * 1e3:.0f} ms/step")
    except RuntimeError as e:
        print(f"PyTorch comparison skipped: {str(e).splitlines()[-1] if str(e) else e}")
    with open(args.json, "w") as f:
        json.dump({"peak": peak, "base": base, "points": [{"policy": p, "fraction": fr, **r}
                                                         for p, fr, r in rows[1:]],
                   "torch": torch_rows}, f, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    sys.exit(main())
