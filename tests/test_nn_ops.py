"""The NN and tensor ops as values (equality, hash, repr, flags) and against numpy
references written here, plus PyTorch where it is installed: convolution, pooling, the
softmax family, cross entropy, batch/layer norm, embedding; and the errors of each."""
import itertools

import numpy as np
import pytest

import imperative as imp
from imperative import ops as O

F = imp.functional


def T(a):
    return imp.Tensor(a)


def run(op, *arrays):
    """Apply `op` to tensors made from `arrays`; the outputs as numpy arrays."""
    return [t.numpy() for t in imp.apply(op, *[T(a) for a in arrays])]


def raises_when_run(exc_type, match, async_level):
    """A failing kernel raises its exception at the call at async level 0 and as the
    cause of an AsyncError at the next sync point otherwise."""
    if async_level == 0:
        return pytest.raises(exc_type, match=match)
    return pytest.raises(imp.AsyncError, match=match)


# --------------------------------------------------------------------------- ops are values

OP_VALUES = [
    (lambda: O.Convolution(2, (1, 0), 1, 2), lambda: O.Convolution((2, 2), [1, 0], (1, 1), 2),
     lambda: O.Convolution(1, (1, 0), 1, 2)),
    (lambda: O.Pooling("max", 3, 2, 1), lambda: O.Pooling("MAX", (3, 3), (2, 2), (1, 1)),
     lambda: O.Pooling("AVERAGE", 3, 2, 1)),
    (lambda: O.Softmax(1), lambda: O.Softmax(1), lambda: O.LogSoftmax(1)),
    (lambda: O.CrossEntropy(-1, "sum"), lambda: O.CrossEntropy(-1, "sum"),
     lambda: O.CrossEntropy()),
    (lambda: O.BatchNormForward(True, 0.1, 1e-5), lambda: O.BatchNormForward(True),
     lambda: O.BatchNormForward(False)),
    (lambda: O.LayerNormForward(4), lambda: O.LayerNormForward((4,)),
     lambda: O.LayerNormForward((2, 4))),
    (lambda: O.Embedding(), lambda: O.Embedding(), lambda: O.LeakyRelu()),
    (lambda: O.LeakyRelu(0), lambda: O.LeakyRelu(0.0), lambda: O.LeakyRelu(0.2)),
    (lambda: O.Concat(1), lambda: O.Concat(1), lambda: O.Concat(0)),
    (lambda: O.Split(0, [1, 2]), lambda: O.Split(0, (1, 2)), lambda: O.Split(0, 2)),
    (lambda: O.Where(), lambda: O.Where(), lambda: O.Concat()),
    (lambda: O.Clip(0, 1), lambda: O.Clip(0, 1), lambda: O.Clip(None, 1)),
    (lambda: O.Arange(0, 5, 1, "int32", "cpu0"), lambda: O.Arange(0, 5), lambda: O.Arange(0, 5, 2)),
    (lambda: O.Linspace(0, 1, 5), lambda: O.Linspace(0, 1, 5, True, "float32"),
     lambda: O.Linspace(0, 1, 6)),
    (lambda: O.Elemwise("gelu"), lambda: O.Elemwise("GELU"), lambda: O.Elemwise("ERF")),
]


@pytest.mark.parametrize("make_a, make_b, make_other", OP_VALUES,
                         ids=lambda f: repr(f()).split("(")[0])
def test_ops_are_immutable_hashable_values(make_a, make_b, make_other):
    a, b, other = make_a(), make_b(), make_other()
    assert a == b and hash(a) == hash(b) and not a != b
    assert a != other
    assert repr(a) == repr(b) and repr(a).startswith(type(a).__name__ + "(")
    with pytest.raises(AttributeError, match="immutable"):
        a.axis = 3
    assert len({a, b, other}) == 2


