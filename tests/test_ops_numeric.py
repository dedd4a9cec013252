"""Differential tests: `imp.apply(op, *tensors)` and the operators against numpy on the same
inputs (API.md §2: exactly for integer and shape ops, to float rounding for float math)."""
import math
import operator
import zlib

import numpy as np
import pytest

import imperative as imp
from imperative import ops as O
from imperative.ops import elemwise

DTYPES = ["float32", "float16", "int32", "int8", "uint8", "bool"]

# The reference semantics, written independently of the implementation's table.
# mode -> (numpy function, arity, kind); kind "float": integer/bool inputs compute in float32.
REF = {
    "ADD": (np.add, 2, "arith"),
    "SUB": (np.subtract, 2, "arith"),
    "MUL": (np.multiply, 2, "arith"),
    "TRUE_DIV": (np.true_divide, 2, "float"),
    "FLOOR_DIV": (np.floor_divide, 2, "arith"),
    "MOD": (np.remainder, 2, "arith"),
    "POW": (np.power, 2, "arith"),
    "MAX": (np.maximum, 2, "arith"),
    "MIN": (np.minimum, 2, "arith"),
    "AND": (np.bitwise_and, 2, "arith"),
    "OR": (np.bitwise_or, 2, "arith"),
    "XOR": (np.bitwise_xor, 2, "arith"),
    "EQ": (np.equal, 2, "compare"),
    "NE": (np.not_equal, 2, "compare"),
    "LT": (np.less, 2, "compare"),
    "LEQ": (np.less_equal, 2, "compare"),
    "GT": (np.greater, 2, "compare"),
    "GEQ": (np.greater_equal, 2, "compare"),
    "NEGATE": (np.negative, 1, "arith"),
    "ABS": (np.absolute, 1, "arith"),
    "NOT": (np.invert, 1, "arith"),
    "RELU": (lambda x: np.maximum(x, np.zeros((), x.dtype)), 1, "arith"),
    "EXP": (np.exp, 1, "float"),
    "LOG": (np.log, 1, "float"),
    "SQRT": (np.sqrt, 1, "float"),
    "TANH": (np.tanh, 1, "float"),
    "SIGMOID": (lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), 1, "float"),
}
_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _f64(fn):
    """A float64 reference, rounded to the input's dtype."""
    return lambda x: np.asarray(fn(x.astype(np.float64))).astype(x.dtype)


REF.update({
    "SIGN": (np.sign, 1, "arith"), "SHL": (np.left_shift, 2, "arith"),
    "SHR": (np.right_shift, 2, "arith"),
    "LOGICAL_AND": (np.logical_and, 2, "compare"), "LOGICAL_OR": (np.logical_or, 2, "compare"),
    "LOGICAL_XOR": (np.logical_xor, 2, "compare"), "LOGICAL_NOT": (np.logical_not, 1, "compare"),
    "FLOOR": (np.floor, 1, "arith"), "CEIL": (np.ceil, 1, "arith"), "TRUNC": (np.trunc, 1, "arith"),
    "ROUND": (lambda x: np.round(x) if x.dtype.kind == "f" else x, 1, "arith"),
    "EXPM1": (np.expm1, 1, "float"), "LOG1P": (np.log1p, 1, "float"),
    "RSQRT": (_f64(lambda x: 1 / np.sqrt(x)), 1, "float"), "SIN": (np.sin, 1, "float"),
    "COS": (np.cos, 1, "float"), "TAN": (np.tan, 1, "float"), "ERF": (_f64(_erf), 1, "float"),
    "GELU": (_f64(lambda x: x * 0.5 * _erfc(-x / math.sqrt(2))), 1, "float"),
    "GELU_TANH": (_f64(lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                         * (x + 0.044715 * x ** 3)))),
                  1, "float"),
    "SOFTPLUS": (_f64(lambda x: np.logaddexp(0, x)), 1, "float"),
    "SILU": (_f64(lambda x: x / (1 + np.exp(-x))), 1, "float"),
    "HSWISH": (_f64(lambda x: x * np.clip(x + 3, 0, 6) / 6), 1, "float"),
    "HSIGMOID": (_f64(lambda x: np.clip(x + 3, 0, 6) / 6), 1, "float"),
})

DOWNCAST = {np.dtype("int64"): np.dtype("int32"), np.dtype("float64"): np.dtype("float32"),
            np.dtype("uint32"): np.dtype("int32"), np.dtype("uint64"): np.dtype("int32")}


def downcast(dt):
    dt = np.dtype(dt)
    return DOWNCAST.get(dt, dt)


