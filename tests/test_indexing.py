"""Tensor.__getitem__ / __setitem__ against numpy (API.md §1), on a generated table of index
expressions, plus views, errors and the index ops themselves."""

import numpy as np
import pytest

import imperative as imp
from imperative import ops as O

SHAPES = [(5,), (4, 5), (3, 4, 5), (2, 3, 4, 5)]
CASES_PER_SHAPE = 60
STEPS = [None, 1, 2, 3, -1, -2, -3]


class AsTensor:
    """Marks an index array that the test passes as an imp.Tensor (numpy gets the array)."""

    def __init__(self, array):
        self.array = np.asarray(array)


def for_numpy(index):
    return tuple(e.array if isinstance(e, AsTensor) else e for e in index)


def for_imperative(index):
    return tuple(imp.Tensor(e.array) if isinstance(e, AsTensor) else e for e in index)


def describe(e):
    if isinstance(e, AsTensor):
        return f"{'Tmask' if e.array.dtype == bool else 'T'}{e.array.shape}"
    if isinstance(e, np.ndarray):
        return f"{'mask' if e.dtype == bool else 'arr'}{e.shape}"
    if isinstance(e, slice):
        return ":".join("" if v is None else str(v) for v in (e.start, e.stop, e.step))
    return "..." if e is Ellipsis else repr(e)


# --------------------------------------------------------------------------- the generated table


def _slice(rng, n):
    def bound():
        return None if rng.random() < 0.3 else int(rng.integers(-n - 2, n + 3))
    return slice(bound(), bound(), STEPS[rng.integers(len(STEPS))])


def _shape_broadcasting_to(rng, target):
    """A random shape that broadcasts to `target` (some trailing dims, some set to 1)."""
    kept = int(rng.integers(1, len(target) + 1)) if target and rng.random() < 0.85 else 0
    dims = target[len(target) - kept:]
    return tuple(1 if rng.random() < 0.3 else d for d in dims)


def _plan(rng, ndim):
    """Item kinds with the axes each consumes, in order; then where '...' goes, if anywhere."""
    kinds, budget = [], int(rng.integers(1, ndim + 1))
    while budget:
        kind = rng.choice(["int", "slice", "slice", "list", "array", "tensor", "mask", "tmask"])
        width = int(rng.integers(1, min(budget, 2) + 1)) if kind in ("mask", "tmask") else 1
        kinds.append((kind, width))
        budget -= width
    ellipsis_at = int(rng.integers(0, len(kinds) + 1)) if rng.random() < 0.35 else None
    return kinds, ellipsis_at


def _random_index(rng, shape):
    ndim = len(shape)
    kinds, ellipsis_at = _plan(rng, ndim)
    # axes: before '...' from the left, after it from the right
    n_after = sum(w for _, w in kinds[ellipsis_at:]) if ellipsis_at is not None else 0
    axes, axis = [], 0
    for i, (_, width) in enumerate(kinds):
        if i == ellipsis_at:
            axis = ndim - n_after
        axes.append(axis)
        axis += width
    # at most one mask; the int arrays broadcast with its selection (or a random target)
    masks = [i for i, (k, _) in enumerate(kinds) if k in ("mask", "tmask")]
    items, target = [None] * len(kinds), [(), (1,), (2,), (3,), (2, 3), (3, 1)][rng.integers(6)]
    for i in masks[:1]:
        kind, width = kinds[i]
        mask = rng.random(shape[axes[i]:axes[i] + width]) < 0.5
        items[i] = AsTensor(mask) if kind == "tmask" else mask
        target = (int(mask.sum()),)
    for i, ((kind, _), ax) in enumerate(zip(kinds, axes)):
        n = shape[ax]
        if items[i] is not None:
            continue
        if kind == "int":
            items[i] = int(rng.integers(-n, n))
        elif kind == "slice":
            items[i] = _slice(rng, n)
        else:                                  # list, array, tensor; extra masks become arrays
            arr = rng.integers(-n, n, size=_shape_broadcasting_to(rng, target))
            items[i] = arr.tolist() if kind == "list" and arr.ndim else (
                AsTensor(arr) if kind == "tensor" else arr)
    if ellipsis_at is not None:
        items.insert(ellipsis_at, Ellipsis)
    for _ in range(rng.integers(0, 3)):
        if rng.random() < 0.4:
            items.insert(int(rng.integers(0, len(items) + 1)), None)
    return tuple(items)


