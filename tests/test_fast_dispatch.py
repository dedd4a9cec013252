"""The eager fast paths (issue 16) give what the general path gives, and what numpy gives.

The general path is forced by turning host compute off at async level 2: every op is then a
command for the worker, run by its kernel. Each case runs both ways (and at both async levels,
by the autouse fixture) and compares values and dtypes exactly.
"""
import contextlib
import operator

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import functional as F
from imperative.autodiff import GradManager


@contextlib.contextmanager
def general_path():
    with imp.option("async_level", 2), imp.option("enable_host_compute", 0):
        yield
        imp.sync()


def both(fn, *arrays):
    """fn on Tensors of `arrays`, by the fast path and by the general path: two arrays."""
    fast = fn(*[imp.Tensor(a) for a in arrays])
    fast = fast.numpy().copy()
    with general_path():
        slow = fn(*[imp.Tensor(a) for a in arrays])
        slow = slow.numpy().copy()
    return fast, slow


def assert_same(fast, slow, expected=None):
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    np.testing.assert_array_equal(fast, slow)
    if expected is not None:
        expected = np.asarray(expected)
        assert fast.dtype == expected.dtype, (fast.dtype, expected.dtype)
        np.testing.assert_allclose(fast, expected, rtol=1e-6, atol=0)


VALUES = {
    "float32": np.array([-2.5, -1.0, 0.0, 0.5, 3.0], np.float32),
    "float16": np.array([-2.5, -1.0, 0.0, 0.5, 3.0], np.float16),
    "int8": np.array([-3, -1, 0, 1, 7], np.int8),
    "int32": np.array([-3, -1, 0, 1, 7], np.int32),
    "uint8": np.array([0, 1, 2, 200, 255], np.uint8),
    "bool": np.array([True, False, True, False, True]),
    "0-d": np.array(1.5, np.float32),
}
UNARY_VALUES = {      # (signed zeros, infinities, NaN; a strided, Fortran-ordered view)
    "specials": np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, -1e-45], np.float32),
    "strided": np.asfortranarray(np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6))[:, ::2],
}
OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.lt, operator.eq]
SCALARS = [2.0, 3, True, -1.5]


@pytest.mark.parametrize("name", list(VALUES))
@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_python_scalar_operands(name, op, scalar):
    x = VALUES[name]
    if x.dtype == np.bool_ and op is operator.sub and type(scalar) is bool:
        pytest.skip("bool - bool is an error in numpy and here alike")
    for fn in (lambda t: op(t, scalar), lambda t: op(scalar, t)):
        fast, slow = both(fn, x)
        assert_same(fast, slow)


def test_scalar_dtype_rules_on_the_fast_path():
    # the tensor's dtype wins unless the scalar's category is higher (API.md section 5)
    i8 = imp.Tensor(np.array([1, 2, 3], np.int8))
    assert (i8 + 1).dtype == np.int8 and (1 - i8).dtype == np.int8
    assert (i8 * 1.5).dtype == np.float32
    h = imp.Tensor(np.array([1.0, 2.0], np.float16))
    assert (h * 2.0).dtype == np.float16
    np.testing.assert_array_equal((h * 2.0).numpy(), np.array([2.0, 4.0], np.float16))
    u8 = imp.Tensor(np.array([0, 255], np.uint8))
    np.testing.assert_array_equal((u8 + 1).numpy(), np.array([1, 0], np.uint8))


def test_scalar_that_does_not_fit_names_the_operand():
    i8 = imp.Tensor(np.array([1, 2], np.int8))
    with pytest.raises(OverflowError, match="scalar operand 1000"):
        i8 + 1000
    with pytest.raises(OverflowError, match="scalar operand"):
        2 ** 70 * i8


def test_zero_d_tensor_broadcasts_on_the_fast_path():
    v = np.arange(5, dtype=np.float32)
    s = np.array(2.0, np.float32)
    for fn in (lambda a, b: a * b, lambda a, b: b - a, lambda a, b: a / b):
        fast, slow = both(fn, v, s)
        assert_same(fast, slow, fn(v, s))
    fast, slow = both(lambda a, b: a + b, s, s)
    assert fast.shape == ()
    assert_same(fast, slow, s + s)


