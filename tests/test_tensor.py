"""The Tensor facade (API.md §1, with the dtype rules of §5 and the devices of §3)."""
import gc
import operator
import pickle

import numpy as np
import pytest

import imperative as imp
from imperative import dtype as D

SUPPORTED = ["bool", "uint8", "int8", "uint16", "int16", "int32", "float16", "float32"]
DOWNCAST = {"int64": "int32", "float64": "float32", "uint32": "int32", "uint64": "int32"}


def sample(dtype, shape=(2, 3)):
    """Deterministic data of `dtype` (small non-negative values valid for every dtype)."""
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "b":
        return (np.arange(n) % 2 == 0).reshape(shape)
    return (np.arange(n) % 7).astype(dtype).reshape(shape)


def test_runs_at_the_fixture_async_level(async_level):
    assert async_level in (0, 2)
    assert imp.get_async_level() == async_level
    assert imp.get_option("async_level") == async_level
    assert imp.options()["async_level"] == async_level


# --------------------------------------------------------------------------- construction


class TestConstruction:
    @pytest.mark.parametrize("dtype", SUPPORTED)
    def test_numpy_array_keeps_supported_dtype(self, dtype):
        src = sample(dtype)
        t = imp.Tensor(src)
        assert t.dtype == np.dtype(dtype)
        assert isinstance(t.dtype, np.dtype)
        assert t.shape == src.shape
        np.testing.assert_array_equal(t.numpy(), src)
        assert t.numpy().dtype == np.dtype(dtype)

    @pytest.mark.parametrize("src_dtype, expected", sorted(DOWNCAST.items()))
    def test_numpy_array_downcasts(self, src_dtype, expected):
        src = sample(src_dtype)
        t = imp.Tensor(src)
        assert t.dtype == np.dtype(expected)
        np.testing.assert_array_equal(t.numpy(), src.astype(expected))

    def test_float64_values_round_to_float32(self):
        src = np.array([0.1, 1 / 3, 1e-8], dtype=np.float64)
        t = imp.Tensor(src)
        assert t.dtype == np.float32
        np.testing.assert_array_equal(t.numpy(), src.astype(np.float32))

    @pytest.mark.parametrize("value, dtype", [
        (True, "bool"), (False, "bool"), (3, "int32"), (-7, "int32"), (2.5, "float32"),
    ])
    def test_python_scalars(self, value, dtype):
        t = imp.Tensor(value)
        assert t.dtype == np.dtype(dtype)
        assert t.shape == ()
        assert t.ndim == 0
        assert t.size == 1
        assert t._isscalar()
        assert t.item() == value
        assert t.numpy().shape == ()

    @pytest.mark.parametrize("value, dtype", [
        (np.float64(1.5), "float32"), (np.int64(4), "int32"), (np.int8(-3), "int8"),
        (np.float16(0.5), "float16"), (np.bool_(True), "bool"), (np.uint8(200), "uint8"),
    ])
    def test_numpy_scalars(self, value, dtype):
        t = imp.Tensor(value)
        assert t.dtype == np.dtype(dtype)
        assert t.shape == ()
        assert t.item() == value

    @pytest.mark.parametrize("data, dtype", [
        ([1, 2, 3], "int32"),
        ([[1.5, 2], [3, 4]], "float32"),
        ([True, False], "bool"),
        (((1, 2), (3, 4)), "int32"),
        ([[1, 2.0]], "float32"),
        ([], "float32"),
    ])
    def test_lists_go_through_numpy_then_downcast(self, data, dtype):
        t = imp.Tensor(data)
        expected = np.array(data)
        assert t.dtype == np.dtype(dtype)
        assert t.shape == expected.shape
        np.testing.assert_array_equal(t.numpy(), expected.astype(dtype))

    @pytest.mark.parametrize("dtype", SUPPORTED)
    def test_explicit_dtype_wins(self, dtype):
        src = [[0.0, 1.7, 2.2], [3.9, 4.0, 5.5]]
        t = imp.Tensor(src, dtype=dtype)
        assert t.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(t.numpy(), np.array(src).astype(dtype))

    def test_explicit_dtype_on_numpy_array_casts(self):
        src = np.array([1.9, -2.9, 3.5], dtype=np.float32)
        t = imp.Tensor(src, dtype=np.int8)
        assert t.dtype == np.int8
        np.testing.assert_array_equal(t.numpy(), src.astype(np.int8))
        t = imp.Tensor(np.array([1, 2], np.int64), dtype="float16")
        assert t.dtype == np.float16

    @pytest.mark.parametrize("data, name", [
        (np.array([1 + 2j]), "complex"),
        (np.array([object()], dtype=object), "object"),
        (np.array(["a", "b"]), "U1"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"),
        (1 + 2j, "complex"),
    ])
    def test_unsupported_data_dtype_is_type_error(self, data, name):
        with pytest.raises(TypeError, match=name):
            imp.Tensor(data)

    @pytest.mark.parametrize("dtype, name", [
        ("float64", "float64"), (np.float64, "float64"), ("int64", "int64"),
        (np.complex64, "complex64"),
    ])
    def test_unsupported_explicit_dtype_is_type_error(self, dtype, name):
        with pytest.raises(TypeError, match=name):
            imp.Tensor([1.0, 2.0], dtype=dtype)

    @pytest.mark.parametrize("make", [lambda: (x for x in range(3)), lambda: iter([1, 2]),
                                      lambda: map(float, [1, 2])],
                             ids=["generator", "list_iterator", "map"])
    @pytest.mark.parametrize("dtype", [None, "float32"])
    def test_an_iterator_as_data_is_a_type_error_saying_so(self, make, dtype):
        # it said "unsupported dtype object" (numpy makes a 0-d object array of it)
        assert np.array(make()).dtype == object
        data = make()
        with pytest.raises(TypeError, match=rf"data is a {type(data).__name__} \(an "
                                            r"iterator\).*pass list\(data\)"):
            imp.Tensor(data, dtype=dtype)
        np.testing.assert_array_equal(imp.Tensor(list(make()), dtype=dtype).numpy(),
                                      np.array(list(make()), dtype=dtype or None))
        assert imp.Tensor(range(3)).shape == np.array(range(3)).shape     # a sequence

    def test_value_is_copied_at_construction(self):
        src = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = imp.Tensor(src)
        src[...] = -1
        np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))

    def test_value_is_copied_even_for_downcast_free_dtypes(self):
        for dtype in SUPPORTED:
            src = sample(dtype)
            expected = src.copy()
            t = imp.Tensor(src)
            src[...] = src.dtype.type(1) if dtype != "bool" else True
            np.testing.assert_array_equal(t.numpy(), expected, err_msg=dtype)

    def test_list_source_mutation_does_not_show(self):
        src = [1, 2, 3]
        t = imp.Tensor(src)
        src[0] = 100
        np.testing.assert_array_equal(t.numpy(), [1, 2, 3])

    def test_name_keyword(self):
        assert imp.Tensor([1]).name == ""
        t = imp.Tensor([1], name="weights")
        assert t.name == "weights"
        t.name = "other"
        assert t.name == "other"
        assert (t + 1).name == ""