def test_ops_are_exported_with_their_flags():
    joined = {"Concat": O.shape, "Split": O.shape, "Where": O.select, "Clip": O.select,
              "Fill": O.creation, "Arange": O.creation, "Linspace": O.creation}
    for name in O.nn.__all__ + list(joined):
        assert getattr(O, name) is getattr(O.nn if name in O.nn.__all__ else joined[name], name)
        assert name in O.__all__
    def flag(cls, name, default=False):    # the core reads absent flags as their defaults
        return getattr(cls, name, default)

    assert flag(O.Split, "ALIASES_INPUT") and not flag(O.Concat, "ALIASES_INPUT")
    assert flag(O.Clip, "INPLACE_CAPABLE") and flag(O.Elemwise, "INPLACE_CAPABLE")
    names = O.nn.__all__ + list(joined)
    assert all(flag(getattr(O, n), "RECOMPUTABLE", True) for n in names)
    assert not any(flag(getattr(O, n), "VALUE_DEPENDENT") for n in names)
    assert O.Pooling("MAX", 2).name == "Pooling.MAX"


@pytest.mark.parametrize("bad", [
    lambda: O.Convolution(stride=0), lambda: O.Convolution(padding=-1),
    lambda: O.Convolution(groups=0), lambda: O.Pooling("SUM", 2),
    lambda: O.Pooling("MAX", 2, padding=2),
    lambda: O.CrossEntropy(reduction="avg"), lambda: O.Clip(), lambda: O.Arange(0, 3, 0),
    lambda: O.Elemwise("ERFC"),
])
def test_bad_op_parameters_are_value_errors(bad):
    with pytest.raises(ValueError):
        bad()


@pytest.mark.parametrize("bad", [lambda: O.Convolution(stride=(1, 2, 3)),
                                 lambda: O.Convolution(stride=1.5),
                                 lambda: O.Pooling("MAX", "3"), lambda: O.Clip("0")])
def test_bad_op_parameter_types_are_type_errors(bad):
    with pytest.raises(TypeError):
        bad()


# --------------------------------------------------------------------------- convolution


def ref_conv2d(x, w, b, stride, padding, dilation, groups):
    """Direct definition: one einsum per kernel tap and group (float64)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for g, i, j in itertools.product(range(groups), range(kh), range(kw)):
        patch = xp[:, g * cg:(g + 1) * cg, i * dh:i * dh + sh * (ho - 1) + 1:sh,
                   j * dw:j * dw + sw * (wo - 1) + 1:sw]
        out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                 w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


CONV_CASES = [
    # x shape, weight shape, stride, padding, dilation, groups, bias
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 0, 1, 1, True),
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 1, 1, 1, False),
    ((1, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0), 1, 2, True),
    ((2, 2, 9, 9), (2, 2, 3, 3), 2, 2, 2, 1, True),
    ((1, 6, 5, 5), (6, 1, 3, 3), 1, 1, 1, 6, False),          # depthwise
    ((3, 2, 4, 4), (5, 2, 1, 1), 1, 0, 1, 1, True),           # 1x1
    ((0, 3, 5, 5), (4, 3, 3, 3), 1, 1, 1, 1, True),           # empty batch
    ((1, 1, 2, 2), (1, 1, 3, 3), 1, 1, 1, 1, False),          # kernel larger than input
]


def _conv_args(case):
    xs, ws, stride, padding, dilation, groups, bias = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32) if bias else None
    return x, w, b, stride, padding, dilation, groups


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_convolution_matches_reference(case):
    x, w, b, stride, padding, dilation, groups = _conv_args(case)
    op = O.Convolution(stride, padding, dilation, groups)
    (got,) = run(op, *([x, w] if b is None else [x, w, b]))
    expected = ref_conv2d(x.astype(np.float64), w.astype(np.float64), b, _pair(stride),
                          _pair(padding), _pair(dilation), groups)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CONV_CASES[:6], ids=str)
def test_convolution_matches_torch(case):
    torch = pytest.importorskip("torch")
    x, w, b, stride, padding, dilation, groups = _conv_args(case)
    got = F.conv2d(T(x), T(w), None if b is None else T(b), stride, padding, dilation, groups)
    expected = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                          None if b is None else torch.from_numpy(b),
                                          stride, padding, dilation, groups).numpy()
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_convolution_chunks_over_a_large_batch(monkeypatch):
    """Batches bigger than one cache-sized chunk give the same answer as one chunk."""
    x, w, b, *_ = _conv_args(((9, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1, True))
    (whole,) = run(O.Convolution(1, 1), x, w, b)
    monkeypatch.setattr(O.nn_common, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(O.nn_common, "_GEMM_CHUNK_BYTES", 1)
    (chunked,) = run(O.Convolution(1, 1), x, w, b)
    np.testing.assert_allclose(chunked, whole, rtol=1e-6, atol=1e-6)


def ref_conv2d_grads(x, w, dy, stride, padding, dilation, groups):
    """conv2d's input and weight gradients by their definition (float64)."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    ho, wo = dy.shape[2:]
    og = o // groups
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    gxp, gw = np.zeros_like(xp), np.zeros(w.shape)
    for g, i, j in itertools.product(range(groups), range(kh), range(kw)):
        rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
        cols = slice(j * dw, j * dw + sw * (wo - 1) + 1, sw)
        cs, os_ = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
        gxp[:, cs, rows, cols] += np.einsum("nohw,oc->nchw", dy[:, os_], w[os_, :, i, j])
        gw[os_, :, i, j] = np.einsum("nohw,nchw->oc", dy[:, os_], xp[:, cs, rows, cols])
    return gxp[:, :, ph:ph + h, pw:pw + wd], gw


