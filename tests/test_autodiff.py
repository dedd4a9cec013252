"""The autodiff engine (API.md §8): GradKey / backward, GradManager, groups, higher order,
what a backward keeps alive, and misuse errors.

The real backward rules (imperative/grad_rules.py) are written separately. So that these tests
check the engine on its own, `_fallback_rules` registers a few minimal rules for the ops used
here *only where no real rule exists*, and removes them after the module.
"""
import gc

import numpy as np
import pytest

import imperative as imp
from imperative import _core, autodiff, grad_rules
from imperative import functional as F
from imperative import ops as O
from imperative.autodiff import GradKey, GradManager, GradManagerGroup

# ---------------------------------------------------------------------------- fallback rules


def _elemwise_saves(op):
    return {"MUL": (0, 1)}.get(op.mode, ())


def _elemwise_saves_out(op):
    return (0,) if op.mode == "RELU" else ()


def _elemwise_backward(op, ctx, grads):
    # equal shapes only: the tests below never broadcast a tracked input
    g = grads[0]
    if op.mode == "ADD":
        return g, g
    if op.mode == "MUL":
        a, b = ctx.inputs
        return g * b, g * a
    if op.mode == "RELU":
        return (g * (ctx.outputs[0] > 0).astype(g.dtype),)
    return (None,) * len(ctx.in_shapes)


def _matmul_backward(op, ctx, grads):
    assert not (op.transpose_a or op.transpose_b), "fallback rule: plain 2-d matmul only"
    a, b = ctx.inputs
    g = grads[0]
    return g @ b.T, a.T @ g


def _reduce_backward(op, ctx, grads):
    assert op.mode == "SUM" and op.axis is None, "fallback rule: full sums only"
    return (grads[0].broadcast_to(ctx.in_shapes[0]),)


_FALLBACKS = {
    O.Elemwise: grad_rules.GradRule(_elemwise_backward, _elemwise_saves, _elemwise_saves_out),
    O.MatrixMul: grad_rules.GradRule(_matmul_backward, lambda op: (0, 1), lambda op: ()),
    O.Reduce: grad_rules.GradRule(_reduce_backward, lambda op: (), lambda op: ()),
}


@pytest.fixture(scope="module", autouse=True)
def _fallback_rules():
    added = [cls for cls in _FALLBACKS if cls not in grad_rules.RULES]
    for cls in added:
        grad_rules.RULES[cls] = _FALLBACKS[cls]
    yield
    for cls in added:
        grad_rules.RULES.pop(cls, None)


@pytest.fixture(autouse=True)
def _no_recording_left():
    yield
    assert _core.get_grad_hook() is None, "a test left a gradient recording active"


def f32(a):
    return np.asarray(a, dtype=np.float32)


def close(t, expected):
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- GradManager


def test_matmul_square_sum(rng):
    xv, wv = f32(rng.standard_normal((3, 4))), f32(rng.standard_normal((4, 2)))
    x, w = imp.Tensor(xv), imp.Parameter(wv)
    gm = GradManager().attach([x, w])
    with gm:
        y = x @ w
        loss = (y * y).sum()
        gm.backward(loss)
    dy = 2 * xv @ wv
    close(w.grad, xv.T @ dy)
    close(x.grad, dy @ wv.T)


def test_reused_input_accumulates():
    x = imp.Tensor(f32([1.0, -2.0, 3.0]))
    gm = GradManager().attach(x)
    with gm:
        gm.backward(x * x + x)          # 2x + 1: x is read three times
    close(x.grad, 2 * x.numpy() + 1)


def test_grad_accumulates_until_reset():
    x = imp.Tensor(f32([1.0, 2.0]))
    gm = GradManager().attach(x)
    for _ in range(2):
        with gm:
            gm.backward((x * x).sum())
    close(x.grad, 4 * x.numpy())
    x.grad = None
    with gm:
        gm.backward((x * x).sum())
    close(x.grad, 2 * x.numpy())


def test_record_release_and_dy():
    x = imp.Tensor(f32([1.0, 2.0, 3.0]))
    gm = GradManager().attach(x)
    gm.record()
    y = x * x
    gm.backward(y, imp.Tensor(f32([1.0, 10.0, 100.0])))
    gm.release()                       # already released by backward: a no-op
    close(x.grad, 2 * x.numpy() * [1, 10, 100])
    assert not gm.recording


def test_list_of_ys_and_dys():
    x = imp.Tensor(f32([1.0, 2.0]))
    gm = GradManager().attach(x)
    with gm:
        gm.backward([x * x, x + x], [imp.Tensor(f32([1.0, 1.0])), imp.Tensor(f32([3.0, 3.0]))])
    close(x.grad, 2 * x.numpy() + 6)


def test_callbacks_run_in_order_before_accumulation():
    x = imp.Tensor(f32([1.0, 2.0]))
    seen = []

    def scale(t, g):
        seen.append(t is x)
        return g * 10

    def shift(t, g):
        return g + 1

    gm = GradManager().attach(x, callbacks=[scale, shift])
    with gm:
        gm.backward((x * x).sum())
    close(x.grad, 2 * x.numpy() * 10 + 1)
    assert seen == [True]