def make_input(mode, position, dtype, shape, rng):
    """Data valid for `mode` in argument `position`: no zero divisors, no negative logs or
    square roots, small integer powers."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        if mode in ("FLOOR_DIV", "MOD", "TRUE_DIV") and position == 1 or mode == "LOG":
            return np.ones(shape, bool)
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind == "f":
        if mode in ("LOG", "SQRT"):
            x = rng.uniform(0.1, 10.0, size=shape)
        elif mode == "POW":
            x = (rng.uniform(0.5, 2.0, size=shape) if position == 0
                 else rng.uniform(-2, 2, size=shape))
        elif mode in ("TRUE_DIV", "FLOOR_DIV", "MOD") and position == 1:
            x = rng.uniform(0.5, 3.0, size=shape) * rng.choice([-1, 1], size=shape)
        elif mode == "EXP":
            x = rng.uniform(-5, 5, size=shape)
        else:
            x = rng.uniform(-4, 4, size=shape)
        return x.astype(dt)
    info = np.iinfo(dt)
    if mode == "POW":
        return rng.integers(0, 4, size=shape).astype(dt)
    if mode in ("LOG", "SQRT"):
        return rng.integers(1, min(info.max, 100), size=shape, endpoint=True).astype(dt)
    if mode in ("EXP", "SIGMOID", "TANH"):
        return rng.integers(max(info.min, -10), 10, size=shape, endpoint=True).astype(dt)
    if mode in ("TRUE_DIV", "FLOOR_DIV", "MOD") and position == 1:
        lo = 1 if info.min == 0 else -9
        x = rng.integers(lo, 10, size=shape, endpoint=True)
        x[x == 0] = 3
        return x.astype(dt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt)


def reference(mode, arrays):
    """numpy's answer on the same inputs, or raises numpy's TypeError when it has none."""
    fn, _, kind = REF[mode]
    if kind == "float":
        arrays = [a.astype(np.float32) if a.dtype.kind in "biu" else a for a in arrays]
    with np.errstate(all="ignore"):
        r = np.asarray(fn(*arrays))
    return r.astype(downcast(r.dtype), copy=False)


def numpy_supports(mode, dtype):
    fn, nin, kind = REF[mode]
    dt = np.dtype(dtype)
    if kind == "float" and dt.kind in "biu":
        dt = np.dtype(np.float32)
    try:
        with np.errstate(all="ignore"):
            fn(*([np.ones(2, dt)] * nin))
    except TypeError:
        return False
    return True


def assert_matches(got, expected, dtype_hint):
    assert isinstance(got, imp.Tensor)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    arr = got.numpy()
    assert arr.dtype == expected.dtype
    if expected.dtype.kind == "f":
        rtol = 1e-3 if expected.dtype == np.float16 else 1e-6
        atol = 1e-3 if expected.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(arr, expected, rtol=rtol, atol=atol,
                                   err_msg=f"dtype {dtype_hint}")
    else:
        np.testing.assert_array_equal(arr, expected, err_msg=f"dtype {dtype_hint}")


BINARY_SHAPES = [
    ((2, 3, 4), (2, 3, 4)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((4,), (2, 3, 4)),
    ((0, 3), (0, 3)),
    ((0, 3), (1, 3)),
    ((), ()),
    ((), (5,)),
    ((2, 2), ()),
]
UNARY_SHAPES = [(2, 3, 4), (7,), (0, 3), ()]
ALL_MODES = elemwise.modes()


def test_modes_table_covers_the_contract():
    modes = set(ALL_MODES)
    for required in ["ADD", "SUB", "MUL", "TRUE_DIV", "FLOOR_DIV", "MOD", "POW", "NEGATE", "ABS",
                     "EXP", "LOG", "SQRT", "TANH", "SIGMOID", "RELU", "MAX", "MIN", "EQ", "LT",
                     "LEQ"]:
        assert required in modes
    assert modes <= set(REF), f"modes without a reference in this test: {modes - set(REF)}"


# --------------------------------------------------------------------------- Elemwise


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_elemwise_matches_numpy(mode, dtype):
    _, nin, _ = REF[mode]
    op = O.Elemwise(mode)
    rng = np.random.default_rng(zlib.crc32(f"{mode}/{dtype}".encode()))
    if not numpy_supports(mode, dtype):
        # numpy has no loop for this: a dtype error at the call site
        a = imp.Tensor(make_input(mode, 0, dtype, (3,), rng))
        with pytest.raises(TypeError):
            imp.apply(op, *([a] * nin))
        return
    shapes = BINARY_SHAPES if nin == 2 else [(s,) for s in UNARY_SHAPES]
    for shape_set in shapes:
        arrays = [make_input(mode, i, dtype, s, rng) for i, s in enumerate(shape_set)]
        expected = reference(mode, arrays)
        (out,) = imp.apply(op, *[imp.Tensor(a) for a in arrays])
        assert_matches(out, expected, f"{dtype} {shape_set}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ALL_MODES)
def test_elemwise_chained_results(mode, dtype):
    """Outputs of an op used as inputs of the next (worker-produced values, not constants)."""
    _, nin, _ = REF[mode]
    rng = np.random.default_rng(11)
    if not numpy_supports(mode, dtype):
        (a,) = imp.apply(O.Identity(), imp.Tensor(make_input(mode, 0, dtype, (64, 33), rng)))
        with pytest.raises(TypeError):
            imp.apply(O.Elemwise(mode), *([a] * nin))
        return
    arrays = [make_input(mode, i, dtype, (64, 33), rng) for i in range(nin)]
    # Identity-like producers: an Elemwise input that is itself the result of an op
    tensors = [imp.apply(O.Identity(), imp.Tensor(a))[0] for a in arrays]
    (out,) = imp.apply(O.Elemwise(mode), *tensors)
    assert_matches(out, reference(mode, arrays), dtype)


OPERATORS = {
    "ADD": operator.add, "SUB": operator.sub, "MUL": operator.mul, "TRUE_DIV": operator.truediv,
    "FLOOR_DIV": operator.floordiv, "MOD": operator.mod, "POW": operator.pow,
    "AND": operator.and_, "OR": operator.or_, "XOR": operator.xor, "EQ": operator.eq,
    "NE": operator.ne, "LT": operator.lt, "LEQ": operator.le, "GT": operator.gt,
    "GEQ": operator.ge, "NEGATE": operator.neg, "ABS": operator.abs, "NOT": operator.invert,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", sorted(OPERATORS))
def test_operators_match_numpy(mode, dtype):
    _, nin, _ = REF[mode]
    if not numpy_supports(mode, dtype):
        a = imp.Tensor(make_input(mode, 0, dtype, (3,), np.random.default_rng(0)))
        with pytest.raises(TypeError):
            OPERATORS[mode](*([a] * nin))
        return
    rng = np.random.default_rng(3)
    for shape_set in (BINARY_SHAPES if nin == 2 else [(s,) for s in UNARY_SHAPES]):
        arrays = [make_input(mode, i, dtype, s, rng) for i, s in enumerate(shape_set)]
        out = OPERATORS[mode](*[imp.Tensor(a) for a in arrays])
        assert_matches(out, reference(mode, arrays), f"{dtype} {shape_set}")


@pytest.mark.parametrize("a_dtype, b_dtype", [
    ("int8", "int16"), ("uint8", "int8"), ("int8", "float16"), ("int32", "float16"),
    ("float16", "float32"), ("bool", "int32"), ("bool", "float32"), ("uint16", "int16"),
])
@pytest.mark.parametrize("mode", ["ADD", "SUB", "MUL", "TRUE_DIV", "MAX", "LT", "EQ"])
def test_elemwise_mixed_dtypes_promote(mode, a_dtype, b_dtype):
    rng = np.random.default_rng(5)
    a = make_input(mode, 0, a_dtype, (3, 4), rng)
    b = make_input(mode, 1, b_dtype, (4,), rng)
    promoted = imp.dtype_promotion(a, b)
    if not numpy_supports(mode, promoted):
        with pytest.raises(TypeError):
            imp.apply(O.Elemwise(mode), imp.Tensor(a), imp.Tensor(b))
        return
    expected = reference(mode, [a.astype(promoted), b.astype(promoted)])
    (out,) = imp.apply(O.Elemwise(mode), imp.Tensor(a), imp.Tensor(b))
    assert_matches(out, expected, f"{a_dtype}+{b_dtype}")


def test_elemwise_large_float32():
    """Sizes past the small-op fast path run on the worker and still match."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((256, 300)).astype(np.float32)
    b = rng.standard_normal((300,)).astype(np.float32)
    for mode in ("ADD", "MUL", "SUB", "MAX"):
        (out,) = imp.apply(O.Elemwise(mode), imp.Tensor(a), imp.Tensor(b))
        assert_matches(out, reference(mode, [a, b]), "float32")
    for mode in ("TANH", "SIGMOID", "RELU", "EXP", "NEGATE", "ABS"):
        (out,) = imp.apply(O.Elemwise(mode), imp.Tensor(a))
        assert_matches(out, reference(mode, [a]), "float32")