class TestTensorFromTensor:
    def test_shares_value(self):
        t = imp.Tensor([1.0, 2.0, 3.0], name="src")
        assert t._use_cnt() == 1
        u = imp.Tensor(t)
        assert t._use_cnt() == 2
        assert u._use_cnt() == 2
        assert u._handle == t._handle
        np.testing.assert_array_equal(u.numpy(), t.numpy())
        assert u.dtype == t.dtype and u.device == t.device
        # the name is not shared
        assert u.name == ""
        del u
        gc.collect()
        assert t._use_cnt() == 1

    def test_same_dtype_and_device_are_accepted(self):
        t = imp.Tensor([1, 2], dtype="int16")
        u = imp.Tensor(t, dtype="int16", device="cpu0")
        assert u._handle == t._handle
        assert t._use_cnt() == 2

    def test_mismatching_dtype_is_value_error(self):
        t = imp.Tensor([1, 2, 3])
        with pytest.raises(ValueError, match="float32"):
            imp.Tensor(t, dtype="float32")

    def test_mismatching_device_is_value_error(self):
        t = imp.Tensor([1, 2, 3])
        with pytest.raises(ValueError, match="cpu1"):
            imp.Tensor(t, device="cpu1")

    def test_shares_an_unfinished_result(self):
        a = imp.Tensor(np.ones((64, 64), np.float32))
        b = a @ a
        c = imp.Tensor(b)
        np.testing.assert_array_equal(c.numpy(), np.full((64, 64), 64, np.float32))
        assert b._use_cnt() == 2


# --------------------------------------------------------------------------- properties


class TestProperties:
    def test_shape_dtype_ndim_size(self):
        t = imp.Tensor(np.zeros((2, 3, 4), np.int16))
        assert t.shape == (2, 3, 4)
        assert isinstance(t.shape, tuple)
        assert all(type(s) is int for s in t.shape)
        assert t.ndim == 3
        assert t.size == 24
        assert t.dtype == np.dtype(np.int16)
        assert isinstance(t.dtype, np.dtype)

    def test_empty_tensor(self):
        t = imp.Tensor(np.zeros((0, 3), np.float32))
        assert t.shape == (0, 3)
        assert t.size == 0
        assert t.numpy().shape == (0, 3)
        assert len(t) == 0
        assert list(t) == []

    def test_device(self):
        t = imp.Tensor([1.0])
        assert str(t.device) == "cpu0"
        assert t.device == "cpu0"
        assert isinstance(t.device, imp.Device)
        assert imp.get_default_device() == "cpu0"

    def test_properties_are_read_only(self):
        t = imp.Tensor([1.0, 2.0])
        for attr, value in [("shape", (1, 2)), ("dtype", np.dtype("int32")), ("device", "cpu1"),
                            ("ndim", 3), ("size", 7)]:
            with pytest.raises(AttributeError):
                setattr(t, attr, value)
        assert t.shape == (2,)

    def test_shape_of_results_known_without_waiting(self):
        a = imp.Tensor(np.ones((3, 5), np.float32))
        b = imp.Tensor(np.ones((5, 7), np.float32))
        c = (a @ b).sum(axis=0, keepdims=True)
        assert c.shape == (1, 7)
        assert c.dtype == np.float32
        assert c.device == "cpu0"
        np.testing.assert_array_equal(c.numpy(), np.full((1, 7), 15, np.float32))


# --------------------------------------------------------------------------- conversions


class TestConversions:
    def test_numpy_is_read_only_or_a_copy(self):
        src = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = imp.Tensor(src)
        arr = t.numpy()
        assert isinstance(arr, np.ndarray)
        np.testing.assert_array_equal(arr, src)
        if arr.flags.writeable:
            arr[0, 0] = 99
        else:
            with pytest.raises(ValueError):
                arr[0, 0] = 99
        np.testing.assert_array_equal(t.numpy(), src)

    def test_numpy_of_result_cannot_change_tensor(self):
        t = imp.Tensor(np.arange(4, dtype=np.int32)) * 2
        arr = t.numpy()
        if arr.flags.writeable:          # a copy is allowed
            arr[0] = 5
        else:
            with pytest.raises(ValueError):
                arr[0] = 5
        np.testing.assert_array_equal(t.numpy(), [0, 2, 4, 6])
        view = imp.Tensor(np.arange(6, dtype=np.float32)).reshape(2, 3).T.numpy()
        if not view.flags.writeable:
            with pytest.raises(ValueError):
                view[0, 0] = 1

    def test_numpy_of_scalar_is_0d(self):
        arr = imp.Tensor(3.5).numpy()
        assert isinstance(arr, np.ndarray)
        assert arr.shape == ()
        assert arr == np.float32(3.5)

    def test_item_and_tolist(self):
        assert imp.Tensor(7).item() == 7
        assert isinstance(imp.Tensor(7).item(), int)
        assert isinstance(imp.Tensor(7.0).item(), float)
        assert imp.Tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
        assert imp.Tensor([True, False]).tolist() == [True, False]
        assert imp.Tensor([[2.5]]).item() == 2.5

    def test_float_int_bool_of_size_one(self):
        assert float(imp.Tensor(2.5)) == 2.5
        assert float(imp.Tensor([[2.5]])) == 2.5
        assert int(imp.Tensor(-3)) == -3
        assert int(imp.Tensor([9])) == 9
        assert int(imp.Tensor(2.9)) == 2
        assert bool(imp.Tensor(0)) is False
        assert bool(imp.Tensor([1])) is True
        assert bool(imp.Tensor(True)) is True

    @pytest.mark.parametrize("conv", [float, int, bool])
    @pytest.mark.parametrize("shape", [(3,), (2, 2), (0,)])
    def test_float_int_bool_of_other_sizes_is_type_error(self, conv, shape):
        t = imp.Tensor(np.ones(shape, np.float32))
        with pytest.raises(TypeError):
            conv(t)

    def test_len(self):
        assert len(imp.Tensor(np.zeros((4, 2)))) == 4
        with pytest.raises(TypeError):
            len(imp.Tensor(1.0))

    def test_iteration_yields_tensors(self):
        src = np.arange(6, dtype=np.int32).reshape(3, 2)
        rows = list(imp.Tensor(src))
        assert len(rows) == 3
        for row, expected in zip(rows, src):
            assert isinstance(row, imp.Tensor)
            assert row.dtype == np.int32
            np.testing.assert_array_equal(row.numpy(), expected)
        scalars = list(imp.Tensor([1.5, 2.5]))
        assert all(isinstance(s, imp.Tensor) and s.shape == () for s in scalars)
        assert [s.item() for s in scalars] == [1.5, 2.5]

    def test_iterating_a_0d_tensor_says_so_as_numpy(self):
        # it said "len() of a 0-d tensor", a call the user never made, at the first next()
        with pytest.raises(TypeError, match="iteration over a 0-d array") as theirs:
            iter(np.array(1.0))
        for call in (iter, list, tuple):
            with pytest.raises(TypeError, match="^iteration over a 0-d tensor$"):
                call(imp.Tensor(1.0))
        assert str(theirs.value).replace("array", "tensor") == "iteration over a 0-d tensor"
        assert [r.item() for r in imp.Tensor([[1.0], [2.0]])[:, 0]] == [1.0, 2.0]

    def test_repr_shows_values_dtype_device(self):
        r = repr(imp.Tensor([1, 2, 3], dtype="int16"))
        assert "1" in r and "2" in r and "3" in r
        assert "int16" in r
        assert "cpu0" in r
        r = repr(imp.Tensor([0.5, 1.25]))
        assert "0.5" in r and "1.25" in r and "float32" in r
        r = repr(imp.Tensor(4, device="cpu1"))
        assert "4" in r and "cpu1" in r and "int32" in r

    def test_np_asarray(self):
        src = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = imp.Tensor(src)
        arr = np.asarray(t)
        assert isinstance(arr, np.ndarray)
        assert arr.dtype == np.float32
        np.testing.assert_array_equal(arr, src)
        np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), src.astype(np.float64))
        np.testing.assert_array_equal(np.array(t), src)
        assert isinstance(np.asarray(imp.Tensor(2.5)), np.ndarray)
        assert np.asarray(imp.Tensor(2.5)).shape == ()


