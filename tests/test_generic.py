"""imp.GenericPyOp: ops written in Python, called directly or through imp.apply."""
import traceback

import numpy as np
import pytest

import imperative as imp


class Scale(imp.GenericPyOp):
    def __init__(self, k):
        self.k = k

    def _default_rule(self, x):
        return x * self.k + 1


class DivMod(imp.GenericPyOp):
    def _default_rule(self, x, y):
        return x // y, x % y


class Boom(imp.GenericPyOp):
    def _default_rule(self, x):
        raise KeyError("boom")


class Clip(imp.GenericPyOp):
    _fields = ("lo", "hi")

    def __init__(self, lo, hi):
        self._set(lo=lo, hi=hi)

    def _default_rule(self, x):
        y = imp.Tensor(x)
        y[x.numpy() < self.lo] = self.lo
        y[x > self.hi] = self.hi
        return y


def run_both_ways(op, *inputs):
    """The outputs of `op(*inputs)` and of `imp.apply(op, *inputs)`, as arrays."""
    called = op(*inputs)
    called = called if isinstance(called, tuple) else (called,)
    applied = imp.apply(op, *inputs)
    assert isinstance(applied, tuple)
    return [t.numpy() for t in called], [t.numpy() for t in applied]


def test_one_output():
    a = np.arange(6, dtype=np.float32)
    called, applied = run_both_ways(Scale(3), imp.Tensor(a))
    np.testing.assert_array_equal(called[0], a * 3 + 1)
    np.testing.assert_array_equal(applied[0], a * 3 + 1)
    assert isinstance(Scale(3)(imp.Tensor(a)), imp.Tensor)


def test_several_outputs():
    a, b = np.arange(1, 13, dtype=np.int32), np.full(12, 5, np.int32)
    called, applied = run_both_ways(DivMod(), imp.Tensor(a), imp.Tensor(b))
    for got in (called, applied):
        np.testing.assert_array_equal(got[0], a // b)
        np.testing.assert_array_equal(got[1], a % b)
    q, r = imp.apply(DivMod(), imp.Tensor(a), imp.Tensor(b))
    assert q.shape == (12,) and q.dtype == np.int32


def test_a_rule_may_index_and_assign():
    a = np.linspace(-3, 3, 13, dtype=np.float32)
    called, applied = run_both_ways(Clip(-1.0, 2.0), imp.Tensor(a))
    np.testing.assert_array_equal(called[0], np.clip(a, -1, 2))
    np.testing.assert_array_equal(applied[0], np.clip(a, -1, 2))


def test_apply_matches_results_to_their_calls_when_they_run_out_of_order():
    # The big call is handed to the worker; the small one runs at once on this thread.
    op = Scale(2)
    big = imp.Tensor(np.arange(100000, dtype=np.float32))
    small = imp.Tensor(np.arange(3, dtype=np.float32))
    (y_big,), (y_small,) = imp.apply(op, big), imp.apply(op, small)
    np.testing.assert_array_equal(y_small.numpy(), [1, 3, 5])
    np.testing.assert_array_equal(y_big.numpy(), np.arange(100000, dtype=np.float32) * 2 + 1)


@pytest.mark.parametrize("how", ["call", "apply"])
def test_an_exception_keeps_its_type_and_traceback(how):
    x = imp.Tensor([1.0])
    with pytest.raises(KeyError, match="boom") as info:
        Boom()(x) if how == "call" else imp.apply(Boom(), x)
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert frames[-1] == "_default_rule"
    assert imp.Tensor([2.0]).numpy()[0] == 2.0        # the runtime is still usable


def test_bad_inputs_and_outputs_are_type_errors():
    with pytest.raises(TypeError, match="expects Tensor inputs"):
        Scale(2)(np.ones(3))

    class NotATensor(imp.GenericPyOp):
        def _default_rule(self, x):
            return x.numpy()
    with pytest.raises(TypeError, match="must return a Tensor"):
        NotATensor()(imp.Tensor([1]))
    with pytest.raises(TypeError, match="must return a Tensor"):
        imp.apply(NotATensor(), imp.Tensor([1]))


def test_equality_hash_and_repr():
    a, b = Scale(2), Scale(2)
    assert a == a and a != b and hash(a) == hash(a)        # by identity, by default
    assert repr(a) == "Scale(k=2)"
    assert Clip(0, 1) == Clip(0, 1) and Clip(0, 1) != Clip(0, 2)   # by _fields when declared
    assert hash(Clip(0, 1)) == hash(Clip(0, 1))
    assert repr(Clip(0, 1)) == "Clip(lo=0, hi=1)"
    assert len({a, b, Clip(0, 1), Clip(0, 1)}) == 3
    assert a.name == "Scale"


def test_flags_say_what_the_apply_path_needs():
    assert imp.GenericPyOp.RECOMPUTABLE is False
    assert Scale(1).value_dependent          # infer runs the rule on every call


def test_no_handle_leaks(assert_no_leak):
    x, y = imp.Tensor(np.arange(1, 9, dtype=np.int32)), imp.Tensor(np.full(8, 3, np.int32))

    def work():
        return [t.numpy() for t in DivMod()(x, y) + imp.apply(DivMod(), x, y)]
    assert_no_leak(work, repeat=3)