CONV_GRAD_CASES = [
    # x shape, weight shape, stride, padding, dilation, groups
    ((5, 8, 6, 7), (8, 8, 3, 3), 1, 1, 1, 1),          # wide sgemm; data grad as a conv (C >= O)
    ((5, 4, 6, 7), (8, 4, 3, 3), 1, 1, 1, 1),          # data grad by col2im (C < O)
    ((3, 12, 7, 6), (4, 6, 3, 2), 1, (2, 1), (1, 2), 2),   # groups, dilation, C >= O
    ((3, 12, 7, 6), (4, 6, 3, 2), 1, (3, 1), 1, 2),    # padding too large for the conv route
    ((3, 8, 9, 9), (6, 8, 3, 3), 2, 1, 1, 1),          # stride 2: col2im
]


@pytest.mark.parametrize("case", CONV_GRAD_CASES, ids=str)
@pytest.mark.parametrize("columns", [4096, 50, 1])
def test_convolution_and_gradients_over_chunkings(monkeypatch, case, columns):
    """Forward, data and filter gradients match their definitions whichever kernel path
    runs and however the batch is chunked (partial last chunks included)."""
    monkeypatch.setattr(O.nn_common, "GEMM_COLUMNS", columns)
    xs, ws, stride, padding, dilation, groups = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    (y,) = run(O.Convolution(stride, padding, dilation, groups), x, w)
    args = (_pair(stride), _pair(padding), _pair(dilation), groups)
    np.testing.assert_allclose(y, ref_conv2d(x.astype(np.float64), w.astype(np.float64), None,
                                             *args), rtol=1e-4, atol=1e-4)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    (gx,) = run(O.ConvolutionBackwardData(stride, padding, dilation, groups, xs[2:]), dy, w)
    (gw,) = run(O.ConvolutionBackwardFilter(stride, padding, dilation, groups, ws[2:]), x, dy)
    ex, ew = ref_conv2d_grads(x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64),
                              *args)
    assert gx.dtype == gw.dtype == np.float32
    np.testing.assert_allclose(gx, ex, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, ew, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype, out_dtype", [("float16", "float16"), ("int8", "float32"),
                                              ("bool", "float32")])
