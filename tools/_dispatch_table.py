"""The table of common eager calls measured by tools/bench_dispatch.py (issue 16).

Each row is (name, numpy, imperative, torch): three builders that take the row's inputs as
that library's arrays and return a zero-argument call, or None where the library has no
such call (numpy has no conv2d; `numpy()` is imperative's and torch's own).
"""
import _harness
import numpy as np


def inputs(rng):
    """The tiny inputs every row draws from (float32 unless named otherwise)."""
    f = np.float32
    return {
        "v": rng.standard_normal(16).astype(f),           # (16,)
        "w": rng.standard_normal(16).astype(f),
        "pos": (rng.random(16) + 0.5).astype(f),          # for log and sqrt
        "a": rng.standard_normal((4, 16)).astype(f),      # (4, 16)
        "b": rng.standard_normal((4, 16)).astype(f),
        "m": rng.standard_normal((16, 16)).astype(f),     # (16, 16) for @
        "n": rng.standard_normal((16, 16)).astype(f),
        "mask": rng.random((4, 16)) > 0.5,
        "idx": np.array([3, 0, 2], np.int64),
        "labels": np.array([1, 5, 0, 15], np.int64),
        "g": np.ones(16, f), "beta": np.zeros(16, f),
        "img": rng.standard_normal((1, 8, 8, 8)).astype(f),
        "ker": rng.standard_normal((8, 8, 3, 3)).astype(f),
        "s": np.array(1.5, f),                            # 0-d
    }


def _np_softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_layer_norm(a, g, beta):
    mu = a.mean(-1, keepdims=True)
    var = ((a - mu) ** 2).mean(-1, keepdims=True)
    return (a - mu) / np.sqrt(var + 1e-5) * g + beta


def _np_cross_entropy(a, labels):
    z = a - a.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return -logp[np.arange(len(labels)), labels].mean()


def _np_gelu(a):   # numpy has no erf: the tanh form, the same amount of work
    return 0.5 * a * (1.0 + np.tanh(0.7978845608 * (a + 0.044715 * a ** 3)))


def _chain(x, y, exp, tanh):
    for _ in range(4):
        x = x * y + 1.0
        x = tanh(x)
        x = x - y
        x = exp(x * 0.25)
        x = x / 2.0
    return x