def _generate():
    rng = np.random.default_rng(20240611)
    cases = []
    for shape in SHAPES:
        x = np.zeros(shape)
        found = 0
        while found < CASES_PER_SHAPE:
            index = _random_index(rng, shape)
            try:
                x[for_numpy(index)]
            except IndexError:                 # arrays that do not broadcast: draw again
                continue
            cases.append(pytest.param(shape, index, id=f"{shape}-{found}-"
                                      + ",".join(map(describe, index))))
            found += 1
    return cases


# numpy's corner cases, named so that a failure says which rule broke
HANDPICKED = [
    ((3, 4, 5), (0, slice(None), [0, 1]), "int and array separated: advanced dims go first"),
    ((3, 4, 5), ([0, 1], None, [0, 1]), "None separates advanced indices"),
    ((5, 3, 4), (slice(None), [0, 1, 2], Ellipsis, [0, 1, 2]), "an empty ... separates"),
    ((3, 4, 5), (slice(None), [0, 1], [2, 3]), "adjacent arrays stay in place"),
    ((2, 3, 4, 5), (slice(None), AsTensor([[0], [2]]), slice(1, 3), AsTensor([1, 4])),
     "2-d tensors separated"),
    ((3, 4, 5), (True,), "0-d True adds an axis"),
    ((3, 4, 5), (False, Ellipsis), "0-d False selects nothing"),
    ((3, 4, 5), (slice(None), True, [0, 1]), "0-d bool counts as advanced"),
    ((3, 4, 5), (AsTensor(np.int32(2)), slice(None, None, -1)), "0-d index tensor"),
    ((3, 4, 5), ([],), "an empty list is an empty int index"),
    ((3, 4, 5), (np.zeros((3, 4), bool),), "a mask selecting nothing"),
    ((3, 4, 5), (AsTensor(np.ones((3, 4, 5), bool)),), "a full-rank tensor mask"),
    ((3, 4, 5), (1, AsTensor(np.array([True, False, True, True])), slice(-1, None, -2)),
     "mask after int"),
    ((4, 5), (slice(10, -10, -1), slice(-10, 10)), "slice bounds clamp"),
    ((4, 5), ((0, 2), 1), "a nested tuple is an array"),
    ((5,), (np.array([-1, -5, 0]),), "negative array entries wrap"),
]
CASES = _generate() + [pytest.param(shape, index, id=why) for shape, index, why in HANDPICKED]


