"""`t[basic index] = number` writes into t's own buffer where nothing but t can see its old
value (as numpy's assignment does), and makes a new value, as before, wherever something
can: another Tensor sharing it, a numpy() view, a saved-for-backward reference, a view of
its storage, a trace, the memory manager. Every holder keeps the value it had."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F, _core
from imperative.autodiff import GradManager


def _buffer_address(t):
    """Where t's value lies (read from its record: numpy() would hand out a view)."""
    imp.sync()
    return _core.channel().lookup(t._handle).value.__array_interface__["data"][0]


def _memoised_write(t, index, number):
    """t[index] = number after one write at that index (the first one, of any tensor, makes
    and memoises the op on the general path)."""
    scratch = imp.Tensor(np.zeros(t.shape, t.dtype))
    scratch[index] = number
    t[index] = number


@pytest.mark.parametrize("shape", [(16,), (300, 400)])
def test_an_unshared_tensor_is_written_in_its_own_buffer(shape):
    t = F.zeros(shape) + 1
    before = _buffer_address(t)
    allocated = imp.memory_stats()["allocated"]
    _memoised_write(t, 3, 0.5)
    expected = np.ones(shape, np.float32)
    expected[3] = 0.5
    assert _buffer_address(t) == before
    assert imp.memory_stats()["allocated"] == allocated
    np.testing.assert_array_equal(t.numpy(), expected)


def test_indices_met_after_a_full_memo_are_still_written_in_place():
    """The memo of indices -> ops starts afresh when full: a program that wrote at more
    indices than it holds (1024) still writes in place at the ones it uses next."""
    scratch = imp.Tensor(np.zeros(3000, np.float32))
    for i in range(1100, 2200):
        scratch[i] = 1.0
    t = F.zeros((16,)) + 1
    before = _buffer_address(t)
    _memoised_write(t, 5, 2.0)
    assert _buffer_address(t) == before
    expected = np.ones(16, np.float32)
    expected[5] = 2.0
    np.testing.assert_array_equal(t.numpy(), expected)
    np.testing.assert_array_equal(scratch.numpy()[1100:2200], 1)


def test_every_other_holder_keeps_the_old_value():
    t = imp.Tensor(np.arange(6, dtype=np.float32))
    shared = imp.Tensor(t)
    _memoised_write(t, 0, -1.0)
    np.testing.assert_array_equal(shared.numpy(), np.arange(6))
    exported = t.numpy()
    t[1] = -2.0
    np.testing.assert_array_equal(exported, [-1, 1, 2, 3, 4, 5])
    view = t[2:4]
    t[2] = -3.0
    np.testing.assert_array_equal(view.numpy(), [2, 3])
    np.testing.assert_array_equal(t.numpy(), [-1, -2, -3, 3, 4, 5])


def test_a_weak_reference_to_the_old_value_finds_it_gone():
    t = imp.Tensor(np.zeros(4, np.float32))
    _memoised_write(t, 1, 1.0)
    ref = imp.TensorWeakRef(t)
    t[1] = 2.0
    assert ref() is None
    np.testing.assert_array_equal(imp.TensorWeakRef(t)().numpy(), [0, 2, 0, 0])


def test_a_value_saved_for_backward_is_not_written_over():
    x = imp.Parameter(np.array([1.0, 2.0, 3.0], np.float32))
    h = imp.Tensor(np.array([4.0, 5.0, 6.0], np.float32))
    _memoised_write(imp.Tensor(np.zeros(3, np.float32)), 0, 0.0)
    gm = GradManager().attach([x])
    with gm:
        y = (x * h).sum()
        h[0] = 100.0             # h was saved for x's gradient
        gm.backward(y)
    np.testing.assert_array_equal(x.grad.numpy(), [4, 5, 6])
    np.testing.assert_array_equal(h.numpy(), [100, 5, 6])


def test_a_traced_constant_is_not_written_over():
    made = []

    @imp.jit.trace(symbolic=True)
    def f(x):
        c = imp.Tensor(np.array([1.0, 2.0], np.float32))
        made.append(c)
        return x + c

    x = imp.Tensor(np.zeros(2, np.float32))
    np.testing.assert_array_equal(f(x).numpy(), [1, 2])
    _memoised_write(made[0], 0, 50.0)
    np.testing.assert_array_equal(f(x).numpy(), [1, 2])


def test_under_dtr_the_write_makes_a_new_value():
    t = F.zeros((64, 64)) + 1
    _memoised_write(t, 0, 2.0)
    with imp.option("dtr_eviction_threshold", 1 << 30), imp.option("dtr_evictee_minimum_size", 0), \
            imp.option("record_computing_path", 1), imp.option("enable_dtr_auto_drop", 1):
        t = F.exp(t)                    # recorded: a recipe reads the old value
        before = _buffer_address(t)
        t[1] = 3.0
        assert _buffer_address(t) != before
        expected = np.exp(np.ones((64, 64), np.float32))
        expected[0] = np.exp(np.float32(2.0))
        expected[1] = 3.0
        np.testing.assert_array_equal(t.numpy(), expected)


_INDICES = [0, -1, 1, slice(None, 2), slice(1, None, 2), (0, 1), (slice(None), 2), Ellipsis]


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["set", "share", "numpy", "view", "drop"]),
                                st.integers(0, 3), st.sampled_from(_INDICES),
                                st.integers(-4, 4)), min_size=1, max_size=25))
def test_writes_among_shared_values_keep_value_semantics(steps):
    """Random programs of writes, sharing, numpy() exports, views and drops over a few
    (3, 4) tensors: every Tensor and every exported array holds what value semantics says
    (numpy arrays copied at each share, the model)."""
    start = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensors, model = [imp.Tensor(start)], [start.copy()]
    exports = []
    for action, which, index, number in steps:
        k = which % len(tensors)
        if action == "set":
            tensors[k][index] = number
            model[k][index] = number
        elif action == "share":
            tensors.append(imp.Tensor(tensors[k]))
            model.append(model[k].copy())
        elif action == "numpy":
            exports.append((tensors[k].numpy(), model[k].copy()))
        elif action == "view":             # (a view sharing the storage, of the same shape)
            tensors.append(tensors[k][:])
            model.append(model[k].copy())
        elif len(tensors) > 1:
            del tensors[k], model[k]
    for t, want in zip(tensors, model):
        np.testing.assert_array_equal(t.numpy(), want)
    for got, want in exports:
        np.testing.assert_array_equal(got, want)