def test_shapes_that_broadcast_otherwise_take_the_general_path():
    a = np.ones((2, 3), np.float32)
    b = np.arange(3, dtype=np.float32)
    fast, slow = both(lambda x, y: x + y, a, b)
    assert_same(fast, slow, a + b)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        imp.Tensor(a) + imp.Tensor(np.ones(4, np.float32))


@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "sigmoid", "sqrt", "sin", "abs", "neg",
                                "gelu", "silu", "softplus", "relu", "hardswish", "hardsigmoid"])
@pytest.mark.parametrize("name", ["float32", "float16", "int8", "int32", "0-d", "specials",
                                  "strided"])
def test_unary_functions(fn, name):
    x = UNARY_VALUES.get(name, VALUES.get(name))
    f = getattr(F, fn)
    with np.errstate(all="ignore"):
        fast, slow = both(f, x)
    assert_same(fast, slow)
    if name.startswith("int") and fn not in ("abs", "neg", "relu"):
        assert fast.dtype == np.float32          # float-only math of ints is float32
    if fn in ("exp", "tanh", "sqrt", "sin") and name in ("float32", "0-d"):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(fast, getattr(np, fn)(x))


def test_unary_functions_take_non_tensors():
    np.testing.assert_allclose(F.exp(1.0).numpy(), np.exp(np.float32(1.0)))
    a = np.array([0.5, 1.0], np.float32)
    np.testing.assert_array_equal(F.tanh(a).numpy(), np.tanh(a))
    with pytest.raises(TypeError, match="None"):
        F.exp(None)


def test_the_20_op_chain():
    v = np.linspace(-1, 1, 16).astype(np.float32)
    w = np.linspace(0.5, 1.5, 16).astype(np.float32)

    def chain(x, y, exp, tanh):
        for _ in range(4):
            x = x * y + 1.0
            x = tanh(x)
            x = x - y
            x = exp(x * 0.25)
            x = x / 2.0
        return x
    fast, slow = both(lambda x, y: chain(x, y, F.exp, F.tanh), v, w)
    assert_same(fast, slow)
    np.testing.assert_array_equal(fast, chain(v, w, np.exp, np.tanh))


def test_gradients_through_scalar_operands_and_unary_functions():
    def grad(general):
        ctx = general_path() if general else contextlib.nullcontext()
        with ctx:
            w = imp.Parameter(np.linspace(-1, 1, 6).astype(np.float32))
            gm = GradManager().attach(w)
            with gm:
                y = F.exp(w * 0.5 + 1.0) - 2.0 * F.tanh(w)
                gm.backward((y / 3.0).sum())
            return w.grad.numpy().copy()
    assert_same(grad(False), grad(True))


def test_fast_path_results_are_released(assert_no_leak):
    v = imp.Tensor(np.ones(16, np.float32))
    assert_no_leak(lambda: F.exp(v * 2.0 + 1.0) - 1.5, repeat=5)


# ---- reductions: the kernel's memoised plan against its general branch and numpy

REDUCE_SHAPES = [(), (5,), (4, 16), (2, 3, 4), (3, 0)]
REDUCE_AXES = [None, 0, -1, (0, -1)]


def _reductions(monkeypatch, plan, mode, x, axis, keepdims):
    """Without the plan: the kernel's general branch, run by the worker (the tiny path
    would call the direct kernel, the plan's reduction, that an earlier call memoised)."""
    from imperative.ops import reduce as R
    t = imp.Tensor(x)
    fn = {"SUM": F.sum, "MEAN": F.mean, "MAX": F.max, "MIN": F.min, "PRODUCT": F.prod}[mode]
    with contextlib.nullcontext() if plan else general_path():
        if not plan:
            monkeypatch.setattr(R.Reduce, "_plan", lambda self, shape, dtype: False)
        out = fn(t, axis=axis, keepdims=keepdims).numpy().copy()
    monkeypatch.undo()
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int32, np.bool_])
@pytest.mark.parametrize("mode", ["SUM", "MEAN", "MAX", "MIN", "PRODUCT"])
def test_reductions_plan_matches_general_branch_and_numpy(monkeypatch, dtype, mode):
    rng = np.random.default_rng(3)
    np_fn = {"SUM": np.sum, "MEAN": np.mean, "MAX": np.max, "MIN": np.min, "PRODUCT": np.prod}[mode]
    for shape in REDUCE_SHAPES:
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        for axis in REDUCE_AXES:
            if len(shape) == 0 and axis is not None and axis != 0 and axis != -1:
                continue
            if len(shape) < 2 and isinstance(axis, tuple):
                continue
            for keepdims in (False, True):
                try:   # (a 0-d tensor's one axis, 0 or -1, holds its one value)
                    ref = np_fn(x, axis=None if x.ndim == 0 else axis, keepdims=keepdims)
                except ValueError:
                    with pytest.raises(ValueError):
                        _reductions(monkeypatch, True, mode, x, axis, keepdims)
                    continue
                fast = _reductions(monkeypatch, True, mode, x, axis, keepdims)
                slow = _reductions(monkeypatch, False, mode, x, axis, keepdims)
                assert fast.dtype == slow.dtype and fast.shape == slow.shape
                np.testing.assert_array_equal(fast, slow)
                assert fast.shape == np.shape(ref), (shape, axis, keepdims)
                np.testing.assert_allclose(fast.astype(np.float64), np.asarray(ref, np.float64),
                                           rtol=2e-3 if dtype == np.float16 else 1e-5, atol=1e-5)


