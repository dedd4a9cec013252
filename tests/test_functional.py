"""imperative.functional against numpy (and the new Elemwise modes against independent
references): elementwise math with scalar promotion, reductions, shapes, joins and splits,
where/clip, creation ops, and the error each bad argument gets."""
import math

import numpy as np
import pytest

import imperative as imp
from imperative import ops as O

F = imp.functional


def T(a, **kw):
    return imp.Tensor(a, **kw)


def assert_same(got, expected, rtol=1e-6, atol=1e-6):
    """dtype, shape and values (exact for non-floats)."""
    expected = np.asarray(expected)
    assert isinstance(got, imp.Tensor)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if expected.dtype.kind == "f":
        tol = 1e-3 if expected.dtype == np.float16 else rtol
        np.testing.assert_allclose(got.numpy(), expected, rtol=tol,
                                   atol=1e-3 if expected.dtype == np.float16 else atol)
    else:
        np.testing.assert_array_equal(got.numpy(), expected)


def test_functional_is_F():
    assert imp.F is imp.functional
    for name in F.__all__:
        assert callable(getattr(F, name)), name


# --------------------------------------------------------------------------- new Elemwise modes

def _float64(fn):
    """A reference computed in float64 from the (float32/float16) inputs."""
    return lambda *xs: fn(*(x.astype(np.float64) for x in xs))


_SQRT2 = math.sqrt(2)
_erf64 = np.vectorize(math.erf, otypes=[np.float64])
_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])

# mode -> (reference, arity, kind, input range); kind "float": ints/bools compute in float32
NEW_MODES = {
    "SIGN": (np.sign, 1, "arith", None),
    "SHL": (np.left_shift, 2, "arith", (0, 3)),
    "SHR": (np.right_shift, 2, "arith", (0, 3)),
    "LOGICAL_AND": (np.logical_and, 2, "arith", None),
    "LOGICAL_OR": (np.logical_or, 2, "arith", None),
    "LOGICAL_XOR": (np.logical_xor, 2, "arith", None),
    "LOGICAL_NOT": (np.logical_not, 1, "arith", None),
    "FLOOR": (np.floor, 1, "arith", None),
    "CEIL": (np.ceil, 1, "arith", None),
    "TRUNC": (np.trunc, 1, "arith", None),
    "ROUND": (lambda x: np.round(x) if x.dtype.kind == "f" else x, 1, "arith", None),
    "EXPM1": (_float64(np.expm1), 1, "float", (-3, 3)),
    "LOG1P": (_float64(np.log1p), 1, "float", (0, 9)),
    "RSQRT": (_float64(lambda x: 1 / np.sqrt(x)), 1, "float", (1, 9)),
    "SIN": (_float64(np.sin), 1, "float", (-3, 3)),
    "COS": (_float64(np.cos), 1, "float", (-3, 3)),
    "TAN": (_float64(np.tan), 1, "float", (-1, 1)),
    "ERF": (_float64(_erf64), 1, "float", (-5, 5)),
    "GELU": (_float64(lambda x: x * 0.5 * _erfc64(-x / _SQRT2)), 1, "float", (-6, 6)),
    "GELU_TANH": (_float64(lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                             * (x + 0.044715 * x ** 3)))),
                  1, "float", (-6, 6)),
    "SOFTPLUS": (_float64(lambda x: np.logaddexp(0, x)), 1, "float", (-9, 9)),
    "SILU": (_float64(lambda x: x / (1 + np.exp(-x))), 1, "float", (-9, 9)),
    "HSWISH": (_float64(lambda x: x * np.clip(x + 3, 0, 6) / 6), 1, "float", (-5, 5)),
    "HSIGMOID": (_float64(lambda x: np.clip(x + 3, 0, 6) / 6), 1, "float", (-5, 5)),
}
ELEMWISE_DTYPES = ["float32", "float16", "int8", "uint8", "int32", "bool"]


def _data(dtype, shape, value_range, rng):
    dt = np.dtype(dtype)
    lo, hi = value_range or (-6, 6)
    if dt.kind == "b":      # all True where the function's domain excludes 0
        return rng.integers(0 if lo <= 0 else 1, 2, size=shape).astype(bool)
    if dt.kind == "u":
        lo = max(lo, 0)
    if dt.kind == "f":
        return rng.uniform(lo, hi, size=shape).astype(dt)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dt)


