"""The tiny-op path (imperative/_tiny.pxi) and the Tensor methods in the core
(imperative/_methods.pxi), issue 16.

A small op on resident inputs runs at dispatch without a Command; it must give exactly what
the general path gives (host compute off: every op a command for the worker), fail the way
the general path fails (an error at the call at level 0, an AsyncError naming the user's
line at level 2), and leave no handle behind. The methods find their op by their arguments:
the same call must always give the same result as the facade's own helpers, and arguments
that look alike but differ (a quantized dtype, a list, a Tensor shape) must not share an op.
"""
import contextlib
import gc

import numpy as np
import pytest

import imperative as imp
from imperative import functional as F
from tests.conftest import assert_no_leak, live_handle_count


@contextlib.contextmanager
def general_path():
    with imp.option("async_level", 2), imp.option("enable_host_compute", 0):
        yield
        imp.sync()


RNG = np.random.default_rng(7)
X = RNG.standard_normal((4, 16)).astype(np.float32)
Y = RNG.standard_normal((4, 16)).astype(np.float32)
IMG = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
KER = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
LABELS = np.array([1, 5, 0, 15], np.int32)
MASK = RNG.random((4, 16)) > 0.5

CALLS = {
    "sum": lambda t: t["x"].sum(),
    "sum axis": lambda t: t["x"].sum(axis=1, keepdims=True),
    "mean axes": lambda t: t["x"].mean(axis=(0, 1)),
    "max": lambda t: t["x"].max(axis=0),
    "min": lambda t: t["x"].min(),
    "prod": lambda t: t["x"].prod(axis=-1),
    "reshape": lambda t: t["x"].reshape(16, 4),
    "reshape tuple": lambda t: t["x"].reshape((2, -1)),
    "transpose": lambda t: t["x"].transpose(1, 0),
    "T": lambda t: t["x"].T,
    "astype": lambda t: t["x"].astype(np.int32),
    "basic index": lambda t: t["x"][1:3, ::2],
    "advanced index": lambda t: t["x"][np.array([3, 0, 2])],
    "matmul": lambda t: t["x"] @ t["y"].T,
    "concat": lambda t: F.concat([t["x"], t["y"]], axis=1),
    "where": lambda t: F.where(t["mask"], t["x"], t["y"]),
    "clip": lambda t: F.clip(t["x"], -0.5, 0.5),
    "softmax": lambda t: F.softmax(t["x"], -1),
    "log_softmax": lambda t: F.log_softmax(t["x"], 0),
    "layer_norm": lambda t: F.layer_norm(t["x"], (16,), t["g"], t["b"]),
    "cross_entropy": lambda t: F.cross_entropy(t["x"], t["labels"]),
    "cross_entropy sum": lambda t: F.cross_entropy(t["x"], t["labels"], reduction="sum"),
    "conv2d": lambda t: F.conv2d(t["img"], t["ker"], padding=1),
    "gelu": lambda t: F.gelu(t["x"]),
    "matmul transpose_b": lambda t: F.matmul(t["x"], t["y"], transpose_b=True),
    "matmul transpose_a": lambda t: F.matmul(t["x"], t["y"], transpose_a=True),
    "matmul 1-d, transpose_a": lambda t: F.matmul(t["g"], t["y"].T, transpose_a=True),
    "matmul batched, both": lambda t: F.matmul(t["img"][0], t["img"][0], transpose_a=True,
                                               transpose_b=True),
    "linear": lambda t: F.linear(t["x"], t["y"][:, :16], t["b"][:4]),
}


def _tensors():
    return {"x": imp.Tensor(X), "y": imp.Tensor(Y), "mask": imp.Tensor(MASK),
            "labels": imp.Tensor(LABELS), "img": imp.Tensor(IMG), "ker": imp.Tensor(KER),
            "g": imp.Tensor(np.linspace(0.5, 1.5, 16).astype(np.float32)),
            "b": imp.Tensor(np.linspace(-1, 1, 16).astype(np.float32))}


@pytest.mark.parametrize("name", list(CALLS))
def test_tiny_path_gives_the_general_paths_bits(name):
    fast = CALLS[name](_tensors()).numpy().copy()
    with general_path():
        slow = CALLS[name](_tensors()).numpy().copy()
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.parametrize("name", ["sum axis", "reshape", "basic index", "cross_entropy",
                                  "conv2d", "concat"])
def test_tiny_path_results_are_released(name):
    t = _tensors()
    assert_no_leak(lambda: CALLS[name](t).numpy(), repeat=3)