def test_elemwise_arity_and_shape_errors():
    a = imp.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError):
        imp.apply(O.Elemwise("ADD"), a)
    with pytest.raises(ValueError):
        imp.apply(O.Elemwise("EXP"), a, a)
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        imp.apply(O.Elemwise("ADD"), a, imp.Tensor(np.ones(4, np.float32)))


# --------------------------------------------------------------------------- Reduce

REDUCE_REF = {
    "SUM": np.sum,
    "MEAN": np.mean,
    "MAX": np.max,
    "MIN": np.min,
    "PRODUCT": np.prod,
    "SUM_SQR": lambda x, axis, keepdims: np.sum(np.square(x), axis=axis, keepdims=keepdims),
}


def reduce_dtype(mode, dtype):
    dt = np.dtype(dtype)
    if mode in ("SUM", "PRODUCT", "SUM_SQR") and dt.kind in "biu":
        return np.dtype(np.int32)
    if mode == "MEAN" and dt.kind in "biu":
        return np.dtype(np.float32)
    return dt


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=repr)
@pytest.mark.parametrize("mode", sorted(REDUCE_REF))
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "bool", "float16"])
def test_reduce_matches_numpy(mode, axis, keepdims, dtype):
    rng = np.random.default_rng(21)
    if dtype == "bool":
        x = rng.integers(0, 2, size=(2, 3, 4)).astype(bool)
    elif np.dtype(dtype).kind == "f":
        x = rng.uniform(0.5, 1.5, size=(2, 3, 4)).astype(dtype)
    else:
        x = rng.integers(-3, 4, size=(2, 3, 4)).astype(dtype)
    out_dt = reduce_dtype(mode, dtype)
    if mode == "SUM_SQR" and x.dtype.kind == "b":
        src = x.astype(np.int32)
    else:
        src = x.astype(out_dt) if mode in ("SUM", "PRODUCT", "SUM_SQR") else x
    with np.errstate(all="ignore"):
        expected = np.asarray(REDUCE_REF[mode](src, axis=axis, keepdims=keepdims))
    expected = expected.astype(out_dt)
    (out,) = imp.apply(O.Reduce(mode, axis, keepdims), imp.Tensor(x))
    assert out.dtype == out_dt
    assert out.shape == expected.shape
    if out_dt.kind == "f":
        tol = 2e-3 if out_dt == np.float16 else 1e-5
        np.testing.assert_allclose(out.numpy(), expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("mode", ["SUM", "MEAN", "PRODUCT", "SUM_SQR"])
def test_reduce_empty(mode):
    x = np.zeros((0, 3), np.float32)
    for axis in (None, 0, 1):
        with np.errstate(all="ignore"):
            expected = np.asarray(REDUCE_REF[mode](x, axis=axis, keepdims=False), np.float32)
        (out,) = imp.apply(O.Reduce(mode, axis), imp.Tensor(x))
        assert out.shape == expected.shape
        np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("mode", ["MAX", "MIN"])
def test_reduce_empty_without_identity_is_value_error(mode):
    with pytest.raises(ValueError):
        imp.apply(O.Reduce(mode, 0), imp.Tensor(np.zeros((0, 3), np.float32)))


def test_reduce_scalar_input():
    (out,) = imp.apply(O.Reduce("SUM"), imp.Tensor(np.float32(2.5)))
    assert out.shape == ()
    assert out.item() == 2.5


def test_reduce_axis_errors():
    x = imp.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(IndexError):
        imp.apply(O.Reduce("SUM", 2), x)
    with pytest.raises(IndexError):
        imp.apply(O.Reduce("MEAN", (0, -3)), x)
    with pytest.raises(ValueError):
        imp.apply(O.Reduce("SUM", (0, 0)), x)


@pytest.mark.parametrize("cls, fn", [(O.Argmax, np.argmax), (O.Argmin, np.argmin)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_argmax_argmin_ops(cls, fn, axis):
    rng = np.random.default_rng(2)
    x = rng.permutation(60).reshape(3, 4, 5).astype(np.int16)
    (out,) = imp.apply(cls(axis), imp.Tensor(x))
    expected = np.asarray(fn(x, axis=axis))
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out.numpy(), expected)


# --------------------------------------------------------------------------- MatrixMul

MATMUL_CASES = [
    ((4,), (4,)),
    ((3, 4), (4,)),
    ((4,), (4, 5)),
    ((3, 4), (4, 5)),
    ((1, 1), (1, 1)),
    ((0, 4), (4, 5)),
    ((3, 0), (0, 5)),
]


def np_t(x):
    return np.swapaxes(x, -1, -2) if x.ndim >= 2 else x


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "int8"])
@pytest.mark.parametrize("shapes", MATMUL_CASES, ids=repr)
def test_matmul_matches_numpy(shapes, dtype):
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, size=shapes[0]).astype(dtype)
    b = rng.integers(-3, 4, size=shapes[1]).astype(dtype)
    expected = np.matmul(a, b)
    (out,) = imp.apply(O.MatrixMul(), imp.Tensor(a), imp.Tensor(b))
    assert out.dtype == np.dtype(dtype)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-3 if dtype == "float16" else 1e-6)
    out2 = imp.Tensor(a) @ imp.Tensor(b)
    np.testing.assert_array_equal(out2.numpy(), out.numpy())


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_transposes(transpose_a, transpose_b):
    rng = np.random.default_rng(6)
    a0 = rng.standard_normal((3, 4)).astype(np.float32)
    b0 = rng.standard_normal((4, 5)).astype(np.float32)
    a = a0.T.copy() if transpose_a else a0
    b = b0.T.copy() if transpose_b else b0
    (out,) = imp.apply(O.MatrixMul(transpose_a, transpose_b), imp.Tensor(a), imp.Tensor(b))
    assert out.shape == (3, 5)
    np.testing.assert_allclose(out.numpy(), a0 @ b0, rtol=1e-5, atol=1e-6)
    (out,) = imp.apply(O.MatrixMul(transpose_a=transpose_a, transpose_b=transpose_b),
                       imp.Tensor(a), imp.Tensor(b))
    np.testing.assert_allclose(out.numpy(), a0 @ b0, rtol=1e-5, atol=1e-6)


