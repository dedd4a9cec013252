"""The PyTorch tensor functions of session 49 (imperative/tensor_ops.py): F.gather, F.scatter,
F.scatter_add, F.index_select, F.index_add, F.sort, F.argsort, F.topk, F.cumsum, F.cumprod,
F.flip, F.tril, F.triu, F.einsum, F.outer and F.norm. Values and gradients against PyTorch
on the same inputs (numpy where cheap, with hypothesis), duplicates, ties, zeros and 0-d
edge cases; each new op (Argsort, Cumulative, CumprodGrad) trained under a tight memory
budget to the unconstrained bits; the errors of bad arguments, after which the runtime
still works; and the PyTorch spellings' hints."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import _core
from imperative.autodiff import GradManager

torch = pytest.importorskip("torch")
F = imp.functional
QUICK = settings(max_examples=25, deadline=None, database=None, derandomize=True)


def _ours(fn, arrays, dy, float_grads=True):
    """(value, grads) of fn(*tensors): the float arrays become Parameters, the gradient is
    that of sum(fn(...) * dy) (dy None: no gradient)."""
    tensors = [imp.Parameter(a) if a.dtype.kind == "f" and float_grads else imp.Tensor(a)
               for a in arrays]
    params = [t for t in tensors if isinstance(t, imp.Parameter)]
    gm = GradManager().attach(params)
    with gm:
        y = fn(*tensors)
        if dy is not None:
            gm.backward(F.sum(y * imp.Tensor(dy)))
    grads = [p.grad.numpy() if p.grad is not None else None for p in params]
    return y.numpy(), grads


def _theirs(fn, arrays, dy):
    """The same through PyTorch (integer arrays as int64)."""
    tensors = [torch.tensor(a, requires_grad=a.dtype.kind == "f") if a.dtype.kind == "f"
               else torch.tensor(a.astype(np.int64)) for a in arrays]
    y = fn(*tensors)
    if dy is not None:
        (y * torch.tensor(dy)).sum().backward()
    grads = [t.grad.numpy() if t.grad is not None else np.zeros(t.shape, np.float32)
             for t in tensors if t.requires_grad]
    return y.detach().numpy(), grads


def _compare(ours, theirs, arrays, out_shape=None, rng=None, rtol=1e-5, atol=1e-6):
    """Values and gradients of `ours` and `theirs` on the same arrays, equal."""
    rng = rng or np.random.default_rng(0)
    want, _ = _theirs(theirs, arrays, None)
    dy = rng.standard_normal(want.shape).astype(np.float32)
    got, got_grads = _ours(ours, arrays, dy)
    want, want_grads = _theirs(theirs, arrays, dy)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    assert len(got_grads) == len(want_grads)
    for g, w in zip(got_grads, want_grads):
        # no gradient (a count of non-zeros) is PyTorch's zero gradient
        np.testing.assert_allclose(np.zeros_like(w) if g is None else g, w, rtol=rtol, atol=atol)


def _randn(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------
# gather, scatter, scatter_add, index_select, index_add

GATHERS = [  # (x shape, axis, index shape)
    ((3, 4), 0, (5, 4)), ((3, 4), -1, (3, 7)), ((3, 4), 1, (2, 2)), ((2, 3, 4), 1, (2, 6, 4)),
    ((2, 3, 4), -3, (3, 1, 2)), ((5,), 0, (9,)), ((1,), 0, (3,)), ((), 0, ()), ((3, 0), 1, (3, 0)),
]


@pytest.mark.parametrize("shape, axis, index_shape", GATHERS, ids=repr)
def test_gather_and_scatter_add_match_pytorch_with_duplicate_indices(shape, axis, index_shape):
    rng = np.random.default_rng(len(shape) + axis)
    x = _randn(rng, shape)
    size = shape[axis] if shape else 1
    index = rng.integers(0, max(size, 1), index_shape).astype(np.int32)   # repeats positions
    _compare(lambda t, i: F.gather(t, axis, i), lambda t, i: torch.gather(t, axis, i),
             [x, index])
    src = _randn(rng, index_shape)
    _compare(lambda t, i, s: F.scatter_add(t, axis, i, s),
             lambda t, i, s: torch.scatter_add(t, axis, i, s), [x, index, src])


def test_scatter_add_uses_the_index_shaped_corner_of_a_larger_src():
    """As PyTorch's forward (whose backward refuses a larger src): the rest of src is
    ignored and gets a zero gradient."""
    rng = np.random.default_rng(3)
    x, src = _randn(rng, (3, 4)), _randn(rng, (4, 5))
    index = np.array([[0, 0, 2], [1, 0, 0]], np.int32)
    want = torch.scatter_add(torch.tensor(x), 1, torch.tensor(index.astype(np.int64)),
                             torch.tensor(src)).numpy()
    dy = _randn(rng, (3, 4))
    got, (gx, gsrc) = _ours(lambda t, i, s: F.scatter_add(t, 1, i, s), [x, index, src], dy)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(gx, dy)
    want_gsrc = np.zeros_like(src)
    want_gsrc[:2, :3] = np.take_along_axis(dy[:2], index, 1)
    np.testing.assert_array_equal(gsrc, want_gsrc)


@pytest.mark.parametrize("shape, axis", [((4, 5), 0), ((4, 5), -1), ((2, 3, 4), 1), ((6,), 0)])
def test_scatter_matches_pytorch_where_positions_are_distinct(shape, axis):
    rng = np.random.default_rng(5)
    x = _randn(rng, shape)
    # a permutation along the axis, cut short: every written position is distinct
    index = np.argsort(rng.random(shape), axis=axis).astype(np.int32)
    index = index[tuple(slice(0, max(n - 1, 1)) if d != axis % len(shape) else slice(0, n - 1)
                        for d, n in enumerate(shape))]
    src = _randn(rng, index.shape)
    _compare(lambda t, i, s: F.scatter(t, axis, i, s), lambda t, i, s: torch.scatter(t, axis, i, s),
             [x, index, src])
    got = F.scatter(x, axis, index, 2.5).numpy()
    np.testing.assert_array_equal(got, torch.scatter(torch.tensor(x), axis,
                                                     torch.tensor(index.astype(np.int64)),
                                                     2.5).numpy())


def test_scatter_out_of_place_and_repeated_positions_take_one_of_the_values():
    x = imp.Tensor(np.zeros(3, np.float32))
    y = F.scatter(x, 0, [1, 1, 0], imp.Tensor(np.array([5.0, 7.0, 9.0], np.float32)))
    assert y.numpy()[0] == 9.0 and y.numpy()[1] in (5.0, 7.0) and y.numpy()[2] == 0.0
    np.testing.assert_array_equal(x.numpy(), np.zeros(3, np.float32))     # x is unchanged


@pytest.mark.parametrize("shape, axis", [((4, 5), 0), ((4, 5), -1), ((2, 3, 4), 1), ((5,), 0),
                                         ((), 0)])
def test_index_select_and_index_add_match_pytorch(shape, axis):
    rng = np.random.default_rng(7)
    x = _randn(rng, shape)
    size = shape[axis] if shape else 1
    index = np.array([size - 1, 0, size - 1] if shape else [0], np.int32)   # a repeat
    _compare(lambda t, i: F.index_select(t, axis, i),
             lambda t, i: torch.index_select(t, axis, i), [x, index])
    src_shape = shape[:axis % max(len(shape), 1)] + (len(index),) + \
        shape[axis % max(len(shape), 1) + 1:] if shape else ()
    src = _randn(rng, src_shape if shape else ())
    if not shape:
        index = index[:1]
    _compare(lambda t, i, s: F.index_add(t, axis, i, s, alpha=0.5),
             lambda t, i, s: torch.index_add(t, axis, i, s, alpha=0.5), [x, index, src])


@QUICK
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_gather_and_scatter_add_against_numpy(shape, data):
    shape = tuple(shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(sum(shape))
    x = _randn(rng, shape)
    index_shape = list(shape)
    index_shape[axis] = data.draw(st.integers(0, 5))
    index = rng.integers(0, shape[axis], index_shape).astype(np.int32)
    np.testing.assert_array_equal(F.gather(x, axis, index).numpy(),
                                  np.take_along_axis(x, index, axis))
    src = _randn(rng, index.shape)
    want = x.copy()
    grid = list(np.indices(index.shape, sparse=True))
    grid[axis] = index
    np.add.at(want, tuple(grid), src)
    np.testing.assert_allclose(F.scatter_add(x, axis, index, src).numpy(), want, rtol=1e-6)


def test_other_integer_index_dtypes_are_converted():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for dtype in (np.int8, np.uint8, np.int16, np.int64):
        index = np.array([[2, 0]], dtype)
        np.testing.assert_array_equal(F.gather(x, 1, index).numpy(), [[2.0, 0.0]])


# ---------------------------------------------------------------------------------------
# cumsum and cumprod

SCANS = [((7,), 0), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4), -1), ((2, 3, 4), 1), ((1,), 0),
         ((), 0), ((0, 3), 0)]


@pytest.mark.parametrize("shape, axis", SCANS, ids=repr)
def test_cumsum_and_cumprod_match_pytorch(shape, axis):
    rng = np.random.default_rng(11)
    x = _randn(rng, shape)
    _compare(lambda t: F.cumsum(t, axis), lambda t: torch.cumsum(t, axis), [x])
    _compare(lambda t: F.cumprod(t, axis), lambda t: torch.cumprod(t, axis), [x], rtol=1e-4)


@pytest.mark.parametrize("zeros", [[2], [0], [4], [1, 3], [0, 4], [2, 3]])
def test_the_gradient_of_cumprod_is_exact_where_x_has_zeros(zeros):
    rng = np.random.default_rng(13)
    x = _randn(rng, (3, 5))
    x[:, zeros] = 0.0
    _compare(lambda t: F.cumprod(t, 1), lambda t: torch.cumprod(t, 1), [x], rtol=1e-4)
    _compare(lambda t: F.cumprod(t, 0), lambda t: torch.cumprod(t, 0), [x.T.copy()], rtol=1e-4)


def test_cumulative_integers_and_bools_accumulate_in_int32():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    got = F.cumsum(x, 1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.numpy(), np.cumsum(x, 1))
    np.testing.assert_array_equal(F.cumprod(x, 0).numpy(), np.cumprod(x, 0))
    mask = F.cumsum(np.array([True, False, True]), 0)
    assert mask.dtype == np.int32 and mask.numpy().tolist() == [1, 1, 2]


# ---------------------------------------------------------------------------------------
# sort, argsort, topk


def _torch_sort(t, axis, descending):
    return torch.sort(t, dim=axis, descending=descending, stable=True)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape, axis", [((9,), 0), ((4, 6), 1), ((4, 6), 0), ((2, 3, 5), -2),
                                         ((), 0), ((1,), -1), ((3, 0), 1)], ids=repr)
def test_sort_matches_pytorch_stable_with_ties(shape, axis, descending):
    rng = np.random.default_rng(17)
    x = rng.integers(0, 3, shape).astype(np.float32)        # many ties
    values, indices = F.sort(x, axis, descending=descending)
    want_values, want_indices = _torch_sort(torch.tensor(x), axis, descending)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(F.argsort(x, axis, descending).numpy(), want_indices.numpy())
    _compare(lambda t: F.sort(t, axis, descending)[0],
             lambda t: _torch_sort(t, axis, descending)[0], [x])


def test_sort_puts_nan_last_ascending_and_first_descending_as_pytorch():
    x = np.array([2.0, np.nan, -1.0, np.nan, 2.0, -np.inf], np.float32)
    for descending in (False, True):
        values, indices = F.sort(x, descending=descending)
        want = _torch_sort(torch.tensor(x), 0, descending)
        np.testing.assert_array_equal(values.numpy(), want[0].numpy())
        np.testing.assert_array_equal(indices.numpy(), want[1].numpy())


def test_sort_of_integers_keeps_extremes_in_order():
    info = np.iinfo(np.int32)
    x = np.array([3, info.min, info.max, 0, info.min], np.int32)
    values, indices = F.sort(x, descending=True)
    np.testing.assert_array_equal(values.numpy(), [info.max, 3, 0, info.min, info.min])
    np.testing.assert_array_equal(indices.numpy(), [2, 0, 3, 1, 4])


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape, k, axis", [((10,), 3, 0), ((4, 7), 2, -1), ((4, 7), 4, 0),
                                            ((2, 3, 5), 5, 2), ((3,), 0, 0), ((), 1, 0)],
                         ids=repr)
def test_topk_matches_pytorch(shape, k, axis, largest):
    rng = np.random.default_rng(19)
    x = _randn(rng, shape)           # distinct values: PyTorch's indices are then defined
    values, indices = F.topk(x, k, axis, largest=largest)
    want_values, want_indices = torch.topk(torch.tensor(x), k, axis, largest=largest)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
    _compare(lambda t: F.topk(t, k, axis, largest)[0],
             lambda t: torch.topk(t, k, axis, largest)[0], [x])


def test_topk_breaks_ties_by_the_lower_position():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0], [0.0, 0.0, 5.0, 0.0, 0.0]], np.float32)
    values, indices = F.topk(x, 2, 1)
    np.testing.assert_array_equal(values.numpy(), [[3.0, 3.0], [5.0, 0.0]])
    np.testing.assert_array_equal(indices.numpy(), [[1, 2], [2, 0]])
    _, smallest = F.topk(x, 3, 1, largest=False)
    np.testing.assert_array_equal(smallest.numpy(), [[0, 3, 1], [0, 1, 3]])


@QUICK
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.data())
def test_sort_against_numpy_stable(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(len(shape)).integers(-2, 3, shape).astype(np.float32)
    values, indices = F.sort(x, axis)
    np.testing.assert_array_equal(indices.numpy(), np.argsort(x, axis, kind="stable"))
    np.testing.assert_array_equal(values.numpy(), np.sort(x, axis, kind="stable"))


# ---------------------------------------------------------------------------------------
# flip, tril, triu, outer, einsum, norm


@pytest.mark.parametrize("shape, axis", [((5,), 0), ((3, 4), 0), ((3, 4), -1), ((3, 4), (0, 1)),
                                         ((2, 3, 4), [0, 2]), ((), ())], ids=repr)
def test_flip_matches_pytorch(shape, axis):
    x = _randn(np.random.default_rng(23), shape)
    dims = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    _compare(lambda t: F.flip(t, axis), lambda t: torch.flip(t, dims), [x])


@pytest.mark.parametrize("k", [0, 1, -1, 3, -5])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 5, 3)])
def test_tril_and_triu_match_pytorch(shape, k):
    x = _randn(np.random.default_rng(29), shape)
    _compare(lambda t: F.tril(t, k), lambda t: torch.tril(t, k), [x])
    _compare(lambda t: F.triu(t, k), lambda t: torch.triu(t, k), [x])


def test_outer_matches_pytorch():
    rng = np.random.default_rng(31)
    _compare(F.outer, torch.outer, [_randn(rng, 4), _randn(rng, 3)])
    _compare(F.outer, torch.outer, [_randn(rng, 1), _randn(rng, 0)])


EINSUMS = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ij,jk", [(3, 4), (4, 5)]), ("ji", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]), ("i,i->", [(5,), (5,)]), ("bi,bi->b", [(3, 4), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("...i,...i", [(2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("abc,cd->dba", [(2, 3, 4), (4, 5)]),
    ("i...->...", [(2, 3, 4)]), ("bqd, bkd -> bqk", [(2, 3, 4), (2, 5, 4)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]), ("->", [()]), ("Ab,bC->AC", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_matches_pytorch(equation, shapes):
    rng = np.random.default_rng(37)
    arrays = [_randn(rng, s) for s in shapes]
    _compare(lambda *ts: F.einsum(equation, *ts), lambda *ts: torch.einsum(equation, *ts),
             arrays, rtol=1e-5, atol=1e-5)


def test_einsum_takes_a_list_and_gives_a_new_tensor_for_the_identity():
    x = imp.Tensor(np.ones((2, 3), np.float32))
    y = F.einsum("ij->ij", [x])
    assert y is not x
    y += 1
    np.testing.assert_array_equal(x.numpy(), np.ones((2, 3), np.float32))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("ord", [1, 2, float("inf"), float("-inf"), 3, 0.5, 0])
@pytest.mark.parametrize("shape, axis", [((6,), None), ((3, 4), 1), ((3, 4), (0, -1)),
                                         ((2, 3, 4), -2), ((2, 3, 4), None)], ids=repr)
def test_vector_norm_matches_pytorch(shape, axis, ord, keepdims):
    x = _randn(np.random.default_rng(41), shape)
    dims = list(axis) if isinstance(axis, tuple) else axis
    _compare(lambda t: F.norm(t, ord, axis, keepdims),
             lambda t: torch.linalg.vector_norm(t, ord, dims, keepdims), [x], rtol=1e-4,
             atol=1e-5)


@pytest.mark.parametrize("ord", [1, 2, 3, float("inf")])
def test_norm_of_a_zero_vector_has_a_zero_gradient_as_pytorch(ord):
    x = np.zeros((2, 3), np.float32)
    x[1] = [1.0, -2.0, 0.0]
    _compare(lambda t: F.norm(t, ord, 1), lambda t: torch.linalg.vector_norm(t, ord, 1), [x])


@pytest.mark.parametrize("ord", [2, 3])
def test_norm_of_a_vector_holding_nan_or_inf_is_nan_or_inf_as_pytorch(ord):
    """Only a zero total is masked for the zero vector's gradient: a nan read 0 before."""
    x = np.array([[np.nan, 1.0, 2.0], [np.inf, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, -2.0, 3.0]],
                 np.float32)
    _compare(lambda t: F.norm(t, ord, 1), lambda t: torch.linalg.vector_norm(t, ord, 1), [x])


