import numpy as np
import pytest
from imperative.dtype import (
    SUPPORTED,
    canonical_dtype,
    convert_from_qint4,
    convert_from_qint8,
    convert_from_qint32,
    convert_from_quint4,
    convert_from_quint8,
    convert_to_qint4,
    convert_to_qint8,
    convert_to_qint32,
    convert_to_quint4,
    convert_to_quint8,
    dequantize,
    downcast,
    dtype_name,
    dtype_promotion,
    get_scale,
    get_zero_point,
    is_4bit,
    is_quantize,
    pack_4bit,
    promote_pair,
    qdtype_name,
    qint4,
    qint8,
    qint32,
    qrange,
    quantize,
    quint4,
    quint8,
    same_dtype,
    unpack_4bit,
)
import re

SUPPORTED_NAMES = ["bool", "uint8", "int8", "uint16", "int16", "int32", "float16", "float32"]
SUPPORTED_LIST = [np.dtype(n) for n in SUPPORTED_NAMES]


def arr(dtype):
    """A small tensor-like operand of the given dtype."""
    return np.zeros(2, dtype=dtype)


def category(dt):
    return {"f": 3, "i": 2, "u": 2, "b": 1}.get(np.dtype(dt).kind, 0)


# ---------------------------------------------------------------------------
# SUPPORTED / canonical_dtype
# ---------------------------------------------------------------------------


def test_supported_set():
    assert isinstance(SUPPORTED, frozenset)
    assert SUPPORTED == frozenset(SUPPORTED_LIST)
    assert all(dt.metadata is None for dt in SUPPORTED)


@pytest.mark.parametrize("name", SUPPORTED_NAMES)
def test_canonical_dtype_accepts_names_types_and_dtypes(name):
    expected = np.dtype(name)
    for spelling in (name, expected.type, expected, expected.str):
        got = canonical_dtype(spelling)
        assert isinstance(got, np.dtype)
        assert got == expected and got.metadata is None


def test_canonical_dtype_normalises_byte_order_and_metadata():
    got = canonical_dtype(np.dtype(">f4"))
    assert got == np.float32 and got.isnative
    got = canonical_dtype(np.dtype(np.int16, metadata={"other": 1}))
    assert got == np.int16 and got.metadata is None


def test_canonical_dtype_keeps_quantized_metadata():
    dt = quint8(0.25, 7)
    got = canonical_dtype(dt)
    assert same_dtype(got, dt)
    assert got.metadata["qdtype"] == {"name": "quint8", "scale": 0.25, "zero_point": 7}


@pytest.mark.parametrize(
    "given, shown",
    [
        ("float64", "float64"),
        (np.float64, "float64"),
        (float, "float64"),
        ("int64", "int64"),
        (int, "int64"),
        (np.uint32, "uint32"),
        ("uint64", "uint64"),
        (np.complex64, "complex64"),
        (object, "object"),
        (str, "<U0"),
        ("S3", "|S3"),
        ("datetime64[s]", "datetime64[s]"),
        ("timedelta64[ms]", "timedelta64[ms]"),
    ],
)
def test_canonical_dtype_rejects_unsupported(given, shown):
    with pytest.raises(TypeError, match=re.escape(f"unsupported dtype {shown}")) as info:
        canonical_dtype(given)
    assert "bool, uint8, int8, uint16, int16, int32, float16, float32 and quantized dtypes" in str(
        info.value
    )


def test_canonical_dtype_names_the_python_spelling():
    with pytest.raises(TypeError, match=r"unsupported dtype float64 \(given as 'float'\)"):
        canonical_dtype("float")


@pytest.mark.parametrize("garbage", [3.5, "nonsense", [1], None])
def test_canonical_dtype_rejects_garbage(garbage):
    with pytest.raises(TypeError, match="dtype"):
        canonical_dtype(garbage)