def rows(imp, F, torch):
    """[(name, numpy builder, imperative builder, torch builder)]."""
    TF = torch.nn.functional if torch is not None else None
    R = []

    def row(name, np_fn, imp_fn, torch_fn):
        R.append((name, np_fn, imp_fn, torch_fn))

    row("a @ b (16,16)", lambda d: lambda: d["m"] @ d["n"], lambda d: lambda: d["m"] @ d["n"],
        lambda d: lambda: d["m"] @ d["n"])
    for red in ("sum", "mean", "max"):
        row(f"a.{red}() (4,16)", lambda d, r=red: getattr(d["a"], r),
            lambda d, r=red: getattr(d["a"], r), lambda d, r=red: getattr(d["a"], r))
        row(f"a.{red}(axis=1)", lambda d, r=red: lambda: getattr(d["a"], r)(axis=1),
            lambda d, r=red: lambda: getattr(d["a"], r)(axis=1),
            lambda d, r=red: (lambda: d["a"].amax(1)) if r == "max"
            else (lambda: getattr(d["a"], r)(1)))
    row("a.reshape(16, 4)", lambda d: lambda: d["a"].reshape(16, 4),
        lambda d: lambda: d["a"].reshape(16, 4), lambda d: lambda: d["a"].reshape(16, 4))
    row("a.T", lambda d: lambda: d["a"].T, lambda d: lambda: d["a"].T, lambda d: lambda: d["a"].T)
    row("a[1:3] basic", lambda d: lambda: d["a"][1:3], lambda d: lambda: d["a"][1:3],
        lambda d: lambda: d["a"][1:3])
    row("a[idx] advanced", lambda d: lambda: d["a"][d["idx"]],
        lambda d: lambda: d["a"][d["idx"]], lambda d: lambda: d["a"][d["idx"]])

    def setitem(d):
        a = d["a"]

        def f():
            a[1] = 0.5
        return f
    row("a[1] = 0.5", setitem, setitem, setitem)
    row("concat([a, b])", lambda d: lambda: np.concatenate([d["a"], d["b"]]),
        lambda d: lambda: F.concat([d["a"], d["b"]]), lambda d: lambda: torch.cat([d["a"], d["b"]]))
    row("where(mask, a, b)", lambda d: lambda: np.where(d["mask"], d["a"], d["b"]),
        lambda d: lambda: F.where(d["mask"], d["a"], d["b"]),
        lambda d: lambda: torch.where(d["mask"], d["a"], d["b"]))
    row("clip(a, -.5, .5)", lambda d: lambda: np.clip(d["a"], -0.5, 0.5),
        lambda d: lambda: F.clip(d["a"], -0.5, 0.5),
        lambda d: lambda: torch.clamp(d["a"], -0.5, 0.5))
    row("relu(a)", lambda d: lambda: np.maximum(d["a"], 0),
        lambda d: lambda: F.relu(d["a"]), lambda d: lambda: torch.relu(d["a"]))
    row("gelu(a)", lambda d: lambda: _np_gelu(d["a"]), lambda d: lambda: F.gelu(d["a"]),
        lambda d: lambda: TF.gelu(d["a"]))
    row("softmax(a, -1)", lambda d: lambda: _np_softmax(d["a"]),
        lambda d: lambda: F.softmax(d["a"], -1), lambda d: lambda: torch.softmax(d["a"], -1))
    row("layer_norm(a, 16)", lambda d: lambda: _np_layer_norm(d["a"], d["g"], d["beta"]),
        lambda d: lambda: F.layer_norm(d["a"], (16,), d["g"], d["beta"]),
        lambda d: lambda: TF.layer_norm(d["a"], (16,), d["g"], d["beta"]))
    row("cross_entropy(a, y)", lambda d: lambda: _np_cross_entropy(d["a"], d["labels"]),
        lambda d: lambda: F.cross_entropy(d["a"], d["labels"]),
        lambda d: lambda: TF.cross_entropy(d["a"], d["labels"]))
    row("conv2d 1x8x8x8 3x3", None,
        lambda d: lambda: F.conv2d(d["img"], d["ker"], padding=1),
        lambda d: lambda: TF.conv2d(d["img"], d["ker"], padding=1))
    row("a.astype(int32)", lambda d: lambda: d["a"].astype(np.int32),
        lambda d: lambda: d["a"].astype(np.int32), lambda d: lambda: d["a"].to(torch.int32))
    row("Tensor(np_array)", lambda d: lambda: np.array(d["raw"]),
        lambda d: lambda: imp.Tensor(d["raw"]), lambda d: lambda: torch.tensor(d["raw"]))
    row("t.numpy()", None, lambda d: d["a"].numpy, lambda d: d["a"].numpy)
    row("float(t) 0-d", lambda d: lambda: float(d["s"]), lambda d: lambda: float(d["s"]),
        lambda d: lambda: float(d["s"]))
    row("v + 1.0", lambda d: lambda: d["v"] + 1.0, lambda d: lambda: d["v"] + 1.0,
        lambda d: lambda: d["v"] + 1.0)
    row("v * 2", lambda d: lambda: d["v"] * 2, lambda d: lambda: d["v"] * 2,
        lambda d: lambda: d["v"] * 2)
    row("1.0 - v", lambda d: lambda: 1.0 - d["v"], lambda d: lambda: 1.0 - d["v"],
        lambda d: lambda: 1.0 - d["v"])
    for fn, arg in (("exp", "v"), ("log", "pos"), ("tanh", "v"), ("sigmoid", "v"), ("sqrt", "pos")):
        np_fn = ((lambda x: 1.0 / (1.0 + np.exp(-x))) if fn == "sigmoid" else getattr(np, fn))
        row(f"F.{fn}(v)", lambda d, f=np_fn, k=arg: lambda: f(d[k]),
            lambda d, f=fn, k=arg: lambda: getattr(F, f)(d[k]),
            lambda d, f=fn, k=arg: lambda: getattr(torch, f)(d[k]))
    row("20-op chain (16,)", lambda d: lambda: _chain(d["v"], d["w"], np.exp, np.tanh),
        lambda d: lambda: _chain(d["v"], d["w"], F.exp, F.tanh),
        lambda d: lambda: _chain(d["v"], d["w"], torch.exp, torch.tanh))
    return R