# ---------------------------------------------------------------------------------------
# Each new op trains under a tight memory budget to the unconstrained bits


def _train(step_loss, w, steps=3):
    """`steps` SGD steps on w: the losses and w's final value."""
    losses = []
    for _ in range(steps):
        w.grad = None
        gm = GradManager().attach([w])
        with gm:
            loss = step_loss()
            gm.backward(loss)
        losses.append(loss.numpy())
        w -= w.grad * 0.01
    return losses, w.numpy()


def _same_bits_under_a_budget(step_loss, make_w, op_name):
    """A few training steps recompute `op_name` under a 150 kB budget and give the bits
    they give without one."""
    want = _train(step_loss(make_w()), make_w.last)
    recomputed = []
    with imp.option("dtr_eviction_threshold", 150_000), \
            imp.option("dtr_evictee_minimum_size", 0), imp.option("record_computing_path", 1), \
            imp.option("enable_dtr_auto_drop", 1):
        _core.set_decision_hook(lambda action, info, clock: recomputed.append(
            type(info.producer.op).__name__ if info.producer is not None else None)
            if action == "recompute" else None)
        try:
            got = _train(step_loss(make_w()), make_w.last)
            imp.sync()
        finally:
            _core.set_decision_hook(None)
    assert op_name in recomputed
    for g, r in zip(got[0] + [got[1]], want[0] + [want[1]]):
        np.testing.assert_array_equal(g, r)


