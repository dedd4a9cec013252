"""`t.astype(dtype)` and `a @ b` of small resident tensors run on the caller's thread (as a
unary elementwise op does), larger ones are dispatched: both give the general path's
results (numpy's cast, numpy's or the native product), bit for bit, on every layout
((520, 520) passes HOST_COMPUTE_MEDIUM_ELEMENTS: it queues at async level 2), and the
gradient, trace and profile see the op as before."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import _core
from imperative.autodiff import GradManager
from imperative.backend import native

_DTYPES = ["float32", "float16", "int32", "int8", "uint8", "bool"]


def _values(shape, dtype, rng):
    x = rng.standard_normal(shape) * 200
    if dtype.startswith("float"):
        x[..., :1] = [np.nan]          # (NaN and infinities cast as numpy casts them)
        x[..., 1:2] = [np.inf]
    return x.astype(dtype)


@settings(max_examples=60, deadline=None)
@given(src=st.sampled_from(_DTYPES), dst=st.sampled_from(_DTYPES),
       shape=st.sampled_from([(4, 16), (3, 5, 2), (0, 3), (520, 520)]),
       transposed=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_astype_is_numpy_s_cast_bit_for_bit(src, dst, shape, transposed, seed):
    a = _values(shape, src, np.random.default_rng(seed))
    t = imp.Tensor(a)
    if transposed:
        a, t = a.T, t.T
    with np.errstate(all="ignore"):
        want = a.astype(dst)
        got = t.astype(dst).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))


def test_a_cast_is_differentiated_traced_and_profiled(tmp_path):
    w = imp.Parameter(np.array([1.5, -2.0, 3.25], np.float32))
    gm = GradManager().attach([w])
    with gm:
        loss = (w.astype("float16").astype("float32") * 2).sum()
        gm.backward(loss)
    np.testing.assert_array_equal(w.grad.numpy(), [2, 2, 2])

    @imp.jit.trace(symbolic=True)
    def f(x):
        return x.astype("int32") + 1

    x = imp.Tensor(np.array([1.7, -2.2], np.float32))
    for _ in range(2):
        np.testing.assert_array_equal(f(x).numpy(), [2, -1])

    profiler = imp.Profiler(str(tmp_path))
    with profiler:
        x.astype("int32").numpy()
    assert any("TypeCvt" in open(f).read() for f in profiler.files)


def test_the_host_product_stops_where_the_native_one_starts():
    assert _core.NUMPY_PRODUCT_MACS == native._MIN_MACS


@settings(max_examples=60, deadline=None)
@given(m=st.sampled_from([0, 1, 3, 16, 64, 100]), k=st.sampled_from([1, 7, 16, 64, 100]),
       n=st.sampled_from([1, 5, 16, 64, 100]), transposed=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_a_product_is_the_general_path_s_bit_for_bit(m, k, n, transposed, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if transposed else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ta, tb = imp.Tensor(a), imp.Tensor(b)
    if transposed:
        a, ta = a.T, ta.T
    got = (ta @ tb).numpy()
    with imp.option("enable_host_compute", 0):      # (every op a command for the worker)
        want = (ta @ tb).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_a_product_s_errors_gradient_and_trace_are_the_general_path_s():
    with pytest.raises(ValueError):
        (imp.Tensor(np.ones((2, 3), np.float32)) @ imp.Tensor(np.ones((2, 3), np.float32))).numpy()
    w = imp.Parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
    x = imp.Tensor(np.ones((3, 2), np.float32))
    gm = GradManager().attach([w])
    with gm:
        gm.backward((w @ x).sum())
    np.testing.assert_array_equal(w.grad.numpy(), np.full((2, 3), 2, np.float32))

    @imp.jit.trace(symbolic=True)
    def f(p, q):
        return p @ q + 1

    for _ in range(2):
        np.testing.assert_array_equal(f(w, x).numpy(), w.numpy() @ x.numpy() + 1)
