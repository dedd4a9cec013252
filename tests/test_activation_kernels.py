"""SiLU, hard swish, hard sigmoid, leaky ReLU and erf in one native float32 pass each, and
`x ** 2`, `x ** 3`, `x ** 4` as products: the same values as before (the hard activations
and leaky ReLU bit for bit numpy's formulas, SiLU within float32 round-off of float64 and
PyTorch), on every length (the last n % 8 values take a part vector), at the edges
(signed zeros, infinities, NaNs), on strided inputs, on the caller's thread and the
worker's alike."""
import math

import numpy as np
import pytest

import imperative as imp
from imperative import F
from imperative.autodiff import GradManager
from imperative.backend import native

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 3.0, -3.0, 6.0, -88.0, 88.0,
                  1e-30, -1e-30], np.float32)
LENGTHS = [1, 7, 8, 9, 17, 1000]


@pytest.fixture(params=["native", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(native, "_MODE", "always" if request.param == "native" else "never")
    return request.param


def values(n, scale=5.0):
    x = (np.random.default_rng(n).standard_normal(n) * scale).astype(np.float32)
    x[-min(n, EDGES.size):] = EDGES[:min(n, EDGES.size)]
    return x


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.int32), want.view(np.int32)), (got, want)


def _hardswish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def _hardsigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


def _leaky(x, slope=0.01):
    return np.where(x >= 0, x, x * np.float32(slope))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("fn, formula", [(F.hardswish, _hardswish),
                                         (F.hardsigmoid, _hardsigmoid),
                                         (lambda t: F.leaky_relu(t, 0.2),
                                          lambda x: _leaky(x, 0.2)),
                                         (F.leaky_relu, _leaky)])
def test_exact_activations_are_numpys_formulas_bit_for_bit(kernels, n, fn, formula):
    x = values(n)
    with np.errstate(invalid="ignore"):
        want = formula(x)
    same_bits(fn(imp.Tensor(x)).numpy(), want)
    # a transposed input: the same bits as its contiguous copy
    m = np.stack([x, -x])
    with np.errstate(invalid="ignore"):
        same_bits(fn(imp.Tensor(m).T).numpy(), formula(m.T))


def _silu64(x):
    return x / (1 + np.exp(-x))


def _silu_grad64(x):
    s = 1 / (1 + np.exp(-x))
    return s * (1 + x * (1 - s))


@pytest.mark.parametrize("n", LENGTHS)
def test_silu_and_its_gradient_match_float64(kernels, n):
    x = values(n)
    finite = np.isfinite(x)
    dy = np.random.default_rng(n + 1).standard_normal(n).astype(np.float32)
    xt = imp.Tensor(x)
    gm = GradManager().attach([xt])
    with gm:
        y = F.silu(xt)
        gm.backward((y * imp.Tensor(dy)).sum())
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        want, want_grad = _silu64(x64), dy * _silu_grad64(x64)
    got = y.numpy()
    # (atol: sigmoid's exp flushes values under 1e-38, so silu(-88) is -0, not -5e-37)
    np.testing.assert_allclose(got[finite], want[finite], rtol=3e-6, atol=1e-30)
    np.testing.assert_allclose(xt.grad.numpy()[finite], want_grad[finite], rtol=2e-5,
                               atol=1e-6)
    # as PyTorch: NaN in, NaN out; silu(inf) = inf, silu(-inf) = -inf * 0, a NaN
    assert np.isnan(got[np.isnan(x) | (x == -np.inf)]).all()
    assert (got[x == np.inf] == np.inf).all()


def test_silu_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = values(1000)
    dy = np.random.default_rng(9).standard_normal(x.size).astype(np.float32)
    xt = imp.Tensor(x)
    gm = GradManager().attach([xt])
    with gm:
        y = F.silu(xt)
        gm.backward((y * imp.Tensor(dy)).sum())
    t = torch.from_numpy(x).requires_grad_()
    yt = torch.nn.functional.silu(t)
    (yt * torch.from_numpy(dy)).sum().backward()
    finite = np.isfinite(x)
    np.testing.assert_allclose(y.numpy()[finite], yt.detach().numpy()[finite], rtol=2e-6,
                               atol=1e-30)
    np.testing.assert_allclose(xt.grad.numpy()[finite], t.grad.numpy()[finite], rtol=2e-5,
                               atol=1e-6)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 200_001])
