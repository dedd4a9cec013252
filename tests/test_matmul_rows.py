"""A batch of row blocks times one matrix (a Linear layer on (batch, tokens, features)): the
product runs as one 2-D product of all the rows (ops/matmul.py), with a following ReLU or
ReLU gradient done in its stores. Values and gradients against PyTorch in float64, for
random batch shapes, transposes and layouts, eagerly, under DTR and in a compiled replay."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.autodiff import GradManager
from imperative.jit import trace

from test_memory_regimes import _dtr_budget

torch = pytest.importorskip("torch")


def _case(data):
    batch = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    # (from tiny to past the native kernel's threshold, where the rows are one product)
    k, n = data.draw(st.integers(1, 80)), data.draw(st.integers(1, 80))
    rows = data.draw(st.integers(1, 80))
    rng = np.random.default_rng(sum(batch) + k * n)
    a = rng.standard_normal(batch + (rows, k)).astype(np.float32)
    if data.draw(st.booleans()):       # a non-contiguous batch: the product as numpy's
        a = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 0, -2)), 0, -2)
    transpose_b = data.draw(st.booleans())
    b = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(np.float32)
    return a, b, transpose_b


def _torch_reference(a, b, transpose_b):
    ta = torch.from_numpy(a.astype(np.float64)).requires_grad_()
    tb = torch.from_numpy(b.astype(np.float64)).requires_grad_()
    y = torch.relu(ta @ (tb.T if transpose_b else tb))
    (y * y).sum().backward()
    return y.detach().numpy(), ta.grad.numpy(), tb.grad.numpy()


def _ours(a, b, transpose_b):
    pa, pb = imp.Parameter(a), imp.Parameter(b)
    gm = GradManager().attach([pa, pb])
    with gm:
        y = F.relu(F.matmul(pa, pb, transpose_b=transpose_b))
        gm.backward((y * y).sum())
    return y.numpy(), pa.grad.numpy(), pb.grad.numpy()


def _close(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5 * max(1.0, np.abs(w).max()))


def _check_bits(a, b, transpose_b):
    """Under a DTR budget (recomputing) and in a compiled replay: eager's bits."""
    eager = _ours(a, b, transpose_b)
    with _dtr_budget(1 << 10, 0):
        budgeted = _ours(a, b, transpose_b)
    for g, w in zip(budgeted, eager):
        assert g.tobytes() == w.tobytes()
    step = trace(lambda x, w: F.relu(F.matmul(x, w, transpose_b=transpose_b)), symbolic=True)
    x, w = imp.Tensor(a), imp.Tensor(b)
    step(x, w)
    assert step(x, w).numpy().tobytes() == eager[0].tobytes()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_row_blocks_times_a_matrix_match_pytorch(data):
    a, b, transpose_b = _case(data)
    _close(_ours(a, b, transpose_b), _torch_reference(a, b, transpose_b))


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_the_same_under_dtr_and_in_a_replay_is_bit_identical(data):
    _check_bits(*_case(data))


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("batch", [(4,), (2, 3)])
def test_a_linear_layer_on_tokens_is_one_product(batch, transpose_b):
    """Past the native kernel's threshold (the rows as one product), both ways."""
    rng = np.random.default_rng(len(batch))
    a = rng.standard_normal(batch + (48, 64)).astype(np.float32)
    b = rng.standard_normal((96, 64) if transpose_b else (64, 96)).astype(np.float32)
    _close(_ours(a, b, transpose_b), _torch_reference(a, b, transpose_b))
    _check_bits(a, b, transpose_b)