def test_canonical_dtype_garbage_messages():
    with pytest.raises(TypeError, match=r"invalid dtype 3\.5 \(float\)"):
        canonical_dtype(3.5)
    with pytest.raises(TypeError, match=r"invalid dtype 'nonsense' \(str\)"):
        canonical_dtype("nonsense")
    with pytest.raises(TypeError, match="got None"):
        canonical_dtype(None)


# ---------------------------------------------------------------------------
# downcast
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, expected",
    [
        (np.int64, np.int32),
        (np.float64, np.float32),
        (np.uint32, np.int32),
        (np.uint64, np.int32),
        (np.longlong, np.int32),
        (">i8", np.int32),
        (">f8", np.float32),
    ]
    + [(n, n) for n in SUPPORTED_NAMES],
)
def test_downcast_table(given, expected):
    got = downcast(np.dtype(given))
    assert got == np.dtype(expected)
    assert got.isnative and got.metadata is None


def test_downcast_of_default_numpy_data():
    # The dtypes numpy infers from plain Python data.
    assert downcast(np.asarray([1, 2]).dtype) == np.int32
    assert downcast(np.asarray([1.5]).dtype) == np.float32
    assert downcast(np.asarray([True]).dtype) == np.bool_


def test_downcast_keeps_quantized():
    dt = qint8(0.5)
    assert same_dtype(downcast(dt), dt)


@pytest.mark.parametrize(
    "given",
    ["complex64", "complex128", "object", "U4", "S4", "datetime64[D]", "timedelta64[s]", "V8"],
)
def test_downcast_rejects(given):
    dt = np.dtype(given)
    with pytest.raises(TypeError, match=re.escape(f"unsupported dtype {dt}")):
        downcast(dt)


# ---------------------------------------------------------------------------
# dtype_promotion / promote_pair
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        ((arr(np.int8), 1), np.int8),
        ((arr(np.int32), 1.5), np.float32),
        ((arr(np.float16), 1.0), np.float16),
        ((arr(np.bool_), 1), np.int32),
        ((arr(np.uint8), arr(np.int8)), np.int16),
        ((arr(np.float16), arr(np.float32)), np.float32),
        ((arr(np.int32), arr(np.float16)), np.float16),
        ((arr(np.float64), arr(np.float32)), np.float32),
        ((arr(np.bool_), True), np.bool_),
        ((arr(np.uint8), 7), np.uint8),
        ((True,), np.bool_),
        ((1, True), np.int32),
        ((1, 2.5, True), np.float32),
        ((None, arr(np.int16), None), np.int16),
        ((arr(np.int64), 1), np.int32),
        ((arr(np.uint32), arr(np.int8)), np.int32),
        ((np.dtype(np.uint16), np.dtype(np.int16)), np.int32),
    ],
)
def test_dtype_promotion_examples(args, expected):
    got = dtype_promotion(*args)
    assert got == np.dtype(expected)
    assert got.metadata is None


def test_dtype_promotion_expands_single_sequence():
    assert dtype_promotion([arr(np.int8), 1.0]) == np.float32
    assert dtype_promotion((arr(np.uint8), arr(np.int8))) == np.int16


def test_numpy_scalars_count_as_tensors():
    # np.float64 subclasses float, yet it is a tensor-like operand: its
    # float64 wins over float16 (then downcast) instead of acting as a
    # weak Python scalar.
    assert dtype_promotion(arr(np.float16), np.float64(1.0)) == np.float32
    assert dtype_promotion(arr(np.float16), 1.0) == np.float16
    assert dtype_promotion(arr(np.int8), np.int64(1)) == np.int32
    assert dtype_promotion(np.bool_(True), 1) == np.int32


def test_objects_with_dtype_attribute_count_as_tensors():
    class FakeTensor:
        dtype = np.dtype(np.uint16)

    assert dtype_promotion(FakeTensor(), 3) == np.uint16
    assert dtype_promotion(FakeTensor(), arr(np.int8)) == np.int32


