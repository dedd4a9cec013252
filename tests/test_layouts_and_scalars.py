"""Inputs whose layout or rank used to break kernels (issue 19), against numpy references
computed here: non-contiguous inputs (transposed, Fortran-ordered, broadcast, advanced-
indexed), 0-d values that numpy turns into scalars, results that must not depend on the
async level, prod's gradient at zeros, and a boolean-mask assignment's value shape."""
import math

import numpy as np
import pytest

import imperative as imp
from imperative.ops.base import writable_view

F = imp.functional


def _np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _non_contiguous_views(rng):
    """(name, Tensor, the same values in numpy) for each layout a kernel may be handed."""
    base = rng.standard_normal((2, 3, 4)).astype(np.float32)
    rows = rng.standard_normal((6, 5)).astype(np.float32)
    return [
        ("transposed", imp.Tensor(base).T, base.T),
        ("fortran", imp.Tensor(np.asfortranarray(base)), base),
        ("broadcast", F.broadcast_to(imp.Tensor(rows[:1]), (3, 5)),
         np.broadcast_to(rows[:1], (3, 5))),
        ("advanced", imp.Tensor(rows)[[4, 0, 2]].T, rows[[4, 0, 2]].T),
        ("sliced", imp.Tensor(rows)[::2, 1:], rows[::2, 1:]),
    ]


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_family_on_non_contiguous_inputs(rng, axis):
    for name, t, x in _non_contiguous_views(rng):
        x64 = x.astype(np.float64)
        expected = _np_log_softmax(x64, axis)
        np.testing.assert_allclose(F.log_softmax(t, axis).numpy(), expected, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
        np.testing.assert_allclose(F.softmax(t, axis).numpy(), np.exp(expected), rtol=1e-5,
                                   atol=1e-7, err_msg=name)


def test_cross_entropy_on_transposed_logits(rng):
    logits = rng.standard_normal((4, 3, 6)).astype(np.float32)
    labels = rng.integers(0, 4, size=(6, 3))
    got = F.cross_entropy(imp.Tensor(logits).T, imp.Tensor(labels), reduction="none").numpy()
    log_p = _np_log_softmax(logits.T.astype(np.float64), -1)
    expected = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_erf_on_strided_inputs_beyond_one():
    values = np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6)
    expected = np.vectorize(math.erf)(values.astype(np.float64))
    for t, ref in ((imp.Tensor(values).T, expected.T),
                   (imp.Tensor(values)[:, ::2], expected[:, ::2]),
                   (imp.Tensor(np.asfortranarray(values)), expected)):
        np.testing.assert_allclose(F.erf(t).numpy(), ref, rtol=1e-6, atol=1e-7)


def test_writable_view_refuses_a_reshape_that_copies():
    a = np.zeros((3, 4), np.float32)
    assert np.shares_memory(writable_view(a, -1), a)
    with pytest.raises(ValueError, match="without a copy"):
        writable_view(a.T, -1)


def _first_and_second_derivatives(fn, values):
    """fn' and fn'' of an elementwise fn at float32 `values` (any shape, 0-d included),
    through two nested GradManagers."""
    p = imp.Parameter(np.asarray(values, np.float32))
    outer = imp.autodiff.GradManager().attach([p])
    inner = imp.autodiff.GradManager().attach([p])
    with outer:
        with inner:
            inner.backward(fn(p).sum())
        first, p.grad = p.grad, None
        outer.backward(first.sum())
    return first.numpy(), p.grad.numpy()


def _first_and_second_derivative(fn, value):
    """fn'(x) and fn''(x) at a 0-d float32 x."""
    first, second = _first_and_second_derivatives(fn, value)
    return float(first), float(second)