def test_cross_entropy_rows_pick_what_take_along_axis_picks():
    # the 2-D case gathers by (row, label); other ranks keep take_along_axis: the same values
    logp = F.log_softmax(imp.Tensor(X), -1).numpy()
    picked = -np.take_along_axis(logp, LABELS[:, None].astype(np.intp), 1)[:, 0]
    mean = F.cross_entropy(imp.Tensor(X), imp.Tensor(LABELS)).numpy()
    assert mean == np.float32(picked.sum() / picked.size)
    per_item = F.cross_entropy(imp.Tensor(X), imp.Tensor(LABELS), reduction="none").numpy()
    np.testing.assert_array_equal(per_item, picked)
    # a 3-D input along its middle axis: the general gather
    x3 = X.reshape(2, 2, 16).transpose(0, 2, 1).copy()
    labels3 = LABELS.reshape(2, 2)
    got = F.cross_entropy(imp.Tensor(x3), imp.Tensor(labels3), axis=1, reduction="none").numpy()
    np.testing.assert_array_equal(got.reshape(-1), per_item)


def test_a_kernel_error_on_the_tiny_path_is_raised_like_the_general_paths():
    bad = imp.Tensor(np.array([1, 99, 0, 2], np.int32))      # label 99 of 16 classes
    before = live_handle_count()
    with imp.option("async_level", 0):
        with pytest.raises(IndexError, match="label 99 is out of range for 16 classes"):
            F.cross_entropy(imp.Tensor(X), bad)
        assert live_handle_count() == before
    with imp.option("async_level", 2):
        loss = F.cross_entropy(imp.Tensor(X), bad)           # this line is named in the message
        with pytest.raises(imp.AsyncError, match=r"label 99 .*test_tiny_path\.py:\d+") as info:
            imp.sync()
        assert isinstance(info.value.__cause__, IndexError)
        with pytest.raises(RuntimeError, match="unusable"):
            loss.numpy()
        # (the error's traceback keeps the caller's frames, and so their tensors, alive:
        # they go with it)
        del loss, info
        gc.collect()
    assert live_handle_count() == before
    # the runtime stays usable, and the tiny path still runs
    assert float(imp.Tensor(X).sum()) == pytest.approx(float(X.sum()), rel=1e-6)


def test_reductions_memoise_only_plain_arguments():
    x = imp.Tensor(X)
    np.testing.assert_array_equal(x.sum(axis=[0, 1]).numpy(), x.sum(axis=(0, 1)).numpy())
    assert x.sum(axis=1, keepdims=1).shape == (4, 1)
    assert x.max(axis=0).shape == (16,) and x.max(axis=(0,)).shape == (16,)
    with pytest.raises(TypeError,
                       match=r"Tensor\.sum\(\) got an unexpected keyword argument 'dim'"):
        x.sum(dim=1)
    with pytest.raises(TypeError,
                       match=r"Tensor\.mean\(\) got an unexpected keyword argument 'foo'"):
        x.mean(foo=1)
    with pytest.raises(IndexError, match="axis 5 is out of range"):
        x.sum(axis=5)
    with pytest.raises(IndexError, match="axis 5 is out of range"):    # again: the same
        x.sum(axis=5)


def test_reshape_and_transpose_arguments():
    x = imp.Tensor(X)
    assert x.reshape(16, 4).shape == x.reshape((16, 4)).shape == x.reshape([16, 4]).shape
    assert x.reshape(imp.Tensor(np.array([8, 8]))).shape == (8, 8)
    assert x.reshape(imp.Tensor(np.array([2, 32]))).shape == (2, 32)    # not the last op
    assert x.reshape(-1).shape == (64,)
    with pytest.raises(TypeError, match="expected integers"):
        x.reshape(3.5, 2)
    with pytest.raises(ValueError, match="cannot reshape"):
        x.reshape(5)
    assert x.transpose().shape == x.T.shape == (16, 4)
    cube = imp.Tensor(np.zeros((2, 3, 4), np.float32))
    assert cube.transpose().shape == cube.T.shape == (4, 3, 2)      # the rank is in the key
    assert cube.transpose(1, 0, 2).shape == cube.transpose((1, 0, 2)).shape == (3, 2, 4)


def test_astype_tells_quantized_dtypes_apart():
    x = imp.Tensor(X)
    same = x.astype("float32")
    assert same is not x and x.astype(np.float32) is not x    # new objects, as numpy's
    np.testing.assert_array_equal(same.numpy(), x.numpy())
    a = x.astype(imp.dtype.qint8(0.5))
    b = x.astype(imp.dtype.qint8(0.25))
    assert imp.dtype.get_scale(a.dtype) == 0.5 and imp.dtype.get_scale(b.dtype) == 0.25
    assert not np.array_equal(a.astype(np.float32).numpy(), b.astype(np.float32).numpy())
    i = x.astype(np.int32)
    assert i.astype(np.int32) is not i and i.astype("float32").dtype == np.float32


