"""Float sums that do not go to numpy's reduction in one call (ops/reduce.py): long leading
axes summed in a cascade of blocks (a bias gradient), few values per result added slice by
slice (an upsampling's gradient), and the pairwise copy for the rest; each against float64
and PyTorch on the same inputs, for random shapes, axes and memory layouts."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.ops import reduce as reduce_ops

torch = pytest.importorskip("torch")


def _check(x, axis, keepdims):
    got_sum = F.sum(imp.Tensor(x), axis=axis, keepdims=keepdims).numpy()
    got_mean = F.mean(imp.Tensor(x), axis=axis, keepdims=keepdims).numpy()
    exact = x.astype(np.float64).sum(axis=axis, keepdims=keepdims)
    reference = torch.from_numpy(np.ascontiguousarray(x)).sum(dim=axis, keepdim=keepdims)
    count = x.size // max(exact.size, 1)
    assert got_sum.shape == exact.shape and got_sum.dtype == np.float32
    # no further from float64 than PyTorch's own float32 sum, with a float32 rounding's slack
    slack = 4 * np.finfo(np.float32).eps * (np.abs(x).astype(np.float64).sum(
        axis=axis, keepdims=keepdims) + 1)
    torch_error = np.abs(reference.numpy() - exact)
    assert np.all(np.abs(got_sum - exact) <= 2 * torch_error + slack)
    np.testing.assert_allclose(got_mean, exact / count, rtol=0,
                               atol=float((2 * torch_error + slack).max()) / count)


@pytest.mark.parametrize("shape,axis", [
    ((2048, 256), 0),                   # a bias gradient: a cascade of 16-row blocks
    ((2050, 70), 0),                    # rows left after the last whole block
    ((1030, 3, 70), (0, 1)),            # two leading axes
    ((3, 1100, 20), (0, 1)),            # rows narrower than the cascade's minimum: pairwise
    ((4, 32, 16, 2, 16, 2), (3, 5)),    # an upsampling's gradient: four slices added
    ((1 << 13, 2), 1),                  # the last axis two values long
    ((1 << 12, 3, 3), (1, 2)),
])
@pytest.mark.parametrize("keepdims", [False, True])
def test_own_sum_paths_match_float64_and_pytorch(shape, axis, keepdims):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    axes = (axis,) if isinstance(axis, int) else axis
    assert reduce_ops._own_sum(x.shape, axes, x.dtype)     # the path under test is taken
    _check(x, axis, keepdims)
    _check(np.asfortranarray(x), axis, keepdims)            # the same values, other layout


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 16, 17, 70, 1030]), min_size=1, max_size=4),
       st.data())
def test_random_sums_match_float64_and_pytorch(dims, data):
    if np.prod(dims) > 1 << 18:
        dims = dims[:2]
    axes = data.draw(st.lists(st.integers(0, len(dims) - 1), min_size=1, unique=True))
    x = np.random.default_rng(len(dims)).standard_normal(dims).astype(np.float32)
    if data.draw(st.booleans()):
        x = x.T                                             # a transposed view
    _check(x, tuple(sorted(axes)), data.draw(st.booleans()))
