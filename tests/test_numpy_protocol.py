"""numpy functions and ufuncs on Tensors give Tensors (imperative/numpy_protocol.py)."""
import numpy as np
import pytest

import imperative as imp
from imperative.autodiff import GradManager

A = np.arange(1, 7, dtype=np.float32).reshape(2, 3)


def tensor():
    return imp.Tensor(A)


def assert_tensor_equal(result, expected):
    assert isinstance(result, imp.Tensor), f"got {type(result).__name__}, not a Tensor"
    expected = np.asarray(expected)
    assert result.shape == expected.shape
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.divide, np.power,
                                   np.maximum, np.minimum, np.less, np.greater_equal, np.equal,
                                   np.floor_divide, np.remainder])
def test_binary_ufuncs_give_tensors_on_either_side(ufunc):
    assert_tensor_equal(ufunc(tensor(), 2.0), ufunc(A, np.float32(2.0)))
    assert_tensor_equal(ufunc(A + 1, tensor()), ufunc(A + 1, A))
    assert_tensor_equal(ufunc(tensor(), tensor()), ufunc(A, A))


@pytest.mark.parametrize("ufunc", [np.negative, np.abs, np.exp, np.log, np.sqrt, np.sin, np.tanh,
                                   np.floor, np.sign])
def test_unary_ufuncs_give_tensors(ufunc):
    assert_tensor_equal(ufunc(tensor()), ufunc(A))


def test_ndarray_on_the_left_of_an_operator_gives_a_tensor():
    assert_tensor_equal(A + tensor(), A + A)
    assert_tensor_equal(A @ tensor().T, A @ A.T)
    assert_tensor_equal(A < tensor() + 1, A < A + 1)


@pytest.mark.parametrize("call", [
    lambda x: np.sum(x), lambda x: np.sum(x, axis=0), lambda x: np.sum(x, axis=1, keepdims=True),
    lambda x: np.mean(x, 1), lambda x: np.max(x), lambda x: np.amin(x, axis=0),
    lambda x: np.prod(x), lambda x: np.argmax(x, axis=1), lambda x: np.var(x, ddof=1),
    lambda x: np.std(x, axis=0), lambda x: np.reshape(x, (3, 2)), lambda x: np.transpose(x),
    lambda x: np.expand_dims(x, 0), lambda x: np.squeeze(np.expand_dims(x, 0)),
    lambda x: np.broadcast_to(x, (4, 2, 3)), lambda x: np.concatenate([x, x], axis=1),
    lambda x: np.stack([x, x]), lambda x: np.where(x > 3, x, 0.0), lambda x: np.clip(x, 2, 5),
])
def test_common_functions_give_tensors(call):
    assert_tensor_equal(call(tensor()), call(A))


def test_mapped_functions_are_recorded_for_gradients():
    x = imp.Tensor(A)
    gm = GradManager().attach(x)
    with gm:
        gm.backward(np.sum(np.exp(x) * 2))
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(A), rtol=1e-6)


def test_other_functions_run_in_numpy_and_come_back_as_tensors():
    assert_tensor_equal(np.sort(-tensor(), axis=1), np.sort(-A, axis=1))
    assert_tensor_equal(np.cumsum(tensor()), np.cumsum(A))
    assert_tensor_equal(np.isnan(tensor()), np.isnan(A))
    assert_tensor_equal(np.add.reduce(tensor(), axis=0), A.sum(axis=0))
    assert_tensor_equal(np.sum(tensor(), dtype=np.float64), A.sum())   # float64 → float32
    nonzero = np.where(tensor() > 3)                                    # the one-argument form
    assert isinstance(nonzero, tuple) and [i.tolist() for i in nonzero] == [[1, 1, 1], [0, 1, 2]]
    assert np.allclose(tensor(), A) is True                             # not an array: as is
    assert np.shape(tensor()) == (2, 3)


def test_out_takes_arrays_and_refuses_tensors():
    out = np.zeros((2, 3), np.float32)
    assert np.add(tensor(), 1.0, out=out) is out
    np.testing.assert_array_equal(out, A + 1)
    out_sum = np.zeros((3,), np.float32)
    np.sum(tensor(), axis=0, out=out_sum)
    np.testing.assert_array_equal(out_sum, A.sum(axis=0))
    t = tensor()
    with pytest.raises(TypeError, match=r"np\.add\(\.\.\., out=<Tensor>\): a Tensor cannot be "
                                        r"written into.*assign the result instead"):
        np.add(t, 1.0, out=t)
    np.testing.assert_array_equal(t.numpy(), A)                         # unchanged


def test_results_follow_the_tensor_dtype_rules():
    assert np.add(imp.Tensor([1, 2], dtype="int8"), 1).dtype == np.int8
    with pytest.raises(TypeError, match="complex"):
        np.fft.fft(tensor())