def _reference(mode, arrays):
    fn, _, kind, _ = NEW_MODES[mode]
    if kind == "float":
        out_dt = np.dtype(np.float32) if arrays[0].dtype.kind in "biu" else arrays[0].dtype
        arrays = [a.astype(np.float32) if a.dtype.kind in "biu" else a for a in arrays]
        return np.asarray(fn(*arrays)).astype(out_dt)
    r = np.asarray(fn(*arrays))
    return r.astype(np.int32) if r.dtype == np.int64 else r


def _numpy_refuses(mode, dtype):
    fn, nin, kind, _ = NEW_MODES[mode]
    if kind == "float":
        return False
    try:
        fn(*([np.ones(2, dtype)] * nin))
    except TypeError:
        return True
    return False


def test_new_modes_are_in_the_table():
    assert set(NEW_MODES) <= set(O.elemwise.modes())


@pytest.mark.parametrize("mode", sorted(NEW_MODES))
def test_new_elemwise_modes_match_references(mode):
    _, nin, _, value_range = NEW_MODES[mode]
    rng = np.random.default_rng(len(mode))
    op = O.Elemwise(mode)
    shape_sets = ([((3, 4), (3, 4)), ((3, 1), (1, 4)), ((0, 3), (1, 3)), ((), ())] if nin == 2
                  else [((3, 4),), ((0, 3),), ((),)])
    for dtype in ELEMWISE_DTYPES:
        if _numpy_refuses(mode, dtype):
            with pytest.raises(TypeError, match=mode):
                imp.apply(op, *[T(np.ones(3, dtype))] * nin)
            continue
        for shapes in shape_sets:
            arrays = [_data(dtype, s, value_range, rng) for s in shapes]
            (out,) = imp.apply(op, *[T(a) for a in arrays])
            assert_same(out, _reference(mode, arrays), rtol=2e-6, atol=2e-6)


def test_erf_is_accurate_to_float32_everywhere():
    x = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-30, 7, 2000),
                        -np.geomspace(1e-30, 7, 2000)]).astype(np.float32)
    expected = _erf64(x.astype(np.float64))
    got = F.erf(T(x)).numpy().astype(np.float64)
    ulps = np.abs(got - expected) / np.spacing(np.abs(expected).astype(np.float32))
    assert ulps.max() <= 2.0
    special = F.erf(T(np.array([0.0, np.inf, -np.inf, np.nan], np.float32))).numpy()
    np.testing.assert_array_equal(special[:3], [0.0, 1.0, -1.0])
    assert np.isnan(special[3])


def test_composite_functions_of_large_strided_tensors():
    """Our own (non-ufunc) functions run blockwise over big inputs, views included."""
    x = np.random.default_rng(3).standard_normal((150, 300)).astype(np.float32) * 4
    xt = F.transpose(T(x))
    expected = x.T.astype(np.float64) * 0.5 * _erfc64(-x.T.astype(np.float64) / _SQRT2)
    np.testing.assert_allclose(F.gelu(xt).numpy(), expected, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(F.relu(xt).numpy(), np.maximum(x.T, 0))


def test_gelu_keeps_relative_accuracy_in_the_lower_tail():
    x = np.array([-8.0, -10.0, -12.0], np.float32)
    expected = x.astype(np.float64) * 0.5 * _erfc64(-x.astype(np.float64) / _SQRT2)
    np.testing.assert_allclose(F.gelu(T(x)).numpy(), expected, rtol=1e-4)


@pytest.mark.parametrize("size", [6, 5000])   # host-computed and worker-computed
@pytest.mark.parametrize("fn, ref", [(F.exp, np.exp), (F.sqrt, np.sqrt), (F.tanh, np.tanh),
                                     (F.log, np.log)])
def test_float_functions_of_small_ints_compute_in_float32(fn, ref, size):
    """numpy's own loop would compute int8 in float16: the contract says float32."""
    x = (np.arange(size) % 9 + 1).astype(np.int8)
    out = fn(T(x))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), ref(x.astype(np.float32)), rtol=1e-6)


# --------------------------------------------------------------------------- elementwise functions


BINARY = {
    F.add: np.add, F.sub: np.subtract, F.mul: np.multiply, F.floor_div: np.floor_divide,
    F.mod: np.remainder, F.maximum: np.maximum, F.minimum: np.minimum, F.equal: np.equal,
    F.less: np.less, F.greater_equal: np.greater_equal, F.bitwise_and: np.bitwise_and,
    F.logical_or: np.logical_or,
}