def data(shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * 1.5 - 7


def kind_of(e):
    if isinstance(e, (AsTensor, np.ndarray)):
        array = e.array if isinstance(e, AsTensor) else e
        return (("tensor " if isinstance(e, AsTensor) else "")
                + ("mask" if array.dtype == bool else "array"))
    if isinstance(e, slice):
        return "slice step<0" if (e.step or 1) < 0 else "slice step>0"
    return {list: "list", int: "int"}.get(type(e), repr(e))


def test_the_table_covers_every_kind_of_index():
    kinds = {kind_of(e) for param in CASES for e in param.values[1]}
    assert kinds >= {"int", "None", "Ellipsis", "list", "array", "mask", "tensor array",
                     "tensor mask", "slice step<0", "slice step>0"}
    assert len(CASES) >= 200


@pytest.mark.parametrize("shape, index", CASES)
def test_getitem_matches_numpy(shape, index):
    x = data(shape)
    want = x[for_numpy(index)]
    got = imp.Tensor(x)[for_imperative(index)]
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


def _value(kind, target):
    if kind == "scalar":
        return -3
    if kind == "array":     # float64, broadcast along the first axis
        shape = (1,) + target[1:] if target else ()
        return np.random.default_rng(0).normal(size=shape)
    return imp.Tensor(-1 - np.arange(np.prod(target), dtype=np.int32).reshape(target))


@pytest.mark.parametrize("kind", ["scalar", "array", "tensor"])
@pytest.mark.parametrize("shape, index", CASES)
def test_setitem_matches_numpy(shape, index, kind):
    x = data(shape)
    value = _value(kind, x[for_numpy(index)].shape)
    want = x.copy()
    want[for_numpy(index)] = value.numpy() if isinstance(value, imp.Tensor) else value
    t = imp.Tensor(x)
    t[for_imperative(index)] = value
    assert t.dtype == np.float32 and t.shape == shape
    np.testing.assert_array_equal(t.numpy(), want)


# --------------------------------------------------------------------------- views and values


def test_basic_indexing_gives_views_that_share_storage():
    x = imp.Tensor(np.arange(256 * 256, dtype=np.float32).reshape(256, 256))
    imp.sync()
    before = imp.memory_stats()["allocated"]
    views = [x[1:], x[::-2, 3], x[..., None, 7:0:-3], x[5], x[:, None]]
    imp.sync()
    assert imp.memory_stats()["allocated"] == before
    for v in views:
        assert np.shares_memory(v.numpy(), x.numpy())


def test_advanced_indexing_copies():
    x = imp.Tensor(np.arange(20, dtype=np.float32).reshape(4, 5))
    y = x[[0, 2]]
    assert not np.shares_memory(y.numpy(), x.numpy())


def test_setitem_rebinds_only_the_tensor_it_is_called_on():
    p = imp.Parameter(np.zeros(4, np.float32))
    before = p.detach()
    view = p[1:]
    p[1] = 5
    assert type(p) is imp.Parameter
    np.testing.assert_array_equal(p.numpy(), [0, 5, 0, 0])
    np.testing.assert_array_equal(before.numpy(), [0, 0, 0, 0])   # values are immutable
    np.testing.assert_array_equal(view.numpy(), [0, 0, 0])


def test_setitem_from_an_overlapping_view_reads_the_old_values():
    a = np.arange(6, dtype=np.float32)
    t = imp.Tensor(a)
    t[1:] = t[:-1]
    a[1:] = a[:-1]
    np.testing.assert_array_equal(t.numpy(), a)


def test_range_and_numpy_scalars_index_like_numpy():
    a = np.arange(20).reshape(4, 5)
    x = imp.Tensor(a)
    for index in [range(1, 3), np.int16(2), (np.int64(-1), np.array(2)), np.True_]:
        np.testing.assert_array_equal(x[index].numpy(), a[index])


def test_setitem_casts_the_value_to_the_tensor_dtype():
    t = imp.Tensor(np.zeros(4, np.int8))
    t[:2] = [1.9, -2.7]
    t[imp.Tensor([3])] = imp.Tensor([7.5])
    assert t.dtype == np.int8
    np.testing.assert_array_equal(t.numpy(), np.array([1.9, -2.7, 0, 7.5]).astype(np.int8))


def test_setitem_writes_in_place_when_the_old_value_is_unshared(async_level):
    if async_level == 0:
        pytest.skip("ops run at once on the caller's thread: no Del to fold into them")
    # (past the host-compute limit: the worker runs it, with the old value's Del folded in)
    t = imp.Tensor(np.zeros(imp._core.HOST_COMPUTE_MEDIUM_ELEMENTS + 1, np.float32))
    imp.sync()
    reuses = imp.memory_stats()["inplace_reuses"]
    t[10:20] = 1.0
    imp.sync()
    assert imp.memory_stats()["inplace_reuses"] == reuses + 1
    assert t.numpy().sum() == 10


def test_an_int_tensor_index_has_its_shape_at_dispatch():
    x = imp.Tensor(np.zeros((6, 7), np.float32))
    y = x[imp.Tensor([[0, 1, 2]]), 1:4]
    assert y._record.shape == (1, 3, 3)       # no waiting: known from the index's shape
    assert not O.IndexingMultiAxisVec((O.indexing.TENSOR,)).value_dependent


def test_a_bool_tensor_mask_makes_the_shape_value_dependent():
    a = np.arange(12).reshape(3, 4)
    x = imp.Tensor(a)
    y = x[x > 4]
    assert O.MaskedIndexingMultiAxisVec.VALUE_DEPENDENT
    assert y.shape == (7,)
    np.testing.assert_array_equal(y.numpy(), a[a > 4])
    np.testing.assert_array_equal(y[::-2].numpy(), a[a > 4][::-2])   # indexing a result of it


def test_a_masked_result_feeds_other_ops():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = imp.Tensor(a)
    assert float(x[x > 4].sum()) == a[a > 4].sum()


def test_setitem_through_a_bool_tensor_mask():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = imp.Tensor(a)
    x[x > 4] = imp.Tensor(np.float32(0.5))
    want = a.copy()
    want[want > 4] = 0.5
    np.testing.assert_array_equal(x.numpy(), want)


def test_index_ops_are_values_in_imp_ops():
    T = O.indexing.TENSOR
    op = O.IndexingMultiAxisVec((slice(1, None, -1), T, None, Ellipsis, 2))
    assert op == O.IndexingMultiAxisVec((slice(1, None, -1), T, None, Ellipsis, 2))
    assert hash(op) == hash(O.IndexingMultiAxisVec((slice(1, None, -1), T, None, Ellipsis, 2)))
    assert repr(op) == "IndexingMultiAxisVec([1::-1, <tensor>, None, ..., 2])"
    for name in ("SetSubtensor", "IndexingSetMultiAxisVec", "MaskedIndexingMultiAxisVec",
                 "IndexingMultiAxisVec", "Subtensor"):
        assert hasattr(O, name)
    assert O.SetSubtensor.INPLACE_CAPABLE
    with pytest.raises(ValueError):
        O.SetSubtensor((T,))


def test_index_ops_through_apply():
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    x, idx = imp.Tensor(a), imp.Tensor([3, 0])
    (y,) = imp.apply(O.IndexingMultiAxisVec((slice(None), O.indexing.TENSOR)), x, idx)
    np.testing.assert_array_equal(y.numpy(), a[:, [3, 0]])
    (z,) = imp.apply(O.IndexingSetMultiAxisVec((O.indexing.TENSOR, 1)), x,
                     imp.Tensor(np.int32(-1)), idx)
    want = a.copy()
    want[[3, 0], 1] = -1
    np.testing.assert_array_equal(z.numpy(), want)
    np.testing.assert_array_equal(x.numpy(), a)            # the kernel did not write into x


def test_indexing_leaks_no_handles(assert_no_leak):
    x = imp.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))

    def work():
        y = x[[0, 1], :, imp.Tensor([1, 2])] + x[1, :, 0]
        z = imp.Tensor(x)
        z[np.array([True, False]), 1:] = y[:, :1]
        z[x > 3] = 0.0
        return z[z < 5].numpy(), z.numpy()
    assert_no_leak(work, repeat=3)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("index", [5, -6, (0, 5), (Ellipsis, 9), ([0], 7), (slice(None), -6),
                                   (np.array([1, 5]),), ([[0, -7]],)],
                         ids=str)