@pytest.mark.parametrize("value", [0.3, -1.7])
def test_activation_derivatives_of_a_scalar(value):
    t = math.tanh(value)
    s = 1 / (1 + math.exp(-value))
    expected = {
        "tanh": (F.tanh, 1 - t * t, -2 * t * (1 - t * t)),
        "sigmoid": (F.sigmoid, s * (1 - s), s * (1 - s) * (1 - 2 * s)),
        "gelu": (F.gelu, 0.5 * (1 + math.erf(value / math.sqrt(2)))
                 + value * math.exp(-value * value / 2) / math.sqrt(2 * math.pi),
                 math.exp(-value * value / 2) / math.sqrt(2 * math.pi) * (2 - value * value)),
        "silu": (F.silu, s * (1 + value * (1 - s)), s * (1 - s) * (2 + value * (1 - 2 * s))),
        "cube": (lambda p: p ** 3, 3 * value * value, 6 * value),
    }
    for name, (fn, d1, d2) in expected.items():
        got = _first_and_second_derivative(fn, value)
        np.testing.assert_allclose(got, (d1, d2), rtol=2e-5, atol=1e-6, err_msg=name)


def test_gelu_tanh_second_derivative_of_a_scalar():
    torch = pytest.importorskip("torch",
                                reason="the tanh-approximate GELU's reference is PyTorch's")
    x = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    (d1,) = torch.autograd.grad(torch.nn.functional.gelu(x, approximate="tanh"), x,
                                create_graph=True)
    (d2,) = torch.autograd.grad(d1, x)
    got = _first_and_second_derivative(lambda p: F.gelu(p, approximate="tanh"), 0.8)
    np.testing.assert_allclose(got, (d1.item(), d2.item()), rtol=1e-5)


def _gelu_tanh_derivatives_float64(x):
    """The tanh-approximate GELU's first and second derivatives in float64, with
    1 - tanh^2 u as 1 / cosh^2 u (no cancellation in the tails)."""
    c, a = math.sqrt(2 / math.pi), 0.044715
    u = c * (x + a * x ** 3)
    du, ddu = c * (1 + 3 * a * x * x), 6 * c * a * x
    t, sech2 = np.tanh(u), 1 / np.cosh(u) ** 2
    d1 = 0.5 * (1 + t) + 0.5 * x * sech2 * du
    d2 = sech2 * du - x * t * sech2 * du * du + 0.5 * x * sech2 * ddu
    return d1, d2