def test_matmul_transpose_with_vector():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    v = rng.standard_normal(4).astype(np.float32)
    (out,) = imp.apply(O.MatrixMul(transpose_a=True), imp.Tensor(a), imp.Tensor(v))
    np.testing.assert_allclose(out.numpy(), a.T @ v, rtol=1e-5, atol=1e-6)


def test_matmul_errors():
    a = imp.Tensor(np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        imp.apply(O.MatrixMul(), a, a)
    with pytest.raises(ValueError):
        imp.apply(O.MatrixMul(), imp.Tensor(np.float32(1)), a)
    with pytest.raises(ValueError):
        imp.apply(O.MatrixMul(), imp.Tensor(np.ones(5, np.float32)), a)
    with pytest.raises(ValueError):
        imp.apply(O.MatrixMul(), a, imp.Tensor(np.ones(3, np.float32)))
    (ok,) = imp.apply(O.MatrixMul(transpose_b=True), a, a)
    assert ok.shape == (3, 3)


@pytest.mark.parametrize("shapes", [
    ((2, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (1, 4, 5)),
    ((1, 3, 4), (6, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((3, 2, 3, 4), (3, 1, 4, 5)),
], ids=repr)
@pytest.mark.parametrize("transpose_b", [False, True])
def test_batched_matmul_broadcasts_batch_dims(shapes, transpose_b):
    rng = np.random.default_rng(10)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b0 = rng.standard_normal(shapes[1]).astype(np.float32)
    b = np_t(b0).copy() if transpose_b else b0
    expected = np.matmul(a, b0)
    (out,) = imp.apply(O.BatchedMatrixMul(transpose_b=transpose_b), imp.Tensor(a), imp.Tensor(b))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    (out,) = imp.apply(O.MatrixMul(transpose_b=transpose_b), imp.Tensor(a), imp.Tensor(b))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_batched_matmul_transpose_a_and_errors():
    rng = np.random.default_rng(12)
    a0 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    (out,) = imp.apply(O.BatchedMatrixMul(True, False), imp.Tensor(np_t(a0).copy()), imp.Tensor(b))
    np.testing.assert_allclose(out.numpy(), a0 @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        imp.apply(O.BatchedMatrixMul(), imp.Tensor(np.ones((2, 3, 4), np.float32)),
                  imp.Tensor(np.ones((3, 4, 5), np.float32)))
    with pytest.raises(ValueError):
        imp.apply(O.BatchedMatrixMul(), imp.Tensor(np.ones((2, 3, 4), np.float32)),
                  imp.Tensor(np.ones((2, 3, 5), np.float32)))


# --------------------------------------------------------------------------- shape and misc ops

X = np.arange(24, dtype=np.int32).reshape(2, 3, 4)


def apply1(op, x):
    (out,) = imp.apply(op, imp.Tensor(x))
    return out


def assert_exact(out, expected):
    expected = np.asarray(expected)
    assert isinstance(out, imp.Tensor)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("shape", [(24,), (4, 6), (-1, 4), (2, -1, 2), (1, 24, 1), (2, 3, 4)],
                         ids=repr)
def test_reshape_op(shape):
    assert_exact(apply1(O.Reshape(shape), X), X.reshape(shape))


def test_reshape_op_errors():
    with pytest.raises(ValueError):
        apply1(O.Reshape((5, 5)), X)
    with pytest.raises(ValueError):
        O.Reshape((-1, -1))
    assert_exact(apply1(O.Reshape(()), np.array([7], np.int8)), np.array(7, np.int8))
    assert_exact(apply1(O.Reshape((0, 5)), np.zeros((5, 0), np.float32)),
                 np.zeros((0, 5), np.float32))


@pytest.mark.parametrize("src, shape", [
    ((3,), (2, 3)), ((3, 1), (3, 4)), ((1,), (2, 2, 2)), ((), (3, 2)), ((2, 1, 3), (2, 5, 3)),
    ((1, 3), (0, 3)),
], ids=repr)
def test_broadcast_op(src, shape):
    x = np.arange(int(np.prod(src)), dtype=np.float32).reshape(src)
    assert_exact(apply1(O.Broadcast(shape), x), np.broadcast_to(x, shape))


def test_broadcast_op_errors():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\)"):
        apply1(O.Broadcast((3, 4)), X)
    with pytest.raises(ValueError):
        apply1(O.Broadcast((2, 3, 5)), X)


@pytest.mark.parametrize("pattern", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (2, 0, 1)], ids=repr)
def test_dimshuffle_op(pattern):
    assert_exact(apply1(O.Dimshuffle(pattern), X), np.transpose(X, pattern))


def test_dimshuffle_op_errors():
    with pytest.raises(ValueError):
        apply1(O.Dimshuffle((0, 1)), X)
    with pytest.raises(ValueError):
        apply1(O.Dimshuffle((0, 0, 1)), X)


@pytest.mark.parametrize("axis", [0, 1, 3, -1, (0, 2), (0, -1)], ids=repr)
def test_add_axis_op(axis):
    assert_exact(apply1(O.AddAxis(axis), X), np.expand_dims(X, axis))


@pytest.mark.parametrize("src, axis", [((1, 3, 1), 0), ((1, 3, 1), 2), ((1, 3, 1), (0, 2)),
                                       ((1, 3, 1), -1), ((1,), 0)], ids=repr)
def test_remove_axis_op(src, axis):
    x = np.arange(3 if 3 in src else 1, dtype=np.int8).reshape(src)
    assert_exact(apply1(O.RemoveAxis(axis), x), np.squeeze(x, axis))


def test_add_remove_axis_errors():
    with pytest.raises(ValueError):
        apply1(O.RemoveAxis(1), X)
    with pytest.raises(IndexError):
        apply1(O.RemoveAxis(5), X)
    with pytest.raises(IndexError):
        apply1(O.AddAxis(5), X)


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (0, 7)], ids=repr)
def test_get_var_shape(shape):
    x = np.zeros(shape, np.float16)
    out = apply1(O.GetVarShape(), x)
    assert_exact(out, np.array(shape, dtype=np.int32))


@pytest.mark.parametrize("cls", [O.Identity, O.FastpathCopy])
def test_identity_and_fastpath_copy(cls):
    for x in (X, np.float32(3.5), np.array([True, False]), np.zeros((0, 2), np.uint8)):
        x = np.asarray(x)
        t = imp.Tensor(x)
        (out,) = imp.apply(cls(), t)
        assert_exact(out, x)
        assert out.device == t.device
        # the input is untouched and both stay usable after the other is gone
        del t
        np.testing.assert_array_equal(out.numpy(), x)


def test_fastpath_copy_of_pending_result():
    a = imp.Tensor(np.ones((32, 32), np.float32))
    b = a @ a
    (c,) = imp.apply(O.FastpathCopy(), b)
    np.testing.assert_array_equal(c.numpy(), np.full((32, 32), 32, np.float32))
    np.testing.assert_array_equal(b.numpy(), c.numpy())


@pytest.mark.parametrize("index", [
    0, -1, (1, 2), slice(None, None, -1), (slice(None), slice(None, None, -2)),
    (Ellipsis, 1), (None, 0, Ellipsis), (1, slice(3, 0, -1), None, 2), (slice(0, 0),),
], ids=repr)
def test_subtensor_op(index):
    assert_exact(apply1(O.Subtensor(index), X), X[index])


def test_subtensor_out_of_range():
    with pytest.raises(IndexError):
        apply1(O.Subtensor((5,)), X)


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES + ["int16", "uint16"])
def test_typecvt_op(src, dst):
    rng = np.random.default_rng(13)
    x = make_input("ADD", 0, src, (3, 5), rng)
    out = apply1(O.TypeCvt(dst), x)
    assert_exact(out, x.astype(dst))