# --------------------------------------------------------------------------- operators

BINARY = [
    ("add", operator.add, np.add),
    ("sub", operator.sub, np.subtract),
    ("mul", operator.mul, np.multiply),
    ("truediv", operator.truediv, np.true_divide),
    ("floordiv", operator.floordiv, np.floor_divide),
    ("mod", operator.mod, np.remainder),
    ("pow", operator.pow, np.power),
]
COMPARE = [
    ("eq", operator.eq, np.equal),
    ("ne", operator.ne, np.not_equal),
    ("lt", operator.lt, np.less),
    ("le", operator.le, np.less_equal),
    ("gt", operator.gt, np.greater),
    ("ge", operator.ge, np.greater_equal),
]
BITWISE = [
    ("and", operator.and_, np.bitwise_and),
    ("or", operator.or_, np.bitwise_or),
    ("xor", operator.xor, np.bitwise_xor),
]
INPLACE = {
    "add": operator.iadd, "sub": operator.isub, "mul": operator.imul,
    "truediv": operator.itruediv, "floordiv": operator.ifloordiv, "mod": operator.imod,
    "pow": operator.ipow, "and": operator.iand, "or": operator.ior, "xor": operator.ixor,
}


def check_close(result, expected, dtype=None):
    assert isinstance(result, imp.Tensor)
    expected = np.asarray(expected)
    if dtype is not None:
        assert result.dtype == np.dtype(dtype), (result.dtype, dtype)
    got = result.numpy()
    assert got.shape == expected.shape
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected.astype(got.dtype), rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, expected)


class TestOperators:
    @pytest.mark.parametrize("name, op, ufunc", BINARY, ids=[b[0] for b in BINARY])
    @pytest.mark.parametrize("dtype", ["float32", "int32"])
    def test_binary_tensor_tensor(self, name, op, ufunc, dtype):
        a = np.array([[1, 2, 3], [4, 5, 6]], dtype=dtype)
        b = np.array([[2, 1, 3], [1, 2, 2]], dtype=dtype)
        out = op(imp.Tensor(a), imp.Tensor(b))
        expected = ufunc(a, b)
        dt = "float32" if name == "truediv" else dtype
        check_close(out, expected, dt)

    @pytest.mark.parametrize("name, op, ufunc", BINARY, ids=[b[0] for b in BINARY])
    def test_binary_with_python_scalar_both_sides(self, name, op, ufunc):
        a = np.array([1.0, 2.0, 3.0, 4.5], np.float32)
        t = imp.Tensor(a)
        check_close(op(t, 2), ufunc(a, np.float32(2)), "float32")
        check_close(op(3, t), ufunc(np.float32(3), a), "float32")
        check_close(op(t, 1.5), ufunc(a, np.float32(1.5)), "float32")
        check_close(op(1.5, t), ufunc(np.float32(1.5), a), "float32")

    @pytest.mark.parametrize("name, op, ufunc", BINARY, ids=[b[0] for b in BINARY])
    def test_reflected_with_numpy_array_on_the_left(self, name, op, ufunc):
        a = np.array([[1.0, 2.0, 3.0]], np.float32)
        left = np.array([[2.0], [3.0]], np.float32)
        out = op(left, imp.Tensor(a))
        assert isinstance(out, imp.Tensor), type(out)
        check_close(out, ufunc(left, a), "float32")
        # a float64 array on the left still gives a float32 Tensor
        out = op(np.ones(3), imp.Tensor(a))
        assert isinstance(out, imp.Tensor), type(out)
        check_close(out, ufunc(np.ones(3, np.float32), a), "float32")

    def test_ndarray_plus_tensor_is_tensor(self):
        t = imp.Tensor([1.0, 2.0, 3.0])
        out = np.ones(3) + t
        assert isinstance(out, imp.Tensor)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.numpy(), [2.0, 3.0, 4.0])
        out = np.int8(2) * imp.Tensor(np.array([1, 2], np.int8))
        assert isinstance(out, imp.Tensor)
        np.testing.assert_array_equal(out.numpy(), [2, 4])

    def test_matmul_operator(self):
        rng = np.random.default_rng(0)
        a = rng.standard_normal((3, 4)).astype(np.float32)
        b = rng.standard_normal((4, 2)).astype(np.float32)
        v = rng.standard_normal(4).astype(np.float32)
        np.testing.assert_allclose((imp.Tensor(a) @ imp.Tensor(b)).numpy(), a @ b, rtol=1e-5)
        np.testing.assert_allclose((imp.Tensor(a) @ imp.Tensor(v)).numpy(), a @ v, rtol=1e-5)
        out = a @ imp.Tensor(b)
        assert isinstance(out, imp.Tensor)
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5)
        out = imp.Tensor(a) @ b
        np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5)
        assert (imp.Tensor(v) @ imp.Tensor(v)).shape == ()

    def test_unary(self):
        a = np.array([-2.5, 0.0, 3.0], np.float32)
        t = imp.Tensor(a)
        check_close(-t, -a, "float32")
        check_close(+t, +a, "float32")
        check_close(abs(t), np.abs(a), "float32")
        i = np.array([-3, 0, 5], np.int32)
        check_close(~imp.Tensor(i), ~i, "int32")
        check_close(-imp.Tensor(i), -i, "int32")
        b = np.array([True, False])
        check_close(~imp.Tensor(b), ~b, "bool")

    @pytest.mark.parametrize("name, op, ufunc", COMPARE, ids=[c[0] for c in COMPARE])
    def test_comparisons_return_bool(self, name, op, ufunc):
        a = np.array([1.0, 2.0, 3.0], np.float32)
        b = np.array([2.0, 2.0, 2.0], np.float32)
        check_close(op(imp.Tensor(a), imp.Tensor(b)), ufunc(a, b), "bool")
        check_close(op(imp.Tensor(a), 2), ufunc(a, 2), "bool")
        check_close(op(imp.Tensor(a), 2.5), ufunc(a, 2.5), "bool")
        check_close(op(2, imp.Tensor(a)), ufunc(2, a), "bool")
        out = op(b, imp.Tensor(a))
        assert isinstance(out, imp.Tensor)
        check_close(out, ufunc(b, a), "bool")

    @pytest.mark.parametrize("name, op, ufunc", BITWISE, ids=[b[0] for b in BITWISE])
    @pytest.mark.parametrize("dtype", ["bool", "int32", "uint8", "int8"])
    def test_bitwise(self, name, op, ufunc, dtype):
        a = np.array([0, 1, 5, 12], dtype=dtype)
        b = np.array([3, 1, 0, 10], dtype=dtype)
        check_close(op(imp.Tensor(a), imp.Tensor(b)), ufunc(a, b), dtype)
        if dtype == "bool":
            check_close(op(imp.Tensor(a), True), ufunc(a, True), "bool")
        else:
            check_close(op(imp.Tensor(a), 6), ufunc(a, np.array(6, dtype)), dtype)
            check_close(op(6, imp.Tensor(a)), ufunc(np.array(6, dtype), a), dtype)

    @pytest.mark.parametrize("name", sorted(INPLACE))
    def test_inplace_keeps_identity(self, name):
        dtype = "int32" if name in ("and", "or", "xor") else "float32"
        a = np.array([1, 2, 3], dtype=dtype)
        t = imp.Tensor(a)
        ident = id(t)
        other = 2
        t = INPLACE[name](t, other)
        assert id(t) == ident
        ufunc = dict((n, u) for n, _, u in BINARY + BITWISE)[name]
        np.testing.assert_allclose(t.numpy(), ufunc(a, np.array(other, dtype)).astype(dtype),
                                   rtol=1e-6)
        assert t.dtype == np.dtype(dtype)

    def test_inplace_does_not_change_other_holders(self):
        t = imp.Tensor([1.0, 2.0])
        alias = imp.Tensor(t)
        det = t.detach()
        t += 10
        np.testing.assert_array_equal(t.numpy(), [11.0, 12.0])
        np.testing.assert_array_equal(alias.numpy(), [1.0, 2.0])
        np.testing.assert_array_equal(det.numpy(), [1.0, 2.0])

    def test_inplace_matmul(self):
        a = np.arange(4, dtype=np.float32).reshape(2, 2)
        t = imp.Tensor(a)
        ident = id(t)
        t @= imp.Tensor(np.eye(2, dtype=np.float32) * 2)
        assert id(t) == ident
        np.testing.assert_array_equal(t.numpy(), a * 2)

    def test_inplace_on_parameter_stays_parameter(self):
        p = imp.Parameter([1.0, 2.0], name="w")
        ident = id(p)
        p += imp.Tensor([0.5, 0.5])
        assert type(p) is imp.Parameter
        assert id(p) == ident
        p *= 2
        assert type(p) is imp.Parameter
        p -= 1
        assert type(p) is imp.Parameter
        np.testing.assert_array_equal(p.numpy(), [2.0, 4.0])
        assert p.name == "w"

    @pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                    operator.floordiv, operator.mod, operator.pow,
                                    operator.matmul, operator.and_, operator.or_,
                                    operator.xor, operator.lt, operator.le, operator.gt,
                                    operator.ge, operator.eq, operator.ne],
                             ids=lambda f: f.__name__)
    def test_none_operand_is_type_error(self, op):
        t = imp.Tensor([1, 2])
        with pytest.raises(TypeError):
            op(t, None)
        with pytest.raises(TypeError):
            op(None, t)

    def test_none_operand_inplace_is_type_error(self):
        t = imp.Tensor([1, 2])
        with pytest.raises(TypeError):
            t += None
        np.testing.assert_array_equal(t.numpy(), [1, 2])

    def test_unsupported_operand_type(self):
        t = imp.Tensor([1, 2])
        with pytest.raises(TypeError):
            t + "abc"
        with pytest.raises(TypeError):
            t + object()