@pytest.mark.parametrize("fn", list(BINARY), ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
def test_binary_functions_match_numpy(fn, dtype):
    rng = np.random.default_rng(7)
    a = rng.integers(-20, 20, size=(4, 1, 3)).astype(dtype)
    b = rng.integers(1, 9, size=(5, 1)).astype(dtype)
    if fn is F.bitwise_and and dtype == "float32":
        with pytest.raises(TypeError, match="AND"):    # numpy has no bitwise loop for floats
            fn(T(a), T(b))
        return
    assert_same(fn(T(a), T(b)), BINARY[fn](a, b))


def test_div_of_ints_is_float32():
    assert_same(F.div(T(np.array([1, 2, 3], np.int8)), T(np.array([2, 2, 2], np.int8))),
                np.array([0.5, 1, 1.5], np.float32))


@pytest.mark.parametrize("x, y, dtype", [
    (np.array([1, 2], np.int8), 1, np.int8),               # the tensor's category wins
    (np.array([1, 2], np.int32), 1.5, np.float32),          # a higher scalar category wins
    (np.array([1, 2], np.float16), 2.0, np.float16),
    (np.array([True, False]), 1, np.int32),
    (3, np.array([1.0, 2.0], np.float32), np.float32),
])
def test_python_scalars_promote_like_operators(x, y, dtype):
    out = F.add(T(x) if isinstance(x, np.ndarray) else x, T(y) if isinstance(y, np.ndarray) else y)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), np.add(x, y).astype(dtype))


def test_numpy_arrays_are_accepted_as_tensors():
    out = F.mul(T(np.ones(3, np.float32)), np.array([1.0, 2.0, 3.0]))
    assert_same(out, np.array([1, 2, 3], np.float32))


def test_elementwise_shape_error_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        F.add(T(np.ones((2, 3))), T(np.ones(4)))


def test_none_operand_is_a_type_error():
    with pytest.raises(TypeError, match="None"):
        F.add(T(np.ones(2)), None)


def test_gelu_approximate_argument():
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    exact = x.astype(np.float64) * 0.5 * _erfc64(-x.astype(np.float64) / _SQRT2)
    np.testing.assert_allclose(F.gelu(T(x)).numpy(), exact, rtol=1e-5, atol=1e-6)
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(F.gelu(T(x), approximate="tanh").numpy(), tanh, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(T(x), approximate="fast")


def test_relu_sigmoid_leaky_relu():
    x = np.array([[-3.0, -0.5, 0.0, 2.0]], np.float32)
    assert_same(F.relu(T(x)), np.maximum(x, 0))
    assert_same(F.sigmoid(T(x)), 1 / (1 + np.exp(-x)))
    assert_same(F.leaky_relu(T(x), 0.2), np.where(x >= 0, x, 0.2 * x))
    assert_same(F.leaky_relu(T(np.array([-2, 3], np.int32))), np.array([-0.02, 3], np.float32))
    big = F.sigmoid(T(np.array([-200.0, 200.0], np.float32))).numpy()
    np.testing.assert_array_equal(big, [0.0, 1.0])


# --------------------------------------------------------------------------- where / clip


def test_where_broadcasts_and_promotes():
    cond = np.array([[True], [False]])
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    assert_same(F.where(T(cond), T(x), 0.5), np.where(cond, x, 0.5).astype(np.float32))
    assert_same(F.where(T(cond), T(x), T(np.int16(-1))), np.where(cond, x, np.int16(-1)))
    assert_same(F.where(T(np.zeros((0, 3), bool)), T(x[:1]), 1), np.zeros((0, 3), np.int8))
    with pytest.raises(ValueError, match="condition"):
        F.where(T(np.ones(4, bool)), T(x), T(x))


def test_clip():
    x = np.arange(-5, 6, dtype=np.int32)
    assert_same(F.clip(T(x), -2, 3), np.clip(x, -2, 3))
    assert_same(F.clip(T(x), None, 3), np.minimum(x, 3))
    assert_same(F.clip(T(x), -2.5, 2.5), np.clip(x, -2.5, 2.5).astype(np.float32))
    assert_same(F.clip(T(x.astype(np.int8)), -1000, 1000), x.astype(np.int8))
    lo = np.full(11, -1, np.int32)
    assert_same(F.clip(T(x), T(lo), 4), np.clip(x, lo, 4))
    assert_same(F.clip(T(np.float32(7.0)), 0.0, 1.0), np.float32(1.0))
    with pytest.raises(ValueError, match="lower and upper"):
        F.clip(T(x))


# --------------------------------------------------------------------------- reductions

REDUCTIONS = {F.sum: np.sum, F.mean: np.mean, F.max: np.max, F.min: np.min, F.prod: np.prod}


@pytest.mark.parametrize("fn", list(REDUCTIONS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), [1]], ids=repr)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(fn, axis, keepdims):
    x = np.random.default_rng(1).uniform(0.5, 1.5, size=(2, 3, 4)).astype(np.float32)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    assert_same(fn(T(x), axis, keepdims), REDUCTIONS[fn](x, axis=np_axis, keepdims=keepdims),
                rtol=1e-5)


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("axis", [None, 1, (0, 2)], ids=repr)
def test_var_std_match_numpy(axis, ddof):
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32) * 3 + 10
    for fn, ref in ((F.var, np.var), (F.std, np.std)):
        for keepdims in (False, True):
            expected = ref(x.astype(np.float64), axis=axis, ddof=ddof, keepdims=keepdims)
            assert_same(fn(T(x), axis, keepdims, ddof), expected.astype(np.float32), rtol=1e-5)
    assert_same(F.var(T(np.array([1, 2, 3, 4], np.int8))), np.float32(1.25))