def test_typecvt_float_to_int_truncates_like_numpy():
    x = np.array([-2.7, -0.5, 0.5, 2.7, 100.2], np.float32)
    for dst in ("int32", "int8", "int16"):
        assert_exact(apply1(O.TypeCvt(dst), x), x.astype(dst))


def test_typecvt_rejects_unsupported():
    with pytest.raises(TypeError, match="float64"):
        O.TypeCvt("float64")


@pytest.mark.parametrize("device", ["cpu0", "cpu1", "cpu2"])
def test_copy_op(device):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = imp.Tensor(x)
    (out,) = imp.apply(O.Copy(device), t)
    assert out.device == device
    assert_exact(out, x)
    (back,) = imp.apply(O.Copy("cpu0"), out)
    assert back.device == "cpu0"
    assert_exact(back, x)
    # the copy is independent of the source
    del t
    np.testing.assert_array_equal(out.numpy(), x)


def test_copy_op_unknown_device():
    with pytest.raises(ValueError):
        O.Copy("npu0")


def test_shape_ops_chain_matches_numpy():
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    t = imp.Tensor(x)
    (a,) = imp.apply(O.Dimshuffle((3, 1, 0, 2)), t)
    (b,) = imp.apply(O.Reshape((5, -1)), a)
    (c,) = imp.apply(O.Subtensor((slice(None, None, -2), slice(1, None, 3))), b)
    (d,) = imp.apply(O.AddAxis(1), c)
    (e,) = imp.apply(O.Broadcast((3, 4, 8)), d)
    (f,) = imp.apply(O.Reduce("SUM", (0, 1)), e)
    ref = np.transpose(x, (3, 1, 0, 2)).reshape(5, -1)[::-2, 1::3]
    ref = np.broadcast_to(np.expand_dims(ref, 1), (3, 4, 8)).sum(axis=(0, 1))
    np.testing.assert_allclose(f.numpy(), ref, rtol=1e-6)