def test_convolution_dtypes(dtype, out_dtype):
    x = (np.arange(2 * 2 * 5 * 5) % 3).reshape(2, 2, 5, 5).astype(dtype)
    w = np.ones((3, 2, 2, 2), dtype)
    (got,) = run(O.Convolution(), x, w)
    assert got.dtype == out_dtype
    expected = ref_conv2d(x.astype(np.float64), w.astype(np.float64), None, (1, 1), (0, 0),
                          (1, 1), 1)
    np.testing.assert_allclose(got, expected, rtol=1e-3)


@pytest.mark.parametrize("shapes, bias, groups, match", [
    (((2, 3, 5), (4, 3, 3, 3)), None, 1,
     r"input must be 4-D \(N, C, H, W\), got shape \(2, 3, 5\)"),
    (((2, 3, 5, 5), (4, 3, 3)), None, 1, r"weight must be 4-D"),
    (((2, 3, 5, 5), (4, 2, 3, 3)), None, 1, r"expects 2 input channels.*\(2, 3, 5, 5\)"),
    (((2, 4, 5, 5), (3, 2, 3, 3)), None, 2, r"out_channels 3.*divisible by groups=2"),
    (((2, 3, 5, 5), (4, 3, 3, 3)), (3,), 1, r"bias must have shape \(4,\).*got \(3,\)"),
    (((2, 3, 2, 5), (4, 3, 3, 3)), None, 1,
     r"kernel height 3.*larger than the padded input height 2"),
])
def test_convolution_shape_errors(shapes, bias, groups, match):
    xs, ws = shapes
    args = [T(np.ones(xs, np.float32)), T(np.ones(ws, np.float32))]
    if bias:
        args.append(T(np.ones(bias, np.float32)))
    with pytest.raises(ValueError, match=match):
        imp.apply(O.Convolution(groups=groups), *args)


def test_convolution_rejects_quantized_and_bad_arity():
    q = imp.Tensor(np.ones((1, 1, 3, 3), np.float32), dtype=imp.dtype.qint8(0.5))
    with pytest.raises(TypeError, match="quantized"):
        imp.apply(O.Convolution(), q, q)
    with pytest.raises(ValueError, match="2 or 3 inputs"):
        imp.apply(O.Convolution(), T(np.ones((1, 1, 3, 3))))


# --------------------------------------------------------------------------- pooling


def ref_pool(x, mode, k, s, p):
    """Per output position, over the real input values of its window."""
    (kh, kw), (sh, sw), (ph, pw) = _pair(k), _pair(s), _pair(p)
    n, c, h, w = x.shape
    ho, wo = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = np.zeros((n, c, ho, wo))
    for i, j in itertools.product(range(ho), range(wo)):
        r0, c0 = i * sh - ph, j * sw - pw
        win = x[:, :, max(r0, 0):r0 + kh, max(c0, 0):c0 + kw].astype(np.float64)
        if mode == "MAX":
            out[:, :, i, j] = win.max(axis=(2, 3))
        elif mode == "AVERAGE":
            out[:, :, i, j] = win.sum(axis=(2, 3)) / (kh * kw)
        else:
            out[:, :, i, j] = win.mean(axis=(2, 3))
    return out


POOL_CASES = [(2, None, 0), (3, 2, 1), ((3, 2), (1, 2), (1, 1)), (2, 1, 1), (5, 3, 2)]
POOL_MODES = ["MAX", "AVERAGE", "AVERAGE_COUNT_EXCLUDE_PADDING"]


@pytest.mark.parametrize("mode", POOL_MODES)
@pytest.mark.parametrize("k, s, p", POOL_CASES, ids=str)
def test_pooling_matches_reference(mode, k, s, p):
    x = np.random.default_rng(8).standard_normal((2, 3, 9, 8)).astype(np.float32)
    (got,) = run(O.Pooling(mode, k, s, p), x)
    expected = ref_pool(x, mode, k, k if s is None else s, p)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("k, s, p", POOL_CASES[:4], ids=str)