def convert(data, lib, imp, torch):
    """The inputs as `lib`'s arrays ("raw" stays a numpy array: it is the input of Tensor())."""
    out = {}
    for k, x in data.items():
        if lib == "numpy":
            out[k] = x.copy()
        elif lib == "imperative":
            out[k] = imp.Tensor(x)
        else:
            out[k] = torch.from_numpy(x.copy())
    out["raw"] = data["a"].copy()
    return out


def measure(imp, F, torch, rounds, target_s, quick=False):
    """{row: {lib: [us per call, one per round]}}, the libraries interleaved within each
    round (one round of a row = each library once, the order rotating)."""
    rng = np.random.default_rng(0)
    data = inputs(rng)
    libs = ["numpy", "imperative"] + (["torch"] if torch is not None else [])
    conv = {lib: convert(data, lib, imp, torch) for lib in libs}
    results = {}
    for name, *builders in rows(imp, F, torch):
        calls = {}
        for lib, build in zip(("numpy", "imperative", "torch"), builders):
            if lib in libs and build is not None:
                calls[lib] = build(conv[lib])
        n = _harness.repeats_for(calls.values(), target_s, most=20000)
        runs = {lib: _us_per_call(fn, imp.sync if lib == "imperative" else None, n)
                for lib, fn in calls.items()}
        results[name] = _harness.interleaved(runs, rounds, rotate=True)
    return results


def _us_per_call(fn, finish, n):
    return lambda: _harness.seconds(fn, finish, repeat=n) * 1e6


def summarise(results, torch_on):
    """Print the table (best and median per library) and return the JSON of ratios."""
    import statistics
    libs = ["numpy", "imperative"] + (["torch"] if torch_on else [])
    ratios, rows = {}, {}
    for name, times in results.items():
        best = {lib: _harness.best(v) for lib, v in times.items()}
        med = {lib: statistics.median(v) for lib, v in times.items()}
        r_t = med["imperative"] / med["torch"] if "torch" in med else None
        r_n = med["imperative"] / med["numpy"] if "numpy" in med else None
        rows[name] = {**{f"{lib} best/med": f"{best[lib]:.2f}/{med[lib]:.2f}" for lib in best},
                      "imp/torch": r_t, "imp/numpy": r_n}
        ratios[name] = {"imp_over_torch": r_t, "imp_over_numpy": r_n,
                        "best_us": best, "median_us": med}
    _harness.print_table(rows, {**{f"{lib} best/med": None for lib in libs},
                                "imp/torch": ".2f", "imp/numpy": ".2f"}, label="call")
    vs_torch = sorted(r["imp_over_torch"] for r in ratios.values() if r["imp_over_torch"])
    if vs_torch:
        mid = statistics.median(vs_torch)
        print(f"median row imp/torch {mid:.2f} (target <= 0.8); rows <= 1.0x torch: "
              f"{sum(v <= 1.0 for v in vs_torch)}/{len(vs_torch)}")
    return ratios


def main_table(imp, F, torch, quick, json_path):
    rounds = 3 if quick else 7
    results = measure(imp, F, torch, rounds, 0.002 if quick else 0.02, quick)
    print(f"\nus per call, tiny inputs, imperative at async level {imp.get_option('async_level')}; "
          f"{rounds} interleaved rounds, best/median")
    ratios = summarise(results, torch is not None)
    if json_path:
        _harness.write_json(json_path, {"rows": ratios, "rounds": rounds}, indent=1)
    return ratios