FLOAT16_INPUTS = {
    "100k uniform": lambda rng: rng.random(100000).astype(np.float16),
    "70k halves": lambda rng: np.full((4, 70000), 0.5, np.float16),
    "sum past 65504": lambda rng: np.full(1000, 100, np.float16),
    "large values": lambda rng: np.full(3, 40000, np.float16),
    "rows": lambda rng: (rng.random((37, 53)) * 100).astype(np.float16),
    "long first axis": lambda rng: rng.random((3000, 4)).astype(np.float16),
}


@pytest.mark.parametrize("make", list(FLOAT16_INPUTS.values()), ids=list(FLOAT16_INPUTS))
def test_float16_mean_var_std_accumulate_in_float32(make):
    # the count was cast to float16 (inf past 65504: the mean of 100k values was 0) and
    # the sums were float16 (inf past 65504)
    x = make(np.random.default_rng(5))
    for axis in [None] + list(range(x.ndim)):
        # mean: numpy's algorithm (float32 sum and division, one rounding): its very bits
        expected = np.mean(x, axis=axis)
        for got in (T(x).mean(axis=axis), F.mean(T(x), axis)):
            assert got.dtype == np.float16
            np.testing.assert_array_equal(got.numpy(), expected)
        # sum: float16, as numpy's (inf past 65504), no further from the float64 sum than
        # numpy's by one float16 rounding (long leading axes are summed more exactly)
        with np.errstate(over="ignore"):
            theirs = np.sum(x, axis=axis)
        exact, got = np.sum(x.astype(np.float64), axis=axis), T(x).sum(axis=axis).numpy()
        np.testing.assert_array_equal(np.isinf(got), np.isinf(theirs))
        finite = np.isfinite(theirs)
        assert np.all((np.abs(got - exact) <= np.abs(theirs - exact) + np.spacing(got))[finite])
        # var, std: float32 throughout (numpy's var sums in float16, and overflows where
        # these sums pass 65504): the float64 result to float16 rounding, and no further
        # from it than numpy's (by one float16 rounding) wherever numpy's is finite
        exact = np.var(x.astype(np.float64), axis=axis)
        for fn, ref, want in ((F.var, np.var, exact), (F.std, np.std, np.sqrt(exact))):
            got = fn(T(x), axis)
            assert got.dtype == np.float16
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-3, atol=1e-7)
            with np.errstate(over="ignore", invalid="ignore"):
                theirs = ref(x, axis=axis)
            finite = np.isfinite(theirs)
            ours_off = np.abs(got.numpy().astype(np.float64) - want)[finite]
            numpy_off = np.abs(theirs.astype(np.float64) - want)[finite]
            assert np.all(ours_off <= numpy_off + np.spacing(np.float16(want[finite]))), axis


def test_float16_mean_and_var_gradients_match_torch():
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(6).random(70000) * 3).astype(np.float16)
    for fn, tfn in ((lambda t: t.mean(), lambda t: t.mean()),
                    (F.var, lambda t: t.var(unbiased=False))):
        w = imp.Parameter(x)
        gm = imp.autodiff.GradManager().attach([w])
        with gm:
            gm.backward(fn(w))
        tw = torch.tensor(x, requires_grad=True)
        tfn(tw).backward()
        assert w.grad.dtype == np.float16
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-2, atol=1e-7)
        assert np.any(w.grad.numpy() != 0)