def test_indices_known_at_dispatch_are_checked_at_the_call(index):
    x = imp.Tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        x[index]
    with pytest.raises(IndexError, match="out of bounds"):
        x[index] = 1.0
    np.testing.assert_array_equal(x.numpy(), np.zeros((4, 5)))


def test_an_int_tensor_index_is_checked_by_the_kernel(async_level):
    x = imp.Tensor(np.arange(5, dtype=np.float32))
    idx = imp.Tensor([1, 7])
    if async_level == 0:
        with pytest.raises(IndexError, match="out of bounds"):
            x[idx]
        return
    y = x[idx]
    assert y.shape == (2,)
    with pytest.raises(imp.AsyncError) as info:
        y.numpy()
    assert isinstance(info.value.__cause__, IndexError)


@pytest.mark.parametrize("index, message", [
    ((0, 0, 0), "too many indices"),
    ((Ellipsis, 0, Ellipsis), "single ellipsis"),
    ((np.ones((4, 5, 1), bool),), "too many indices"),
    ((np.ones(3, bool),), "boolean index did not match"),
    ((slice(None), np.ones(4, bool)), "boolean index did not match"),
    ((np.array([0, 1]), np.array([0, 1, 2])), "shape mismatch"),
    ((np.array([0.5]),), "integer"),
    (("a",), "only integers"),
    ((1.0,), "only integers"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_indices_raise_index_error_like_numpy(index, message):
    x = imp.Tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(IndexError, match=message):
        np.zeros((4, 5))[index]
    with pytest.raises(IndexError, match=message):
        x[index]


@pytest.mark.parametrize("make_index, message", [
    (lambda: imp.Tensor(np.ones((4, 4), bool)), "boolean index did not match"),
    (lambda: (imp.Tensor([0, 1]), imp.Tensor([0, 1, 2])), "shape mismatch"),
    (lambda: imp.Tensor([0.0]), "integer"),
])
def test_bad_index_tensors_raise_at_the_call(make_index, message):
    x = imp.Tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(IndexError, match=message):
        x[make_index()]


def test_zero_slice_step_is_a_value_error():
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        imp.Tensor([1, 2, 3])[::0]


def test_setitem_value_that_does_not_broadcast_raises_at_the_call():
    x = imp.Tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="could not broadcast"):
        x[1:3] = np.ones((3, 5))
    with pytest.raises(ValueError, match="could not broadcast"):
        x[[0, 1], [0, 1]] = imp.Tensor([1.0, 2.0, 3.0])
    x[1:3] = np.ones((1, 1, 5))                      # extra leading 1s are fine, as in numpy
    assert x.numpy().sum() == 10