@pytest.mark.parametrize("tensor_dt", SUPPORTED_LIST)
@pytest.mark.parametrize("scalar", [True, 3, 2.5])
def test_tensor_scalar_promotion_matches_numpy(tensor_dt, scalar):
    # numpy's NEP 50 "weak scalar" rule agrees with ours once its 64-bit
    # defaults are downcast.
    expected = downcast(np.result_type(tensor_dt, scalar))
    assert dtype_promotion(arr(tensor_dt), scalar) == expected


def expected_pair(a, b):
    """The contract's rule for two tensors, computed with numpy."""
    ca, cb = category(a), category(b)
    if ca == cb:
        return downcast(np.result_type(a, b))
    return downcast(a if ca > cb else b)


@pytest.mark.parametrize("a", SUPPORTED_LIST)
def test_promote_pair_matches_dtype_promotion_on_all_pairs(a):
    for b in SUPPORTED_LIST:
        expected = expected_pair(a, b)
        assert dtype_promotion(arr(a), arr(b)) == expected
        assert promote_pair(a, b) == expected
        assert promote_pair(a, b) == expected  # second call is a cache hit
        assert promote_pair(a, b) in SUPPORTED


def test_promote_pair_cache_does_not_hide_quantized():
    # quint8 hashes and compares like uint8, so a cached (uint8, uint8)
    # entry must not answer for it.
    assert promote_pair(np.dtype(np.uint8), np.dtype(np.uint8)) == np.uint8
    message = "cannot promote quantized dtype quint8(scale=0.5, zero_point=1)"
    with pytest.raises(TypeError, match=re.escape(message)):
        promote_pair(quint8(0.5, 1), np.dtype(np.uint8))
    with pytest.raises(TypeError, match="cannot promote quantized dtype qint8"):
        promote_pair(np.dtype(np.int8), qint8(0.5))


def test_promote_pair_rejects_non_dtypes():
    with pytest.raises(TypeError, match="promote_pair expects two numpy dtypes, got str and str"):
        promote_pair("int8", "int8")


def test_dtype_promotion_errors():
    with pytest.raises(ValueError, match="no dtype"):
        dtype_promotion()
    with pytest.raises(ValueError, match="no dtype"):
        dtype_promotion(None, None)
    with pytest.raises(ValueError, match="no dtype"):
        dtype_promotion([])
    with pytest.raises(TypeError, match="got str"):
        dtype_promotion(arr(np.int8), "1")
    with pytest.raises(TypeError, match="got complex"):
        dtype_promotion(arr(np.float32), 1j)
    with pytest.raises(TypeError, match="argument 1 is the type float32"):
        dtype_promotion(arr(np.int8), np.float32)
    qarr = np.asarray([1, 2], dtype=quint8(0.1, 3))
    with pytest.raises(TypeError, match="cannot promote quantized dtype quint8"):
        dtype_promotion(qarr, 1)
    with pytest.raises(TypeError, match="cannot promote quantized dtype qint4"):
        dtype_promotion(arr(np.float32), qint4(2.0))
    with pytest.raises(TypeError, match="unsupported dtype complex128"):
        dtype_promotion(arr(np.complex128), arr(np.float32))
    with pytest.raises(TypeError, match="unsupported dtype object"):
        dtype_promotion(np.array([None]), 1)
    with pytest.raises(TypeError, match="unsupported dtype <U1"):
        promote_pair(np.dtype("U1"), np.dtype(np.int8))


# ---------------------------------------------------------------------------
# Quantized dtypes: construction, comparison, accessors
# ---------------------------------------------------------------------------

QCASES = [
    # name, constructor call, storage, (lo, hi), zero point
    ("quint8", lambda: quint8(0.1, 3), np.uint8, (0, 255), 3),
    ("qint8", lambda: qint8(0.1), np.int8, (-128, 127), 0),
    ("qint32", lambda: qint32(0.1), np.int32, (-(2**31), 2**31 - 1), 0),
    ("quint4", lambda: quint4(0.1, 3), np.uint8, (0, 15), 3),
    ("qint4", lambda: qint4(0.1), np.int8, (-8, 7), 0),
]


