"""A product keeps an operand for backward only where the other operand's gradient needs it
(registry `needed_by`): `h * 0.1`, a dropout's `h * mask`, `h / c` and a product with a
frozen matrix keep their constant side, never `h` (as PyTorch saves them). The gradients
stay those numpy's formulas give, whichever operands are tracked."""
import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import functional as F
from imperative.autodiff import GradManager


def f32(a):
    return np.asarray(a, dtype=np.float32)


CONSTANT_SIDE = {
    "times a scalar": (lambda h, c: h * 0.1, lambda hv, cv: np.full_like(hv, 0.1)),
    "times a mask": (lambda h, c: h * c, lambda hv, cv: cv),
    "over a constant": (lambda h, c: h / c, lambda hv, cv: 1 / cv),
    "by a frozen matrix": (lambda h, c: h @ c, lambda hv, cv: np.ones_like(hv) @ cv.T),
}


@pytest.mark.parametrize("name", sorted(CONSTANT_SIDE))
def test_the_tracked_side_of_a_product_with_a_constant_is_not_kept(name):
    fn, d_dh = CONSTANT_SIDE[name]
    rng = np.random.default_rng(0)
    w = imp.Parameter(f32(rng.standard_normal((8, 8))))
    c = imp.Tensor(f32(rng.uniform(0.5, 2.0, (8, 8))))
    gm = GradManager().attach(w)
    with gm:
        h = F.sin(w)                     # (sin keeps its input, not h)
        y = fn(h, c)
        h_ref = imp.TensorWeakRef(h)
        del h
        gc.collect()
        imp.sync()
        assert h_ref() is None, f"{name}: the product kept its tracked operand alive"
        gm.backward(y.sum())
    wv, cv = w.numpy(), c.numpy()
    np.testing.assert_allclose(w.grad.numpy(), np.cos(wv) * d_dh(np.sin(wv), cv),
                               rtol=1e-5, atol=1e-6)


def test_an_operand_tracked_only_after_the_product_gets_no_gradient_through_it():
    a, b = imp.Parameter(f32([1.0, 2.0])), imp.Parameter(f32([3.0, 4.0]))
    gm = GradManager().attach(a)
    with gm:
        y = a * b                        # (b untracked here: a is not kept for b)
        gm.attach(b)
        gm.backward(y.sum())
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 4.0])
    assert b.grad is None


OPS = {
    "mul": (lambda x, y: x * y, lambda xv, yv, g: (g * yv, g * xv)),
    "div": (lambda x, y: x / y, lambda xv, yv, g: (g / yv, -g * xv / yv ** 2)),
    "matmul": (lambda x, y: x @ y, lambda xv, yv, g: (g @ yv.T, xv.T @ g)),
}


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(op=st.sampled_from(sorted(OPS)), tracked=st.sampled_from([(1, 0), (0, 1), (1, 1)]),
       through_sin=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_product_gradients_whichever_operands_are_tracked(op, tracked, through_sin, seed):
    fn, grads = OPS[op]
    rng = np.random.default_rng(seed)
    values = [f32(rng.uniform(0.5, 2.0, (4, 4))) for _ in range(2)]
    leaves = [imp.Parameter(v) for v in values]
    gm = GradManager().attach([t for t, on in zip(leaves, tracked) if on])
    with gm:
        operands = [F.sin(t) if through_sin else t for t in leaves]
        gm.backward(fn(*operands).sum())
    inner = [np.sin(v) if through_sin else v for v in values]
    expected = grads(*inner, np.ones((4, 4), np.float32))
    for leaf, value, on, g in zip(leaves, values, tracked, expected):
        if not on:
            assert leaf.grad is None
            continue
        if through_sin:
            g = g * np.cos(value)
        np.testing.assert_allclose(leaf.grad.numpy(), g, rtol=2e-5, atol=1e-5)


def test_a_convolution_with_a_frozen_filter_keeps_not_its_input_and_gives_the_same_bits():
    rng = np.random.default_rng(1)
    xv = f32(rng.standard_normal((2, 3, 9, 9)))
    wv = f32(rng.standard_normal((4, 3, 3, 3)))

    def input_grad(track_filter):
        x, w = imp.Parameter(xv), imp.Parameter(wv)
        gm = GradManager().attach([x, w] if track_filter else [x])
        with gm:
            h = F.sin(x)
            y = F.conv2d(h, w, padding=1)
            h_ref = imp.TensorWeakRef(h)
            del h
            gc.collect()
            imp.sync()
            kept = h_ref() is not None
            gm.backward((y * y).sum())
        return kept, x.grad.numpy()

    kept_frozen, g_frozen = input_grad(track_filter=False)
    kept_trained, g_trained = input_grad(track_filter=True)
    assert not kept_frozen and kept_trained
    np.testing.assert_array_equal(g_frozen, g_trained)


@pytest.mark.parametrize("exponent_tracked", [False, True])
def test_a_power_keeps_not_its_output(exponent_tracked):
    rng = np.random.default_rng(2)
    w = imp.Parameter(f32(rng.uniform(0.5, 2.0, (8, 8))))
    e = imp.Parameter(f32([2.5]))
    gm = GradManager().attach([w, e] if exponent_tracked else [w])
    with gm:
        y = F.sin(w) ** e
        y_ref = imp.TensorWeakRef(y)
        loss = y.sum()
        del y
        gc.collect()
        imp.sync()
        assert y_ref() is None
        gm.backward(loss)
    h = np.sin(w.numpy())
    np.testing.assert_allclose(w.grad.numpy(), 2.5 * h ** 1.5 * np.cos(w.numpy()), rtol=2e-5)
    if exponent_tracked:
        np.testing.assert_allclose(e.grad.numpy(), [np.sum(h ** 2.5 * np.log(h))], rtol=2e-5)
    else:
        assert e.grad is None