def test_argmax_argmin_and_sum_dtypes():
    x = np.array([[3, 9, 1], [7, 2, 8]], np.int8)
    assert_same(F.argmax(T(x), 1), np.argmax(x, 1).astype(np.int32))
    assert_same(F.argmin(T(x)), np.int32(np.argmin(x)))
    assert_same(F.sum(T(x)), np.int32(x.sum()))
    assert_same(F.mean(T(x), 0), x.mean(0).astype(np.float32))


def test_reduction_axis_errors():
    with pytest.raises(IndexError, match="axis 3"):
        F.sum(T(np.ones((2, 3))), 3)
    with pytest.raises(IndexError):
        F.var(T(np.ones((2, 3))), -3)


@pytest.mark.parametrize("bad, good", [(True, 1), (1.0, 1), (np.float64(2.0), 2),
                                       ((0.0, 1), (0, 1)), ((False, 1), (0, 1))], ids=repr)
def test_a_rejected_axis_leaves_every_later_reduction_working(bad, good):
    # 1 == 1.0 == True hash alike: the op of a rejected axis was memoised and served
    # every later valid call with an equal axis, in every tensor of the process
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    scalar_axis = not isinstance(good, tuple)
    calls = [(m, (lambda t, a, m=m: getattr(t, m)(axis=a)), getattr(np, m))
             for m in ("sum", "mean", "max", "min", "prod")]
    calls += [("F." + f.__name__, f, REDUCTIONS[f]) for f in REDUCTIONS]
    if scalar_axis:
        calls += [(m, (lambda t, a, m=m: getattr(t, m)(axis=a)), getattr(np, m))
                  for m in ("argmax", "argmin")]
    for name, call, ref in calls:
        with pytest.raises(TypeError, match="axis"):
            call(T(x), bad)
        with pytest.raises(TypeError):
            ref(x, axis=bad)                         # numpy refuses them too
        for shape in ((2, 3, 4), (3, 5, 2)):
            y = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
            expected = ref(y, axis=good)
            got = call(T(y), good).numpy()
            np.testing.assert_allclose(got, expected.astype(got.dtype), rtol=1e-6,
                                       err_msg=name)
        # and the other way round: a valid call first does not make the bad one pass
        with pytest.raises(TypeError, match="axis"):
            call(T(x), bad)


# --------------------------------------------------------------------------- matmul and shapes


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes(ta, tb):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    a_in = np.swapaxes(a, -1, -2).copy() if ta else a
    b_in = b.T.copy() if tb else b
    assert_same(F.matmul(T(a_in), T(b_in), ta, tb), a @ b, rtol=1e-5, atol=1e-5)


def test_shape_functions_match_numpy():
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    assert_same(F.reshape(T(x), (4, -1)), x.reshape(4, -1))
    assert_same(F.transpose(T(x)), x.T)
    assert_same(F.transpose(T(x), (1, 0, 2)), x.transpose(1, 0, 2))
    assert_same(F.broadcast_to(T(x[:, :1]), (5, 2, 3, 4)), np.broadcast_to(x[:, :1], (5, 2, 3, 4)))
    assert_same(F.expand_dims(T(x), (0, -1)), np.expand_dims(x, (0, -1)))
    assert_same(F.squeeze(T(x[:1, :, :1])), np.squeeze(x[:1, :, :1]))
    assert_same(F.squeeze(T(x[:1]), 0), x[0])
    assert_same(F.flatten(T(x)), x.reshape(-1))
    assert_same(F.flatten(T(x), 1), x.reshape(2, 12))
    assert_same(F.flatten(T(x), 0, 1), x.reshape(6, 4))
    assert_same(F.flatten(T(np.float32(3))), np.array([3], np.float32))


def test_shape_function_errors():
    x = T(np.ones((2, 3)))
    with pytest.raises(ValueError, match="reshape"):
        F.reshape(x, (4, 2))
    with pytest.raises(ValueError, match="squeeze"):
        F.squeeze(x, 0)
    with pytest.raises(ValueError, match="start_axis"):
        F.flatten(x, 1, 0)
    with pytest.raises(ValueError, match="broadcast"):
        F.broadcast_to(x, (3, 3))


# --------------------------------------------------------------------------- concat / stack / split


def test_concat_matches_numpy_and_promotes():
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    b = np.ones((1, 3), np.float16)
    assert_same(F.concat([T(a), T(b)]), np.concatenate([a, b]))
    assert_same(F.concat([T(a), T(a)], axis=-1), np.concatenate([a, a], -1))
    assert_same(F.concat([T(a[:0]), T(a)]), a)
    assert_same(F.concat((T(a),)), a)
    for axis in (0, 1, -1, -2, np.int64(1), np.int32(-2)):     # (a plain int's op memoised)
        for _ in range(2):
            assert_same(F.concat([T(a), T(a + 1)], axis=axis),
                        np.concatenate([a, a + 1], int(axis)))