def test_erf_is_within_2_ulp(kernels, n):
    """Both expansions, the switch between them at |x| = 1, the tails out to where erf
    rounds to 1, and the last n % 32 values (a zero-padded block)."""
    x = np.linspace(-10, 10, n).astype(np.float32) if n > 1 else np.float32([0.5])
    x = np.concatenate([x, np.float32([1.0, -1.0, 0.99999994, -0.99999994, 1e-30, -1e-30])])
    got = F.erf(imp.Tensor(x)).numpy()
    want = np.array([math.erf(float(v)) for v in x])
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - want) <= 2 * ulp).all()
    edges = F.erf(imp.Tensor(np.float32([0.0, -0.0, np.inf, -np.inf, np.nan]))).numpy()
    assert edges[:4].tolist() == [0.0, 0.0, 1.0, -1.0] and np.isnan(edges[4])
    assert np.signbit(edges[:4]).tolist() == [False, True, False, True]


@pytest.mark.parametrize("fn", [F.silu, F.hardswish, F.hardsigmoid, F.leaky_relu, F.erf])
def test_caller_and_worker_give_the_same_bits(fn):
    x = imp.Tensor(values(240).reshape(6, 40))
    with imp.option("async_level", 2):
        here = fn(x).numpy()
        with imp.option("enable_host_compute", 0):
            there = fn(x).numpy()
    same_bits(here, there)


@pytest.mark.parametrize("exponent", [2, 3, 4, 2.0, 3.0, 4.0])
def test_small_integer_powers_are_products(exponent):
    dtype = np.float32
    x = values(1000)
    with np.errstate(all="ignore"):
        square = x * x
        want = {2: square, 3: square * x, 4: square * square}[int(exponent)]
        exact = np.power(x.astype(np.longdouble), int(exponent))
    for got in ((imp.Tensor(x) ** exponent).numpy(), F.pow(imp.Tensor(x), exponent).numpy()):
        assert got.dtype == dtype
        assert np.array_equal(got, want, equal_nan=True)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    # within 2 ulp of the power itself where it is a normal number
    normal = np.isfinite(exact) & (np.abs(exact) > np.finfo(dtype).tiny) & (
        np.abs(exact) < np.finfo(dtype).max)
    ulp = np.spacing(np.abs(want[normal]))
    assert (np.abs(want[normal] - exact[normal]) <= 2 * ulp).all()


@pytest.mark.parametrize("x, exponent", [(np.array([-2, 3], np.int32), 3),
                                         (np.array([-1.5, 2.25], np.float16), 3),
                                         (np.array([-1.5, 2.25], np.float32), 5),
                                         (np.array([-1.5, 2.25], np.float32), 2.5),
                                         (np.array([-1.5, 2.25], np.float32), True)])
def test_other_powers_stay_numpys(x, exponent):
    with np.errstate(invalid="ignore"):
        want = np.power(x, np.asarray(exponent, x.dtype) if x.dtype.kind == "f" else exponent)
    got = (imp.Tensor(x) ** exponent).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)


def test_gradient_of_a_cube_and_a_fourth_power():
    x = values(100)[:-13].astype(np.float32) / 4           # finite values
    xt = imp.Tensor(x)
    gm = GradManager().attach([xt])
    with gm:
        gm.backward((xt ** 3 + F.pow(xt, 4)).sum())
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(xt.grad.numpy(), 3 * x64 ** 2 + 4 * x64 ** 3, rtol=1e-6,
                               atol=1e-6)
    assert math.isfinite(float(xt.grad.numpy().sum()))
