"""`Tensor(array)` takes a short path for plain numpy arrays whose dtype needs no look at the
values (a copy, or float64 narrowed to float32): the same array, dtype and layout as the
general rules of API.md §1 (dtype.as_tensor_data, which an ndarray subclass and a call
naming a device still take)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import _core
from imperative.dtype import qint8


class _Sub(np.ndarray):
    """An ndarray subclass: the general path."""


def _stored(t):
    """The array t's record holds (numpy() would hand out a view)."""
    imp.sync()
    return _core.channel().lookup(t._handle).value


_DTYPES = ["float32", "float64", "float16", "int32", "int64", "int8", "uint8", "uint32",
           "bool", ">f4", ">i4", "<f8"]


@settings(max_examples=80, deadline=None)
@given(dtype=st.sampled_from(_DTYPES), shape=st.lists(st.integers(0, 4), max_size=3),
       layout=st.sampled_from(["C", "F", "strided"]))
def test_plain_arrays_get_the_general_rules_result(dtype, shape, layout):
    values = np.arange(int(np.prod(shape))) % 5
    if np.dtype(dtype).kind in "if":
        values = values - 2
    a = values.reshape(shape).astype(dtype)
    if layout == "F":
        a = np.asfortranarray(a)
    elif layout == "strided" and a.ndim:
        a = a[..., ::2]
    t = imp.Tensor(a)
    for general in (imp.Tensor(a.view(_Sub)), imp.Tensor(a, device="cpu0")):
        assert t.dtype == general.dtype
        assert _stored(t).dtype == _stored(general).dtype
        assert _stored(t).strides == _stored(general).strides
        np.testing.assert_array_equal(_stored(t), _stored(general))
    assert not np.shares_memory(_stored(t), a)
    before = t.numpy().copy()
    if a.size:
        a[(0,) * a.ndim] = 1
    np.testing.assert_array_equal(t.numpy(), before)


def test_values_that_need_a_look_take_the_general_path():
    with pytest.raises(ValueError, match="does not fit int32"):
        imp.Tensor(np.array([2 ** 40], np.int64))
    assert imp.Tensor(np.array([7], np.int64)).dtype == np.int32
    q = np.array([1, 2], qint8(0.5))
    assert imp.Tensor(q).dtype == q.dtype          # (metadata kept: quantized)
    with pytest.raises(TypeError, match="unsupported dtype"):
        imp.Tensor(np.array(["a"]))


def test_a_name_is_kept_and_defaults_to_empty():
    assert imp.Tensor(np.zeros(2, np.float32)).name == ""
    assert imp.Tensor(np.zeros(2, np.float32), name="w").name == "w"