class TestPromotionThroughOperators:
    @pytest.mark.parametrize("tensor_dtype, scalar, expected", [
        ("int8", 1, "int8"),
        ("int8", True, "int8"),
        ("uint8", 3, "uint8"),
        ("int16", 2, "int16"),
        ("int32", 1.5, "float32"),
        ("int8", 1.5, "float32"),
        ("float16", 1.0, "float16"),
        ("float16", 2, "float16"),
        ("bool", 1, "int32"),
        ("bool", 1.0, "float32"),
        ("bool", True, "bool"),
    ])
    def test_tensor_and_python_scalar(self, tensor_dtype, scalar, expected):
        a = np.array([0, 1, 1], dtype=tensor_dtype)
        t = imp.Tensor(a)
        for out in (t + scalar, scalar + t):
            assert out.dtype == np.dtype(expected)
            np.testing.assert_array_equal(out.numpy(),
                                          a.astype(expected) + np.array(scalar).astype(expected))

    def test_int8_plus_one_wraps_like_int8(self):
        t = imp.Tensor(np.array([127, -128], np.int8))
        out = t + 1
        assert out.dtype == np.int8
        np.testing.assert_array_equal(out.numpy(), np.array([127, -128], np.int8) + np.int8(1))

    @pytest.mark.parametrize("a_dtype, b_dtype", [
        ("int8", "int16"), ("uint8", "int8"), ("int16", "int32"), ("float16", "float32"),
        ("int32", "float16"), ("bool", "int8"), ("bool", "float16"), ("uint16", "int16"),
        ("uint8", "float16"),
    ])
    def test_tensor_and_tensor(self, a_dtype, b_dtype):
        a = np.array([0, 1, 1], dtype=a_dtype)
        b = np.array([1, 1, 0], dtype=b_dtype)
        expected = imp.dtype_promotion(a, b)
        out = imp.Tensor(a) + imp.Tensor(b)
        assert out.dtype == expected
        np.testing.assert_array_equal(out.numpy(), (a.astype(expected) + b.astype(expected)))
        out = imp.Tensor(b) * imp.Tensor(a)
        assert out.dtype == expected

    def test_numpy_array_counts_as_tensor(self):
        t = imp.Tensor(np.array([1, 2], np.int8))
        out = t + np.array([1.0, 2.0])   # float64 array → float, downcast to float32
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
        out = t + np.array([1, 2])       # int64 array: category equal; numpy promotion, downcast
        assert out.dtype == np.int32
        np.testing.assert_array_equal(out.numpy(), [2, 4])

    def test_integer_true_division_is_float32(self):
        out = imp.Tensor(np.array([7, 8], np.int32)) / imp.Tensor(np.array([2, 4], np.int32))
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.numpy(), [3.5, 2.0])
        out = imp.Tensor(np.array([1, 3], np.int8)) / 2
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.numpy(), [0.5, 1.5])


# --------------------------------------------------------------------------- methods