# --------------------------------------------------------------------------- ops are values


def test_ops_are_values():
    assert O.Elemwise("ADD") == O.Elemwise("ADD")
    assert O.Elemwise("ADD") == O.Elemwise("add")
    assert O.Elemwise("ADD") != O.Elemwise("SUB")
    assert hash(O.Elemwise("ADD")) == hash(O.Elemwise("ADD"))
    assert len({O.Elemwise("ADD"), O.Elemwise("ADD"), O.Elemwise("MUL")}) == 2
    assert O.Reduce("SUM", 0, True) == O.Reduce("SUM", 0, True)
    assert O.Reduce("SUM", 0, True) != O.Reduce("SUM", 0, False)
    assert O.Reduce("SUM", (0, 1)) == O.Reduce("SUM", [0, 1])
    assert O.Reduce("SUM") != O.Reduce("MEAN")
    assert O.MatrixMul() == O.MatrixMul(False, False)
    assert O.MatrixMul(True) != O.MatrixMul()
    assert O.MatrixMul() != O.BatchedMatrixMul()
    assert O.Reshape((2, 3)) == O.Reshape((2, 3))
    assert O.Reshape((2, 3)) != O.Reshape((3, 2))
    assert O.TypeCvt("float32") == O.TypeCvt(np.float32)
    assert O.TypeCvt("float32") != O.TypeCvt("int32")
    assert O.Copy("cpu1") == O.Copy("cpu1")
    assert O.Elemwise("ADD") != "ADD"
    d = {O.Reshape((2, 3)): 1, O.Dimshuffle((1, 0)): 2, O.Elemwise("ADD"): 3}
    assert d[O.Reshape([2, 3])] == 1 and d[O.Dimshuffle([1, 0])] == 2
    assert d[O.Elemwise("ADD")] == 3


