"""Products of views that numpy's matmul would not hand to BLAS: a broadcast or flipped
vector, a matrix with broadcast rows or columns, or every other column. numpy sums such a
product term by term, in order, so that a (4800,) broadcast vector's dot with another was
off by 1.5e-5 relative, and at 100,000 terms by 9e-4, where the same values in buffers of
their own were within 1e-7 (tools/fuzz_torch.py --seed 5901 found it as a second-order
gradient 3.4e-5 from PyTorch's float64 one, through the gradient of a broadcast operand).
Such an operand is copied first (_records.pxi: _blas_ready): the product of the views
is as close as the product of the same values in buffers."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.autodiff import GradManager

# views made inside imperative, as a program makes them; each of a `shape`d value
VIEWS = {
    "broadcast": lambda a: F.broadcast_to(imp.Tensor(a[(slice(0, 1),) * a.ndim]), a.shape),
    "flipped": lambda a: imp.Tensor(np.ascontiguousarray(a[::-1]))[::-1],
    "broadcast rows": lambda a: F.broadcast_to(imp.Tensor(a[..., :1, :]), a.shape),
    "broadcast columns": lambda a: F.broadcast_to(imp.Tensor(a[..., :1]), a.shape),
    "every other column": lambda a: imp.Tensor(np.repeat(a, 2, axis=-1))[..., ::2],
}
VECTOR_VIEWS = ("broadcast", "flipped")


def test_a_dot_of_broadcast_vectors_is_summed_as_one_of_buffers():
    n = 100_000
    x = F.broadcast_to(imp.Tensor(np.array([1.8204], np.float32)), (n,))
    y = F.broadcast_to(imp.Tensor(np.array([-1.0003], np.float32)), (n,))
    exact = n * float(np.float32(1.8204)) * float(np.float32(-1.0003))
    got = float(F.matmul(x, y).numpy())
    assert got == float(F.matmul(imp.Tensor(x.numpy()), imp.Tensor(y.numpy())).numpy())
    assert abs(got - exact) <= 1e-5 * abs(exact), (got, exact)     # (term by term: 9e-4)


@st.composite
def _products(draw):
    """(shape of a, shape of b, view of a or None, view of b or None): at least one a
    view numpy would not hand to BLAS; sizes from a few terms to past the native
    kernel's threshold."""
    k = draw(st.sampled_from([1, 7, 300, 3000]))
    a_shape = draw(st.sampled_from([(k,), (5, k), (2, 3, k), (70, k)]))
    b_shape = draw(st.sampled_from([(k,), (k, 4), (k, 90)]))

    def view(shape):
        names = VECTOR_VIEWS if len(shape) == 1 else tuple(VIEWS)
        return draw(st.none() | st.sampled_from(names))

    a_view, b_view = view(a_shape), view(b_shape)
    if a_view is None and b_view is None:
        b_view = "broadcast"
    return a_shape, b_shape, a_view, b_view


def _operand(shape, view, rng):
    values = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    return imp.Tensor(values) if view is None else VIEWS[view](values)


def _relative_error(got, exact):
    return float(np.max(np.abs(got - exact)) / np.max(np.abs(exact)))


@settings(max_examples=60, deadline=None)
@given(_products(), st.integers(0, 2 ** 31))
def test_a_product_of_views_is_as_close_as_the_product_of_buffers(case, seed):
    """Against float64, within 4x the error of the same values in buffers of their own,
    in imperative or in numpy (whose BLAS takes a batch broadcast from one matrix one
    small product at a time, where imperative's buffers are one product on the native
    kernel, which rounds otherwise)."""
    a_shape, b_shape, a_view, b_view = case
    rng = np.random.default_rng(seed)
    a, b = _operand(a_shape, a_view, rng), _operand(b_shape, b_view, rng)
    a_values, b_values = a.numpy(), b.numpy()
    exact = np.matmul(a_values.astype(np.float64), b_values.astype(np.float64))
    got = F.matmul(a, b).numpy()
    in_buffers = max(
        _relative_error(F.matmul(imp.Tensor(a_values), imp.Tensor(b_values)).numpy(), exact),
        _relative_error(np.matmul(np.ascontiguousarray(a_values),
                                  np.ascontiguousarray(b_values)), exact))
    assert _relative_error(got, exact) <= 4 * in_buffers + 2e-7, case


def test_the_gradient_of_a_broadcast_operand_matches_float64():
    """The fuzzer's program: (x @ y + c) * d of two broadcast (4800,) vectors, its
    first-order gradients taken with a graph and then differentiated again."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    bases = [rng.uniform(-2, 2, shape).astype(np.float32) for shape in ((1,), (1,), (), ())]
    directions = [rng.uniform(-2, 2, b.shape).astype(np.float32) for b in bases]

    params = [imp.Parameter(b) for b in bases]
    outer, inner = GradManager().attach(params), GradManager().attach(params)
    with outer:
        with inner:
            x, y = (F.broadcast_to(p, (4800,)) for p in params[:2])
            inner.backward((F.matmul(x, y) + params[2]) * params[3])
        grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        outer.backward(sum(F.sum(g * imp.Tensor(v)) for g, v in zip(grads, directions)))
    got = [p.grad.numpy() for p in params]

    t = [torch.tensor(b, dtype=torch.float64, requires_grad=True) for b in bases]
    y = (t[0].expand(4800) @ t[1].expand(4800) + t[2]) * t[3]
    g = torch.autograd.grad(y, t, create_graph=True)
    want = torch.autograd.grad(sum((gi * torch.tensor(v, dtype=torch.float64)).sum()
                                   for gi, v in zip(g, directions)), t)
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-5)      # (summed term by
                                                                           # term: 3.4e-5)