class TestMethods:
    def test_astype(self):
        a = np.array([1.7, -2.2, 3.0], np.float32)
        t = imp.Tensor(a)
        for dt in SUPPORTED:
            out = t.astype(dt)
            assert out.dtype == np.dtype(dt)
            np.testing.assert_array_equal(out.numpy(), a.astype(dt))
        np.testing.assert_array_equal(t.astype(np.int16).numpy(), a.astype(np.int16))
        # the source is unchanged
        np.testing.assert_array_equal(t.numpy(), a)

    @pytest.mark.parametrize("alias", [lambda t: t.astype("float32"),
                                       lambda t: t.astype(np.float32), lambda t: +t],
                             ids=["astype str", "astype type", "unary plus"])
    def test_same_dtype_astype_and_unary_plus_are_new_tensors(self, alias):
        # they returned the very object: `snap = P.astype("float32"); snap += 10` changed P
        a = np.array([1.0, 2.0, 3.0], np.float32)
        p = imp.Parameter(a)
        snap = alias(p)
        assert snap is not p and type(snap) is imp.Tensor
        np.testing.assert_array_equal(snap.numpy(), a)
        snap += 10
        snap *= 2
        snap[0] = -1
        np.testing.assert_array_equal(p.numpy(), a)             # as numpy's copies
        np.testing.assert_array_equal(snap.numpy(), [-1.0, 24.0, 26.0])
        # and the other way round: an optimizer step rebinds p alone
        snap = alias(p)
        gm = imp.autodiff.GradManager().attach([p])
        opt = imp.optim.SGD([p], lr=0.5)
        with gm:
            gm.backward((alias(p) * alias(p)).sum())        # the gradient flows through
        np.testing.assert_array_equal(p.grad.numpy(), 2 * a)
        opt.step()
        np.testing.assert_array_equal(p.numpy(), a - a)
        np.testing.assert_array_equal(snap.numpy(), a)
        t = imp.Tensor(a)
        u = alias(t)
        u -= 1
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal(u.numpy(), a - 1)

    def test_astype_unsupported_dtype(self):
        with pytest.raises(TypeError, match="float64"):
            imp.Tensor([1.0]).astype("float64")

    def test_reshape(self):
        a = np.arange(24, dtype=np.int32)
        t = imp.Tensor(a)
        np.testing.assert_array_equal(t.reshape(2, 3, 4).numpy(), a.reshape(2, 3, 4))
        np.testing.assert_array_equal(t.reshape((4, 6)).numpy(), a.reshape(4, 6))
        np.testing.assert_array_equal(t.reshape(-1, 8).numpy(), a.reshape(-1, 8))
        np.testing.assert_array_equal(t.reshape([2, -1, 3]).numpy(), a.reshape(2, -1, 3))
        assert t.reshape(2, 3, 4).reshape(-1).shape == (24,)
        assert imp.Tensor(5).reshape(1, 1).shape == (1, 1)
        assert imp.Tensor([5]).reshape(()).shape == ()

    def test_reshape_errors(self):
        t = imp.Tensor(np.zeros((2, 3)))
        with pytest.raises(ValueError, match=r"\(2, 3\)"):
            t.reshape(4, 2)
        with pytest.raises(ValueError):
            t.reshape(-1, -1)
        with pytest.raises(ValueError):
            t.reshape(-1, 4)

    def test_transpose_and_T(self):
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        t = imp.Tensor(a)
        np.testing.assert_array_equal(t.transpose().numpy(), a.transpose())
        np.testing.assert_array_equal(t.T.numpy(), a.T)
        np.testing.assert_array_equal(t.transpose(1, 0, 2).numpy(), a.transpose(1, 0, 2))
        np.testing.assert_array_equal(t.transpose((2, 0, 1)).numpy(), a.transpose(2, 0, 1))
        m = np.arange(6).reshape(2, 3)
        np.testing.assert_array_equal(imp.Tensor(m).T.numpy(), m.T)
        with pytest.raises(ValueError):
            t.transpose(0, 1)

    def test_transpose_takes_negative_axes_as_numpy(self):
        # they were refused as "not a permutation"
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        b = np.arange(6, dtype=np.float32).reshape(2, 3)
        for x, axes in [(a, (-1, 0, 1)), (a, (2, -3, -2)), (b, (-1, 0)), (b, (-1, -2)),
                        (a, (0, 1, 2)), (b, (1, 0))]:
            want = np.transpose(x, axes)
            for got in (imp.Tensor(x).transpose(*axes), imp.Tensor(x).transpose(axes),
                        imp.F.transpose(imp.Tensor(x), axes),
                        imp.F.transpose(imp.Tensor(x), list(axes)),
                        np.transpose(imp.Tensor(x), axes)):
                assert isinstance(got, imp.Tensor)
                np.testing.assert_array_equal(got.numpy(), want)
        # the same negative axes on another rank (the memo is keyed by the rank too)
        np.testing.assert_array_equal(imp.Tensor(a).transpose(-1, 0, 1).numpy(),
                                      a.transpose(-1, 0, 1))
        # the gradient follows the normalised permutation
        w = imp.Parameter(a)
        gm = imp.autodiff.GradManager().attach([w])
        with gm:
            gm.backward((w.transpose(-1, 0, 1) * imp.Tensor(a.transpose(2, 0, 1))).sum())
        np.testing.assert_array_equal(w.grad.numpy(), a)
        # repeated, out-of-range and too few axes are still refused, saying which
        t = imp.Tensor(b)
        for axes, match, np_error in [((0, -2), "axis 0 is repeated", ValueError),
                                      ((-3, 0), "axis -3 is out of range", ValueError),
                                      ((2, 0), "axis 2 is out of range", ValueError),
                                      ((0,), "1 axes given", ValueError)]:
            for call in (lambda axes=axes: t.transpose(*axes),
                         lambda axes=axes: imp.F.transpose(t, axes)):
                with pytest.raises(ValueError, match=match):
                    call()
            with pytest.raises(np_error):
                b.transpose(axes)
        with pytest.raises(ValueError, match="not a permutation .*: axis 0 is repeated"):
            imp.apply(imp.ops.Dimshuffle((0, 0)), t)
        np.testing.assert_array_equal(t.transpose(-1, 0).numpy(), b.T)   # still usable

    def test_flatten(self):
        a = np.arange(12, dtype=np.int16).reshape(3, 4)
        out = imp.Tensor(a).flatten()
        assert out.dtype == np.int16
        np.testing.assert_array_equal(out.numpy(), a.flatten())
        np.testing.assert_array_equal(imp.Tensor(a).T.flatten().numpy(), a.T.flatten())

    def test_broadcast_to(self):
        a = np.array([[1], [2]], np.float32)
        t = imp.Tensor(a)
        np.testing.assert_array_equal(t.broadcast_to(2, 3).numpy(), np.broadcast_to(a, (2, 3)))
        np.testing.assert_array_equal(t.broadcast_to((4, 2, 3)).numpy(),
                                      np.broadcast_to(a, (4, 2, 3)))
        with pytest.raises(ValueError, match=r"\(2, 1\)"):
            t.broadcast_to(3, 3)

    @pytest.mark.parametrize("method", ["sum", "mean", "max", "min", "prod"])
    @pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (0, 1, 2), ()])
    @pytest.mark.parametrize("keepdims", [False, True])
    def test_reductions_float(self, method, axis, keepdims):
        rng = np.random.default_rng(5)
        a = rng.uniform(0.5, 1.5, size=(2, 3, 4)).astype(np.float32)
        out = getattr(imp.Tensor(a), method)(axis=axis, keepdims=keepdims)
        expected = getattr(np, method)(a, axis=axis, keepdims=keepdims)
        assert out.dtype == np.float32
        assert out.shape == expected.shape
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)

    def test_reductions_axis_list(self):
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        np.testing.assert_array_equal(imp.Tensor(a).sum(axis=[0, 2]).numpy(), a.sum(axis=(0, 2)))

    @pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "uint8", "uint16", "int32"])
    def test_integer_reduction_dtypes(self, dtype):
        a = sample(dtype, (3, 4))
        t = imp.Tensor(a)
        s = t.sum()
        assert s.dtype == np.int32
        assert s.item() == a.sum()
        p = t.prod(axis=0)
        assert p.dtype == np.int32
        np.testing.assert_array_equal(p.numpy(), a.prod(axis=0))
        m = t.mean(axis=1)
        assert m.dtype == np.float32
        np.testing.assert_allclose(m.numpy(), a.mean(axis=1), rtol=1e-6)
        mx = t.max(axis=0)
        assert mx.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(mx.numpy(), a.max(axis=0))
        mn = t.min()
        assert mn.dtype == np.dtype(dtype)
        assert mn.item() == a.min()

    def test_int8_sum_does_not_overflow(self):
        a = np.full(10, 100, np.int8)
        s = imp.Tensor(a).sum()
        assert s.dtype == np.int32
        assert s.item() == 1000

    def test_float16_reduction_dtype(self):
        a = np.array([1, 2, 3], np.float16)
        t = imp.Tensor(a)
        assert t.sum().dtype == np.float16
        assert t.mean().dtype == np.float16
        assert t.sum().item() == 6

    @pytest.mark.parametrize("method", ["argmax", "argmin"])
    @pytest.mark.parametrize("axis", [None, 0, 1, -1])
    @pytest.mark.parametrize("keepdims", [False, True])
    def test_argmax_argmin(self, method, axis, keepdims):
        rng = np.random.default_rng(7)
        a = rng.permutation(24).reshape(2, 3, 4).astype(np.float32)
        out = getattr(imp.Tensor(a), method)(axis=axis, keepdims=keepdims)
        expected = getattr(np, method)(a, axis=axis, keepdims=keepdims)
        assert out.dtype == np.int32
        assert out.shape == np.shape(expected)
        np.testing.assert_array_equal(out.numpy(), expected)

    @pytest.mark.parametrize("method", ["sum", "mean", "max", "min", "prod", "argmax", "argmin"])
    def test_axis_out_of_range_is_index_error(self, method):
        t = imp.Tensor(np.ones((2, 3), np.float32))
        with pytest.raises(IndexError):
            getattr(t, method)(axis=2)
        with pytest.raises(IndexError):
            getattr(t, method)(axis=-3)

    def test_reduce_tuple_axis_out_of_range(self):
        with pytest.raises(IndexError):
            imp.Tensor(np.ones((2, 3))).sum(axis=(0, 5))