def test_concat_errors():
    a = T(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"tensor 1 has shape \(2, 4\)"):
        F.concat([a, T(np.ones((2, 4)))])
    with pytest.raises(IndexError):
        F.concat([a, a], axis=2)
    with pytest.raises(ValueError, match="zero-dimensional"):
        F.concat([T(1.0), T(2.0)])
    with pytest.raises(ValueError, match="at least one"):
        F.concat([])
    with pytest.raises(TypeError, match="list or tuple"):
        F.concat(a)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack_matches_numpy(axis):
    xs = [np.full((2, 3), i, np.float32) for i in range(4)]
    assert_same(F.stack([T(x) for x in xs], axis), np.stack(xs, axis))


def test_stack_errors_and_scalars():
    assert_same(F.stack([T(1.0), T(2.0)]), np.array([1, 2], np.float32))
    with pytest.raises(ValueError, match=r"tensor 1 has shape \(3,\), expected \(2,\)"):
        F.stack([T(np.ones(2)), T(np.ones(3))])
    with pytest.raises(IndexError):
        F.stack([T(np.ones(2))], axis=3)


@pytest.mark.parametrize("spec", [3, [1, 4], (0, 2, 2, 6), [-2], [5, 2]], ids=repr)
def test_split_matches_numpy(spec):
    x = np.arange(12, dtype=np.int32).reshape(6, 2)
    got = F.split(T(x), spec)
    expected = np.split(x, spec)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_same(g, e)
    got = F.split(T(x.T), 2, axis=1)
    for g, e in zip(got, np.split(x.T, 2, axis=1)):
        assert_same(g, e)


def test_split_errors():
    x = T(np.ones((6, 2)))
    with pytest.raises(ValueError, match="equal sections"):
        F.split(x, 4)
    with pytest.raises(ValueError, match="positive"):
        F.split(x, 0)
    with pytest.raises(IndexError):
        F.split(x, 2, axis=2)
    with pytest.raises(TypeError, match="indices_or_sections"):
        F.split(x, 1.5)


# --------------------------------------------------------------------------- creation


def test_creation_functions_match_numpy():
    assert_same(F.zeros((2, 3)), np.zeros((2, 3), np.float32))
    assert_same(F.ones(4, dtype="int8"), np.ones(4, np.int8))
    assert_same(F.full((2,), 7), np.full(2, 7, np.int32))
    assert_same(F.full((2,), True), np.full(2, True))
    assert_same(F.full((2,), 1.5, dtype="float16"), np.full(2, 1.5, np.float16))
    assert_same(F.full((0, 3), 1.0), np.ones((0, 3), np.float32))
    assert_same(F.full((), 2.0), np.float32(2.0))
    assert_same(F.arange(5), np.arange(5, dtype=np.int32))
    assert_same(F.arange(1, 2, 0.25), np.arange(1, 2, 0.25).astype(np.float32))
    assert_same(F.arange(10, 0, -3), np.arange(10, 0, -3).astype(np.int32))
    assert_same(F.arange(3, 3), np.zeros(0, np.int32))
    assert_same(F.arange(0, 1, 0.1, dtype="float16"), np.arange(0, 1, 0.1).astype(np.float16))
    assert_same(F.linspace(0, 1, 5), np.linspace(0, 1, 5).astype(np.float32))
    assert_same(F.linspace(0, 1, 4, endpoint=False),
                np.linspace(0, 1, 4, endpoint=False).astype(np.float32))
    assert_same(F.linspace(2, 3, 0), np.zeros(0, np.float32))


def test_like_functions_follow_the_tensor():
    x = T(np.ones((2, 3), np.int16))
    assert_same(F.zeros_like(x), np.zeros((2, 3), np.int16))
    assert_same(F.ones_like(x, dtype="float32"), np.ones((2, 3), np.float32))
    assert_same(F.full_like(x, 5), np.full((2, 3), 5, np.int16))
    y = F.zeros_like(F.copy(x, "cpu1"))
    assert y.device == "cpu1"


def test_creation_ops_have_no_inputs_and_name_their_device():
    op = O.Fill((2, 2), 3.0, None, "cpu1")
    (t,) = imp.apply(op)
    assert t.device == "cpu1" and t.dtype == np.float32
    np.testing.assert_array_equal(t.numpy(), np.full((2, 2), 3.0))
    same = O.Fill((2, 2), 3.0, "float32", "cpu1")
    assert op == same and hash(op) == hash(same)
    assert "Fill(shape=(2, 2), value=3.0, dtype=float32" in repr(op)
    with pytest.raises(ValueError):
        imp.apply(op, T(1.0))