def test_typecvt_ops_with_different_quantization_differ():
    q1, q2 = imp.dtype.quint8(0.1, 3), imp.dtype.quint8(0.2, 3)
    assert O.TypeCvt(q1) != O.TypeCvt(q2)
    assert O.TypeCvt(q1) != O.TypeCvt("uint8")
    assert O.TypeCvt(q1) == O.TypeCvt(imp.dtype.quint8(0.1, 3))


@pytest.mark.parametrize("op, words", [
    (O.Elemwise("ADD"), ["Elemwise", "ADD"]),
    (O.Reduce("SUM", (0, 2), True), ["Reduce", "SUM", "(0, 2)", "True"]),
    (O.MatrixMul(True, False), ["MatrixMul", "True", "False"]),
    (O.BatchedMatrixMul(), ["BatchedMatrixMul"]),
    (O.Reshape((2, -1)), ["Reshape", "(2, -1)"]),
    (O.Broadcast((4, 5)), ["Broadcast", "(4, 5)"]),
    (O.Dimshuffle((1, 0)), ["Dimshuffle", "(1, 0)"]),
    (O.AddAxis(1), ["AddAxis", "1"]),
    (O.RemoveAxis(0), ["RemoveAxis", "0"]),
    (O.GetVarShape(), ["GetVarShape"]),
    (O.Identity(), ["Identity"]),
    (O.FastpathCopy(), ["FastpathCopy"]),
    (O.TypeCvt("float16"), ["TypeCvt", "float16"]),
    (O.Copy("cpu1"), ["Copy", "cpu1"]),
], ids=lambda v: type(v).__name__ if isinstance(v, O.Op) else "")
def test_op_repr_is_readable(op, words):
    r = repr(op)
    assert "object at 0x" not in r
    for w in words:
        assert w in r, (w, r)