def test_python_numbers_of_one_element_tensors():
    assert float(imp.Tensor(np.array([[2.5]], np.float32))) == 2.5
    assert int(imp.Tensor(np.array(7, np.int32))) == 7
    assert bool(imp.Tensor(np.array([0.0], np.float32))) is False
    with pytest.raises(TypeError,
                       match=r"one element can be converted to float, got shape \(4, 16\)"):
        float(imp.Tensor(X))
    masked = imp.Tensor(X)[imp.Tensor(X) > 10]      # a value-dependent shape: (0,)
    with pytest.raises(TypeError, match=r"converted to int, got shape \(0,\)"):
        int(masked)


TENSOR_INDICES = {     # names of index Tensors (in _index_tensors) among basic items
    "rows, slice": ("i64", slice(1, 9)),
    "slice, rows": (slice(None, 3), "i32"),
    "int, rows": (2, "i64"),
    "rows, rows": ("i64", "i32"),
    "rows, None, step": ("i32", None, slice(None, None, -3)),
    "mask": ("mask",),
    "mask row, slice": ("mask row", slice(2, None)),
}


def _index_tensors():
    return {"i64": np.array([3, 0, 2, 3], np.int64), "i32": np.array([1, 0, 2, 1], np.int32),
            "mask": MASK, "mask row": np.array([True, False, True, True])}


@pytest.mark.parametrize("name", list(TENSOR_INDICES))
def test_index_tuples_holding_tensors_pick_what_numpy_picks(name):
    arrays = _index_tensors()
    tensors = {k: imp.Tensor(v) for k, v in arrays.items()}
    items = TENSOR_INDICES[name]
    want = X[tuple(arrays[i] if isinstance(i, str) else i for i in items)]
    x = imp.Tensor(X)
    for _ in range(2):          # the second time by the memoised op
        got = x[tuple(tensors[i] if isinstance(i, str) else i for i in items)].numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    with general_path():
        slow = x[tuple(tensors[i] if isinstance(i, str) else i for i in items)].numpy()
    np.testing.assert_array_equal(slow, want)


def test_memoised_index_tuples_check_each_calls_tensors():
    x = imp.Tensor(X)
    rows = imp.Tensor(np.array([0, 1], np.int64))
    x[rows, rows]                                       # the (int64, int64) op, memoised
    for _ in range(2):
        with pytest.raises(IndexError, match="shape mismatch"):
            x[rows, imp.Tensor(np.array([0, 1, 2], np.int64))]
        with pytest.raises(IndexError, match="integer"):
            x[rows, imp.Tensor(np.array([0.5], np.float32))]
    x[imp.Tensor(np.array([1, 1, 0], np.int64)), np.array([2, 3, 4])]    # a constant: facade's
    np.testing.assert_array_equal(
        x[imp.Tensor(np.array([1, 1, 0], np.int64)), np.array([2, 3, 4])].numpy(),
        X[[1, 1, 0], [2, 3, 4]])


SETS = ((1, 0.5), ((2, slice(3, 5)), 2), ((..., 0), True), (0, 1.75))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_])
def test_setitem_of_a_number_casts_as_tensor_of_that_dtype_does(dtype):
    def fill(t):
        for index, value in SETS:
            t[index] = value            # twice each: the second time by the memoised op
            t[index] = value
        t[3, ::4] = imp.Tensor(np.array([9.5, 8, 7, 6], np.float32))    # a Tensor value
        return t.numpy().copy()
    want = np.zeros((4, 16), dtype)
    for index, value in SETS:
        want[index] = np.array(value, dtype=dtype)      # Tensor(value, dtype=)'s cast
    fast = fill(imp.Tensor(np.zeros((4, 16), dtype)))
    with general_path():
        slow = fill(imp.Tensor(np.zeros((4, 16), dtype)))
    np.testing.assert_array_equal(fast, slow)
    assert fast.dtype == dtype
    np.testing.assert_array_equal(fast[:3], want[:3])


def test_setitem_of_a_number_that_does_not_fit_says_so_every_time():
    u = imp.Tensor(np.zeros(4, np.uint8))
    u[1] = 7
    for _ in range(2):
        with pytest.raises(OverflowError, match="300 out of bounds for uint8"):
            u[2] = 300
    np.testing.assert_array_equal(u.numpy(), [0, 7, 0, 0])


