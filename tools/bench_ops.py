"""Big NN ops: imperative vs numpy written by hand vs PyTorch CPU, one thread each.

    python tools/bench_ops.py [--quick] [--rounds N] [--json bench_ops.json]

It measures the checkout it lives in; IMPERATIVE_ROOT=/path/to/checkout measures another.

Cases: conv2d on (32, 64, 56, 56) with 64 3x3 filters, padding 1; max_pool2d 3x3 stride 2
padding 1 on the same input; softmax, log_softmax and cross_entropy (mean over the rows,
integer labels) over the last axis of (4096, 1000); layer_norm over
the last axis of (32, 128, 768) with weight and bias; GELU and its gradient on a transformer
MLP's (16, 64, 512); the sums of a bias gradient (axis 0 of (2048, 256)) and of a 2x
upsampling's gradient (axes 3 and 5 of (8, 32, 32, 2, 32, 2)), and that upsampling itself
(broadcast, then reshape); then elementwise rows on (2048, 256) float32: SiLU, erf, leaky
ReLU, hard swish, x ** 3, where with a random mask, and x.T * 2 (an op on a transposed
input, whose result the runtime keeps C-ordered). Every contender runs each case in
the same process, interleaved over several rounds; the table shows the best round in
milliseconds (imperative end to end: dispatch, kernel and a final sync), and the JSON
holds the times and the ratios. Each result is checked against PyTorch's first.
"""
import argparse
import os
import sys

import _harness

_harness.one_blas_thread()      # before numpy loads OpenBLAS

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

# the checkout this file lives in (not whichever imperative is installed); IMPERATIVE_ROOT
# measures another build (a before/after comparison)
sys.path.insert(0, os.environ.get("IMPERATIVE_ROOT",
                                  os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import imperative as imp  # noqa: E402
from imperative.ops.elemwise import ActivationGrad  # noqa: E402

F = imp.functional
torch = _harness.import_torch()
TF = torch.nn.functional if torch is not None else None


# ---------------------------------------------------------------------------------------
# numpy by hand: what a user would write in a few lines, without our chunking


def np_conv2d(x, w, padding):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))          # n c ho wo kh kw
    ho, wo = win.shape[2:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * kh * kw)
    return (cols @ w.reshape(o, -1).T).reshape(n, ho, wo, o).transpose(0, 3, 1, 2)


def np_max_pool2d(x, k, s, p):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    return sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s].max(axis=(4, 5))


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_log_softmax(x):
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def np_cross_entropy(x, labels):
    return -np_log_softmax(x)[np.arange(len(labels)), labels].mean()


def np_layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


# ---------------------------------------------------------------------------------------
# Cases: inputs, then one callable per contender returning a numpy array


def np_normal_cdf(x):
    return 0.5 * (1 + np_erf(x / np.sqrt(np.float32(2))))


def np_gelu(x):
    return x * np_normal_cdf(x)


def np_gelu_grad(dy, x):
    return dy * (np_normal_cdf(x) + x * np.exp(-0.5 * x * x) / np.sqrt(np.float32(2 * np.pi)))


def np_erf(z):
    # Abramowitz and Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf
    a = np.abs(z)
    t = 1 / (1 + np.float32(0.3275911) * a)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    return np.sign(z) * (1 - poly * np.exp(-a * a))


