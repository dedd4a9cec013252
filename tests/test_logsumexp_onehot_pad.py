"""F.logsumexp, F.one_hot and F.pad, and nn.SiLU, nn.Sigmoid and nn.Tanh, which users
reached for by PyTorch habit (docs/api.md): values against numpy (float64 references for
logsumexp, exact for one_hot and pad) and PyTorch where it imports, gradients (softmax for
logsumexp, the slice back for pad), infinities, recomputation under a memory budget, traces,
the ONNX export, and the error each bad argument gets."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import imperative as imp
from imperative import nn

from composite_checks import (assert_dropped_comes_back, assert_onnx_matches,
                              assert_same_bits_under_a_budget, value_and_grad)

F = imp.functional
QUICK = settings(max_examples=40, deadline=None, database=None, derandomize=True)


def T(a, **kw):
    return imp.Tensor(a, **kw)



# ---------------------------------------------------------------------------------------
# logsumexp


def _lse64(x, axis, keepdims=False):
    x = np.asarray(x, np.float64)
    axis = tuple(axis) if isinstance(axis, list) else axis
    m = np.max(x, axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis) if axis is not None else out.reshape(())


def _softmax64(x, axis):
    x = np.asarray(x, np.float64)
    axis = tuple(axis) if isinstance(axis, list) else axis
    e = np.exp(x - np.max(x, axis, keepdims=True))
    return e / np.sum(e, axis, keepdims=True)


LSE = [   # (shape, axis)
    ((7,), 0), ((7,), -1), ((3, 5), 1), ((3, 5), 0), ((3, 5), (0, 1)), ((3, 5), None),
    ((2, 3, 4), -2), ((2, 3, 4), (0, 2)), ((2, 3, 4), [2, 0]), ((2, 3, 4), (-1, -3)),
    ((4, 1, 6), 1), ((2, 3, 40), -1), ((), 0), ((), None), ((5, 0), 0),
]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape, axis", LSE, ids=repr)
def test_logsumexp_matches_float64_with_softmax_gradient(shape, axis, keepdims):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 5 + 30).astype(np.float32)   # exp alone would be off
    y = F.logsumexp(T(x), axis, keepdims)
    want = _lse64(x, axis, keepdims)
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-6)
    dy = rng.standard_normal(want.shape).astype(np.float32)
    _, grad = value_and_grad(F.logsumexp, x, dy, axis, keepdims)
    axes = axis if axis is not None else tuple(range(len(shape)))
    dy_kept = dy if keepdims or not shape else np.expand_dims(dy, axes)
    np.testing.assert_allclose(grad, dy_kept * _softmax64(x, axis), rtol=1e-5, atol=1e-6)


def test_logsumexp_does_not_overflow_or_underflow():
    x = np.array([[1000.0, 1000.0, 999.0], [-1000.0, -1001.0, -1000.0], [88.0, 89.0, 0.0]],
                 np.float32)
    np.testing.assert_allclose(F.logsumexp(x, 1).numpy(), _lse64(x, 1), rtol=1e-7)
    _, grad = value_and_grad(F.logsumexp, x, np.ones(3, np.float32), 1)
    np.testing.assert_allclose(grad, _softmax64(x, 1), rtol=1e-6, atol=1e-7)


def test_logsumexp_infinities_as_pytorch():
    """A row of -inf gives -inf (gradient 0 here; PyTorch's is NaN), a +inf gives +inf,
    -inf entries add nothing, a NaN propagates; no numpy warning on the way."""
    inf = np.inf
    x = np.array([[-inf, -inf, -inf], [1.0, inf, 2.0], [inf, inf, 0.0], [-inf, 0.0, -inf],
                  [np.nan, 1.0, 2.0]], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = F.logsumexp(T(x), 1).numpy()
        _, grad = value_and_grad(F.logsumexp, x[[0, 3]], np.ones(2, np.float32), 1)
    np.testing.assert_array_equal(y[:4], [-inf, inf, inf, 0.0])
    assert np.isnan(y[4])
    np.testing.assert_array_equal(grad, [[0, 0, 0], [0, 1, 0]])
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, grad = value_and_grad(F.logsumexp, x[1:2], np.ones(1, np.float32), 1)
    np.testing.assert_array_equal(grad[0][[0, 2]], [0, 0])     # NaN at the inf, as PyTorch


def test_logsumexp_dtypes_and_inputs():
    y = F.logsumexp(T(np.array([[0, 1], [2, 3]], np.int32)), 1)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), _lse64([[0, 1], [2, 3]], 1), rtol=1e-6)
    assert F.logsumexp(T(np.array([1, 2], np.int8)), 0).dtype == np.float32
    half = F.logsumexp(T(np.array([[1.0, 2.0, 3.0]], np.float16)), -1)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.numpy(), _lse64([[1, 2, 3]], -1), rtol=1e-3)
    # arrays and lists are accepted like everywhere in F; an empty axis gives -inf
    np.testing.assert_allclose(F.logsumexp([[0.0, 0.0]], 1).numpy(), [np.log(2)], rtol=1e-6)
    np.testing.assert_array_equal(F.logsumexp(np.zeros((2, 0), np.float32), 1).numpy(),
                                  [-np.inf, -np.inf])


@QUICK
@given(data=st.data(), x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=4,
                                                                 min_side=1, max_side=5),
                                     elements=st.floats(-60, 60, width=32)))
def test_logsumexp_on_drawn_shapes_and_axes(data, x):
    axes = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=x.ndim,
                              unique_by=lambda a: a % x.ndim))
    axis = tuple(axes) if len(axes) > 1 else axes[0]
    keepdims = data.draw(st.booleans())
    want = _lse64(x, axis, keepdims)
    y, grad = value_and_grad(F.logsumexp, x, np.ones(want.shape, np.float32), axis, keepdims)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(grad, _softmax64(x, axis), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.logsumexp(x, 2), IndexError,
     r"logsumexp: axis 2 is out of range for a tensor with 2 dimension\(s\)"),
    (lambda x: F.logsumexp(x, (0, -2)), ValueError, r"logsumexp: repeated axis in \(0, -2\)"),
    (lambda x: F.logsumexp(x, dim=1), TypeError, r"spells PyTorch's dim= as axis="),
    (lambda x: F.logsumexp(x, 1, keepdim=True), TypeError, "keepdim= as keepdims="),
    (lambda x: F.logsumexp(x), TypeError, "axis"),
    (lambda x: F.logsumexp(None, 0), TypeError, "got None"),
    (lambda x: x.logsumexp, AttributeError, r"x\.logsumexp, use F\.logsumexp\(x, axis"),
])
def test_logsumexp_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(T(np.zeros((2, 3), np.float32)))


# ---------------------------------------------------------------------------------------
# one_hot


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8", "int16", "uint16"])
@pytest.mark.parametrize("shape, classes", [((5,), 5), ((2, 3), 7), ((), 3), ((0,), 2),
                                            ((2, 0, 3), 4), ((4, 1, 2), 1)], ids=repr)
def test_one_hot_matches_numpy(shape, classes, dtype):
    rng = np.random.default_rng(classes)
    labels = rng.integers(0, classes, shape).astype(dtype)
    y = F.one_hot(T(labels), classes)
    want = np.eye(classes, dtype=np.float32)[labels]
    assert y.dtype == np.float32 and y.shape == shape + (classes,)
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(F.one_hot(labels, np.int64(classes)).numpy(), want)


def test_one_hot_of_lists_and_a_loss():
    np.testing.assert_array_equal(F.one_hot([2, 0], 3).numpy(), [[0, 0, 1], [1, 0, 0]])
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((6, 4)).astype(np.float32)
    labels = np.array([0, 3, 1, 1, 2, 3])
    loss = -F.sum(F.log_softmax(T(logits)) * F.one_hot(labels, 4)) / 6
    np.testing.assert_allclose(loss.numpy(), F.cross_entropy(T(logits), labels).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("labels, classes, error, message", [
    ([0, 4], 4, IndexError,
     r"one_hot: label 4 \(labels\[1\]\) is out of range for num_classes=4: labels must be in "
     r"\[0, 4\)"),
    ([[0, 1], [-1, 2]], 3, IndexError, r"label -1 \(labels\[1, 0\]\) is out of range"),
    (np.array([0.0, 1.0], np.float32), 2, TypeError,
     r"one_hot: labels must be an integer tensor, got dtype float32 of shape \(2,\)"),
    (np.array([True]), 2, TypeError, "labels must be an integer tensor, got dtype bool"),
    ([1], 0, ValueError, r"one_hot: num_classes must be a positive int, got 0 \(int\)"),
    ([1], -1, ValueError, r"num_classes must be a positive int, got -1"),
    ([1], 2.0, TypeError, r"num_classes must be a positive int, got 2\.0 \(float\)"),
    ([1], True, TypeError, r"num_classes must be a positive int, got True \(bool\)"),
    ([1], None, TypeError, r"num_classes must be a positive int, got None"),
    (None, 2, TypeError, "got None"),
])
def test_one_hot_errors(labels, classes, error, message):
    with pytest.raises(error, match=message):
        F.one_hot(labels if labels is None or isinstance(labels, np.ndarray) else
                  T(labels), classes)


# ---------------------------------------------------------------------------------------
# pad


def _np_pad(x, pad, value):
    """numpy's pad (and slicing, for negative widths) for PyTorch's flat `pad`."""
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = tuple(slice(max(-b, 0), x.shape[a] - max(-e, 0)) for a, (b, e) in enumerate(widths))
    return np.pad(x[crop], [(max(b, 0), max(e, 0)) for b, e in widths], constant_values=value)


PADS = [   # (shape, pad)
    ((5,), (1, 2)), ((5,), (0, 3)), ((5,), (2, 0)), ((3, 4), (1, 1)), ((3, 4), (1, 0, 0, 2)),
    ((2, 3, 4), (1, 2, 3, 4, 0, 1)), ((2, 3, 4), (0, 0, 2, 1)), ((2, 3, 4), ()),
    ((2, 3, 4), (0, 0, 0, 0)), ((2, 3, 4), (-1, 2)), ((2, 3, 4), (-1, -1, 1, -2)),
    ((2, 3, 4), (-4, 0)), ((2, 0, 3), (1, 1, 2, 0)), ((1, 2, 3, 4), (1, 1, 1, 1)),
    ((2, 3, 4), [np.int64(1), np.int32(2)]),
]


@pytest.mark.parametrize("shape, pad", PADS, ids=repr)
@pytest.mark.parametrize("dtype, value", [("float32", 0.0), ("float32", -2.5),
                                          ("float16", 1.5), ("int32", 7), ("int8", -3.0),
                                          ("bool", 1)])
def test_pad_matches_numpy(shape, pad, dtype, value):
    x = (np.arange(int(np.prod(shape))).reshape(shape) % 5).astype(dtype)
    y = F.pad(T(x), pad, value=value)
    want = _np_pad(x, pad, value)
    assert y.dtype == want.dtype and y.shape == want.shape
    np.testing.assert_array_equal(y.numpy(), want)


def test_pad_gradient_is_the_slice_back():
    rng = np.random.default_rng(2)
    for shape, pad in PADS:
        x = rng.standard_normal(shape).astype(np.float32)
        want = _np_pad(x, pad, 0.0)
        dy = rng.standard_normal(want.shape).astype(np.float32)
        y, grad = value_and_grad(F.pad, x, dy, pad)
        np.testing.assert_array_equal(y, want)
        widths = [(0, 0)] * x.ndim
        for i in range(len(pad) // 2):
            widths[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
        # the inverse pad (crops become zeros, pads are cut off) of dy
        back = [w for b, e in reversed(widths) for w in (-b, -e)]
        np.testing.assert_array_equal(grad, _np_pad(dy, back, 0.0))


def test_a_pad_of_nothing_is_a_new_tensor():
    x = T(np.arange(4, dtype=np.float32))
    for pad in ((), (0, 0)):
        y = F.pad(x, pad)
        assert y is not x
        y += 1
        np.testing.assert_array_equal(x.numpy(), np.arange(4))


@QUICK
@given(data=st.data(), x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=4,
                                                                 min_side=0, max_side=4),
                                     elements=st.floats(-9, 9, width=32)))
def test_pad_on_drawn_shapes_and_widths(data, x):
    pairs = data.draw(st.integers(0, x.ndim))
    pad = []
    for i in range(pairs):
        size = x.shape[x.ndim - 1 - i]
        before = data.draw(st.integers(-size, 3))
        pad += [before, data.draw(st.integers(-(size + min(before, 0)), 3))]
    value = data.draw(st.floats(-5, 5, width=32))
    want = _np_pad(x, pad, value)
    y, grad = value_and_grad(F.pad, x, np.ones(want.shape, np.float32), tuple(pad),
                             "constant", value)
    np.testing.assert_array_equal(y, want)
    kept = _np_pad(np.ones(want.shape, np.float32),
                   [w for b, e in zip(pad[::2], pad[1::2]) for w in (-b, -e)], 0.0)
    np.testing.assert_array_equal(grad, kept)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.pad(x, (1,)), ValueError,
     r"pad: pad must hold \(before, after\) pairs, an even number of ints, got 1: \(1,\)"),
    (lambda x: F.pad(x, (1, 1, 1, 1, 1, 1)), ValueError,
     r"pad: pad \(1, 1, 1, 1, 1, 1\) gives 3 \(before, after\) pairs but x has only 2 "
     r"dimension\(s\) \(shape \(2, 3\)\)"),
    (lambda x: F.pad(x, 2), TypeError,
     r"pad: pad must be a tuple of ints \(\(before, after\) pairs from the last axis\), got 2"),
    (lambda x: F.pad(x, (1.0, 2)), TypeError,
     r"pad: pad must be a tuple of ints, got \(1\.0, 2\) \(holding 1\.0, a float\)"),
    (lambda x: F.pad(x, (True, 0)), TypeError, r"holding True, a bool"),
    (lambda x: F.pad(x, (-2, -2)), ValueError,
     r"pad: pad \(-2, -2\) for axis 1 of size 3 crops more than it holds"),
    (lambda x: F.pad(x, (0, 0, -3, 1)), ValueError, r"pad \(-3, 1\) for axis 0 of size 2"),
    (lambda x: F.pad(x, (3, 1), "reflect"), ValueError,
     r"pad: reflect padding \(3, 1\) must be less than the size 3 of axis 1"),
    (lambda x: F.pad(x, (1, 1), mode="wrap"), ValueError,
     r"pad: mode must be 'constant' or one of \('reflect', 'replicate', 'circular'\), "
     r"got 'wrap'"),
    (lambda x: F.pad(x, (1, 1), value="0"), TypeError,
     r"pad: value must be a real number, got '0' \(str\)"),
    (lambda x: F.pad(x, (1, 1), value=None), TypeError, "value must be a real number"),
    (lambda x: F.pad(x.astype("int32"), (1, 1), value=0.5), ValueError,
     r"pad: value 0\.5 is not an integer, and x is int32"),
    (lambda x: F.pad(x.astype("int8"), (1, 1), value=300), ValueError,
     r"pad: value 300 does not fit x's dtype int8 \(\[-128, 127\]\)"),
    (lambda x: F.pad(x.astype("int8"), (1, 1), value=float("nan")), ValueError,
     "not an integer"),
    (lambda x: F.pad(None, (1, 1)), TypeError, "got None"),
])
def test_pad_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(T(np.zeros((2, 3), np.float32)))


# ---------------------------------------------------------------------------------------
# nn.SiLU, nn.Sigmoid, nn.Tanh


@pytest.mark.parametrize("module, reference", [
    (nn.SiLU, lambda x: x / (1 + np.exp(-x))), (nn.Sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    (nn.Tanh, np.tanh)])
def test_activation_modules(module, reference):
    x = np.linspace(-6, 6, 25, dtype=np.float32)
    m = module()
    assert list(m.parameters()) == [] and module.__name__ in nn.__all__
    np.testing.assert_allclose(m(T(x)).numpy(), reference(x.astype(np.float64)), rtol=2e-6,
                               atol=1e-7)
    model = nn.Sequential(nn.Linear(4, 3), module())
    assert model(T(np.ones((2, 4), np.float32))).shape == (2, 3)


# ---------------------------------------------------------------------------------------
# Under the memory manager, a trace and an ONNX export


def _net(x, w, labels):
    """A step using all three: padded features, a logsumexp loss against one-hot labels."""
    h = F.pad(F.tanh(x @ w), (1, 2, 0, 0), value=0.5)            # (N, 67)
    logits = h[:, :8] * 3.0
    target = F.one_hot(labels, 8)
    return F.mean(F.logsumexp(logits, 1) - F.sum(logits * target, 1)) + F.sum(h) * 1e-3


def test_a_step_with_the_three_recomputes_under_a_budget_with_the_same_bits():
    rng = np.random.default_rng(3)
    x = T(rng.standard_normal((256, 64)).astype(np.float32))
    w = imp.Parameter(rng.standard_normal((64, 64)).astype(np.float32) * 0.2)
    labels = T(rng.integers(0, 8, 256))

    assert_same_bits_under_a_budget(lambda: _net(x, w, labels), w)


def test_a_dropped_logsumexp_and_pad_come_back_bit_for_bit():
    x = T(np.linspace(-50, 50, 1 << 16, dtype=np.float32).reshape(256, 256))
    assert_dropped_comes_back(lambda: F.pad(F.logsumexp(x, 1, keepdims=True), (3, 1), value=-1.0))


def test_traced_logsumexp_and_pad_replay_the_eager_bits():
    rng = np.random.default_rng(4)
    w = imp.Parameter(rng.standard_normal((8, 8)).astype(np.float32))

    def fn(x):
        return F.logsumexp(F.pad(x @ w, (2, 1, 1, 0), value=-3.0), (0, 1))

    traced = imp.jit.trace(symbolic=True)(fn)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((6, 8)).astype(np.float32)
        np.testing.assert_array_equal(traced(T(x)).numpy(), fn(T(x)).numpy())


def test_logsumexp_pad_and_one_hot_export_to_onnx(tmp_path):
    labels = T(np.array([0, 3, 1, 2]))

    @imp.jit.trace(capture_as_const=True)
    def fn(x):
        return F.logsumexp(F.pad(x, (1, 1), value=-1.0), 1) + F.sum(x * F.one_hot(labels, 5), 1)

    x = np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)
    assert_onnx_matches(fn, x, str(tmp_path / "lse_pad.onnx"))


# ---------------------------------------------------------------------------------------
# PyTorch


def test_match_pytorch_with_gradients():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    rng = np.random.default_rng(6)
    for shape, axis, keepdims in [((5,), 0, False), ((3, 7), 1, True), ((2, 3, 4), (0, 2), False),
                                  ((2, 3, 4), -2, True)]:
        x = (rng.standard_normal(shape) * 10).astype(np.float32)
        y = F.logsumexp(T(x), axis, keepdims)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        y, grad = value_and_grad(F.logsumexp, x, dy, axis, keepdims)
        t = torch.tensor(x, requires_grad=True)
        ty = torch.logsumexp(t, axis, keepdims)
        ty.backward(torch.tensor(dy))
        np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-5, atol=1e-6)
    inf = float("inf")
    special = torch.tensor([[-inf, -inf], [1.0, inf], [-inf, 2.0], [1e30, 1e30]])
    np.testing.assert_array_equal(F.logsumexp(special.numpy(), 1).numpy(),
                                  torch.logsumexp(special, 1).numpy())
    labels = rng.integers(0, 6, (3, 4))
    np.testing.assert_array_equal(F.one_hot(labels, 6).numpy(),
                                  tf.one_hot(torch.tensor(labels), 6).float().numpy())
    for shape, pad in PADS:
        x = rng.standard_normal(shape).astype(np.float32)
        pad = tuple(int(p) for p in pad)
        y = F.pad(T(x), pad, value=0.25)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        y, grad = value_and_grad(F.pad, x, dy, pad, "constant", 0.25)
        t = torch.tensor(x, requires_grad=True)
        ty = tf.pad(t, pad, value=0.25)
        ty.backward(torch.tensor(dy))
        np.testing.assert_array_equal(y, ty.detach().numpy())
        np.testing.assert_array_equal(grad, t.grad.numpy())
    x = np.linspace(-8, 8, 101, dtype=np.float32)
    for ours, theirs in ((nn.SiLU(), torch.nn.SiLU()), (nn.Sigmoid(), torch.nn.Sigmoid()),
                         (nn.Tanh(), torch.nn.Tanh())):
        np.testing.assert_allclose(ours(T(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                                   rtol=2e-6, atol=1e-7)