@pytest.mark.parametrize("name, make, storage, rng, zp", QCASES)
def test_qdtype_construction_and_accessors(name, make, storage, rng, zp):
    dt = make()
    assert isinstance(dt, np.dtype) and dt == np.dtype(storage)
    info = dt.metadata["qdtype"]
    assert info["name"] == name and info["scale"] == 0.1
    assert ("zero_point" in info) == name.startswith("qu")
    assert is_quantize(dt) and not is_quantize(np.dtype(storage))
    assert qdtype_name(dt) == name
    assert get_scale(dt) == 0.1
    assert get_zero_point(dt) == zp
    assert qrange(dt) == rng
    assert is_4bit(dt) == name.endswith("4")
    assert same_dtype(dt, make())
    assert not same_dtype(dt, np.dtype(storage))
    assert not same_dtype(np.dtype(storage), dt)


def test_qdtype_parameters_are_normalised_to_python_numbers():
    dt = quint8(np.float32(0.5), np.int64(4))
    assert type(get_scale(dt)) is float and get_scale(dt) == 0.5
    assert type(get_zero_point(dt)) is int and get_zero_point(dt) == 4
    assert same_dtype(quint8(1, 0), quint8(1.0, 0))


def test_same_dtype_distinguishes_parameters_numpy_does_not():
    assert quint8(0.1, 3) == quint8(0.2, 3)  # numpy ignores metadata
    assert not same_dtype(quint8(0.1, 3), quint8(0.2, 3))
    assert not same_dtype(quint8(0.1, 3), quint8(0.1, 4))
    assert not same_dtype(quint8(0.1, 3), quint4(0.1, 3))  # same storage
    assert not same_dtype(qint8(0.1), np.int8)
    assert not same_dtype(qint8(0.1), qint32(0.1))
    assert same_dtype(np.float32, "float32")
    assert not same_dtype(np.float32, np.float16)


def test_is_quantize_on_non_quantized_things():
    for thing in ("uint8", np.uint8, np.dtype(np.float32), None, 3):
        assert not is_quantize(thing)
        assert qdtype_name(thing) is None
        assert not is_4bit(thing)


BAD_SCALES = [
    0, -0.5, float("nan"), float("inf"), -float("inf"), True, np.bool_(True), "0.1", None, 1j
]


@pytest.mark.parametrize("bad", BAD_SCALES)
def test_scale_validation(bad):
    for make in (lambda s: quint8(s, 0), qint8, qint32, lambda s: quint4(s, 0), qint4):
        with pytest.raises(ValueError, match="scale must be a finite positive real number"):
            make(bad)


def test_scale_huge_integer_rejected():
    with pytest.raises(ValueError, match="scale"):
        qint8(10**400)


@pytest.mark.parametrize("bad", [3.0, True, "3", None, -1, 256])
def test_quint8_zero_point_validation(bad):
    message = "quint8: zero_point must be an integer in [0, 255]"
    with pytest.raises(ValueError, match=re.escape(message)):
        quint8(0.1, bad)


@pytest.mark.parametrize("bad", [-1, 16, 2.0])
def test_quint4_zero_point_validation(bad):
    message = "quint4: zero_point must be an integer in [0, 15]"
    with pytest.raises(ValueError, match=re.escape(message)):
        quint4(0.1, bad)


@pytest.mark.parametrize("make, name", [(qint8, "qint8"), (qint32, "qint32"), (qint4, "qint4")])
def test_signed_types_reject_zero_point(make, name):
    message = f"{name} is symmetric and takes no zero_point, got zero_point=0"
    with pytest.raises(ValueError, match=message):
        make(0.1, 0)
    with pytest.raises(ValueError, match="takes no zero_point"):
        make(0.1, zero_point=5)


def test_quint_types_require_zero_point():
    with pytest.raises(TypeError):
        quint8(0.1)


def test_accessors_reject_plain_dtypes():
    with pytest.raises(ValueError, match="get_scale: expected a quantized dtype, got uint8"):
        get_scale(np.dtype(np.uint8))
    with pytest.raises(ValueError, match="get_zero_point: expected a quantized dtype, got float32"):
        get_zero_point(np.dtype(np.float32))
    with pytest.raises(ValueError, match="qrange: expected a quantized dtype"):
        qrange(np.dtype(np.int8))