def test_gelu_tanh_derivatives_hold_in_the_tails():
    """As accurate as float32 allows out to |x| = 9 (1 + tanh u and 1 - tanh^2 u cancelled:
    the first derivative was 30% off at x = -5, the second in both tails)."""
    xs = np.linspace(-9, 9, 73).astype(np.float32)
    first, second = _first_and_second_derivatives(lambda p: F.gelu(p, approximate="tanh"), xs)
    d1, d2 = _gelu_tanh_derivatives_float64(xs.astype(np.float64))
    np.testing.assert_allclose(first, d1, rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(second, d2, rtol=1e-5, atol=5e-7)


def test_vector_dot_vector_with_relu_on_the_worker():
    a, b = np.float32([1, -2, 3]), np.float32([1, 1, -1])
    with imp.option("enable_host_compute", 0):
        for sign in (1, -1, 1, -1):          # the epilogue runs from the second call on
            got = F.relu(F.matmul(imp.Tensor(sign * a), imp.Tensor(b))).numpy()
            assert got == np.maximum(np.matmul(sign * a, b), 0)


def _adam_steps_on_a_fortran_parameter(level):
    rs = np.random.RandomState(0)
    with imp.option("async_level", level):
        p = imp.Parameter(np.asfortranarray(rs.standard_normal((67, 33)).astype(np.float32)))
        x = imp.Tensor(rs.standard_normal((33, 65)).astype(np.float32))
        opt = imp.optim.Adam([p], lr=0.01)
        gm = imp.autodiff.GradManager().attach([p])
        seen = []
        for _ in range(3):
            with gm:
                gm.backward((F.matmul(p, x) ** 2).mean())
            opt.step()
            opt.clear_grad()
            seen += [p.numpy().copy(), p.sum(axis=0).numpy(), F.matmul(p, x).numpy()]
        return seen


def test_results_do_not_depend_on_the_async_level_for_a_fortran_parameter():
    for a, b in zip(_adam_steps_on_a_fortran_parameter(0), _adam_steps_on_a_fortran_parameter(2)):
        np.testing.assert_array_equal(a, b)


def _products_of_others(x):
    """prod's gradient and Hessian by their definitions: products over the other elements."""
    n = x.size
    grad = np.array([np.prod(np.delete(x, i)) for i in range(n)])
    hessian = np.array([[0.0 if i == j else np.prod(np.delete(x, [i, j])) for j in range(n)]
                        for i in range(n)])
    return grad, hessian


@pytest.mark.parametrize("values", [[2, 0, 3, 5], [0, 0, 3, 5], [0, 4, 0, 0], [1, 2, 3, 4],
                                    [0, 0, 0, 0]])
def test_prod_gradient_and_hessian_at_zeros(values):
    x = np.float32(values)
    weights = np.float32([1, 2, 3, 4])
    p = imp.Parameter(x)
    outer = imp.autodiff.GradManager().attach([p])
    inner = imp.autodiff.GradManager().attach([p])
    with outer:
        with inner:
            inner.backward(p.prod())
        grad, p.grad = p.grad, None
        outer.backward((grad * imp.Tensor(weights)).sum())
    expected_grad, hessian = _products_of_others(x.astype(np.float64))
    np.testing.assert_array_equal(grad.numpy(), expected_grad)
    np.testing.assert_array_equal(p.grad.numpy(), hessian @ weights)


def test_prod_gradient_along_an_axis_with_zeros():
    x = np.float32([[0, 2, 3], [4, 0, 0], [1, 2, 3]])
    p = imp.Parameter(x)
    gm = imp.autodiff.GradManager().attach([p])
    with gm:
        gm.backward(p.prod(axis=1).sum())
    expected = np.stack([_products_of_others(row.astype(np.float64))[0] for row in x])
    np.testing.assert_array_equal(p.grad.numpy(), expected)


def test_mask_assignment_checks_the_value_shape_at_the_call():
    t = imp.Tensor(np.zeros((3, 4), np.float32))
    mask = imp.Tensor(np.float32([[1, 0, 1, 0]] * 3) > 0)
    with pytest.raises(ValueError, match=r"from shape \(2, 3\) into shape \(N,\)"):
        t[mask] = imp.Tensor(np.ones((2, 3), np.float32))
    rows = imp.Tensor(np.bool_([True, False, True]))
    with pytest.raises(ValueError, match=r"into shape \(N, 4\)"):
        t[rows] = imp.Tensor(np.ones((2, 5), np.float32))


def test_mask_assignment_accepts_what_numpy_broadcasts():
    """Leading 1s of the value do not matter (numpy's mask assignment itself wants them
    gone: the reference is given the value without them)."""
    mask = np.float32([[1, 0, 1, 0]] * 3) > 0
    rows = np.bool_([True, False, True])
    six, four = np.arange(6, dtype=np.float32), np.arange(4, dtype=np.float32)
    for index, value, numpy_value in ((mask, six.reshape(1, 6), six),
                                      (rows, four.reshape(1, 1, 4), four),
                                      (rows, np.float32(7), np.float32(7))):
        t = imp.Tensor(np.zeros((3, 4), np.float32))
        t[imp.Tensor(index)] = imp.Tensor(value)
        expected = np.zeros((3, 4), np.float32)
        expected[index] = numpy_value
        np.testing.assert_array_equal(t.numpy(), expected)


def test_grad_is_none_until_a_gradient_lands():
    p = imp.Parameter(np.float32([1, 2]))
    assert p.grad is None and imp.Tensor(1.0).grad is None
    gm = imp.autodiff.GradManager().attach([p])
    with gm:
        gm.backward((p * p).sum())
    np.testing.assert_array_equal(p.grad.numpy(), np.float32([2, 4]))
    p.grad = None
    assert p.grad is None


@pytest.mark.parametrize("axis", [0, -1, (0,), None])
def test_reductions_of_a_scalar_take_its_one_axis(axis):
    """As PyTorch does (numpy rejects an axis on a 0-d array): the value itself."""
    x = np.float32(-2.5)
    for name in ("sum", "mean", "max", "min", "prod"):
        for keepdims in (False, True):
            got = getattr(F, name)(imp.Tensor(x), axis=axis, keepdims=keepdims).numpy()
            assert got.shape == () and got == getattr(np, name)(x), (name, keepdims)
    assert F.var(imp.Tensor(x), axis=axis).numpy() == 0
    with pytest.raises(IndexError, match="axis 1 is out of range"):
        F.sum(imp.Tensor(x), axis=1)
