"""A float32 max pooling's gradient in one native pass (ops/pool.py:MaxPoolGrad,
_windows.c): the bits of the composite rule it replaces (autodiff/rules_nn.py), for random
shapes, windows, strides and paddings, ties, NaN and infinite inputs and gradients; the
same as PyTorch's where the window maxima are unique; the composite where a higher-order
gradient records, or for other dtypes. And the forward 2x2 stride-2 pooling's native loop:
the values of the numpy loop it replaces."""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.autodiff import GradManager
from imperative.backend import native
from imperative.ops import pool

pytestmark = pytest.mark.skipif(native.max_pool_grad is None, reason="no native extension")


def input_gradient(x, dy, window, stride, padding, one_pass):
    """(x's gradient through F.max_pool2d against upstream dy, MaxPoolGrad runs)."""
    runs = []
    real = native.max_pool_grad

    def counted(*args):
        runs.append(1)
        return real(*args)
    native.max_pool_grad = counted if one_pass else None
    try:
        t = imp.Tensor(x)
        gm = GradManager().attach([t])
        with gm:
            y = F.max_pool2d(t, window, stride, padding)
            gm.backward(y, imp.Tensor(dy))
        return t.grad.numpy(), len(runs)
    finally:
        native.max_pool_grad = real


def out_hw(h, w, k, s, p):
    return (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1


@settings(max_examples=120, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 3), h=st.integers(1, 11), w=st.integers(1, 11),
       k=st.integers(1, 4), s=st.integers(1, 3), p=st.integers(0, 2),
       values=st.sampled_from(["ties", "normal", "specials"]), seed=st.integers(0, 2**16))
def test_one_pass_gives_the_composite_rules_bits(n, c, h, w, k, s, p, values, seed):
    assume(2 * p <= k and h + 2 * p >= k and w + 2 * p >= k)
    rng = np.random.default_rng(seed)
    x = (rng.integers(-2, 2, (n, c, h, w)) if values == "ties"
         else rng.standard_normal((n, c, h, w))).astype(np.float32)
    dy = rng.standard_normal((n, c) + out_hw(h, w, k, s, p)).astype(np.float32)
    if values == "specials":
        x.flat[rng.integers(x.size, size=2)] = [np.nan, -np.inf]
        dy.flat[rng.integers(dy.size, size=2)] = [np.inf, np.nan]
    with np.errstate(invalid="ignore"):
        fast, runs = input_gradient(x, dy, k, s, p, True)
        slow, none = input_gradient(x, dy, k, s, p, False)
    assert (runs, none) == (1, 0)
    assert fast.dtype == np.float32
    # the same bits, NaNs where the rule has NaNs (which NaN, by sign, is the CPU's choice)
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(slow))
    numbers = ~np.isnan(slow)
    assert fast[numbers].tobytes() == slow[numbers].tobytes()


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 2, 1), (3, 1, 1), ((2, 3), (1, 2), (1, 1))])
def test_one_pass_matches_pytorch(k, s, p):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.permutation(2 * 3 * 9 * 8).reshape(2, 3, 9, 8).astype(np.float32)  # no ties
    t = torch.from_numpy(x.copy()).requires_grad_()
    y = torch.nn.functional.max_pool2d(t, k, s, p)
    dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(torch.from_numpy(dy))
    ours, runs = input_gradient(x, dy, k, s, p, True)
    assert runs == 1
    # (overlapping windows add into one input in another order than PyTorch's: an ulp)
    np.testing.assert_allclose(ours, t.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_higher_order_and_other_dtypes_keep_the_composite():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float16)
    dy = rng.standard_normal((1, 2, 2, 2)).astype(np.float16)
    halves, runs = input_gradient(x, dy, 2, 2, 0, True)
    assert runs == 0 and halves.dtype == np.float16
    singles, runs = input_gradient(x.astype(np.float32), dy.astype(np.float32), 2, 2, 0, True)
    assert runs == 1
    np.testing.assert_array_equal(singles, halves.astype(np.float32))
    # a recording outer GradManager (a gradient of the gradient): the differentiable rule
    t = imp.Tensor(x.astype(np.float32))
    outer, inner = GradManager().attach([t]), GradManager().attach([t])
    with outer:
        with inner:
            y = F.max_pool2d(t, 2)
            inner.backward((y * y).sum())
        first = t.grad
        outer.backward((first * first).sum())
    assert t.grad is not None


def test_op_checks_its_inputs():
    x = imp.Tensor(np.zeros((1, 1, 4, 4), np.float32))
    op = pool.MaxPoolGrad((2, 2), (2, 2), (0, 0))
    with pytest.raises(ValueError, match="must match"):
        imp.apply(op, x, imp.Tensor(np.zeros((1, 1, 2, 2), np.float32)),
                  imp.Tensor(np.zeros((1, 1, 3, 2), np.float32)))
    with pytest.raises(TypeError, match="float32 inputs only"):
        half = imp.Tensor(np.zeros((1, 1, 2, 2), np.float16))
        imp.apply(op, x, half, half)


@pytest.mark.parametrize("shape", [(2, 3, 6, 40), (1, 2, 34, 35), (3, 1, 4, 16)])
@pytest.mark.parametrize("values", ["ties", "specials"])
def test_two_by_two_windows_in_eights_give_the_rules_bits(shape, values):
    """The 2x2 stride-2 loop takes eight windows at a time, then one by one."""
    rng = np.random.default_rng(sum(shape))
    x = rng.integers(-2, 2, shape).astype(np.float32)
    dy = rng.standard_normal(shape[:2] + (shape[2] // 2, shape[3] // 2)).astype(np.float32)
    if values == "specials":
        x.flat[rng.integers(x.size, size=6)] = [np.nan, -np.inf, np.inf, -0.0, np.nan, 0.0]
        dy.flat[rng.integers(dy.size, size=3)] = [np.inf, np.nan, -0.0]
    with np.errstate(invalid="ignore"):
        fast, runs = input_gradient(x, dy, 2, 2, 0, True)
        slow, _ = input_gradient(x, dy, 2, 2, 0, False)
    assert runs == 1
    np.testing.assert_array_equal(np.isnan(fast), np.isnan(slow))
    numbers = ~np.isnan(slow)
    assert fast[numbers].tobytes() == slow[numbers].tobytes()


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 3), c=st.integers(1, 3), h=st.integers(2, 21), w=st.integers(2, 41),
       specials=st.booleans(), seed=st.integers(0, 2**16))
def test_forward_2x2_loop_gives_the_numpy_loops_values(n, c, h, w, specials, seed):
    """(numpy's own vector loop may pick the other sign of a zero maximum; the values, NaNs
    included, are the same, and every path runs the one kernel)"""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, (n, c, h, w)).astype(np.float32)
    if specials:
        x.flat[rng.integers(x.size, size=4)] = [np.nan, -0.0, np.inf, -np.inf]
    op = pool.Pooling("MAX", 2)
    native_out = op.kernel(x)
    real = native.max_pool_2x2
    native.max_pool_2x2 = None
    try:
        numpy_out = op.kernel(x)
    finally:
        native.max_pool_2x2 = real
    assert native_out.dtype == np.float32 and native_out.shape == numpy_out.shape
    np.testing.assert_array_equal(native_out, numpy_out)
    t = imp.Tensor(x)
    with imp.option("async_level", 2), imp.option("enable_host_compute", 0):
        np.testing.assert_array_equal(F.max_pool2d(t, 2).numpy(), native_out)
