"""Each op's ONNX form (imperative/jit/onnx_*.py): a program of one step, exported and run in
onnxruntime on random inputs, equals `imp.apply(op, *tensors)` run eagerly (same dtype and
shape; values within 1e-5 relative, exact for integers). Hypothesis draws shapes, dtypes and
the ops' parameters."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from imperative import ops as O  # noqa: E402
from imperative.jit import onnx_elemwise  # noqa: E402
from onnx_programs import QUICK, SEEDS, check_op, random_values  # noqa: E402

shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=5)


# ---------------------------------------------------------------------------------------
# Elementwise

# mode -> (input range, dtypes): the inputs each mode is defined on
_FLOATS = ("float32", "float16")
_NUMBERS = ("float32", "float16", "int32", "int8", "uint8")
_UNARY = {
    "NEGATE": ((-3, 3), ("float32", "float16", "int32", "int8")),
    "ABS": ((-3, 3), ("float32", "int32", "int8")), "SIGN": ((-3, 3), _NUMBERS),
    "FLOOR": ((-3, 3), _NUMBERS), "CEIL": ((-3, 3), _NUMBERS),
    "ROUND": ((-3, 3), _NUMBERS), "TRUNC": ((-3, 3), _NUMBERS),
    "EXP": ((-5, 5), _FLOATS + ("int32",)), "EXPM1": ((-1e-3, 1e-3), _FLOATS),
    "LOG": ((1e-3, 50), _FLOATS + ("uint8",)), "LOG1P": ((-1e-3, 1e-3), _FLOATS),
    "SQRT": ((0, 50), _FLOATS), "RSQRT": ((1e-2, 50), _FLOATS),
    "SIN": ((-3, 3), _FLOATS), "COS": ((-3, 3), _FLOATS), "TAN": ((-1.5, 1.5), _FLOATS),
    "TANH": ((-4, 4), _FLOATS), "ERF": ((-3, 3), _FLOATS + ("int8",)),
    "RELU": ((-3, 3), _NUMBERS), "SIGMOID": ((-8, 8), _FLOATS), "GELU": ((-4, 4), _FLOATS),
    "GELU_TANH": ((-4, 4), _FLOATS), "SOFTPLUS": ((-8, 8), _FLOATS),
    "SILU": ((-5, 5), _FLOATS), "HSWISH": ((-5, 5), _FLOATS), "HSIGMOID": ((-5, 5), _FLOATS),
    "LOGICAL_NOT": ((-2, 2), ("float32", "int32", "bool")), "NOT": ((-9, 9), ("bool", "int32", "uint8")),
}
_BINARY = {
    "ADD": ((-9, 9), _NUMBERS), "SUB": ((-9, 9), _NUMBERS), "MUL": ((-9, 9), _NUMBERS),
    "TRUE_DIV": ((1, 9), _NUMBERS), "FLOOR_DIV": ((-9, 9), ("float32", "int32", "int8")),
    "MOD": ((-9, 9), ("float32", "int32", "int16")), "POW": ((0, 3), _NUMBERS),
    "MAX": ((-9, 9), _NUMBERS + ("bool",)), "MIN": ((-9, 9), _NUMBERS),
    "EQ": ((-2, 2), _NUMBERS), "NE": ((-2, 2), _NUMBERS), "LT": ((-2, 2), _NUMBERS),
    "LEQ": ((-2, 2), _NUMBERS), "GT": ((-2, 2), _NUMBERS), "GEQ": ((-2, 2), _NUMBERS),
    "LOGICAL_AND": ((-1, 1), ("float32", "int32", "bool")),
    "LOGICAL_OR": ((-1, 1), ("float32", "int32", "bool")),
    "LOGICAL_XOR": ((-1, 1), ("float32", "int32", "bool")),
    "AND": ((-9, 9), ("bool", "int32", "int8")), "OR": ((-9, 9), ("bool", "int32", "int8")),
    "XOR": ((-9, 9), ("bool", "int32", "uint8")),
}


def test_every_mode_with_an_onnx_form_is_tested_here():
    assert set(onnx_elemwise.modes()) == set(_UNARY) | set(_BINARY)


@pytest.mark.parametrize("mode", sorted(_UNARY))
@QUICK
@given(shape=shapes, seed=SEEDS, data=st.data())
def test_a_unary_elemwise_mode_matches_eager(tmp_path, mode, shape, seed, data):
    (low, high), dtypes = _UNARY[mode]
    dtype = data.draw(st.sampled_from(dtypes), "dtype")
    check_op(O.Elemwise(mode), [random_values(seed, shape, dtype, low, high)], tmp_path, opset=18)


@pytest.mark.parametrize("mode", sorted(_BINARY))
@QUICK
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       seed=SEEDS, data=st.data())
def test_a_binary_elemwise_mode_matches_eager_with_broadcasting(tmp_path, mode, shapes, seed,
                                                                data):
    (low, high), dtypes = _BINARY[mode]
    a_dtype, b_dtype = (data.draw(st.sampled_from(dtypes), f"dtype {i}") for i in range(2))
    a = random_values(seed, shapes.input_shapes[0], a_dtype, low, high)
    b = random_values(seed + 1, shapes.input_shapes[1], b_dtype, low, high)
    if mode in ("FLOOR_DIV", "MOD"):
        b = np.where(b == 0, np.ones((), b.dtype), b)      # no division by zero
    check_op(O.Elemwise(mode), [a, b], tmp_path, opset=18)


@QUICK
@given(shape=shapes, seed=SEEDS, slope=st.floats(0, 1),
       dtype=st.sampled_from(["float32", "float16", "int32"]))
def test_leaky_relu_matches_eager(tmp_path, shape, seed, slope, dtype):
    check_op(O.LeakyRelu(slope), [random_values(seed, shape, dtype)], tmp_path)


@QUICK
@given(shape=shapes, seed=SEEDS, dtype=st.sampled_from(["float32", "float16", "int32", "int8"]),
       lower=st.none() | st.integers(-3, 0), upper=st.none() | st.integers(0, 3))
def test_clip_matches_eager(tmp_path, shape, seed, dtype, lower, upper):
    if lower is None and upper is None:
        upper = 1
    check_op(O.Clip(lower, upper), [random_values(seed, shape, dtype)], tmp_path)


@QUICK
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=4),
       seed=SEEDS, dtypes=st.tuples(*[st.sampled_from(["float32", "int32", "bool"])] * 3))
def test_where_matches_eager(tmp_path, shapes, seed, dtypes):
    arrays = [random_values(seed + i, s, d) for i, (s, d) in enumerate(zip(shapes.input_shapes, dtypes))]
    check_op(O.Where(), arrays, tmp_path)


# ---------------------------------------------------------------------------------------
# Reductions and products


def _axis_of(data, ndim, allow_tuple=True):
    """None, an int (possibly negative) or, when allowed, a tuple of distinct axes."""
    if ndim == 0:
        return data.draw(st.sampled_from([None, 0, -1]), "axis")
    single = st.integers(-ndim, ndim - 1)
    options = st.none() | single
    if allow_tuple:
        options |= st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).map(tuple)
    return data.draw(options, "axis")


@pytest.mark.parametrize("mode", ["SUM", "MEAN", "MAX", "MIN", "PRODUCT", "SUM_SQR"])
@QUICK
@given(shape=shapes, seed=SEEDS, keepdims=st.booleans(), data=st.data(),
       dtype=st.sampled_from(["float32", "float16", "int32", "int8", "bool"]))
def test_a_reduction_matches_eager(tmp_path, mode, shape, seed, keepdims, data, dtype):
    axis = _axis_of(data, len(shape))
    opset = data.draw(st.sampled_from([17, 18]), "opset")   # Reduce* axes moved in 18
    low, high = (0.5, 1.5) if mode == "PRODUCT" else (-3, 3)
    check_op(O.Reduce(mode, axis, keepdims), [random_values(seed, shape, dtype, low, high)], tmp_path,
           opset=opset)


@pytest.mark.parametrize("op_class", [O.Argmax, O.Argmin])
@QUICK
@given(shape=shapes, seed=SEEDS, keepdims=st.booleans(), data=st.data(),
       dtype=st.sampled_from(["float32", "int32", "float16"]))
def test_argmax_and_argmin_match_eager(tmp_path, op_class, shape, seed, keepdims, data, dtype):
    axis = _axis_of(data, len(shape), allow_tuple=False)
    # (ties, frequent among small integers, go to the first index in both)
    check_op(op_class(axis, keepdims), [random_values(seed, shape, dtype)], tmp_path)


@st.composite
def matmul_cases(draw):
    """(op, a shape, b shape): 1-d operands, matrices and broadcast batches, transposed."""
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    batched = draw(st.booleans())
    batch_a = draw(st.sampled_from([(), (2,), (1, 3), (2, 3)])) if batched else ()
    batch_b = batch_a[draw(st.integers(0, len(batch_a))):] if batched else ()
    if batched and batch_b and draw(st.booleans()):
        batch_b = (1,) + batch_b[1:]                   # broadcast along a batch axis
    ta, tb = draw(st.booleans()), draw(st.booleans())
    a = batch_a + ((k, m) if ta else (m, k))
    b = batch_b + ((n, k) if tb else (k, n))
    if not batched and draw(st.booleans()):
        a, ta = (k,), False                            # a vector on the left
    if len(a) >= 3 and len(b) >= 3 and draw(st.booleans()):
        return O.BatchedMatrixMul(ta, tb), a, b
    return O.MatrixMul(ta, tb), a, b


@QUICK
@given(case=matmul_cases(), seed=SEEDS, dtypes=st.sampled_from(
    [("float32", "float32"), ("float32", "int32"), ("int32", "int32"), ("float16", "float32")]))
def test_matrix_products_match_eager(tmp_path, case, seed, dtypes):
    op, a_shape, b_shape = case
    check_op(op, [random_values(seed, a_shape, dtypes[0]), random_values(seed + 1, b_shape, dtypes[1])],
           tmp_path)


# ---------------------------------------------------------------------------------------
# Shapes


@st.composite
def shape_ops(draw):
    """(op, input shape) for the view ops, with parameters valid for the shape."""
    shape = draw(shapes)
    ndim, size = len(shape), int(np.prod(shape))
    kind = draw(st.sampled_from(["reshape", "broadcast", "dimshuffle", "add_axis",
                                 "remove_axis", "identity"]))
    if kind == "reshape":
        target = list(draw(st.permutations(shape)) if ndim else [])
        if target and draw(st.booleans()):
            target[draw(st.integers(0, ndim - 1))] = -1
        return O.Reshape(tuple(target) if ndim else (1,) * draw(st.integers(0, 2))), shape
    if kind == "broadcast":
        lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        return O.Broadcast(lead + tuple(s if s != 1 else draw(st.integers(1, 3))
                                        for s in shape)), shape
    if kind == "dimshuffle":
        return O.Dimshuffle(tuple(draw(st.permutations(range(ndim))))), shape
    if kind == "add_axis":
        count = draw(st.integers(1, 2))
        axes = draw(st.lists(st.integers(-(ndim + count), ndim + count - 1), min_size=count,
                             max_size=count, unique_by=lambda a: a % (ndim + count)))
        return O.AddAxis(tuple(axes)), shape
    if kind == "remove_axis":
        shape = shape + (1,)
        ones = [i for i, s in enumerate(shape) if s == 1]
        axes = draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))
        return O.RemoveAxis(tuple(a - len(shape) if draw(st.booleans()) else a for a in axes)), shape
    del size
    return draw(st.sampled_from([O.Identity(), O.FastpathCopy(), O.Copy("cpu0"),
                                 O.GetVarShape()])), shape


@QUICK
@given(case=shape_ops(), seed=SEEDS, dtype=st.sampled_from(["float32", "int32", "bool"]))
def test_the_view_ops_match_eager(tmp_path, case, seed, dtype):
    op, shape = case
    check_op(op, [random_values(seed, shape, dtype)], tmp_path)


@QUICK
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=6), seed=SEEDS,
       data=st.data())
def test_basic_indexing_matches_eager(tmp_path, shape, seed, data):
    index = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True), "index")
    check_op(O.Subtensor(index), [random_values(seed, shape, "float32")], tmp_path)


@QUICK
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), seed=SEEDS,
       data=st.data())
def test_concat_matches_eager_promoting_dtypes(tmp_path, shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), "axis")
    arrays = []
    for i in range(data.draw(st.integers(1, 3), "count")):
        piece = list(shape)
        piece[axis] = data.draw(st.integers(1, 3), f"length {i}")
        dtype = data.draw(st.sampled_from(["float32", "int32", "int8"]), f"dtype {i}")
        arrays.append(random_values(seed + i, tuple(piece), dtype))
    check_op(O.Concat(axis), arrays, tmp_path)


@QUICK
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6), seed=SEEDS,
       data=st.data())
def test_split_matches_eager(tmp_path, shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), "axis")
    size = shape[axis]
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    spec = data.draw(st.sampled_from(divisors) | st.lists(st.integers(1, size - 1), max_size=3)
                     .map(lambda points: tuple(sorted(points))) if size > 1
                     else st.just(1), "sections or indices")
    check_op(O.Split(axis, spec), [random_values(seed, shape, "float32")], tmp_path)


# ---------------------------------------------------------------------------------------
# Conversions and creation

_CAST_DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "int32", "float16", "float32"]


@QUICK
@given(shape=shapes, seed=SEEDS, source=st.sampled_from(_CAST_DTYPES),
       target=st.sampled_from(_CAST_DTYPES))
def test_type_conversion_matches_eager(tmp_path, shape, seed, source, target):
    # values every target holds (a float out of an integer's range converts differently)
    x = random_values(seed, shape, source, 0, 100) + (np.float16(0.25) if source.startswith("float")
                                                else 0)
    check_op(O.TypeCvt(target), [x.astype(source)], tmp_path)


@pytest.mark.parametrize("op", [
    O.Fill((2, 3), 1.5), O.Fill((), 7, "int8"), O.Fill((4,), True),
    O.Arange(0, 5), O.Arange(1.0, -2.0, -0.5), O.Linspace(0, 1, 7), O.Linspace(-1, 1, 4, False),
])
def test_creation_ops_become_constants_equal_to_eager(tmp_path, op):
    check_op(op, [], tmp_path)