def make_cases(quick):
    rng = np.random.default_rng(0)
    batch = 4 if quick else 32
    image = rng.standard_normal((batch, 64, 56, 56), dtype=np.float32)
    filters = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05
    logits = rng.standard_normal((512 if quick else 4096, 1000), dtype=np.float32)
    tokens = rng.standard_normal((batch, 128, 768), dtype=np.float32)
    gamma = rng.standard_normal(768, dtype=np.float32)
    beta = rng.standard_normal(768, dtype=np.float32)
    table = rng.standard_normal((4096, 256), dtype=np.float32)
    rows = rng.integers(0, 4096, size=1024)
    classes = rng.integers(0, logits.shape[1], size=logits.shape[0])
    hidden = rng.standard_normal((batch // 2, 64, 512), dtype=np.float32)   # a transformer's MLP
    grad_hidden = rng.standard_normal(hidden.shape, dtype=np.float32)
    activations = rng.standard_normal((2048, 256), dtype=np.float32)      # a bias gradient's
    pixels = rng.standard_normal((batch // 4, 32, 32, 32), dtype=np.float32)
    pairs = rng.standard_normal((batch // 4, 32, 32, 2, 32, 2), dtype=np.float32)
    gates = rng.standard_normal((2048, 256), dtype=np.float32)   # an LSTM step's four gates
    T = imp.Tensor
    ti, tf, tl, tt, tg, tb = (T(a) for a in (image, filters, logits, tokens, gamma, beta))
    t_table, t_rows, t_classes = T(table), T(rows), T(classes)
    th, tdh, tact, tpix, tpairs = (T(a) for a in (hidden, grad_hidden, activations, pixels,
                                                  pairs))
    gate = F.split(T(gates), 4, axis=1)[1]          # a strided view, as F.split makes it
    gelu_grad = ActivationGrad("GELU")
    up_shape = pairs.shape
    up_out = (up_shape[0], 32, 64, 64)

    def imp_setitem():
        x = T(t_table)            # shares the value; setitem rebinds x only
        x[t_rows, 1:9] = 0.5
        return x

    def np_setitem():
        x = table.copy()          # the tensor keeps its old value: a copy is the fair match
        x[rows, 1:9] = 0.5
        return x

    cases = {
        f"conv2d {image.shape} 64x3x3 p1": {
            "imperative": lambda: F.conv2d(ti, tf, padding=1),
            "numpy": lambda: np_conv2d(image, filters, 1),
        },
        f"max_pool2d {image.shape} k3 s2 p1": {
            "imperative": lambda: F.max_pool2d(ti, 3, 2, 1),
            "numpy": lambda: np_max_pool2d(image, 3, 2, 1),
        },
        f"softmax {logits.shape}": {
            "imperative": lambda: F.softmax(tl, -1),
            "numpy": lambda: np_softmax(logits),
        },
        f"log_softmax {logits.shape}": {
            "imperative": lambda: F.log_softmax(tl, -1),
            "numpy": lambda: np_log_softmax(logits),
        },
        f"cross_entropy {logits.shape}": {
            "imperative": lambda: F.cross_entropy(tl, t_classes),
            "numpy": lambda: np_cross_entropy(logits, classes),
        },
        f"layer_norm {tokens.shape}": {
            "imperative": lambda: F.layer_norm(tt, (768,), tg, tb),
            "numpy": lambda: np_layer_norm(tokens, gamma, beta),
        },
        f"getitem {table.shape}[rows(1024), 1:9]": {
            "imperative": lambda: t_table[t_rows, 1:9],
            "numpy": lambda: table[rows, 1:9],
        },
        f"setitem {table.shape}[rows(1024), 1:9] = 0.5": {
            "imperative": imp_setitem,
            "numpy": np_setitem,
        },
        f"gelu {hidden.shape}": {
            "imperative": lambda: F.gelu(th),
            "numpy": lambda: np_gelu(hidden),
        },
        f"gelu backward {hidden.shape}": {
            "imperative": lambda: imp.apply(gelu_grad, tdh, th)[0],
            "numpy": lambda: np_gelu_grad(grad_hidden, hidden),
        },
        f"sum {activations.shape} over axis 0 (a bias gradient)": {
            "imperative": lambda: F.sum(tact, axis=0),
            "numpy": lambda: activations.sum(axis=0),
        },
        f"sum {pairs.shape} over axes 3, 5 (an upsampling's gradient)": {
            "imperative": lambda: F.sum(tpairs, axis=(3, 5)),
            "numpy": lambda: pairs.sum(axis=(3, 5)),
        },
        f"add {activations.shape} + itself (past host compute: the worker's hand-off)": {
            "imperative": lambda: tact + tact,
            "numpy": lambda: activations + activations,
        },
        f"upsample {pixels.shape} x2 (broadcast, reshape)": {
            "imperative": lambda: F.broadcast_to(tpix[:, :, :, None, :, None],
                                                 up_shape).reshape(up_out),
            "numpy": lambda: np.broadcast_to(pixels[:, :, :, None, :, None],
                                             up_shape).reshape(up_out),
        },
        f"sigmoid of an LSTM gate: {gates.shape}[:, 64:128] (strided)": {
            "imperative": lambda: F.sigmoid(gate),
            "numpy": lambda: 1 / (1 + np.exp(-gates[:, 64:128])),
        },
    }
    if torch is not None:
        pi, pf, pl, pt, pg, pb, ptab = (
            torch.from_numpy(a.copy())
            for a in (image, filters, logits, tokens, gamma, beta, table))
        prows, pclasses = torch.from_numpy(rows), torch.from_numpy(classes)
        ph, pdh, pact, ppix, ppairs, pgates = (torch.from_numpy(a.copy()) for a in (
            hidden, grad_hidden, activations, pixels, pairs, gates))

        def torch_setitem():
            x = ptab.clone()
            x[prows, 1:9] = 0.5
            return x

        torch_fns = [lambda: TF.conv2d(pi, pf, padding=1), lambda: TF.max_pool2d(pi, 3, 2, 1),
                     lambda: torch.softmax(pl, -1), lambda: torch.log_softmax(pl, -1),
                     lambda: TF.cross_entropy(pl, pclasses),
                     lambda: TF.layer_norm(pt, (768,), pg, pb),
                     lambda: ptab[prows, 1:9], torch_setitem,
                     lambda: TF.gelu(ph), lambda: torch.ops.aten.gelu_backward(pdh, ph),
                     lambda: pact.sum(0), lambda: ppairs.sum((3, 5)), lambda: pact + pact,
                     lambda: ppix[:, :, :, None, :, None].expand(up_shape).reshape(up_out),
                     lambda: torch.sigmoid(pgates[:, 64:128])]
        for case, fn in zip(cases.values(), torch_fns):
            case["torch"] = fn
    cases.update(elementwise_cases(rng))
    return cases


def elementwise_cases(rng):
    """Elementwise rows on (2048, 256) float32: imperative, numpy written by hand (x * x * x
    for a cube: numpy's own power takes 60 ns a negative value) and PyTorch."""
    x = rng.standard_normal((2048, 256), dtype=np.float32)
    y = rng.standard_normal(x.shape, dtype=np.float32)
    mask = rng.random(x.shape) < 0.5
    tx, ty, tm = imp.Tensor(x), imp.Tensor(y), imp.Tensor(mask)
    rows = {
        "silu": (lambda: F.silu(tx), lambda: x / (1 + np.exp(-x)),
                 lambda px, py, pm: TF.silu(px)),
        "erf": (lambda: F.erf(tx), lambda: np_erf(x), lambda px, py, pm: torch.erf(px)),
        "leaky_relu": (lambda: F.leaky_relu(tx, 0.01),
                       lambda: np.where(x >= 0, x, np.float32(0.01) * x),
                       lambda px, py, pm: TF.leaky_relu(px, 0.01)),
        "hardswish": (lambda: F.hardswish(tx), lambda: x * np.clip(x + 3, 0, 6) / 6,
                      lambda px, py, pm: TF.hardswish(px)),
        "x ** 3": (lambda: tx ** 3, lambda: x * x * x, lambda px, py, pm: px ** 3),
        "where(mask, x, y)": (lambda: F.where(tm, tx, ty), lambda: np.where(mask, x, y),
                              lambda px, py, pm: torch.where(pm, px, py)),
        "x.T * 2 (transposed input)": (lambda: tx.T * 2.0, lambda: x.T * np.float32(2),
                                       lambda px, py, pm: px.T * 2.0),
    }
    torch_args = (() if torch is None else
                  tuple(torch.from_numpy(a.copy()) for a in (x, y, mask)))
    cases = {}
    for name, (ours, by_hand, theirs) in rows.items():
        case = {"imperative": ours, "numpy": by_hand}
        if torch is not None:
            case["torch"] = lambda theirs=theirs: theirs(*torch_args)
        cases[f"{name} {x.shape}"] = case
    return cases


def as_numpy(result):
    if isinstance(result, imp.Tensor):
        return result.numpy()
    if torch is not None and isinstance(result, torch.Tensor):
        return result.numpy()
    return np.asarray(result)


def check(cases):
    """Every contender agrees with the first (imperative) before anything is timed."""
    for name, fns in cases.items():
        results = {who: as_numpy(fn()) for who, fn in fns.items()}
        ref = results["imperative"]
        for who, value in results.items():
            np.testing.assert_allclose(value, ref, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name}: {who} disagrees with imperative")


def timed(who, fn):
    """One timing of `fn`: seconds for a call, imperative's with a final sync (the op may
    still run on the worker)."""
    finish = imp.sync if who == "imperative" else None
    return lambda: _harness.seconds(fn, finish)


def run(cases, rounds):
    """{case: {contender: best seconds}}; every (case, contender) runs once per round."""
    contenders = {(name, who): timed(who, fn) for name, fns in cases.items()
                  for who, fn in fns.items()}
    times = _harness.interleaved(contenders, rounds)
    best = {name: {} for name in cases}
    for (name, who), samples in times.items():
        best[name][who] = _harness.best(samples)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller batches, 2 rounds (smoke run)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5)")
    parser.add_argument("--json", default="bench_ops.json", help="where to write the results")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 5)

    cases = make_cases(args.quick)
    check(cases)
    best = run(cases, rounds)

    print(f"milliseconds, best of {rounds} interleaved rounds, 1 thread; numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else 'not installed'}")
    ratios, rows = {}, {}
    for case, row in best.items():
        ratios[case] = {"imperative_over_numpy": row["imperative"] / row["numpy"]}
        if torch is not None:
            ratios[case]["imperative_over_torch"] = row["imperative"] / row["torch"]
        rows[case] = {**{who: t * 1e3 for who, t in row.items()},
                      "imp/numpy": ratios[case]["imperative_over_numpy"],
                      "imp/torch": ratios[case].get("imperative_over_torch")}
    names = ["imperative", "numpy"] + (["torch"] if torch is not None else [])
    _harness.print_table(rows, dict.fromkeys([*names, "imp/numpy", "imp/torch"], ".2f"))
    _harness.print_ratios(ratios)

    conv = next(c for c in best if c.startswith("conv2d"))
    targets = {"conv2d imperative_over_torch": 2.0}
    _harness.check_targets({"conv2d imperative_over_torch":
                            ratios[conv].get("imperative_over_torch")}, targets)
    _harness.write_json(args.json, {
        "ms": {c: {k: v * 1e3 for k, v in row.items()} for c, row in best.items()},
        "ratios": ratios, "rounds": rounds, "quick": args.quick, "targets": targets,
        "numpy": np.__version__, "torch": torch.__version__ if torch else None})


if __name__ == "__main__":
    sys.exit(main())