def test_reduction_dtypes_and_errors():
    i8 = imp.Tensor(np.array([[100, 100], [1, 2]], np.int8))
    assert i8.sum().dtype == np.int32 and int(i8.sum().numpy()) == 203
    assert i8.mean(axis=0).dtype == np.float32
    assert imp.Tensor(np.ones(3, np.bool_)).sum().dtype == np.int32
    with pytest.raises((ValueError, IndexError), match="axis"):
        i8.sum(axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        i8.sum(axis=(0, -2))
    with pytest.raises(ValueError, match="no identity"):
        imp.Tensor(np.ones((0, 2), np.float32)).max(axis=0)


# ---- matrix products: the small-product shortcut is numpy's product, as the general branch

@pytest.mark.parametrize("sa,sb", [((16,), (16,)), ((4, 16), (16,)), ((16,), (16, 3)),
                                   ((2, 3, 4), (4, 5)), ((3, 4), (4, 5)), ((16, 16), (16, 16))])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_small_products_match_numpy(sa, sb, dtype):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal(sa) * 3).astype(dtype)
    b = (rng.standard_normal(sb) * 3).astype(dtype)
    fast, slow = both(lambda x, y: x @ y, a, b)
    assert_same(fast, slow)
    expected = np.matmul(a, b)
    assert fast.dtype == expected.dtype and fast.shape == expected.shape
    np.testing.assert_array_equal(fast, expected)


def test_products_of_mixed_dtypes_and_transposes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.arange(20, dtype=np.int32).reshape(4, 5)
    fast, slow = both(lambda x, y: x @ y, a, b)
    assert_same(fast, slow, a @ b.astype(np.float32))
    fast, slow = both(lambda x, y: F.matmul(x, y, transpose_b=True), a, b.T.copy())
    assert_same(fast, slow, a @ b.astype(np.float32))
    with pytest.raises(ValueError):
        imp.Tensor(a) @ imp.Tensor(a)


def test_composite_functions_on_large_and_empty_inputs():
    # the blockwise path (past one block) and the one-call path give the same values
    x = np.random.default_rng(2).standard_normal(70000).astype(np.float32)
    for f in (F.sigmoid, F.gelu, F.silu):
        whole = f(imp.Tensor(x)).numpy()
        head = f(imp.Tensor(x[:1000])).numpy()
        np.testing.assert_array_equal(whole[:1000], head)
        assert f(imp.Tensor(np.zeros((0, 3), np.float32))).shape == (0, 3)


def test_transpose_and_python_numbers():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = imp.Tensor(a)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t.transpose(1, 0, 2).numpy(), a.transpose(1, 0, 2))
    with pytest.raises(ValueError, match="permutation"):
        t.transpose(0, 0, 1)
    one = imp.Tensor(np.array([[2.5]], np.float32))
    assert float(one) == 2.5 and int(one) == 2 and bool(one) is True
    with pytest.raises(TypeError, match="one element"):
        float(t)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=11), st.booleans())
def test_T_reverses_the_axes_of_every_rank(shape, twice):
    """`.T` takes its op from a table by rank up to 8 and the general path beyond: numpy's
    result and layout either way, and the table's op the same for a second tensor."""
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = imp.Tensor(a)
    got = t.T.T if twice else t.T
    want = a.T.T if twice else a.T
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(imp.Tensor(a + 1).T.numpy(), (a + 1).T)