def test_attach_during_record_and_attached_tensors():
    a, b = imp.Tensor(f32([2.0])), imp.Tensor(f32([3.0]))
    gm = GradManager().attach(a)
    with gm:
        gm.attach(b)
        gm.backward(a * b)
    attached = gm.attached_tensors()
    assert len(attached) == 2 and attached[0] is a and attached[1] is b
    close(a.grad, [3.0])
    close(b.grad, [2.0])


def test_untouched_param_keeps_no_grad():
    a, b = imp.Tensor(f32([2.0])), imp.Tensor(f32([3.0]))
    gm = GradManager().attach([a, b])
    with gm:
        gm.backward(a * a)
    assert getattr(b, "grad", None) is None


def test_group():
    a, b = imp.Tensor(f32([2.0, 1.0])), imp.Tensor(f32([3.0, 5.0]))
    gm1, gm2 = GradManager().attach(a), GradManager().attach(b)
    group = gm1 | gm2
    assert isinstance(group, GradManagerGroup)
    with group:
        assert gm1.recording and gm2.recording
        group.backward((a * b).sum())
    assert not gm1.recording and not gm2.recording
    close(a.grad, b.numpy())
    close(b.grad, a.numpy())


def test_second_order_of_cube():
    xv = f32([1.0, 2.0, -3.0])
    x = imp.Tensor(xv)
    outer, inner = GradManager().attach(x), GradManager().attach(x)
    with outer:
        with inner:
            inner.backward((x * x * x).sum())
        close(x.grad, 3 * xv ** 2)
        outer.backward(x.grad.sum())
    # the outer backward adds d/dx sum(3x^2) = 6x to the first-order gradient
    close(x.grad, 3 * xv ** 2 + 6 * xv)


def test_higher_order_directive_off():
    x = imp.Tensor(f32([2.0]))
    outer, inner = GradManager().attach(x), GradManager().attach(x)
    autodiff.set_allow_higher_order_directive(False)
    try:
        with outer:
            with inner:
                inner.backward(x * x * x)
            with pytest.warns(autodiff.NoGradientWarning, match="does not depend on any tensor"):
                outer.backward(x.grad)  # the inner backward was not recorded: nothing to add
    finally:
        autodiff.set_allow_higher_order_directive(True)
    close(x.grad, [12.0])


# ---------------------------------------------------------------------------- GradKey


def test_gradkey_low_level():
    x = imp.Tensor(f32([1.0, 2.0]))
    key = GradKey("k")
    got = []
    key.attach(x, got.append)
    assert key.name == "k" and isinstance(key.priority, int)
    assert key.is_attached_to(x) and not key.is_attached_to(imp.Tensor(f32([1.0])))
    autodiff.backward(key, (x * x).sum())
    assert len(got) == 1
    close(got[0], 2 * x.numpy())
    assert _core.get_grad_hook() is None   # backward ends the key's recording


def test_backward_ops_run_in_backward_scope():
    x = imp.Tensor(f32([1.0, 2.0]))
    w = imp.Tensor(f32([3.0, 4.0]))
    gm = GradManager().attach(w)
    with gm:
        gm.backward((x * w).sum())
    assert w.grad._name.split(".")[0].split("[")[0] == "backward", w.grad._name


def test_fastpath_copy_is_untracked():
    # FastpathCopy makes a new record sharing the value: the way out of every record
    x = imp.Tensor(f32([1.0, 2.0]))
    gm = GradManager().attach(x)
    with gm:
        d = imp.apply(O.FastpathCopy(), x)[0]
        gm.backward((d * x).sum())
    close(x.grad, x.numpy())           # only the direct path: d is a constant


def test_untracked_y_gives_no_grad():
    x = imp.Tensor(f32([1.0]))
    gm = GradManager().attach(x)
    with gm, pytest.warns(autodiff.NoGradientWarning, match="GradManager@"):
        gm.backward(imp.Tensor(f32([5.0])) * 2)
    assert x.grad is None


# ---------------------------------------------------------------------------- errors


def test_backward_outside_record():
    x = imp.Tensor(f32([1.0]))
    gm = GradManager().attach(x)
    with pytest.raises(RuntimeError, match="not recording"):
        gm.backward(x * x)
    with gm:
        gm.backward(x * x)
        with pytest.raises(RuntimeError, match="not recording"):
            gm.backward(x * x)         # the first backward ended the recording


def test_record_twice():
    gm = GradManager()
    with gm:
        with pytest.raises(RuntimeError, match="already recording"):
            gm.record()


def test_attach_non_float():
    with pytest.raises(TypeError, match="float"):
        GradManager().attach(imp.Tensor([1, 2]))
    with pytest.raises(TypeError, match="float"):
        GradKey().attach(imp.Tensor([True]))