@pytest.mark.parametrize("symbolic", [False, True])
def test_traces_see_the_core_methods_as_they_saw_the_facade(symbolic):
    from imperative.jit import trace
    w = imp.Parameter(np.linspace(0, 1, 16).astype(np.float32))

    def f(x):
        y = x.reshape(8, 8).T[1:5].sum(axis=1, keepdims=True) + w.max()   # w: external
        z = x.astype(np.int32).reshape(-1)[::3]
        return y.mean(axis=0) * 2.0, z.transpose()

    traced = trace(f, symbolic=symbolic)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = imp.Tensor(rng.standard_normal(64).astype(np.float32) * 4)
        got = [t.numpy().copy() for t in traced(x)]
        want = [t.numpy() for t in f(x)]
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
        w._set_info_from(w + 1.0)           # read afresh by the next call
    assert traced.stats["replays"] == 3 and traced.stats["mismatches"] == 0


# ---------------------------------------------------------------- where a medium op runs

MEDIUM = imp._core.HOST_COMPUTE_MAX_ELEMENTS    # elements: past the first limit, not the second


def _commands_issued(fn):
    imp.sync()
    before = imp._core._channel_stats()["issued"]
    out = fn()
    imp.sync()
    return imp._core._channel_stats()["issued"] - before, out


def test_a_medium_elementwise_op_or_optimizer_step_runs_on_the_callers_thread(async_level):
    """Past HOST_COMPUTE_MAX_ELEMENTS, an op without much arithmetic (a fused optimizer
    step over a small model, an add) still runs at once instead of waking the worker; the
    result is the general path's."""
    if async_level == 0:
        pytest.skip("every op runs on the caller's thread at level 0")
    data = RNG.standard_normal(MEDIUM).astype(np.float32)
    a, b = imp.Tensor(data), imp.Tensor(data[::-1].copy())
    issued, out = _commands_issued(lambda: a * b + 1.0)
    assert issued == 0
    np.testing.assert_array_equal(out.numpy(), data * data[::-1] + np.float32(1.0))
    w = imp.Parameter(RNG.standard_normal((256, 128)).astype(np.float32))
    w.grad = imp.Tensor(RNG.standard_normal((256, 128)).astype(np.float32))
    opt = imp.optim.Adam([w], 1e-3)
    issued, _ = _commands_issued(opt.step)
    assert issued == 0


def test_a_medium_product_goes_to_the_worker_and_a_large_op_too(async_level):
    """A product of a megaflop or more releases the GIL in its kernel: it overlaps the caller
    on the worker. Past HOST_COMPUTE_MEDIUM_ELEMENTS every op goes there."""
    if async_level == 0:
        pytest.skip("every op runs on the caller's thread at level 0")
    x = RNG.standard_normal((192, 192)).astype(np.float32)      # 110K elements, 14 MFLOP
    t = imp.Tensor(x)
    issued, out = _commands_issued(lambda: t @ t)
    assert issued == 1
    np.testing.assert_allclose(out.numpy(), x @ x, rtol=1e-4, atol=1e-4)
    big = imp.Tensor(np.ones(imp._core.HOST_COMPUTE_MEDIUM_ELEMENTS, np.float32))
    issued, out = _commands_issued(lambda: big + 1.0)
    assert issued == 1
    assert float(out.sum()) == 2.0 * imp._core.HOST_COMPUTE_MEDIUM_ELEMENTS


def test_a_large_op_on_the_callers_thread_uses_the_workers_allocator():
    """Arrays of an op run on the caller's thread at 64K elements or more come from the
    caching pool (their pages are not faulted in afresh each step); the user's own arrays
    made on this thread do not."""
    from imperative import _kernels
    with imp.option("async_level", 0):
        t = imp.Tensor(np.ones(1 << 18, np.float32))
        for _ in range(3):
            (t + 1.0).numpy()
        before = _kernels.pool_stats()
        out = (t + 1.0).numpy()
        after = _kernels.pool_stats()
        assert after["hits"] + after["misses"] > before["hits"] + before["misses"]
        np.testing.assert_array_equal(out, np.full(1 << 18, 2.0, np.float32))
        mine = _kernels.pool_stats()
        np.ones(1 << 18, np.float32) + 1.0
        assert _kernels.pool_stats()["hits"] + _kernels.pool_stats()["misses"] == (
            mine["hits"] + mine["misses"])


def test_astype_calls_in_turn_each_take_their_own_op():
    """astype keeps its last (argument, input dtype) -> op by identity: calls alternating
    arguments and input dtypes, and the same argument on another input dtype, each convert
    as numpy does."""
    f = imp.Tensor(np.array([1.5, -2.25, 3.0], np.float32))
    i = imp.Tensor(np.array([1, -2, 3], np.int32))
    for _ in range(3):
        for t, arg in [(f, np.int32), (i, np.int32), (i, np.float32), (f, "int8"), (f, np.bool_),
                       (i, np.bool_), (f, np.float32)]:
            got = t.astype(arg)
            want = t.numpy().astype(arg)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want)
            assert got is not t          # (a new Tensor at the same dtype too, as numpy's)