@pytest.mark.parametrize("op, attr", [
    (O.Elemwise("ADD"), "mode"), (O.Reduce("SUM"), "axis"), (O.MatrixMul(), "transpose_a"),
    (O.Reshape((2, 3)), "shape"), (O.TypeCvt("int8"), "dtype"), (O.Copy("cpu0"), "device"),
    (O.Identity(), "anything"),
], ids=lambda v: type(v).__name__ if isinstance(v, O.Op) else v)
def test_ops_are_immutable(op, attr):
    before = repr(op)
    with pytest.raises(AttributeError):
        setattr(op, attr, "changed")
    with pytest.raises(AttributeError):
        op.brand_new = 1
    assert repr(op) == before


def test_elemwise_mode_is_immutable_in_use():
    op = O.Elemwise("ADD")
    with pytest.raises(AttributeError):
        op.mode = "SUB"
    (out,) = imp.apply(op, imp.Tensor([1, 2]), imp.Tensor([3, 4]))
    np.testing.assert_array_equal(out.numpy(), [4, 6])


@pytest.mark.parametrize("mode", ["FOO", "add_", "", "SUM"])
def test_unknown_elemwise_mode(mode):
    with pytest.raises(ValueError, match="mode"):
        O.Elemwise(mode)


@pytest.mark.parametrize("mode", ["ADD", "AVG", ""])
def test_unknown_reduce_mode(mode):
    with pytest.raises(ValueError, match="mode"):
        O.Reduce(mode)


def test_apply_non_tensor_input_is_type_error():
    with pytest.raises(TypeError, match="op Elemwise expects Tensor inputs, got int"):
        imp.apply(O.Elemwise("NEGATE"), 3)
    with pytest.raises(TypeError, match="op Elemwise expects Tensor inputs, got int"):
        imp.apply(O.Elemwise("ADD"), imp.Tensor([1]), 3)
    with pytest.raises(TypeError, match="op Elemwise expects Tensor inputs, got ndarray"):
        imp.apply(O.Elemwise("ADD"), imp.Tensor([1]), np.ones(1))
    with pytest.raises(TypeError, match="op Reduce expects Tensor inputs, got list"):
        imp.apply(O.Reduce("SUM"), [1, 2])
    with pytest.raises(TypeError, match="op MatrixMul expects Tensor inputs, got NoneType"):
        imp.apply(O.MatrixMul(), imp.Tensor([1.0]), None)


def test_apply_returns_tuple_of_tensors():
    res = imp.apply(O.Elemwise("ADD"), imp.Tensor([1.0]), imp.Tensor([2.0]))
    assert isinstance(res, tuple) and len(res) == 1
    assert isinstance(res[0], imp.Tensor)
    assert res[0].item() == 3.0


def test_apply_does_not_leak(assert_no_leak):
    x = imp.Tensor(np.ones((8, 8), np.float32))

    def work():
        (a,) = imp.apply(O.Elemwise("ADD"), x, x)
        (b,) = imp.apply(O.Reduce("SUM", 0), a)
        (c,) = imp.apply(O.MatrixMul(), x, a)
        (d,) = imp.apply(O.Reshape((-1,)), c)
        return d.numpy(), b.numpy()

    assert_no_leak(work, repeat=3)


def test_apply_error_does_not_leak(assert_no_leak):
    x = imp.Tensor(np.ones((2, 3), np.float32))
    y = imp.Tensor(np.ones((4,), np.float32))

    def work():
        with pytest.raises(ValueError):
            imp.apply(O.Elemwise("ADD"), x, y)
        with pytest.raises(TypeError):
            imp.apply(O.Elemwise("ADD"), x, 3)

    assert_no_leak(work, repeat=2)


def test_sums_along_a_long_leading_axis_are_pairwise_accurate():
    """numpy adds the slices along a non-last axis one after another (error growing with
    the length: 8e-5 here); imperative sums such long axes pairwise, as it does a
    broadcast operand's gradient."""
    x = np.random.default_rng(0).standard_normal((4800, 5)).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(imp.functional.sum(imp.Tensor(x), axis=0).numpy(), exact,
                               rtol=0, atol=2e-5)
    np.testing.assert_allclose(imp.functional.mean(imp.Tensor(x), axis=0, keepdims=True).numpy(),
                               exact[None] / 4800, rtol=0, atol=2e-5 / 4800)
    p = imp.Parameter(np.ones(5, np.float32))
    gm = imp.autodiff.GradManager().attach([p])
    with gm:
        gm.backward((imp.functional.broadcast_to(p, x.shape) * imp.Tensor(x)).sum())
    np.testing.assert_allclose(p.grad.numpy(), exact, rtol=0, atol=2e-5)