def test_pooling_matches_torch(k, s, p):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(9).standard_normal((2, 3, 9, 8)).astype(np.float32)
    tx = torch.from_numpy(x)
    tf = torch.nn.functional
    np.testing.assert_array_equal(F.max_pool2d(T(x), k, s, p).numpy(),
                                  tf.max_pool2d(tx, k, s, p).numpy())
    np.testing.assert_allclose(F.avg_pool2d(T(x), k, s, p).numpy(),
                               tf.avg_pool2d(tx, k, s, p, count_include_pad=False).numpy(),
                               rtol=1e-6, atol=1e-6)
    (include,) = run(O.Pooling("AVERAGE", k, s, p), x)
    np.testing.assert_allclose(include, tf.avg_pool2d(tx, k, s, p).numpy(), rtol=1e-6, atol=1e-6)


def test_pooling_dtypes_and_empty_batch():
    x = np.arange(2 * 1 * 4 * 4).reshape(2, 1, 4, 4).astype(np.int8) - 20
    (mx,) = run(O.Pooling("MAX", 3, 1, 1), x)
    assert mx.dtype == np.int8
    np.testing.assert_array_equal(mx, ref_pool(x, "MAX", 3, 1, 1).astype(np.int8))
    (avg,) = run(O.Pooling("AVERAGE_COUNT_EXCLUDE_PADDING", 2), x)
    assert avg.dtype == np.float32
    np.testing.assert_allclose(avg, ref_pool(x, "EXCL", 2, 2, 0))
    (half,) = run(O.Pooling("AVERAGE", 2), x.astype(np.float16))
    assert half.dtype == np.float16
    (empty,) = run(O.Pooling("MAX", 2), np.zeros((0, 3, 4, 4), np.float32))
    assert empty.shape == (0, 3, 2, 2)


def test_pooling_errors():
    with pytest.raises(ValueError,
                       match=r"input must be 4-D \(N, C, H, W\), got shape \(3, 4, 4\)"):
        F.max_pool2d(T(np.ones((3, 4, 4))), 2)
    with pytest.raises(ValueError, match="kernel width 5.*larger than the padded input width 4"):
        F.avg_pool2d(T(np.ones((1, 1, 8, 4))), 5, padding=0)
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool2d(T(np.ones((1, 1, 8, 8))), 2, padding=2)


# --------------------------------------------------------------------------- softmax family