def test_malformed_qdtype_metadata_is_rejected():
    info = {"name": "quint8", "scale": 0.1, "zero_point": 0}
    bad = np.dtype(np.float32, metadata={"qdtype": info})  # storage must be uint8
    with pytest.raises(TypeError, match="malformed quantized dtype"):
        get_scale(bad)
    assert not is_quantize(bad)


def test_dtype_name():
    assert dtype_name(np.dtype(np.float32)) == "float32"
    assert dtype_name(np.bool_) == "bool"
    assert dtype_name("int16") == "int16"
    assert dtype_name(quint8(0.1, 3)) == "quint8(scale=0.1, zero_point=3)"
    assert dtype_name(quint4(2, 0)) == "quint4(scale=2.0, zero_point=0)"
    assert dtype_name(qint8(0.5)) == "qint8(scale=0.5)"
    assert dtype_name(qint32(0.25)) == "qint32(scale=0.25)"
    assert dtype_name(qint4(1.5)) == "qint4(scale=1.5)"
    assert dtype_name(3.5) == "3.5"  # never raises inside error messages


# ---------------------------------------------------------------------------
# quantize / dequantize
# ---------------------------------------------------------------------------

CONVERTERS = {
    "quint8": (quint8, convert_to_quint8, convert_from_quint8, True),
    "qint8": (qint8, convert_to_qint8, convert_from_qint8, False),
    "qint32": (qint32, convert_to_qint32, convert_from_qint32, False),
    "quint4": (quint4, convert_to_quint4, convert_from_quint4, True),
    "qint4": (qint4, convert_to_qint4, convert_from_qint4, False),
}


def make_qdtype(name, scale, zp):
    ctor, _, _, asymmetric = CONVERTERS[name]
    return ctor(scale, zp) if asymmetric else ctor(scale)


@pytest.mark.parametrize("name", list(CONVERTERS))
def test_quantize_dequantize_against_formula(name):
    rng = np.random.default_rng(1234)
    _, to_q, from_q, asymmetric = CONVERTERS[name]
    scale = 0.037
    dt = make_qdtype(name, scale, 5 if asymmetric else None)
    zp = get_zero_point(dt)
    lo, hi = qrange(dt)
    # Span well past both ends of the representable range.
    span = max(abs(lo), hi) * scale
    if name == "qint32":
        span = 2.0**32 * scale
    x = rng.uniform(-3 * span, 3 * span, size=(7, 9)).astype(np.float32)

    q = to_q(x, dt)
    expected = np.clip(np.round(x.astype(np.float64) / scale) + zp, lo, hi).astype(dt.type)
    assert isinstance(q, np.ndarray) and q.shape == x.shape
    assert same_dtype(q.dtype, dt)
    np.testing.assert_array_equal(q.view(dt.type), expected)
    assert q.min() == lo and q.max() == hi  # clipping happened at both ends
    np.testing.assert_array_equal(quantize(x, dt), q)
    assert same_dtype(quantize(x, dt).dtype, dt)

    back = from_q(q)
    expected_back = ((expected.astype(np.float64) - zp) * scale).astype(np.float32)
    assert back.dtype == np.float32 and back.dtype.metadata is None
    np.testing.assert_array_equal(back, expected_back)
    np.testing.assert_array_equal(dequantize(q), expected_back)

    # In-range values survive a round trip to within half a step.
    inside = rng.uniform((lo - zp) * scale, (hi - zp) * scale, size=50)
    tolerance = scale / 2 + 1e-6 * abs(inside).max()  # half a step + float32 rounding
    np.testing.assert_allclose(from_q(to_q(inside, dt)), inside, atol=tolerance)


