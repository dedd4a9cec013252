"""PyTorch spellings: the error names what imperative calls it (imperative/torch_hints.py)."""
import numpy as np
import pytest

import imperative as imp
from imperative import F, nn
from imperative.torch_hints import TENSOR_ATTRIBUTE_HINTS


@pytest.mark.parametrize("call, message", [
    (lambda t: t.sum(dim=1), r"Tensor\.sum\(\) got an unexpected keyword argument 'dim'; "
                             r"imperative spells PyTorch's dim= as axis="),
    (lambda t: t.mean(axis=0, keepdim=True), "keepdim= as keepdims="),
    (lambda t: F.softmax(t, dim=-1), r"softmax\(\).*dim= as axis="),
    (lambda t: F.max(t, dim=0), r"max\(\).*dim= as axis="),
    (lambda t: F.concat([t, t], dim=0), r"concat\(\).*dim= as axis="),
    (lambda t: F.flatten(t, start_dim=1), "start_dim= as start_axis="),
    (lambda t: F.cross_entropy(t, imp.Tensor([0, 1]), dim=1), "dim= as axis="),
])
def test_pytorch_keywords_name_ours(call, message):
    t = imp.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match=message):
        call(t)


def test_keyword_hints_leave_other_errors_and_results_alone():
    t = imp.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(F.sum(t, axis=1).numpy(), [3.0, 12.0])
    np.testing.assert_array_equal(t.max(axis=0, keepdims=True).numpy(), [[3.0, 4.0, 5.0]])
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'$"):
        F.sum(t, bogus=1)
    with pytest.raises(TypeError, match="axis must be an int"):
        F.sum(t, "a")


@pytest.mark.parametrize("name", ["view", "backward", "permute", "unsqueeze", "clone", "dim",
                                  "cuda", "contiguous"])
def test_pytorch_tensor_methods_name_ours(name):
    t = imp.Tensor([1.0])
    with pytest.raises(AttributeError,
                       match=rf"no attribute '{name}'; for PyTorch's x\.{name}, use "):
        getattr(t, name)
    error = pytest.raises(AttributeError, getattr, t, name).value
    assert TENSOR_ATTRIBUTE_HINTS[name] in str(error)


def test_requires_grad_points_to_the_grad_manager():
    with pytest.raises(TypeError, match=r"Tensor\(\) got an unexpected keyword argument "
                                        r"'requires_grad'; .*GradManager\(\)\.attach\(x\)"):
        imp.Tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"Parameter\(\).*'requires_grad'"):
        imp.Parameter([1.0], requires_grad=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'pin_memory'$"):
        imp.Tensor([1.0], pin_memory=True)
    t = imp.Tensor([1.0])
    with pytest.raises(AttributeError, match="GradManager"):
        t.requires_grad = True
    with pytest.raises(AttributeError, match="GradManager"):
        t.requires_grad


def test_unknown_attributes_keep_the_plain_message():
    t = imp.Tensor([1.0])
    with pytest.raises(AttributeError, match="^'Tensor' object has no attribute 'frobnicate'$"):
        t.frobnicate
    assert not hasattr(t, "__array_interface__")
    t.note = "user attributes still work"
    assert t.note == "user attributes still work"


def test_size_is_an_int_that_pytorch_code_may_call():
    t = imp.Tensor(np.zeros((2, 5), np.float32))
    assert t.size == 10 and isinstance(t.size, int) and repr(t.size) == "10"
    assert t.size(0) == 2 and t.size(-1) == 5 and t.size() == (2, 5)
    with pytest.raises(IndexError, match=r"size\(2\): dimension out of range for shape \(2, 5\)"):
        t.size(2)


def test_module_level_pytorch_names():
    with pytest.raises(TypeError, match=r"for PyTorch's torch\.tensor\(data\), use imp\.Tensor"):
        imp.tensor([1.0])
    with pytest.raises(AttributeError, match=r"torch\.no_grad, use nothing to do"):
        imp.no_grad
    with pytest.raises(AttributeError, match=r"torch\.cat, use imp\.F\.concat"):
        imp.cat
    with pytest.raises(AttributeError, match="^module 'imperative' has no attribute 'nope'$"):
        imp.nope



def test_module_habits_name_ours():
    model = nn.Linear(2, 2)
    with pytest.raises(AttributeError,
                       match=r"'Linear' object has no attribute 'zero_grad'; "
                             r"for PyTorch's nn\.Module\.zero_grad, use opt\.clear_grad"):
        model.zero_grad()
    with pytest.raises(AttributeError, match=r"register_buffer, use an attribute assignment"):
        model.register_buffer("b", imp.Tensor([1.0]))
    with pytest.raises(AttributeError, match="^'Linear' object has no attribute 'nope'$"):
        model.nope


def test_a_module_whose_init_skipped_super_says_so():
    class Net(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x)

    with pytest.raises(AttributeError, match=r"Net has no attribute '_scope_name': its __init__ "
                                             r"did not call super\(\)\.__init__\(\)"):
        Net()(imp.Tensor([[1.0, 2.0]]))


def test_pytorch_s_nn_submodule_imports_work():
    """`import torch.nn.functional as F`, `from torch.nn.init import ...` and
    `from torch.nn.utils import clip_grad_norm_`, spelt with imperative."""
    import importlib
    functional = importlib.import_module("imperative.nn.functional")
    init = importlib.import_module("imperative.nn.init")
    utils = importlib.import_module("imperative.nn.utils")
    assert functional is imp.F and init is imp.nn.init and utils is imp.nn.utils
    from imperative.nn.functional import relu
    from imperative.nn.init import zeros_
    x = imp.Parameter(np.ones(3, np.float32))
    zeros_(x)
    np.testing.assert_array_equal(relu(x - 1).numpy(), [0, 0, 0])
