"""Where's one-pass select (_kernels.where_or_numpy): numpy's where bit for bit on every
operand form it takes (full arrays, 0-d and stride-0 values, a mask repeated over leading
axes) and on those it leaves to numpy (other dtypes, strided views, a mask broadcast
another way), through F.where on the caller's thread and the worker's alike. The tiled
copy of a transposed view (_kernels.swapped_copy), which makes an op's result on a
transposed input C-ordered: numpy's copy, value for value, on every shape. The row
scatter-add behind gathers' gradients (_kernels.rows_add): numpy's add.at bit for bit,
repeated and negative indices included, out-of-range ones left to numpy's error."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.backend import native

needs_native = pytest.mark.skipif(native.where_or_numpy is None,
                                  reason="the native loops are off or not built")

DTYPES = [np.float32, np.int32, np.uint32, np.float64, np.int16]


def _operand(kind, shape, dtype, rng):
    if kind == "full":
        v = rng.standard_normal(shape) * 100
    elif kind == "0-d":
        return np.asarray(rng.standard_normal() * 100).astype(dtype)
    elif kind == "broadcast":
        return np.broadcast_to(np.asarray(rng.standard_normal()).astype(dtype), shape)
    else:                                  # a strided view: numpy's where takes it
        v = (rng.standard_normal(shape[:-1] + (2 * shape[-1],)) * 100)[..., ::2]
    v = v.astype(dtype)
    if dtype == np.float32 and v.size:
        v.reshape(-1)[:4][:v.size] = np.array([np.nan, -np.nan, -0.0, np.inf],
                                              np.float32)[:min(4, v.size)]
    return v


@st.composite
def where_cases(draw):
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=4)))
    dtype = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    kinds = ["full", "0-d", "broadcast", "strided"]
    x = _operand(draw(st.sampled_from(kinds)), shape, dtype, rng)
    y = _operand(draw(st.sampled_from(kinds)), shape, dtype, rng)
    trailing = draw(st.integers(0, len(shape)))
    cond_shape = shape[len(shape) - trailing:]
    cond = rng.random(cond_shape) < 0.5
    if draw(st.booleans()) and cond.ndim:
        cond = np.asfortranarray(cond) if cond.ndim > 1 else cond[::-1]
    return cond, x, y


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@needs_native
@settings(max_examples=300, deadline=None)
@given(case=where_cases())
def test_select_is_numpys_where_bit_for_bit(case):
    cond, x, y = case
    same_bits(native.where_or_numpy(cond, x, y), np.where(cond, x, y))


@needs_native
@pytest.mark.parametrize("n", [1, 7, 8, 9, 63, 64, 65, 1000, 70_000])
def test_every_length_and_a_repeated_mask(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    y = rng.standard_normal((3, n)).astype(np.float32)
    cond = rng.random(n) < 0.5                     # one row's mask for all three rows
    same_bits(native.where_or_numpy(cond, x, y), np.where(cond, x, y))
    same_bits(native.where_or_numpy(cond, x, np.float32(-np.inf)),
              np.where(cond, x, np.float32(-np.inf)))


@pytest.mark.parametrize("host", [1, 0])
def test_f_where_on_both_threads(host):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    y = rng.standard_normal((6, 40)).astype(np.float32)
    cond = x > 0
    with imp.option("async_level", 2), imp.option("enable_host_compute", host):
        same_bits(F.where(imp.Tensor(cond), imp.Tensor(x), imp.Tensor(y)).numpy(),
                  np.where(cond, x, y))
        same_bits(F.where(imp.Tensor(cond), imp.Tensor(x), 0.0).numpy(),
                  np.where(cond, x, np.float32(0)))
        got = F.where(imp.Tensor(cond[0]), imp.Tensor(x), imp.Tensor(y)).numpy()
        same_bits(got, np.where(cond[0], x, y))


@given(shape=st.lists(st.integers(1, 40), min_size=2, max_size=4),
       dtype=st.sampled_from([np.float32, np.int32, np.uint32]), seed=st.integers(0, 1000))
@settings(max_examples=200, deadline=None)
def test_a_transposed_view_is_copied_value_for_value(shape, dtype, seed):
    from imperative import _kernels
    a = (np.random.default_rng(seed).standard_normal(shape) * 100).astype(dtype)
    view = a.swapaxes(-1, -2)
    copy = _kernels.swapped_copy(view)
    assert copy.flags.c_contiguous and copy.tobytes() == np.ascontiguousarray(view).tobytes()
    if shape[-1] > 2 and shape[-2] > 1:                         # (not a transposed view)
        assert _kernels.swapped_copy(a[..., ::2]) is None
    assert _kernels.swapped_copy(view.astype(np.float64)) is None


@pytest.mark.parametrize("shape", [(512, 1024), (3, 67, 129), (100, 9)])
def test_an_op_on_a_transposed_tensor_is_c_ordered_and_numpys(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    t = F.transpose(imp.Tensor(x), tuple(range(len(shape) - 2)) + (len(shape) - 1,
                                                                   len(shape) - 2))
    want = np.swapaxes(x, -1, -2) * np.float32(3) + np.float32(1)
    got = (t * 3.0 + 1.0).numpy()
    same_bits(np.ascontiguousarray(got), want)
    with imp.option("enable_host_compute", 0):
        same_bits(np.ascontiguousarray(F.exp(t).numpy()), np.exp(np.swapaxes(x, -1, -2)))


@needs_native
@given(rows=st.integers(1, 30), width=st.sampled_from([(), (1,), (5,), (3, 4)]),
       index_shape=st.sampled_from([(0,), (1,), (7,), (4, 6)]),
       dtype=st.sampled_from([np.int32, np.int64]), seed=st.integers(0, 1000))
@settings(max_examples=200, deadline=None)
def test_a_row_scatter_add_is_numpys_add_at(rows, width, index_shape, dtype, seed):
    from imperative import _kernels
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows,) + width).astype(np.float32)
    index = rng.integers(-rows, rows, index_shape).astype(dtype)     # repeats, negatives
    value = rng.standard_normal(index_shape + width).astype(np.float32) * 1e3
    want = table.copy()
    np.add.at(want, index, value)
    assert _kernels.rows_add(table, index, value) is True
    same_bits(table, want)
    assert _kernels.rows_add(table, np.array([rows]), np.ones((1,) + width, np.float32)) is False
    assert _kernels.rows_add(table, index, value.astype(np.float64)) is False


def test_an_embeddings_gradient_sums_repeated_rows():
    from imperative.autodiff import GradManager
    rng = np.random.default_rng(4)
    weight = imp.Parameter(rng.standard_normal((50, 8)).astype(np.float32))
    ids = rng.integers(0, 50, (16, 12)).astype(np.int32)
    dy = rng.standard_normal((16, 12, 8)).astype(np.float32)
    gm = GradManager().attach([weight])
    with gm:
        gm.backward((F.embedding(imp.Tensor(ids), weight) * imp.Tensor(dy)).sum())
    want = np.zeros((50, 8), np.float32)
    np.add.at(want, ids, dy)
    same_bits(weight.grad.numpy(), want)