def test_quantize_rounds_half_to_even():
    dt = quint8(1.0, 0)
    q = convert_to_quint8(np.array([0.5, 1.5, 2.5, 3.5, 254.5, -0.5]), dt)
    np.testing.assert_array_equal(q.view(np.uint8), [0, 2, 2, 4, 254, 0])
    q = convert_to_qint8(np.array([-0.5, -1.5, -2.5, 0.5]), qint8(1))
    np.testing.assert_array_equal(q.view(np.int8), [0, -2, -2, 0])


def test_quantize_handles_infinities_ints_bools_0d_and_empty():
    dt = qint4(0.5)
    q = convert_to_qint4(np.array([-np.inf, np.inf]), dt)
    np.testing.assert_array_equal(q.view(np.int8), [-8, 7])
    q = convert_to_quint8(np.array([1, 2, 300], dtype=np.int32), quint8(1.0, 10))
    np.testing.assert_array_equal(q.view(np.uint8), [11, 12, 255])
    q = convert_to_quint8(np.array([True, False]), quint8(0.5, 0))
    np.testing.assert_array_equal(q.view(np.uint8), [2, 0])
    q0 = convert_to_qint8(np.float32(1.26), qint8(0.5))
    assert isinstance(q0, np.ndarray) and q0.shape == () and int(q0) == 3
    assert same_dtype(q0.dtype, qint8(0.5))
    d0 = convert_from_qint8(q0)
    assert isinstance(d0, np.ndarray) and d0.shape == () and d0.dtype == np.float32
    assert float(d0) == 1.5
    qe = convert_to_qint32(np.zeros((0, 3), np.float32), qint32(1.0))
    assert qe.shape == (0, 3) and same_dtype(qe.dtype, qint32(1.0))
    assert convert_from_qint32(qe).shape == (0, 3)
    q = convert_to_quint4([[0.0, 1.0], [2.0, 100.0]], quint4(1.0, 2))  # lists work too
    np.testing.assert_array_equal(q.view(np.uint8), [[2, 3], [4, 15]])


def test_asarray_with_quantized_dtype_keeps_metadata():
    dt = quint8(0.1, 3)
    a = np.asarray([1, 2, 3], dtype=dt)
    assert same_dtype(a.dtype, dt)
    expected = np.float32([(1 - 3) * 0.1, (2 - 3) * 0.1, 0.0])
    np.testing.assert_array_equal(convert_from_quint8(a), expected)


def test_convert_to_requires_matching_dtype():
    x = np.ones(3, np.float32)
    message = "convert_to_qint8: dt must be a qint8 dtype, got quint8(scale=0.1, zero_point=3)"
    with pytest.raises(ValueError, match=re.escape(message)):
        convert_to_qint8(x, quint8(0.1, 3))
    with pytest.raises(ValueError, match="convert_to_quint4: dt must be a quint4 dtype, got uint8"):
        convert_to_quint4(x, np.dtype(np.uint8))
    with pytest.raises(ValueError, match="quantize: expected a quantized dtype, got float32"):
        quantize(x, np.dtype(np.float32))


def test_convert_to_rejects_bad_input():
    with pytest.raises(ValueError, match="cannot quantize NaN"):
        convert_to_qint8(np.array([1.0, np.nan]), qint8(0.1))
    with pytest.raises(TypeError, match="must hold real numbers, got dtype complex128"):
        convert_to_qint8(np.array([1j]), qint8(0.1))
    already = convert_to_qint8(np.ones(2), qint8(0.1))
    with pytest.raises(ValueError, match="already quantized as qint8"):
        convert_to_qint8(already, qint8(0.1))


