"""The native small reductions of issue 16 (_reduce.c, Reduce's direct kernel on the tiny-op
path): float32 sums, means, maxima and minima over all of an array or its last axis give
numpy's exact bits (the same pairwise association, the same NaN and signed-zero results),
for random shapes, values and layouts; the caller's thread and the worker's agree; what the
loop does not take (other axes, strided values, other dtypes) still reduces as before."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import imperative as imp
from imperative import F, _kernels
from imperative.backend import native

pytestmark = pytest.mark.skipif(native.reduce_rows_or is None,
                                reason="the native loops are off or not built")

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-38, -3e38, 3e38]


def numpy_reduction(x, mode, axis, keepdims):
    """What ops/reduce.py computes for float32 (its one-call plan), with numpy itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if mode == "mean":
            count = x.size if axis is None else x.shape[-1]
            return np.true_divide(np.add.reduce(x, axis, None, None, keepdims), count,
                                  dtype=np.float32)
        ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum}[mode]
        return ufunc.reduce(x, axis, None, None, keepdims)


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want, np.float32)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)


values = hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40),
                    elements=st.one_of(st.floats(-1e4, 1e4, width=32),
                                       st.sampled_from(SPECIAL)))


@settings(max_examples=300, deadline=None)
@given(x=values, mode=st.sampled_from(["sum", "mean", "max", "min"]),
       last=st.booleans(), keepdims=st.booleans())
def test_kernel_gives_numpys_bits(x, mode, last, keepdims):
    axis = -1 if last else None
    want = numpy_reduction(x, mode, axis, keepdims)
    code = native.REDUCE_MODES[mode.upper()]
    got = _kernels.reduce_rows_or(x, code, last, np.shape(want), numpy_reduction,
                                  (mode, axis, keepdims))
    same_bits(got, want)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), mode=st.sampled_from(["sum", "mean", "max", "min"]),
       keepdims=st.booleans(), strided=st.booleans())
def test_tensor_reductions_give_numpys_bits(data, mode, keepdims, strided):
    """Through the Tensor methods and F, contiguous or a transposed view (the loop's
    fallback), over all axes, the last one, or another (numpy's own call): the tiny path's
    bits are the worker's, and numpy's where the plan is numpy's one call."""
    x = data.draw(values)
    if strided and x.ndim >= 2:
        x = x.swapaxes(0, -1)
    axis = data.draw(st.sampled_from([None, -1, 0] if x.ndim > 1 else [None, -1]))
    t = imp.Tensor(x)
    with warnings.catch_warnings(), imp.option("async_level", 2):
        warnings.simplefilter("ignore", RuntimeWarning)
        got = getattr(t, mode)(axis=axis, keepdims=keepdims).numpy()
        same_bits(getattr(F, mode)(t, axis=axis, keepdims=keepdims).numpy(), got)
        with imp.option("enable_host_compute", 0):
            same_bits(getattr(t, mode)(axis=axis, keepdims=keepdims).numpy(), got)
    if axis in (None, -1):
        same_bits(got, numpy_reduction(np.ascontiguousarray(x), mode, axis, keepdims))


@pytest.mark.parametrize("mode", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("shape,axis", [((7,), None), ((4, 16), None), ((4, 16), 1),
                                        ((3, 5, 130), -1), ((2, 300), None)])
def test_caller_and_worker_give_the_same_bits(mode, shape, axis):
    """The tiny path runs the loop, a Command on the worker runs numpy's call."""
    x = imp.Tensor(np.random.default_rng(5).standard_normal(shape).astype(np.float32) * 100)
    with imp.option("async_level", 2):
        here = getattr(x, mode)(axis=axis).numpy()
        with imp.option("enable_host_compute", 0):
            there = getattr(x, mode)(axis=axis).numpy()
    same_bits(here, there)


def test_signed_zeros_nans_and_overflows_are_numpys():
    """numpy's vector loops choose between -0 and +0 (and among NaNs) by lane order: those
    results are numpy's own (the loop falls back), and so is an overflow's warning."""
    for row in ([0.0, -0.0], [-0.0, 0.0], [-0.0] * 9, [0.0, -0.0] * 20, [1.0, np.nan, -np.inf],
                [np.inf, -np.inf, 2.0]):
        x = np.array(row, np.float32)
        for mode in ("sum", "mean", "max", "min"):
            with imp.option("async_level", 2):
                same_bits(getattr(imp.Tensor(x), mode)().numpy(),
                          numpy_reduction(x, mode, None, False))


def test_an_overflowing_sum_warns_as_numpys():
    x = imp.Tensor(np.full(4, 3e38, np.float32))
    with imp.option("async_level", 2), pytest.warns(RuntimeWarning, match="overflow"):
        assert float(x.sum()) == np.inf


def test_other_dtypes_and_empty_arrays_reduce_as_before():
    ints = np.arange(12, dtype=np.int16).reshape(3, 4)
    assert imp.Tensor(ints).sum().numpy().dtype == np.int32
    assert int(imp.Tensor(ints).sum()) == 66
    doubles = np.linspace(0, 1, 10)
    assert float(imp.Tensor(doubles).mean()) == pytest.approx(0.5)
    assert float(imp.Tensor(np.zeros((0, 3), np.float32)).sum()) == 0.0
    with pytest.raises(ValueError, match="no identity"):
        imp.Tensor(np.zeros((0, 3), np.float32)).max()


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 300), classes=st.integers(1, 40),
       label_dtype=st.sampled_from([np.int32, np.int64, np.int16]),
       reduction=st.sampled_from(["mean", "sum", "none"]), seed=st.integers(0, 2**16),
       special=st.sampled_from([None, np.nan, np.inf, -np.inf, 1e30]))
def test_cross_entropy_in_one_call_gives_the_kernels_bits(rows, classes, label_dtype,
                                                          reduction, seed, special):
    """CrossEntropy's direct kernel (the tiny path) against its kernel (the worker's)."""
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, classes)) * 5).astype(np.float32)
    if special is not None:
        logits[rng.integers(rows), rng.integers(classes)] = special
    labels = rng.integers(0, classes, rows).astype(label_dtype)
    x, y = imp.Tensor(logits), imp.Tensor(labels)
    with warnings.catch_warnings(), imp.option("async_level", 2):
        warnings.simplefilter("ignore", RuntimeWarning)
        here = F.cross_entropy(x, y, reduction=reduction).numpy()
        with imp.option("enable_host_compute", 0):
            there = F.cross_entropy(x, y, reduction=reduction).numpy()
    same_bits(here, there)


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("level,error", [(0, IndexError), (2, imp.AsyncError)])
def test_cross_entropy_bad_label_is_named_as_before(label_dtype, level, error):
    """A label out of range makes the one-call kernel step aside: the op's kernel names it,
    at once (level 0) or when the result is read, and the runtime stays usable."""
    x = imp.Tensor(np.zeros((3, 4), np.float32))
    labels = imp.Tensor(np.array([0, 4, 1], label_dtype))
    with imp.option("async_level", level):
        with pytest.raises(error, match="label 4 is out of range for 4 classes"):
            F.cross_entropy(x, labels).numpy()
        good = imp.Tensor(np.array([0, 3, 1], label_dtype))
        assert float(F.cross_entropy(x, good)) == pytest.approx(np.log(4))