def test_creation_errors():
    with pytest.raises(ValueError, match="negative"):
        np.zeros((2, -1))
    # each names the function called (zeros and ones said `full:`)
    for fn in (F.zeros, F.ones):
        with pytest.raises(ValueError, match=f"^{fn.__name__}: negative"):
            fn((2, -1))
        with pytest.raises(TypeError, match=f"^{fn.__name__}: "):
            fn((2, 1.5))
    with pytest.raises(ValueError, match="^full: negative"):
        F.full((2, -1), 3.0)
    with pytest.raises(ValueError, match="step"):
        F.arange(0, 5, 0)
    with pytest.raises(TypeError, match="float64"):
        F.zeros(3, dtype="float64")
    with pytest.raises(OverflowError):
        F.full(3, 300, dtype="int8")
    with pytest.raises(ValueError, match="num"):
        F.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="quantized|plain"):
        F.zeros(3, dtype=imp.dtype.qint8(0.1))


def test_copy_to_another_device():
    x = T(np.arange(3, dtype=np.float32))
    y = F.copy(x, "cpu1")
    assert y.device == "cpu1"
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert F.copy(x).device == x.device
    with pytest.raises(ValueError, match="different devices"):
        F.add(x, y)


# --------------------------------------------------------------------------- NN functions (numpy)


def test_linear_matches_numpy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    assert_same(F.linear(T(x), T(w)), x @ w.T, rtol=1e-5, atol=1e-5)
    assert_same(F.linear(T(x), T(w), T(b)), x @ w.T + b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"in_features=3.*\(2, 4\)"):
        F.linear(T(np.ones((2, 4), np.float32)), T(w))
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        F.linear(T(x), T(w), T(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="2-D"):
        F.linear(T(x), T(np.ones(3, np.float32)))


def test_softmax_functions_match_numpy():
    x = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32) * 10
    for axis in (0, 1, -1):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        sm = e / e.sum(axis=axis, keepdims=True)
        assert_same(F.softmax(T(x), axis), sm, rtol=1e-5)
        assert_same(F.log_softmax(T(x), axis), np.log(sm), rtol=1e-5, atol=1e-5)


def test_softmax_of_a_0d_tensor_names_its_0_dimensions():
    # the 0-d input counted as 1-d: "out of range for a tensor with 1 dimension(s)"
    for fn in (F.softmax, F.log_softmax):
        with pytest.raises(IndexError, match="axis 1 is out of range for a tensor with 0 "):
            fn(T(5.0), axis=1)
        assert_same(fn(T(5.0), axis=-1), np.float32(1.0 if fn is F.softmax else 0.0))


AXIS_TAKERS = {
    "concat": lambda x, a: F.concat([x, x], axis=a),
    "softmax": lambda x, a: F.softmax(x, a), "log_softmax": lambda x, a: F.log_softmax(x, a),
    "expand_dims": lambda x, a: F.expand_dims(x, a),
    "squeeze": lambda x, a: F.squeeze(F.expand_dims(x, 1), a),
    "split": lambda x, a: F.split(x, 3, axis=a),
    "cross_entropy": lambda x, a: F.cross_entropy(x[0], T(np.zeros(3, np.int32)), axis=a),
}
NUMPY_AXIS_TAKERS = {
    "concat": lambda x, a: np.concatenate([x, x], axis=a),
    "expand_dims": lambda x, a: np.expand_dims(x, a),
    "squeeze": lambda x, a: np.squeeze(np.expand_dims(x, 1), a),
    "split": lambda x, a: np.split(x, 3, axis=a),
}


@pytest.mark.parametrize("name", list(AXIS_TAKERS))
@pytest.mark.parametrize("bad", [1.0, True, 1.5, (1.0,)], ids=repr)
def test_non_integer_axes_are_type_errors(name, bad):
    # F.concat, F.softmax and F.expand_dims took 1.0 (and True) as 1, as int() reads them
    x = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    call = AXIS_TAKERS[name]
    if isinstance(bad, tuple) and name not in ("expand_dims", "squeeze"):
        return
    if (name in NUMPY_AXIS_TAKERS and type(bad) is float) or (
            name == "expand_dims" and bad == (1.0,)):
        with pytest.raises(TypeError):
            NUMPY_AXIS_TAKERS[name](x, bad)                     # numpy refuses them too
    with pytest.raises(TypeError, match="axis must be an int, got"):
        call(T(x), bad)
    got, good = call(T(x), 1), call(T(x), np.int64(1))            # and then works
    if name in NUMPY_AXIS_TAKERS:
        want = NUMPY_AXIS_TAKERS[name](x, 1)
        for g in (got, good):
            for a, b in zip(g if isinstance(g, list) else [g], want if isinstance(want, list)
                            else [want]):
                np.testing.assert_array_equal(a.numpy(), b)