class _Weights:
    """A fresh Parameter each call, remembered as `last`."""

    def __init__(self, shape, seed):
        self.shape, self.seed = shape, seed

    def __call__(self):
        rng = np.random.default_rng(self.seed)
        self.last = imp.Parameter(rng.standard_normal(self.shape).astype(np.float32) * 0.1)
        return self.last


_X = np.random.default_rng(43).standard_normal((128, 64)).astype(np.float32)


def _sort_topk_program(w):
    x = imp.Tensor(_X)

    def loss():
        h = F.tanh(x @ w)                                   # (128, 64)
        values, _ = F.sort(h, 1, descending=True)
        top, index = F.topk(h * 2.0, 8, 1)
        picked = F.gather(h, 1, index)
        return F.mean(values[:, :16] * 0.5) + F.mean(top * picked) + F.sum(h) * 1e-4
    return loss


def _cumsum_program(w):
    x = imp.Tensor(_X)

    def loss():
        h = F.cumsum(F.tanh(x @ w), 1)
        return F.mean(F.cumsum(h * h, 0) * 1e-3) + F.mean(F.flip(F.tril(h[:64]), 0))
    return loss


def _cumprod_program(w):
    x = imp.Tensor(_X)

    def loss():
        h = F.cumprod(F.sigmoid(x @ w) + 0.5, 1)         # read again by the backward
        return (F.mean(F.cumprod(h, 0)) * 1e-3 + F.mean(F.cumprod(F.relu(h - 1.0), 0))
                + F.mean(h * h))
    return loss