class TestGetitem:
    A = np.arange(60, dtype=np.int32).reshape(3, 4, 5)

    @pytest.mark.parametrize("index", [
        0, -1, 2, (1, 2), (1, 2, 3), (-1, -2, -3),
        slice(None), slice(1, None), slice(None, None, -1), slice(None, None, 2),
        (slice(None, None, -2), slice(3, 0, -1)), (slice(-1, None, -1), 1, slice(None, 1, -2)),
        Ellipsis, (Ellipsis, 0), (0, Ellipsis), (Ellipsis, slice(None, None, -1)),
        None, (None, 0), (slice(None), None, 1), (Ellipsis, None),
        (1, None, slice(1, 3), Ellipsis),
        slice(5, 10), slice(2, 1), (slice(None), slice(-100, 100)),
        np.int64(1), (np.int32(2), np.int8(-1)),
    ], ids=repr)
    def test_basic_indexing_matches_numpy(self, index):
        t = imp.Tensor(self.A)
        out = t[index]
        expected = self.A[index]
        assert isinstance(out, imp.Tensor)
        assert out.dtype == np.int32
        assert out.shape == expected.shape
        np.testing.assert_array_equal(out.numpy(), expected)

    def test_scalar_result(self):
        out = imp.Tensor(self.A)[1, 2, 3]
        assert out.shape == ()
        assert out.item() == self.A[1, 2, 3]

    def test_index_out_of_range_is_index_error(self):
        t = imp.Tensor(self.A)
        with pytest.raises(IndexError):
            t[3]
        with pytest.raises(IndexError):
            t[0, -5]
        with pytest.raises(IndexError):
            t[0, 0, 0, 0]

    def test_indexing_result_survives_source(self):
        t = imp.Tensor(self.A.copy())
        row = t[1, ::-1]
        del t
        gc.collect()
        np.testing.assert_array_equal(row.numpy(), self.A[1, ::-1])

    def test_chained_indexing(self):
        t = imp.Tensor(self.A)
        np.testing.assert_array_equal(t[1][::-1][2].numpy(), self.A[1][::-1][2])


# ----------------------------------------------------------------- sharing, parameters, weak refs


class TestDetachParameterWeakRef:
    def test_detach_shares_value(self):
        t = imp.Tensor([1.0, 2.0], name="x")
        d = t.detach()
        assert isinstance(d, imp.Tensor)
        assert d._handle == t._handle
        assert t._use_cnt() == 2
        assert d.name == ""
        np.testing.assert_array_equal(d.numpy(), t.numpy())
        del d
        gc.collect()
        assert t._use_cnt() == 1

    def test_detach_of_parameter_is_tensor(self):
        p = imp.Parameter([1.0])
        d = p.detach()
        assert isinstance(d, imp.Tensor)
        assert d._handle == p._handle

    def test_parameter_is_tensor_subclass(self):
        p = imp.Parameter(np.ones((2, 2), np.float32), name="w")
        assert isinstance(p, imp.Tensor)
        assert p.name == "w"
        assert p.dtype == np.float32
        assert "Parameter" in repr(p)

    @pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                    operator.matmul], ids=lambda f: f.__name__)
    def test_parameter_arithmetic_gives_tensor(self, op):
        a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
        p = imp.Parameter(a)
        t = imp.Tensor(a + 1)
        for out, expected in [(op(p, t), op(a, a + 1)), (op(t, p), op(a + 1, a)),
                              (op(p, p), op(a, a))]:
            assert type(out) is imp.Tensor, type(out)
            np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
        assert type(-p) is imp.Tensor
        assert type(p * 2) is imp.Tensor
        assert type(2 * p) is imp.Tensor
        assert type(p.sum()) is imp.Tensor
        assert type(p[0]) is imp.Tensor

    def test_weakref_alive_then_dead(self):
        t = imp.Tensor([1.0, 2.0, 3.0])
        w = imp.TensorWeakRef(t)
        got = w()
        assert isinstance(got, imp.Tensor)
        np.testing.assert_array_equal(got.numpy(), [1.0, 2.0, 3.0])
        assert got._handle == t._handle
        del got
        del t
        gc.collect()
        imp.sync()
        assert w() is None

    def test_weakref_is_to_the_value(self):
        t = imp.Tensor([4.0])
        w = imp.TensorWeakRef(t)
        d = t.detach()
        s = imp.Tensor(t)
        del t
        gc.collect()
        assert w() is not None
        del d
        gc.collect()
        assert w() is not None
        np.testing.assert_array_equal(w().numpy(), [4.0])
        del s
        gc.collect()
        imp.sync()
        assert w() is None

    def test_weakref_to_result(self):
        a = imp.Tensor(np.ones((8, 8), np.float32))
        b = a * 3
        w = imp.TensorWeakRef(b)
        np.testing.assert_array_equal(w().numpy(), np.full((8, 8), 3, np.float32))
        del b
        gc.collect()
        imp.sync()
        assert w() is None

    def test_weakref_needs_tensor(self):
        with pytest.raises(TypeError):
            imp.TensorWeakRef(np.ones(3))


# --------------------------------------------------------------------------- pickling