def test_convert_from_requires_matching_dtype():
    q = convert_to_quint8(np.ones(3), quint8(0.1, 3))
    message = (
        "convert_from_qint8: array must have a qint8 dtype, got quint8(scale=0.1, zero_point=3)"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        convert_from_qint8(q)
    with pytest.raises(ValueError, match="convert_from_quint4: array must have a quint4 dtype"):
        convert_from_quint4(q)
    with pytest.raises(ValueError, match="array must have a qint8 dtype, got int8"):
        convert_from_qint8(np.ones(3, np.int8))
    with pytest.raises(ValueError, match="dequantize: expected a quantized dtype, got float32"):
        dequantize(np.ones(3, np.float32))


# ---------------------------------------------------------------------------
# 4-bit packing
# ---------------------------------------------------------------------------


def test_pack_4bit_byte_layout():
    packed = pack_4bit(np.array([1, 2, 3], dtype=np.uint8))
    assert packed.dtype == np.uint8 and packed.ndim == 1
    np.testing.assert_array_equal(packed, [0x21, 0x03])
    # Two's complement nibbles: -1 -> 0xF, -8 -> 0x8.
    np.testing.assert_array_equal(pack_4bit(np.array([-1, 7, -8, 0], np.int8)), [0x7F, 0x08])
    np.testing.assert_array_equal(pack_4bit(np.array([[15, 0], [0, 15]], np.uint8)), [0x0F, 0xF0])


@pytest.mark.parametrize("name", ["quint4", "qint4"])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2,), (5,), (6,), (3, 5), (2, 0, 4)])
def test_pack_unpack_round_trip(name, shape):
    rng = np.random.default_rng(7)
    dt = quint4(0.5, 8) if name == "quint4" else qint4(0.5)
    q = quantize(rng.uniform(-5, 5, size=shape), dt)
    packed = pack_4bit(q)
    n = int(np.prod(shape))
    assert packed.shape == ((n + 1) // 2,) and packed.dtype == np.uint8
    back = unpack_4bit(packed, shape, dt)
    assert back.shape == shape and same_dtype(back.dtype, dt)
    np.testing.assert_array_equal(back, q)
    # Same bytes when the values come in as plain integers.
    np.testing.assert_array_equal(pack_4bit(q.view(dt.type)), packed)


def test_unpack_4bit_sign_extension_and_plain_dtypes():
    packed = np.array([0x7F, 0x08], dtype=np.uint8)
    np.testing.assert_array_equal(unpack_4bit(packed, 3, np.int8), [-1, 7, -8])
    np.testing.assert_array_equal(unpack_4bit(packed, (3,), np.uint8), [15, 7, 8])
    got = unpack_4bit(packed, (2, 2), qint4(1.0))
    np.testing.assert_array_equal(got, [[-1, 7], [-8, 0]])
    assert same_dtype(got.dtype, qint4(1.0))


def test_pack_4bit_errors():
    message = "pack_4bit: values must lie in [-8, 15], got range [0, 16]"
    with pytest.raises(ValueError, match=re.escape(message)):
        pack_4bit(np.array([0, 16]))
    with pytest.raises(ValueError, match=re.escape("values must lie in [-8, 7]")):
        pack_4bit(np.asarray([8], dtype=qint4(1.0)))
    with pytest.raises(ValueError, match=re.escape("values must lie in [0, 15]")):
        pack_4bit(np.asarray([16], dtype=quint4(1.0, 0)))
    with pytest.raises(TypeError, match="pack_4bit: values must be integers, got dtype float32"):
        pack_4bit(np.ones(2, np.float32))
    with pytest.raises(ValueError, match="values must be quint4/qint4 or plain integers"):
        pack_4bit(np.asarray([1], dtype=quint8(1.0, 0)))


def test_unpack_4bit_errors():
    packed = np.array([0x21, 0x03], dtype=np.uint8)
    with pytest.raises(ValueError, match=re.escape("shape (4, 2) needs 4 packed bytes, got 2")):
        unpack_4bit(packed, (4, 2), qint4(1.0))
    with pytest.raises(ValueError, match="packed must be a 1-D uint8 array, got 1-D int8"):
        unpack_4bit(packed.astype(np.int8), 3, qint4(1.0))
    with pytest.raises(ValueError, match="dt must be quint4 or qint4, got quint8"):
        unpack_4bit(packed, 3, quint8(1.0, 0))
    with pytest.raises(ValueError, match="dt must be quint4, qint4, int8 or uint8, got float32"):
        unpack_4bit(packed, 3, np.float32)
