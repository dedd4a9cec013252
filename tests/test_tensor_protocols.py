"""Tensor protocols a PyTorch or numpy user reaches for: `.grad`, format(), DLPack."""
import numpy as np
import pytest
import torch

import imperative as imp
from imperative.autodiff import GradManager


def test_grad_is_none_until_a_gradient_lands():
    w = imp.Parameter([1.0, 2.0])
    t = imp.Tensor([3.0])
    assert w.grad is None and t.grad is None
    gm = GradManager().attach([w])
    with gm:
        gm.backward((w * w).sum())
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])
    w.grad = None
    assert w.grad is None


def test_grad_assignment_checks_type_and_shape():
    w = imp.Parameter([1.0, 2.0])
    with pytest.raises(TypeError, match="Tensor or None"):
        w.grad = np.zeros(2)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        w.grad = imp.Tensor([1.0, 2.0, 3.0])
    assert w.grad is None


@pytest.mark.parametrize("spec", [".4f", "", "8.2e", "+.1%"])
def test_format_of_a_one_element_tensor_formats_its_value(spec):
    for value in (imp.Tensor(0.123456), imp.Tensor([[0.123456]])):
        assert format(value, spec) == format(float(np.float32(0.123456)), spec)
    assert f"{imp.Tensor(7):>4d}" == "   7"


def test_format_of_a_larger_tensor_takes_only_the_empty_spec():
    t = imp.Tensor([1.0, 2.0])
    assert f"{t}" == str(t)
    with pytest.raises(TypeError,
                       match=r"'\.2f' needs a tensor with one element, got shape \(2,\)"):
        f"{t:.2f}"


def test_dlpack_to_torch_and_numpy_shares_the_value():
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = imp.Tensor(src) * 2
    assert t.__dlpack_device__() == (1, 0)        # kDLCPU
    as_torch = torch.from_dlpack(t)
    np.testing.assert_array_equal(as_torch.numpy(), src * 2)
    as_numpy = np.from_dlpack(t)
    np.testing.assert_array_equal(as_numpy, src * 2)
    assert np.shares_memory(as_numpy, t.numpy())
    with pytest.raises(ValueError):
        as_numpy[0, 0] = 1.0                       # read-only: the tensor's value cannot change


@pytest.mark.parametrize("dtype, expected", [(torch.float32, np.float32),
                                             (torch.float64, np.float32),
                                             (torch.int64, np.int32), (torch.uint8, np.uint8),
                                             (torch.bool, np.bool_)])
def test_from_dlpack_copies_with_the_tensor_dtype_rules(dtype, expected):
    src = torch.arange(6).reshape(2, 3).to(dtype)
    t = imp.from_dlpack(src)
    assert t.dtype == expected and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), src.numpy().astype(expected))
    if dtype == torch.float32:
        src[0, 0] = 100.0                          # a copy: later writes do not show
        assert t.numpy()[0, 0] == 0.0


def test_from_dlpack_of_numpy_and_of_a_tensor():
    np.testing.assert_array_equal(imp.from_dlpack(np.arange(3.0)).numpy(), [0.0, 1.0, 2.0])
    t = imp.Tensor([1, 2])
    np.testing.assert_array_equal(imp.from_dlpack(t).numpy(), [1, 2])


def test_from_dlpack_rejects_what_is_not_a_producer():
    with pytest.raises(TypeError, match="needs an object with __dlpack__.*got list"):
        imp.from_dlpack([1, 2])