# ---- the softmax family: one block of rows (tiny inputs) vs the blocked loop

@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_one_block_matches_blocked_rows(fn):
    rng = np.random.default_rng(4)
    big = rng.standard_normal((5000, 16)).astype(np.float32)     # several blocks of rows
    whole = fn(imp.Tensor(big), -1).numpy()
    head = fn(imp.Tensor(big[:4]), -1).numpy()
    np.testing.assert_array_equal(whole[:4], head)
    three = big[:24].reshape(2, 3, 4, 16)
    np.testing.assert_array_equal(fn(imp.Tensor(three), -1).numpy().reshape(24, 16), whole[:24])
    t = big[:16].T.copy()       # axis 0, and a transposed (non-contiguous) input
    np.testing.assert_allclose(fn(imp.Tensor(t), 0).numpy(), fn(imp.Tensor(big[:16]), -1).numpy().T,
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fn(imp.Tensor(big[:16]).T, 0).numpy(),
                               fn(imp.Tensor(big[:16]), -1).numpy().T, rtol=1e-6, atol=1e-7)


def test_softmax_family_dtypes_and_edges():
    x16 = np.array([[1.0, 2.0, 3.0]], np.float16)
    assert F.softmax(imp.Tensor(x16)).dtype == np.float16
    assert F.softmax(imp.Tensor(np.array([[1, 2]], np.int32))).dtype == np.float32
    assert F.softmax(imp.Tensor(np.zeros((0, 4), np.float32))).shape == (0, 4)
    np.testing.assert_array_equal(F.softmax(imp.Tensor(np.array(3.0, np.float32))).numpy(), 1.0)
    logits = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32)
    labels = np.array([1, 5, 0, 15])
    fast, slow = both(lambda a, b: F.cross_entropy(a, b), logits, labels)
    assert_same(fast, slow)
    z = logits - logits.max(-1, keepdims=True)
    ref = -(z - np.log(np.exp(z).sum(-1, keepdims=True)))[np.arange(4), labels].mean()
    np.testing.assert_allclose(fast, ref, rtol=1e-6)
    fast, slow = both(lambda a: F.layer_norm(a, (16,)), logits)
    assert_same(fast, slow)


# ---- direct kernels: what the tiny path calls instead of an op's kernel, bit for bit

DIRECT_DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.bool_]


def _direct_op(draw, x, other):
    """An op with a direct kernel for x (and `other`, an operand of the same shape), and
    its input arrays."""
    from imperative.ops import convert, matmul, reduce, select, shape, softmax
    kind = draw(st.sampled_from(["reduce", "reshape", "transpose", "getitem", "astype",
                                 "matmul", "where", "concat", "softmax", "clip"]))
    if kind == "reduce":
        axis = draw(st.sampled_from([None, 0, -1, (0, -1)]))
        mode = draw(st.sampled_from(["SUM", "MEAN", "MAX", "MIN", "PRODUCT"]))
        return reduce.Reduce(mode, axis, draw(st.booleans())), (x,)
    if kind == "reshape":
        return shape.Reshape((-1,) if draw(st.booleans()) else (x.size, 1)), (x,)
    if kind == "transpose":
        return shape.Dimshuffle(tuple(reversed(range(x.ndim)))), (x,)
    if kind == "getitem":
        index = draw(st.sampled_from([0, -1, slice(None, None, 2), (Ellipsis, 0)]))
        return shape.Subtensor(index), (x,)
    if kind == "astype":
        return convert.TypeCvt(draw(st.sampled_from(DIRECT_DTYPES))), (x,)
    if kind == "matmul":
        return matmul.MatrixMul(), (x, other.T if other.ndim == 2 else other)
    if kind == "clip":
        bounds = draw(st.sampled_from([(-0.5, 0.5), (None, 1), (0, None), (-1e9, 300)]))
        return select.Clip(*bounds), (x,)
    if kind == "softmax":
        cls = draw(st.sampled_from([softmax.Softmax, softmax.LogSoftmax]))
        return cls(draw(st.sampled_from([-1, 0, x.ndim - 1]))), (x,)
    if kind == "concat":
        return shape.Concat(draw(st.integers(-x.ndim, x.ndim - 1))), (x, other, x)
    return select.Where(), (x > 0, x, other)