def test_dy_shape_mismatch():
    x = imp.Tensor(f32([1.0, 2.0]))
    gm = GradManager().attach(x)
    with gm:
        with pytest.raises(ValueError, match="does not match"):
            gm.backward(x * x, imp.Tensor(f32([1.0])))


def test_release_on_exception():
    x = imp.Tensor(f32([1.0]))
    gm = GradManager().attach(x)
    with pytest.raises(KeyError):
        with gm:
            _ = x * x
            raise KeyError("boom")
    assert not gm.recording
    assert _core.get_grad_hook() is None


# ---------------------------------------------------------------------------- memory


def _rule_saves(op):
    rule = grad_rules.get_rule(op)
    return set(rule.save_inputs(op)), set(rule.save_outputs(op))


def test_unneeded_intermediate_is_freed():
    x, w = imp.Tensor(f32([1.0, -2.0])), imp.Tensor(f32([3.0, 4.0]))
    gm = GradManager().attach(w)
    relu_in, relu_out = _rule_saves(O.Elemwise("RELU"))
    with gm:
        z = x * w
        y = F.relu(z)
        z_ref, y_ref = imp.TensorWeakRef(z), imp.TensorWeakRef(y)
        del z, y
        gc.collect()
        imp.sync()
        # alive exactly when relu's rule asked to keep it
        assert (z_ref() is not None) == (0 in relu_in)
        assert (y_ref() is not None) == (0 in relu_out)
        out = F.relu(x * w).sum()
        gm.backward(out)
    close(w.grad, np.where(x.numpy() * w.numpy() > 0, x.numpy(), 0))


def test_add_keeps_nothing_alive():
    x = imp.Tensor(f32([1.0, 2.0]))
    gm = GradManager().attach(x)
    saves_in, _ = _rule_saves(O.Elemwise("ADD"))
    with gm:
        z = x * x
        y = z + 1.0
        z_ref = imp.TensorWeakRef(z)
        del z
        gc.collect()
        imp.sync()
        assert (z_ref() is not None) == (0 in saves_in)
        gm.backward(y.sum())
    close(x.grad, 2 * x.numpy())


def test_saved_tensors_freed_after_backward():
    x = imp.Tensor(f32([1.0, 2.0]))
    gm = GradManager().attach(x)
    with gm:
        z = x + x
        y = z * z                       # MUL keeps z alive for the backward
        z_ref = imp.TensorWeakRef(z)
        del z
        gc.collect()
        assert z_ref() is not None
        gm.backward(y.sum())
    del y
    gc.collect()
    imp.sync()
    assert z_ref() is None
    close(x.grad, 8 * x.numpy())


def test_no_leaked_handles(assert_no_leak):
    x = imp.Tensor(f32(np.arange(6).reshape(2, 3)))
    w = imp.Parameter(f32(np.ones((3, 2))))
    gm = GradManager().attach([x, w])

    def step():
        with gm:
            gm.backward(F.relu(x @ w).sum())
        x.grad = w.grad = None

    assert_no_leak(step, repeat=3)


def test_no_leaked_handles_higher_order(assert_no_leak):
    x = imp.Tensor(f32([1.0, 2.0]))
    outer, inner = GradManager().attach(x), GradManager().attach(x)

    def step():
        with outer:
            with inner:
                inner.backward((x * x * x).sum())
            outer.backward(x.grad.sum())
        x.grad = None

    assert_no_leak(step, repeat=2)


# ------------------------------------------------------------------- slips that were silent


def test_backward_with_nothing_attached_says_so():
    gm = GradManager()
    x = imp.Tensor(f32([1.0, 2.0]))
    with gm:
        with pytest.raises(RuntimeError, match=r"GradManager@\w+ with 0 attached.*has nothing "
                                               r"attached.*gm\.attach\(model\.parameters\(\)\)"):
            gm.backward((x * x).sum())
    assert not gm.recording


def test_backward_of_a_loss_computed_before_recording_warns():
    w = imp.Parameter(f32([3.0]))
    gm = GradManager().attach(w)
    loss = (w * w).sum()                      # computed outside `with gm:`: nothing recorded
    with gm, pytest.warns(autodiff.NoGradientWarning, match="inside `with gm:`"):
        gm.backward(loss)
    assert w.grad is None


def test_second_backward_in_one_recording_says_what_happened():
    w = imp.Parameter(f32([3.0]))
    gm = GradManager().attach(w)
    with gm:
        gm.backward((w * w).sum())
        with pytest.raises(RuntimeError, match="already called in this recording.*Add the losses"):
            gm.backward((w * 2).sum())
    close(w.grad, [6.0])
    with gm:                                   # a new recording starts clean
        gm.backward((w * 2).sum())
    close(w.grad, [8.0])


def test_group_backward_needs_only_one_member_reached():
    a, b = imp.Parameter(f32([2.0])), imp.Parameter(f32([5.0]))
    gm_a, gm_b = GradManager().attach(a), GradManager().attach(b)
    with gm_a | gm_b as group:
        group.backward((a * a).sum())         # b is not used: no warning for gm_b
    close(a.grad, [4.0])
    assert b.grad is None and not gm_b.recording
