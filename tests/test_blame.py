"""Blame (issue 13, item 11): an AsyncError names the failing op's scope path besides its
file:line, and an op of a backward rule names the forward op it differentiates."""
import re

import numpy as np
import pytest

import imperative as imp
from imperative import _core, grad_rules
from imperative.autodiff import GradManager
from imperative.ops.base import Op

THIS_FILE = __file__.rstrip("c")
# a scope entered again under the same parent gets a version: block, block[1], ...
BLOCK = r"block(\[\d+\])?"


def line_of(text):
    """The line number in this file of the first line containing `text` (after this one)."""
    with open(THIS_FILE) as f:
        lines = f.read().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "line_of" not in line)


class Twice(Op):
    """x * 2; its backward rule (below) dispatches `Broken` or raises at once."""

    _fields = ("mode",)

    def __init__(self, mode):
        self._set(mode=mode)

    def infer(self, inputs):
        return ((inputs[0].shape, inputs[0].dtype),)

    def kernel(self, x):
        return x * 2


class Broken(Op):
    """An op whose kernel fails on the worker (its inference is fine)."""

    def infer(self, inputs):
        return ((inputs[0].shape, inputs[0].dtype),)

    def kernel(self, x):
        raise FloatingPointError("the kernel broke")


def _twice_backward(op, ctx, grads):
    if op.mode == "raise":
        raise ArithmeticError("the rule broke")
    return (imp.apply(Broken(), grads[0])[0],)


@pytest.fixture(autouse=True)
def twice_rule():
    grad_rules.RULES[Twice] = grad_rules.GradRule(_twice_backward, lambda op: (), lambda op: ())
    yield
    grad_rules.RULES.pop(Twice)


def _async_error(fn):
    """The AsyncError of fn's failing op, at level 2 (at level 0 the original exception is
    raised at the call, with the same message as a note)."""
    with imp.option("async_level", 2):
        with pytest.raises(imp.AsyncError) as info:
            fn()
            imp.sync()
    return str(info.value)


def test_an_async_error_names_the_scope_path_and_the_line():
    def run():
        with imp.scope("block"), imp.scope("linear"):
            imp.apply(Broken(), imp.Tensor(np.ones((64, 64), np.float32)))   # the failing op
    message = _async_error(run)
    assert re.search(rf"\({BLOCK}\.linear\.Broken:0\) failed on the worker: FloatingPointError",
                     message), message
    assert f"test_blame.py:{line_of('# the failing op')}" in message
    assert "in the backward of" not in message


def test_at_level_0_the_original_exception_carries_the_same_words():
    with imp.option("async_level", 0):
        with imp.scope("block"):
            with pytest.raises(FloatingPointError) as info:
                imp.apply(Broken(), imp.Tensor(np.ones((64, 64), np.float32)))
    assert any(re.search(rf"\({BLOCK}\.Broken:0\) failed", note) for note in info.value.__notes__)


def _backward_through_twice(mode):
    w = imp.Parameter(np.ones((64, 64), np.float32))
    gm = GradManager().attach([w])
    with gm:
        with imp.scope("block"), imp.scope("linear"):
            y = imp.apply(Twice(mode), w)[0]                # the forward op
        gm.backward(y.sum())                                # the backward call
    return w.grad


def test_a_failing_backward_op_names_the_forward_op_and_its_line():
    message = _async_error(lambda: _backward_through_twice("dispatch").numpy())
    assert re.search(r"\(backward(\[\d+\])?\.Broken:0\) failed on the worker", message), message
    assert re.search(rf"in the backward of {BLOCK}\.linear\.Twice:0 issued at "
                     rf"{re.escape(THIS_FILE)}:{line_of('# the forward op')}\)$", message), message


def test_a_rule_that_raises_at_once_gets_the_forward_op_as_a_note():
    with pytest.raises(ArithmeticError, match="the rule broke") as info:
        _backward_through_twice("raise")
    [note] = info.value.__notes__
    assert re.fullmatch(rf"in the backward of {BLOCK}\.linear\.Twice:0 issued at "
                        rf"{re.escape(THIS_FILE)}:{line_of('# the forward op')}", note), note
    assert _core.set_blame(None) is None         # the blame does not outlive the backward


def test_at_level_0_a_failing_backward_op_raises_at_the_backward_call_naming_the_forward_op():
    with imp.option("async_level", 0):
        with pytest.raises(FloatingPointError) as info:
            _backward_through_twice("dispatch")
    blame = rf"in the backward of {BLOCK}\.linear\.Twice:0 issued at {re.escape(THIS_FILE)}:"
    assert sum(bool(re.search(blame, note)) for note in info.value.__notes__) == 1   # said once


def test_ops_outside_a_backward_are_blamed_on_nothing():
    _async_error(lambda: _backward_through_twice("dispatch").numpy())
    message = _async_error(lambda: imp.apply(Broken(), imp.Tensor(np.ones((64, 64), np.float32))))
    assert "in the backward of" not in message


def test_op_site_reads_like_a_tensor_name_with_its_line():
    with imp.scope("block"):
        site = _core.op_site(Twice("x"))                    # the site
    site_line = line_of("# the site")
    assert re.fullmatch(rf"{BLOCK}\.Twice:0 issued at {re.escape(THIS_FILE)}:{site_line}",
                        str(site)), str(site)