def test_cross_entropy_accepts_list_labels():
    logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]], np.float32)
    labels = [0, 1]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    per_item = -logp[np.arange(2), labels]
    assert_same(F.cross_entropy(T(logits), labels, reduction="none"), per_item, rtol=1e-6)
    assert_same(F.cross_entropy(T(logits), labels), np.float32(per_item.mean()), rtol=1e-6)
    assert_same(F.cross_entropy(T(logits), labels, reduction="sum"), np.float32(per_item.sum()),
                rtol=1e-6)


def test_batch_norm_updates_running_stats_in_place():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    running_mean, running_var = T(np.zeros(3, np.float32)), T(np.ones(3, np.float32))
    y = F.batch_norm(T(x), running_mean, running_var, training=True, momentum=0.5)
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    expected = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5)
    assert_same(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(running_mean.numpy(), 0.5 * mean, rtol=1e-5)
    np.testing.assert_allclose(running_var.numpy(), 0.5 + 0.5 * var * 16 / 15, rtol=1e-5)
    # eval uses (and keeps) the running statistics
    before = running_mean.numpy().copy()
    y = F.batch_norm(T(x), running_mean, running_var, T(np.full(3, 2.0, np.float32)))
    expected = 2 * (x - before[:, None, None]) / np.sqrt(running_var.numpy()[:, None, None] + 1e-5)
    assert_same(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(running_mean.numpy(), before)
    # training without running statistics
    assert F.batch_norm(T(x), None, None, training=True).shape == x.shape


def test_batch_norm_errors():
    x = T(np.ones((4, 3), np.float32))
    stats = T(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="required when training=False"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match="both"):
        F.batch_norm(x, stats, None)
    with pytest.raises(ValueError, match=r"weight must have shape \(3,\)"):
        F.batch_norm(x, stats, stats, T(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="more than one value"):
        F.batch_norm(T(np.ones((1, 3), np.float32)), stats, stats, training=True)
    with pytest.raises(ValueError, match="at least 2-D"):
        F.batch_norm(T(np.ones(3, np.float32)), stats, stats)


def test_layer_norm_matches_numpy():
    x = np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)
    mean = x.mean(axis=(1, 2), keepdims=True)
    norm = (x - mean) / np.sqrt(x.var(axis=(1, 2), keepdims=True) + 1e-5)
    assert_same(F.layer_norm(T(x), (3, 4)), norm, rtol=1e-5, atol=1e-5)
    w = np.linspace(0.5, 2, 12, dtype=np.float32).reshape(3, 4)
    assert_same(F.layer_norm(T(x), (3, 4), T(w)), norm * w, rtol=1e-5, atol=1e-5)
    assert_same(F.layer_norm(T(x), [3, 4], None, T(w)), norm + w, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"must end with normalized_shape \(4, 3\)"):
        F.layer_norm(T(x), (4, 3))
    with pytest.raises(ValueError, match=r"weight must have shape \(4,\)"):
        F.layer_norm(T(x), 4, T(w))


def test_embedding_matches_numpy():
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([[0, 4], [2, 2]], np.int32)
    assert_same(F.embedding(T(idx), T(w)), w[idx])
    assert_same(F.embedding([1, 3], T(w)), w[[1, 3]])
    assert_same(F.embedding(T(np.zeros((0,), np.int8)), T(w)), np.zeros((0, 3), np.float32))
    with pytest.raises(TypeError, match="indices must have an integer dtype"):
        F.embedding(T(np.array([1.0])), T(w))


def test_dropout_is_deterministic_for_a_seed_and_scales_the_kept_values():
    x = imp.Tensor(np.ones((64, 64), np.float32))
    imp.random.seed(7)
    a = imp.F.dropout(x, 0.25).numpy()
    imp.random.seed(7)
    b = imp.F.dropout(x, 0.25, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.15 < (a == 0).mean() < 0.35
    assert imp.F.dropout(x, 0.25, training=False) is x
    with pytest.raises(ValueError, match="p must be"):
        imp.F.dropout(x, 1.5)