def ref_log_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("shape, axis", [((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1),
                                         ((), -1), ((0, 4), -1), ((3, 0), -1), ((300, 700), -1)],
                         ids=str)
def test_softmax_family_matches_numpy(shape, axis):
    x = (np.random.default_rng(10).standard_normal(shape) * 20).astype(np.float32)
    expected = ref_log_softmax(x, axis) if x.size else x
    (sm,) = run(O.Softmax(axis), x)
    (lsm,) = run(O.LogSoftmax(axis), x)
    assert sm.dtype == lsm.dtype == np.float32 and sm.shape == lsm.shape == x.shape
    np.testing.assert_allclose(sm, np.exp(expected), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(lsm, expected, rtol=1e-5, atol=1e-5)


def test_softmax_dtypes_and_axis_errors():
    (half,) = run(O.Softmax(-1), np.array([1, 2, 3], np.float16))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, np.exp(ref_log_softmax(np.array([1, 2, 3]), -1)), rtol=1e-3)
    (ints,) = run(O.LogSoftmax(0), np.array([1, 2, 3], np.int32))
    assert ints.dtype == np.float32
    with pytest.raises(IndexError, match="axis 2"):
        imp.apply(O.Softmax(2), T(np.ones((2, 2))))


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_matches_torch(axis):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(11).standard_normal((6, 7)).astype(np.float32) * 5
    np.testing.assert_allclose(F.softmax(T(x), axis).numpy(),
                               torch.softmax(torch.from_numpy(x), axis).numpy(),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(F.log_softmax(T(x), axis).numpy(),
                               torch.log_softmax(torch.from_numpy(x), axis).numpy(),
                               rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- cross entropy


def ref_cross_entropy(logits, labels, axis, reduction):
    logp = ref_log_softmax(logits, axis)
    index = np.expand_dims(labels, axis).astype(np.int64)
    picked = -np.squeeze(np.take_along_axis(logp, index, axis), axis)
    return {"none": picked, "sum": picked.sum(), "mean": picked.mean()}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, axis", [((4, 5), -1), ((2, 5, 3), 1), ((5,), 0)], ids=str)
def test_cross_entropy_matches_reference(shape, axis, reduction):
    rng = np.random.default_rng(12)
    logits = rng.standard_normal(shape).astype(np.float32) * 3
    label_shape = shape[:axis % len(shape)] + shape[axis % len(shape) + 1:]
    labels = rng.integers(0, shape[axis], size=label_shape).astype(np.int16)
    (got,) = run(O.CrossEntropy(axis, reduction), logits, labels)
    expected = ref_cross_entropy(logits, labels, axis, reduction)
    assert got.dtype == np.float32 and got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(reduction):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    logits = rng.standard_normal((3, 4, 2, 2)).astype(np.float32)
    labels = rng.integers(0, 4, size=(3, 2, 2)).astype(np.int32)
    got = F.cross_entropy(T(logits), T(labels), axis=1, reduction=reduction)
    expected = torch.nn.functional.cross_entropy(torch.from_numpy(logits),
                                                 torch.from_numpy(labels).long(),
                                                 reduction=reduction).numpy()
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_cross_entropy_errors(async_level):
    logits = T(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match="labels must have an integer dtype, got float32"):
        F.cross_entropy(logits, T(np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match=r"labels must have shape \(2,\).*got \(3,\)"):
        F.cross_entropy(logits, T(np.zeros(3, np.int32)))
    with pytest.raises(ValueError, match="0-d"):
        F.cross_entropy(T(np.float32(1)), T(np.int32(0)))
    with raises_when_run(IndexError, "label 3 is out of range for 3 classes", async_level):
        F.cross_entropy(logits, T(np.array([0, 3], np.int32))).numpy()
    # the runtime stays usable
    assert (F.cross_entropy(logits, T(np.array([0, 2], np.int32))).numpy()
            == pytest.approx(np.log(3)))


# --------------------------------------------------------------------------- batch / layer norm


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_matches_torch(shape, training):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    x = rng.standard_normal(shape).astype(np.float32) * 2 + 1
    w, b = (rng.standard_normal(3).astype(np.float32) for _ in range(2))
    rm, rv = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    outs = run(O.BatchNormForward(training, 0.3, 1e-3), x, w, b, rm, rv)
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    expected = torch.nn.functional.batch_norm(torch.from_numpy(x), trm, trv, torch.from_numpy(w),
                                              torch.from_numpy(b), training, 0.3, 1e-3).numpy()
    np.testing.assert_allclose(outs[0], expected, rtol=1e-5, atol=1e-5)
    assert len(outs) == (3 if training else 1)
    if training:
        np.testing.assert_allclose(outs[1], trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(outs[2], trv.numpy(), rtol=1e-5, atol=1e-6)


def test_batch_norm_op_without_running_stats_and_float16():
    x = np.random.default_rng(15).standard_normal((8, 2, 3)).astype(np.float16)
    ones, zeros = np.ones(2, np.float16), np.zeros(2, np.float16)
    (y,) = run(O.BatchNormForward(True), x, ones, zeros)
    assert y.dtype == np.float16
    xd = x.astype(np.float64)
    mean, var = xd.mean(axis=(0, 2), keepdims=True), xd.var(axis=(0, 2), keepdims=True)
    np.testing.assert_allclose(y, (xd - mean) / np.sqrt(var + 1e-5), rtol=5e-3, atol=5e-3)
    with pytest.raises(ValueError, match="3 inputs.*or 5"):
        imp.apply(O.BatchNormForward(True), T(x), T(ones))


@pytest.mark.parametrize("shape, normalized", [((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((5,), (5,)),
                                               ((0, 4), (4,))], ids=str)
def test_layer_norm_matches_torch(shape, normalized):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(16)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 2
    w, b = (rng.standard_normal(normalized).astype(np.float32) for _ in range(2))
    (y,) = run(O.LayerNormForward(normalized, 1e-4), x, w, b)
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), normalized, torch.from_numpy(w),
                                              torch.from_numpy(b), 1e-4).numpy()
    assert y.shape == x.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_layer_norm_blocks_rows_of_a_large_input():
    x = np.random.default_rng(17).standard_normal((600, 300)).astype(np.float32)
    (y,) = run(O.LayerNormForward(300), x)
    xd = x.astype(np.float64)
    expected = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- embedding, gelu


def test_embedding_op_and_index_errors(async_level):
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([[3, 0, 1]], np.uint8)
    (got,) = run(O.Embedding(), idx, w)
    np.testing.assert_array_equal(got, w[idx])
    with pytest.raises(ValueError, match=r"weight must be 2-D.*got shape \(12,\)"):
        imp.apply(O.Embedding(), T(idx), T(w.reshape(-1)))
    for bad in (4, -1):
        with raises_when_run(IndexError, f"index {bad} is out of range for 4 embeddings",
                             async_level):
            F.embedding(T(np.array([0, bad], np.int32)), T(w)).numpy()


def test_activations_match_torch():
    torch = pytest.importorskip("torch")
    x = np.linspace(-12, 12, 401, dtype=np.float32)
    tx = torch.from_numpy(x)
    tf = torch.nn.functional
    pairs = [(F.gelu(T(x)), tf.gelu(tx)), (F.gelu(T(x), "tanh"), tf.gelu(tx, approximate="tanh")),
             (F.sigmoid(T(x)), torch.sigmoid(tx)), (F.silu(T(x)), tf.silu(tx)),
             (F.softplus(T(x)), tf.softplus(tx)), (F.hardswish(T(x)), tf.hardswish(tx)),
             (F.hardsigmoid(T(x)), tf.hardsigmoid(tx)), (F.erf(T(x)), torch.erf(tx)),
             (F.leaky_relu(T(x), 0.1), tf.leaky_relu(tx, 0.1))]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=2e-6, atol=2e-6)


def _near_constant_rows(n):
    """Rows whose spread is far below their mean: a constant row, one with 1e-4 noise."""
    rows = np.full((2, n), 1.2345678, np.float32)
    rows[1] += np.random.default_rng(0).standard_normal(n).astype(np.float32) * 1e-4
    return rows


def _np_normalized(x, axes):
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + 1e-5)


@pytest.mark.parametrize("n", [64, 4800])
def test_norms_of_near_constant_rows_keep_float32_accuracy(n):
    """The mean's rounding is magnified by 1/std in the output: it must be the float32
    rounding of the data, not of a long float32 sum (that was 30x larger at 4800 values)."""
    rows = _near_constant_rows(n)
    got = F.layer_norm(T(rows), (n,)).numpy()
    np.testing.assert_allclose(got, _np_normalized(rows, -1), rtol=0, atol=3e-5)
    channels = np.stack([rows, rows])[..., None]            # (2, 2, n, 1): rows as channels
    got = F.batch_norm(T(channels), None, None, training=True).numpy()
    np.testing.assert_allclose(got, _np_normalized(channels, (0, 2, 3)), rtol=0, atol=3e-5)