class TestPickle:
    @pytest.mark.parametrize("dtype", SUPPORTED)
    def test_round_trip(self, dtype):
        a = sample(dtype, (2, 3))
        t = imp.Tensor(a, name="my_tensor")
        u = pickle.loads(pickle.dumps(t))
        assert isinstance(u, imp.Tensor)
        assert u.dtype == np.dtype(dtype)
        assert u.shape == (2, 3)
        assert u.name == "my_tensor"
        np.testing.assert_array_equal(u.numpy(), a)

    def test_round_trip_unnamed_scalar_and_result(self):
        t = imp.Tensor(np.arange(4, dtype=np.float32)) * 2
        u = pickle.loads(pickle.dumps(t))
        assert u.name == ""
        np.testing.assert_array_equal(u.numpy(), [0, 2, 4, 6])
        s = pickle.loads(pickle.dumps(imp.Tensor(2.5)))
        assert s.shape == () and s.item() == 2.5

    def test_round_trip_parameter(self):
        p = imp.Parameter([1.0, 2.0], name="w")
        q = pickle.loads(pickle.dumps(p))
        assert type(q) is imp.Parameter
        assert q.name == "w"
        np.testing.assert_array_equal(q.numpy(), [1.0, 2.0])

    def test_round_trip_device(self):
        t = imp.Tensor([1, 2], device="cpu1")
        u = pickle.loads(pickle.dumps(t))
        assert u.device == "cpu1"
        np.testing.assert_array_equal(u.numpy(), [1, 2])

    def test_round_trip_quint8(self):
        q = D.quint8(0.1, 3)
        x = np.array([0.0, 0.1, 0.25, -1.0, 30.0, 2.0], np.float32)
        t = imp.Tensor(x).astype(q)
        t.name = "quant"
        u = pickle.loads(pickle.dumps(t))
        assert D.is_quantize(u.dtype)
        assert D.qdtype_name(u.dtype) == "quint8"
        assert D.get_scale(u.dtype) == pytest.approx(0.1)
        assert D.get_zero_point(u.dtype) == 3
        assert u.name == "quant"
        np.testing.assert_array_equal(u.numpy(), t.numpy())
        np.testing.assert_array_equal(u.numpy(), D.convert_to_quint8(x, q))
        np.testing.assert_allclose(u.astype("float32").numpy(),
                                   D.convert_from_quint8(D.convert_to_quint8(x, q)))

    def test_round_trip_qint4(self):
        q = D.qint4(0.5)
        x = np.array([-5.0, -1.0, 0.0, 0.6, 1.2, 3.5, 10.0], np.float32)   # odd length
        t = imp.Tensor(x).astype(q)
        t.name = "four"
        u = pickle.loads(pickle.dumps(t))
        assert D.is_quantize(u.dtype) and D.qdtype_name(u.dtype) == "qint4"
        assert D.get_scale(u.dtype) == pytest.approx(0.5)
        assert u.name == "four"
        assert u.shape == x.shape
        np.testing.assert_array_equal(u.numpy(), D.convert_to_qint4(x, q))


# --------------------------------------------------------------------------- quantized


QDTYPES = [
    ("quint8", lambda: D.quint8(0.1, 3), D.convert_to_quint8, D.convert_from_quint8),
    ("qint8", lambda: D.qint8(0.05), D.convert_to_qint8, D.convert_from_qint8),
    ("qint32", lambda: D.qint32(0.01), D.convert_to_qint32, D.convert_from_qint32),
    ("quint4", lambda: D.quint4(0.25, 2), D.convert_to_quint4, D.convert_from_quint4),
    ("qint4", lambda: D.qint4(0.5), D.convert_to_qint4, D.convert_from_qint4),
]


class TestQuantized:
    @pytest.mark.parametrize("name, make, to_q, from_q", QDTYPES, ids=[q[0] for q in QDTYPES])
    @pytest.mark.parametrize("shape", [(7,), (2, 3), (3, 3), ()])
    def test_astype_quantizes_and_dequantizes(self, name, make, to_q, from_q, shape):
        rng = np.random.default_rng(3)
        x = rng.uniform(-8, 8, size=shape).astype(np.float32)
        q = make()
        t = imp.Tensor(x).astype(q)
        assert D.is_quantize(t.dtype)
        assert D.qdtype_name(t.dtype) == name
        assert t.shape == x.shape
        expected = to_q(x, q)
        got = t.numpy()
        assert got.shape == expected.shape      # 4-bit values come back unpacked
        np.testing.assert_array_equal(got, expected)
        deq = t.astype("float32")
        assert deq.dtype == np.float32
        assert deq.shape == x.shape
        np.testing.assert_allclose(deq.numpy(), from_q(expected), rtol=1e-6)

    def test_4bit_numpy_gives_unpacked_values(self):
        q = D.quint4(1.0, 0)
        x = np.arange(16, dtype=np.float32).reshape(4, 4)
        t = imp.Tensor(x).astype(q)
        got = t.numpy()
        assert got.shape == (4, 4)
        np.testing.assert_array_equal(got.astype(np.int32), np.arange(16).reshape(4, 4))

    def test_quantized_construction_with_dtype(self):
        q = D.qint8(0.5)
        x = np.array([1.0, -2.4, 100.0], np.float32)
        t = imp.Tensor(x, dtype=q)
        assert D.is_quantize(t.dtype) and D.get_scale(t.dtype) == 0.5
        np.testing.assert_array_equal(t.numpy(), D.convert_to_qint8(x, q))

    def test_astype_distinguishes_quantization_parameters(self):
        # numpy's == and hash ignore dtype metadata: quint8(0.1, 3) == quint8(0.2, 3) == uint8
        x = np.array([0.0, 1.0, 2.0, 5.0], np.float32)
        specs = [D.quint8(0.1, 3), D.quint8(0.2, 3), D.quint8(0.1, 7), D.qint8(0.05),
                 D.qint4(0.5), D.qint8(0.5)]
        for q in specs:
            t = imp.Tensor(x).astype(q)
            assert D.same_dtype(t.dtype, q), (t.dtype.metadata, q.metadata)
            np.testing.assert_array_equal(t.numpy(), D.quantize(x, q))

    def test_requantize_between_scales(self):
        x = np.array([0.0, 1.0, 2.0, 5.0], np.float32)
        a = imp.Tensor(x).astype(D.quint8(0.1, 3))
        b = a.astype(D.quint8(0.2, 3))
        assert D.get_scale(b.dtype) == pytest.approx(0.2)
        np.testing.assert_array_equal(
            b.numpy(), D.quantize(D.dequantize(D.quantize(x, D.quint8(0.1, 3))),
                                  D.quint8(0.2, 3)))

    def test_quantized_elemwise_is_rejected(self):
        t = imp.Tensor([1.0, 2.0], dtype=D.qint8(0.1))
        with pytest.raises(TypeError, match="qint8"):
            imp.apply(imp.ops.Elemwise("ADD"), t, t)      # a fresh op object

    def test_quantized_elemwise_is_rejected_after_plain_storage_dtype(self):
        # qint8's storage is int8 and numpy's dtype == / hash ignore the metadata: an op that
        # has already run on plain int8 must still reject qint8 rather than add raw integers.
        op = imp.ops.Elemwise("ADD")
        plain = imp.Tensor(np.array([1, 2], np.int8))
        (r,) = imp.apply(op, plain, plain)
        np.testing.assert_array_equal(r.numpy(), [2, 4])
        q = imp.Tensor([1.0, 2.0], dtype=D.qint8(0.1))
        with pytest.raises(TypeError, match="qint8"):
            imp.apply(op, q, q)
        with pytest.raises(TypeError, match="qint8"):
            q + q                                          # the operator's shared op
        u = imp.Tensor(np.array([1, 2], np.uint8))
        np.testing.assert_array_equal(abs(u).numpy(), [1, 2])
        qu = imp.Tensor([1.0], dtype=D.quint8(0.5, 1))
        with pytest.raises(TypeError, match="quint8"):
            abs(qu)                                        # unary operator, same storage dtype