@pytest.mark.parametrize("program, op_name", [(_sort_topk_program, "Argsort"),
                                              (_cumsum_program, "Cumulative"),
                                              (_cumprod_program, "Cumulative")],
                         ids=["argsort", "cumsum", "cumprod"])
def test_each_new_op_trains_under_a_tight_budget_with_the_same_bits(program, op_name):
    _same_bits_under_a_budget(program, _Weights((64, 64), 47), op_name)


def test_cumprod_grad_is_recomputed_to_the_same_bits():
    """CumprodGrad (the backward's op) dropped and recomputed gives its bits again."""
    rng = np.random.default_rng(53)
    x = imp.Tensor(_randn(rng, (64, 128)))
    dy = imp.Tensor(_randn(rng, (64, 128)))
    with imp.option("enable_drop", 1):
        g = _core.apply_one(imp.ops.CumprodGrad(1), x, dy)
        want = g.numpy().copy()
        g._drop()
        np.testing.assert_array_equal(g.numpy(), want)


# ---------------------------------------------------------------------------------------
# Bad arguments: clear errors, and the runtime goes on


BAD = [
    (lambda x: F.gather(x, 0, np.zeros((1, 4), np.float32)), TypeError,
     r"gather: index must be an integer tensor, got dtype float32"),
    (lambda x: F.gather(x, 1, [[0, 4]]), IndexError,
     r"gather: index\[0, 1\] = 4 is out of range for axis 1 of size 4: it must lie in \[0, 4\)"),
    (lambda x: F.gather(x, 0, [[-1, 0]]), IndexError, r"index\[0, 0\] = -1 .* axis 0 of size 3"),
    (lambda x: F.gather(x, 0, [0, 1]), ValueError, "index has 1 dimension.* x 2"),
    (lambda x: F.gather(x, 0, np.zeros((2, 5), np.int32)), ValueError,
     r"index \(2, 5\) is larger than x \(3, 4\) along axis 1"),
    (lambda x: F.gather(x, 2, [[0]]), IndexError, "axis 2 is out of range"),
    (lambda x: F.scatter_add(x, 1, [[3]], np.ones((1, 1), np.int32)), TypeError,
     "src has dtype int32 and x float32"),
    (lambda x: F.scatter_add(x, 1, [[0, 1]], np.ones((1, 1), np.float32)), ValueError,
     "larger than src"),
    (lambda x: F.scatter(x, -1, [[9]], 1.0), IndexError, r"index\[0, 0\] = 9 .* axis -1 of size 4"),
    (lambda x: F.index_select(x, 1, [[0]]), ValueError, "index must be 0-d or 1-d"),
    (lambda x: F.index_select(x, 0, [True]), TypeError, "index must be an integer tensor"),
    (lambda x: F.index_add(x, 0, [3], np.ones((1, 4), np.float32)), IndexError,
     r"index_add: index\[0\] = 3 is out of range for axis 0 of size 3"),
    (lambda x: F.index_add(x, 0, [1], np.ones((2, 4), np.float32)), ValueError,
     r"src has shape \(2, 4\).* must be \(1, 4\)"),
    (lambda x: F.index_select(x[0, 0], 0, [0, 0]), ValueError, "x is 0-d, so the index must"),
    (lambda x: F.topk(x, 5, 1), ValueError, "k=5 is out of range for axis 1 of size 4"),
    (lambda x: F.topk(x, 1.5), TypeError, "k must be an int"),
    (lambda x: F.sort(x, 3), IndexError, "axis 3 is out of range"),
    (lambda x: F.cumsum(x, -3), IndexError, "axis -3 is out of range"),
    (lambda x: F.tril(x[0]), ValueError, "at least 2 dimensions"),
    (lambda x: F.triu(x, 0.5), TypeError, "k must be an int"),
    (lambda x: F.norm(x, -2), ValueError, "ord must be >= 0"),
    (lambda x: F.norm(x, "fro"), TypeError, "ord must be a real number"),
    (lambda x: F.outer(x, x), ValueError, "must be 1-d"),
    (lambda x: F.einsum("ii->i", x[:, :3]), ValueError, "index 'i' repeats in operand 0"),
    (lambda x: F.einsum("ij,jk->ik", x), ValueError, "has 2 operand.*1 were given"),
    (lambda x: F.einsum("ijk->i", x), ValueError, "has 2 dimension.*name 3"),
    (lambda x: F.einsum("ij->iz", x), ValueError, "output index 'z' appears in no operand"),
    (lambda x: F.einsum("ij,ij->ij", x, x[:2]), ValueError, "index 'i' has sizes 3 and 2"),
    (lambda x: F.einsum("i1->i", x), ValueError, "must be letters"),
]


