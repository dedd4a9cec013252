"""`t.astype(dtype)` of a small resident tensor runs on the caller's thread (as a unary
elementwise op does), a large one is dispatched: both give numpy's astype, bit for bit, on
every layout ((520, 520) passes HOST_COMPUTE_MEDIUM_ELEMENTS: it queues at async level 2),
and the gradient, trace and profile see the op as before."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative.autodiff import GradManager

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