@st.composite
def direct_cases(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    dtype = draw(st.sampled_from(DIRECT_DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x, other = ((rng.standard_normal(shape) * 4).astype(dtype) for _ in range(2))
    if draw(st.booleans()) and x.ndim >= 2:
        x = np.asfortranarray(x)         # (layouts: the direct call must keep what kernel does)
    op, arrays = _direct_op(draw, x, other)
    return op, arrays


@settings(max_examples=300, deadline=None)
@given(direct_cases())
def test_direct_kernels_give_the_kernels_result_bit_for_bit(case):
    from types import SimpleNamespace
    op, arrays = case
    infos = tuple(SimpleNamespace(shape=a.shape, dtype=a.dtype) for a in arrays)
    try:
        op.infer(infos)
    except (ValueError, TypeError, IndexError):
        return                         # (dispatch asks only after infer accepted the inputs)
    direct = op.direct_kernel(infos)
    expected = np.asarray(op.kernel(*arrays))
    if direct is None:
        return
    fn, tail = direct
    got = np.asarray(fn(*arrays, *tail))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.strides == expected.strides
    assert got.tobytes() == expected.tobytes()
    # and through dispatch: the tiny path (direct kernel) against the worker's (kernel)
    fast, slow = both(lambda *ts: imp.apply(op, *ts)[0], *arrays)
    assert_same(fast, slow)


@pytest.mark.parametrize("other", ["tensor", "array", "scalar"])
def test_where_and_concat_of_tensors_skip_only_the_conversions(other):
    """F.where / F.concat of Tensors only go straight to the op (apply_tensors); with an
    array or a number among the arguments they convert as before, to the same values."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    mask = rng.random((3, 5)) > 0.5
    given_b = {"tensor": imp.Tensor(b), "array": b, "scalar": 0.5}[other]
    want_b = b if other != "scalar" else np.full_like(b, 0.5)
    got = F.where(imp.Tensor(mask), imp.Tensor(a), given_b).numpy()
    np.testing.assert_array_equal(got, np.where(mask, a, want_b))
    if other != "scalar":
        joined = F.concat((imp.Tensor(a), given_b), axis=1).numpy()
        np.testing.assert_array_equal(joined, np.concatenate([a, b], axis=1))
    assert imp._core.apply_tensors(F.O.Concat(0), [imp.Tensor(a), a]) is None
    assert imp._core.apply_tensors(F.O.Concat(0), imp.Tensor(a)) is None
    with pytest.raises(TypeError, match="list or tuple"):
        F.concat(imp.Tensor(a))
    with pytest.raises(ValueError, match="at least one"):
        F.concat([])


def test_python_number_constants_are_kept_per_value_type_and_dtype():
    """Operators keep one 0-d array per (number, type, dtype) (imperative/_tensor_base.pxi:
    _scalar_array); zeros, NaNs, bools and quantized dtypes are made each time. Results
    stay numpy's whichever way."""
    f32 = np.array([1.5, -2.0, 3.0], np.float32)
    i8 = np.array([1, -2, 3], np.int8)
    for _ in range(3):      # (the second and third calls take the kept constants)
        np.testing.assert_array_equal((imp.Tensor(f32) + 1.0).numpy(), f32 + np.float32(1.0))
        np.testing.assert_array_equal((imp.Tensor(f32) * -0.0).numpy(), f32 * np.float32(-0.0))
        assert np.signbit((imp.Tensor(f32) * -0.0).numpy()[0])
        assert np.signbit((imp.Tensor(f32) * 0.0).numpy()[1])
        assert np.isnan((imp.Tensor(f32) + float("nan")).numpy()).all()
        small = imp.Tensor(i8) + 1
        assert small.dtype == np.int8
        np.testing.assert_array_equal(small.numpy(), i8 + np.int8(1))
        wide = imp.Tensor(i8.astype(np.int16)) + 1
        assert wide.dtype == np.int16
        assert (imp.Tensor(i8) + 1.0).dtype == np.float32      # 1.0 is no int 1
        np.testing.assert_array_equal((imp.Tensor(i8) + True).numpy(), i8 + np.int8(1))
    t = imp.Tensor(np.zeros(4, np.float32))
    t[1] = 2.5
    t[2] = 2.5
    np.testing.assert_array_equal(t.numpy(), [0, 2.5, 2.5, 0])
    with pytest.raises(OverflowError, match="does not fit"):
        imp.Tensor(i8) + 2 ** 70


_CONCAT_DTYPES = [np.float32, np.float64, np.int8, np.int64, np.bool_, np.complex64]


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_native_concatenate_is_numpys(data):
    """_kernels.concatenate (Concat's direct kernel) against numpy.concatenate on the same
    arrays: C-contiguous ones of one dtype (its memcpy path, bit for bit), and anything
    else (transposed or mixed-dtype inputs, shapes that disagree, a bad axis), which goes
    to numpy, errors included."""
    from imperative import _kernels
    ndim = data.draw(st.integers(1, 4), label="ndim")
    axis = data.draw(st.integers(-ndim - 1, ndim), label="axis")
    base = data.draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim), label="shape")
    dtype = data.draw(st.sampled_from(_CONCAT_DTYPES), label="dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    arrays = []
    for _ in range(data.draw(st.integers(1, 4), label="count")):
        shape = list(base)
        if -ndim <= axis < ndim:
            shape[axis] = data.draw(st.integers(0, 5), label="extent")
        a = (rng.standard_normal(shape) * 10).astype(dtype)
        kind = data.draw(st.sampled_from(["c", "c", "transposed", "other dtype", "other shape"]))
        if kind == "transposed":
            a = np.ascontiguousarray(a.T).T                     # same values, Fortran order
        elif kind == "other dtype":
            a = a.astype(np.float16)
        elif kind == "other shape":
            a = a.reshape(a.shape + (1,))
        arrays.append(a)
    try:
        want = np.concatenate(arrays, axis)
    except Exception as e:
        with pytest.raises(type(e)):
            _kernels.concatenate(tuple(arrays), axis)
        return
    got = _kernels.concatenate(tuple(arrays), axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (got.flags.c_contiguous, got.flags.f_contiguous) == (
        want.flags.c_contiguous, want.flags.f_contiguous)    # (numpy's layout, kept by DTR)
    np.testing.assert_array_equal(got, want)


def test_concat_of_tensors_takes_the_native_copy_and_keeps_values():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    b = -np.arange(12, dtype=np.float32).reshape(4, 3)
    got = F.concat([imp.Tensor(a), imp.Tensor(b)], axis=1)
    np.testing.assert_array_equal(got.numpy(), np.concatenate([a, b], 1))
    got = F.concat([imp.Tensor(a), imp.Tensor(a[:1])], axis=0)
    np.testing.assert_array_equal(got.numpy(), np.concatenate([a, a[:1]], 0))


def _basic_index(data, shape):
    items = []
    for n in shape[:data.draw(st.integers(1, len(shape)), label="items")]:
        if n and data.draw(st.booleans(), label="int item"):
            items.append(data.draw(st.integers(-n, n - 1), label="int"))
        else:
            start = data.draw(st.none() | st.integers(-n - 1, n + 1), label="start")
            stop = data.draw(st.none() | st.integers(-n - 1, n + 1), label="stop")
            step = data.draw(st.sampled_from([None, 1, 2, -1]), label="step")
            items.append(slice(start, stop, step))
    return tuple(items)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_setitem_at_basic_indices_is_numpys(data):
    """`t[index] = value` at random basic indices (SetSubtensor's direct kernel on small
    tensors, its kernel otherwise) against numpy's assignment on the same array: Python
    numbers and arrays of the target's shape, with leading 1s or broadcasting."""
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=3), label="shape"))
    dtype = data.draw(st.sampled_from([np.float32, np.int32]), label="dtype")
    a = (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
    index = _basic_index(data, shape)
    target = a[index].shape
    form = data.draw(st.sampled_from(["number", "array", "leading ones", "row"]), label="value")
    if form == "number":
        value = data.draw(st.integers(-3, 3), label="number")
    else:
        vshape = {"array": target, "leading ones": (1, 1) + target,
                  "row": target[-1:]}[form]
        value = (np.arange(int(np.prod(vshape))) - 2).astype(dtype).reshape(vshape)
    want = a.copy()
    try:
        want[index] = value
    except ValueError:          # (numpy refuses a (1, 1) value for one element; we take it)
        assume(False)
    t = imp.Tensor(a)
    t[index] = value if form == "number" else imp.Tensor(value)
    got = t.numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(a, np.arange(a.size).reshape(shape).astype(dtype) % 7)