# --------------------------------------------------------------------------- devices


class TestDevices:
    def test_get_device(self):
        a = imp.Tensor([1.0])
        b = imp.Tensor([1.0], device="cpu1")
        with pytest.raises(TypeError):
            imp.get_device()
        assert imp.get_device(1, 2.0, "x") == imp.get_default_device()
        assert imp.get_device(a) == "cpu0"
        assert imp.get_device(b, 3) == "cpu1"
        assert imp.get_device(a, a, 1) == "cpu0"
        with pytest.raises(ValueError, match="ambiguous device"):
            imp.get_device(a, b)

    def test_construct_on_cpu1(self):
        t = imp.Tensor([1, 2, 3], device="cpu1")
        assert t.device == "cpu1"
        assert str(t.device) == "cpu1"
        np.testing.assert_array_equal(t.numpy(), [1, 2, 3])
        out = t * 2
        assert out.device == "cpu1"
        np.testing.assert_array_equal(out.numpy(), [2, 4, 6])
        assert (t + 1.5).device == "cpu1"
        assert (np.ones(3) + t).device == "cpu1"

    def test_to_copies(self):
        t = imp.Tensor([1.0, 2.0])
        u = t.to("cpu1")
        assert u.device == "cpu1"
        assert t.device == "cpu0"
        np.testing.assert_array_equal(u.numpy(), t.numpy())
        assert u.dtype == t.dtype
        back = u.to("cpu0")
        assert back.device == "cpu0"
        np.testing.assert_array_equal(back.numpy(), [1.0, 2.0])
        assert t.to("cpu0").device == "cpu0"

    def test_mixing_devices_is_value_error_at_call(self):
        a = imp.Tensor([1.0, 2.0])
        b = imp.Tensor([1.0, 2.0], device="cpu1")
        with pytest.raises(ValueError, match="cpu1"):
            a + b
        with pytest.raises(ValueError):
            imp.apply(imp.ops.Elemwise("MUL"), a, b)
        with pytest.raises(ValueError):
            a @ b
        # nothing is left pending: the interpreter stays usable
        imp.sync()
        np.testing.assert_array_equal((a + b.to("cpu0")).numpy(), [2.0, 4.0])

    @pytest.mark.parametrize("name", ["tpu0", "gpu99", "cpu-1", "cpux", ""])
    def test_unknown_device_is_value_error(self, name):
        with pytest.raises(ValueError, match="device"):
            imp.Tensor([1.0], device=name)

    def test_unknown_device_in_to(self):
        with pytest.raises(ValueError):
            imp.Tensor([1.0]).to("nope0")

    def test_default_device_round_trip(self):
        old = imp.get_default_device()
        try:
            imp.set_default_device("cpu1")
            assert imp.get_default_device() == "cpu1"
            assert imp.Tensor([1]).device == "cpu1"
            assert imp.get_device(5) == "cpu1"
        finally:
            imp.set_default_device(old)
        assert imp.Tensor([1]).device == old
        with pytest.raises(ValueError):
            imp.set_default_device("bogus")
        assert imp.get_default_device() == old


# ------------------------------------------------------------------------ errors at the call site


class TestCallSiteErrors:
    def test_broadcast_mismatch(self):
        a = imp.Tensor(np.ones((2, 3), np.float32))
        b = imp.Tensor(np.ones((4,), np.float32))
        with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
            a + b
        with pytest.raises(ValueError, match=r"\(2, 3\)"):
            a * np.ones(4)

    def test_matmul_mismatch(self):
        a = imp.Tensor(np.ones((2, 3), np.float32))
        with pytest.raises(ValueError, match=r"\(2, 3\)"):
            a @ a
        with pytest.raises(ValueError):
            imp.Tensor(np.ones(3)) @ imp.Tensor(np.ones(4))

    def test_reshape_wrong_size(self):
        with pytest.raises(ValueError, match=r"\(2, 3\)"):
            imp.Tensor(np.ones((2, 3))).reshape(5)

    def test_errors_leave_interpreter_usable(self):
        a = imp.Tensor(np.ones((2, 3), np.float32))
        with pytest.raises(ValueError):
            a + imp.Tensor(np.ones(4, np.float32))
        imp.sync()
        np.testing.assert_array_equal((a + 1).numpy(), np.full((2, 3), 2, np.float32))


# --------------------------------------------------------------------------- handle accounting


class TestNoLeaks:
    def test_operators_do_not_leak(self, assert_no_leak):
        a = imp.Tensor(np.ones((4, 4), np.float32))

        def work():
            b = a + 1
            c = (b * b - a) / 2
            d = np.ones(4) + c          # temporary for the numpy operand
            e = d @ a
            f = e.sum(axis=0).reshape(2, 2).T
            return f.numpy()

        assert_no_leak(work, repeat=3)

    def test_inplace_and_indexing_do_not_leak(self, assert_no_leak):
        def work():
            t = imp.Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
            t += 1
            t *= t
            r = t[::-1, 1:][0]
            return r.numpy()

        assert_no_leak(work, repeat=3)

    def test_failed_call_same_dtype_does_not_leak(self, assert_no_leak):
        a = imp.Tensor(np.ones((2, 3), np.float32))
        b = imp.Tensor(np.ones(4, np.float32))

        def work():
            with pytest.raises(ValueError):
                a + b
            with pytest.raises(TypeError):
                a + None
            with pytest.raises(ValueError):
                a.reshape(7)

        assert_no_leak(work, repeat=2)

    def test_failed_call_with_numpy_operand_does_not_leak(self, assert_no_leak):
        a = imp.Tensor(np.ones((2, 3), np.float32))

        def work():
            with pytest.raises(ValueError):
                a + np.ones(4, np.float32)

        assert_no_leak(work, repeat=2)

    def test_failed_call_with_promoted_operand_does_not_leak(self, assert_no_leak):
        a = imp.Tensor(np.ones((2, 3), np.float32))
        b = imp.Tensor(np.ones(4, np.int8))

        def work():
            with pytest.raises(ValueError):
                a + b

        assert_no_leak(work, repeat=2)

    def test_failed_cross_device_call_does_not_leak(self, assert_no_leak):
        a = imp.Tensor([1, 2])
        b = imp.Tensor([1.0, 2.0], device="cpu1")

        def work():
            with pytest.raises(ValueError):
                a + b

        assert_no_leak(work, repeat=2)

    def test_live_handles_counts(self, live_handles):
        gc.collect()
        before = live_handles()
        ts = [imp.Tensor([float(i)]) for i in range(5)]
        assert live_handles() == before + 5
        del ts
        gc.collect()
        assert live_handles() == before