@pytest.mark.parametrize("call, error, message", BAD, ids=[m[:30] for _, _, m in BAD])
def test_bad_arguments_raise_clear_errors_and_the_runtime_goes_on(call, error, message):
    x = imp.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    with pytest.raises(error, match=message):
        call(x)
    imp.sync()
    np.testing.assert_array_equal(F.gather(x, 1, [[3], [0], [1]]).numpy(), [[3.0], [4.0], [9.0]])


# ---------------------------------------------------------------------------------------
# PyTorch spellings


def test_pytorch_spellings_name_ours():
    t = imp.Tensor(np.ones((2, 2), np.float32))
    for name, ours in [("gather", "F.gather(x, axis, index)"), ("topk", "F.topk"),
                       ("cumsum", "F.cumsum(x, axis)"), ("flip", "F.flip(x, axis)")]:
        with pytest.raises(AttributeError, match=re.escape(f"x.{name}, use {ours}")):
            getattr(t, name)
    with pytest.raises(TypeError, match="diagonal= as k="):
        F.tril(t, diagonal=1)
    with pytest.raises(TypeError, match="dims= as axis="):
        F.flip(t, dims=[0])
    with pytest.raises(TypeError, match="p= as ord="):
        F.norm(t, p=1)
    with pytest.raises(TypeError, match="dim= as axis="):
        F.gather(t, dim=0, index=[[0]])
    with pytest.raises(AttributeError, match=r"torch\.einsum, use imp\.F\.einsum"):
        imp.einsum
