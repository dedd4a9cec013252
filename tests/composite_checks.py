"""What the tests of functions composed from existing ops (tests/test_roll_elu.py,
tests/test_logsumexp_onehot_pad.py) run on each: a gradient through a Parameter, a training
step recomputed under a tight DTR budget with the same bits, and an ONNX export run in
onnxruntime."""
import numpy as np
import pytest

import imperative as imp
from imperative import functional as F
from imperative.autodiff import GradManager


def value_and_grad(fn, x, dy, *args):
    """(fn(p, *args), p.grad) for p = Parameter(x), the gradient of sum(fn(p, *args) * dy)."""
    p = imp.Parameter(x)
    gm = GradManager().attach([p])
    with gm:
        y = fn(p, *args)
        gm.backward(F.sum(y * imp.Tensor(dy)))
    return y.numpy(), p.grad.numpy()


def assert_same_bits_under_a_budget(loss_of, w):
    """A step computing loss_of() and w's gradient gives the same bits recomputing under a
    150 kB budget (every value evictable) as it does unconstrained, and it recomputes."""
    def step():
        w.grad = None
        gm = GradManager().attach([w])
        with gm:
            loss = loss_of()
            gm.backward(loss)
        return loss.numpy(), w.grad.numpy()

    want = step()
    with imp.option("dtr_eviction_threshold", 150_000), \
            imp.option("dtr_evictee_minimum_size", 0), imp.option("record_computing_path", 1), \
            imp.option("enable_dtr_auto_drop", 1):
        recomputes = imp.memory_stats()["recomputes"]
        got = step()
        assert imp.memory_stats()["recomputes"] > recomputes
    for g, r in zip(got, want):
        np.testing.assert_array_equal(g, r)


def assert_dropped_comes_back(make):
    """The tensor `make()` builds, dropped (enable_drop), is recomputed to the same bits."""
    with imp.option("enable_drop", 1):
        y = make()
        want = y.numpy().copy()
        y._drop()
        np.testing.assert_array_equal(y.numpy(), want)


def assert_onnx_matches(traced, x, path):
    """`traced` (a trace with constants captured) dumped to ONNX at `path` and run in
    onnxruntime gives its eager output on `x` (skipped without onnx and onnxruntime)."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    want = traced(imp.Tensor(x)).numpy()
    traced.dump(path, arg_names=["x"], output_names=["y"])
    got = ort.InferenceSession(path).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
