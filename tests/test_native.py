"""The native float32 kernels (imperative._kernels): the sgemm and the direct convolution
and its weight gradient, against float64 numpy on the same inputs, and the ops that use
them against their numpy paths, on the instruction set this CPU runs (AVX-512 or AVX2; see
also test_native_isa_choice). Skipped where the CPU has neither (or the build has no x86-64
code)."""
import os
import platform
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
import imperative.functional as F
from imperative.backend import native
from imperative.ops.matmul import MatrixMul
from imperative.ops.nn import Convolution, ConvolutionBackwardData, ConvolutionBackwardFilter

# the sgemm, the convolutions and ReLU's gradient need AVX2 or AVX-512 (with FMA); the other
# native loops and the block cache are plain C and run on any CPU
needs_native = pytest.mark.skipif(not native._SUPPORTED, reason="CPU without AVX2/AVX-512F and FMA")

_kernels = native._kernels


def _operand(rng, rows, cols, layout):
    """A (rows, cols) float32 operand stored as `layout`: C order, a transpose, or a strided
    slice of a wider array."""
    if layout == "t":
        return rng.standard_normal((cols, rows)).astype(np.float32).T
    if layout == "slice":
        return rng.standard_normal((rows, 2 * cols + 3)).astype(np.float32)[:, 1:2 * cols + 1:2]
    return rng.standard_normal((rows, cols)).astype(np.float32)


def _rel_err(got, want):
    return np.abs(got - want).max() / max(1.0, np.abs(want).max())


# edge sizes around the micro-tile (AVX-512 14 x 32, AVX2 6 x 16), the shorter tiles of a
# last partial panel (rows mod 14 of 1-2, 3-4, 5-8, 9-13; rows mod 6 of 1-2, 3-4, 5) and the
# packed block sizes (KC 384, NC 192)
SHAPES = [(1, 1, 1), (6, 16, 8), (11, 23, 15), (13, 31, 7), (14, 32, 16), (15, 33, 17),
          (19, 40, 50), (45, 20, 33),
          (100, 37, 77), (64, 385, 641), (29, 700, 1300), (256, 1024, 96)]


@needs_native
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("layout_a,layout_b", [("c", "c"), ("t", "c"), ("c", "t"), ("slice", "t")])
def test_sgemm_matches_float64(m, k, n, layout_a, layout_b):
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a, b = _operand(rng, m, k, layout_a), _operand(rng, k, n, layout_b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    out = np.full((m, n), np.nan, np.float32)
    assert _kernels.sgemm(a, b, out) is out
    assert _rel_err(out, want) < 1e-5
    # accumulate: out += a @ b, into a row-strided view of a larger buffer
    big = np.ones((m, n + 5), np.float32)
    _kernels.sgemm(a, b, big[:, 2:n + 2], accumulate=True)
    assert _rel_err(big[:, 2:n + 2], want + 1) < 1e-5
    assert (big[:, :2] == 1).all() and (big[:, n + 2:] == 1).all()   # nothing written outside


def _aligned_empty(shape, offset_floats):
    """A float32 array whose data starts `offset_floats` past a 64-byte boundary."""
    size = int(np.prod(shape))
    raw = np.empty(size + 32, np.float32)
    start = (-raw.ctypes.data % 64) // 4 + offset_floats
    return raw[start:start + size].reshape(shape)


@needs_native
@pytest.mark.parametrize("n,row,offset", [(1024, 1024, 0), (1030, 1040, 0), (1024, 1024, 1)])
def test_sgemm_large_one_pass_product(n, row, offset):
    """A weight-gradient-sized product (>= 2^20 outputs, depth <= one block): into a 64-byte
    aligned output with rows a multiple of 16 floats apart, its full vectors are written with
    streaming stores and a last partial one masked; unaligned, all stores are ordinary."""
    rng = np.random.default_rng(n + offset)
    a, b = _operand(rng, 1030, 64, "t"), _operand(rng, 64, n, "c")
    out = _aligned_empty((1030, row), offset)[:, :n]
    out[...] = np.nan
    _kernels.sgemm(a, b, out, streaming=True)
    assert _rel_err(out, a.astype(np.float64) @ b.astype(np.float64)) < 1e-5


@needs_native
@pytest.mark.parametrize("m,k,n", [(19, 40, 50), (256, 1024, 96), (1030, 64, 1024), (5, 0, 7)])
def test_sgemm_epilogues_match_numpy_on_the_plain_product(m, k, n):
    """relu and relu_grad applied on the way out equal numpy's maximum and the native relu
    gradient applied afterwards, bit for bit (one pass, several passes, streamed, no depth),
    NaN rows included."""
    rng = np.random.default_rng(m + k + n)
    a, b = _operand(rng, m, k, "c"), _operand(rng, k, n, "t")
    if k:
        a[1, 0] = np.nan                                       # a NaN row of the product
    plain = np.empty((m, n), np.float32)
    _kernels.sgemm(a, b, plain)
    got = _aligned_empty((m, n), 0)
    _kernels.sgemm(a, b, got, epilogue="relu", streaming=True)
    assert np.array_equal(got, np.maximum(plain, np.float32(0)), equal_nan=True)
    assert not np.signbit(got[~np.isnan(got)]).any()
    y = rng.standard_normal((m, n)).astype(np.float32)
    y[0, :3] = [0.0, -0.0, np.nan]
    _kernels.sgemm(a, b, got, epilogue="relu_grad", y=y)
    with np.errstate(invalid="ignore"):
        want = np.multiply(plain, y > 0)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    with pytest.raises(ValueError, match="y"):
        _kernels.sgemm(a, b, got, epilogue="relu_grad")
    with pytest.raises(ValueError, match="overlap"):
        _kernels.sgemm(a, b, got, epilogue="relu_grad", y=got)
    with pytest.raises(ValueError, match="epilogue"):
        _kernels.sgemm(a, b, got, epilogue="gelu")


@needs_native
def test_sgemm_empty_depth_zeroes_or_keeps():
    a, b = np.ones((3, 0), np.float32), np.ones((0, 4), np.float32)
    out = np.full((3, 4), 7.0, np.float32)
    _kernels.sgemm(a, b, out, accumulate=True)
    assert (out == 7).all()
    _kernels.sgemm(a, b, out)
    assert (out == 0).all()


@needs_native
def test_sgemm_rejects_bad_operands():
    a = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match="float32"):
        _kernels.sgemm(a.astype(np.float64), a.T, np.empty((3, 3), np.float32))
    with pytest.raises(ValueError, match="do not match"):
        _kernels.sgemm(a, a, np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match="contiguous rows"):
        _kernels.sgemm(a, a.T, np.empty((3, 6), np.float32)[:, ::2])


def _conv_ref(x, w, padding, dilation):
    """float64 direct convolution by explicit sums over kernel taps."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (ph, pw), (dh, dw) = padding, dilation
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho, wo = h + 2 * ph - dh * (kh - 1), wd + 2 * pw - dw * (kw - 1)
    y = np.zeros((n, o, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh:i * dh + ho, j * dw:j * dw + wo]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    return y


CONVS = [  # (n, c, h, w, o, kh, kw, padding, dilation)
    (2, 3, 8, 8, 5, 3, 3, (1, 1), (1, 1)),
    (3, 7, 9, 13, 17, 3, 3, (1, 1), (1, 1)),
    (1, 4, 6, 5, 3, 1, 1, (0, 0), (1, 1)),
    (2, 5, 11, 7, 9, 5, 3, (2, 0), (1, 1)),
    (2, 6, 12, 10, 8, 3, 3, (0, 2), (2, 1)),
    (4, 16, 16, 16, 33, 3, 3, (1, 1), (1, 1)),
]


@needs_native
@pytest.mark.parametrize("n,c,h,w,o,kh,kw,padding,dilation", CONVS)
def test_conv2d_and_weight_gradient_match_float64(n, c, h, w, o, kh, kw, padding, dilation):
    rng = np.random.default_rng(n + c + h + o)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c, kh, kw)).astype(np.float32)
    y = _kernels.conv2d_s1(x, wt, padding, dilation)
    want = _conv_ref(x, wt, padding, dilation)
    assert y.shape == want.shape and _rel_err(y, want) < 1e-5
    dy = rng.standard_normal(y.shape).astype(np.float32)
    gw = _kernels.conv2d_s1_grad_weight(x, dy, (kh, kw), padding, dilation)
    # d/dw of sum(y * dy) = sum over taps of dy x patch, in float64
    (ph, pw), (dh, dw) = padding, dilation
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho, wo = y.shape[2:]
    want_gw = np.stack([np.stack([
        np.einsum("nohw,nchw->oc", dy.astype(np.float64),
                  xp[:, :, i * dh:i * dh + ho, j * dw:j * dw + wo])
        for j in range(kw)], -1) for i in range(kh)], -2)
    assert gw.shape == wt.shape and _rel_err(gw, want_gw) < 1e-5


@needs_native
@pytest.mark.parametrize("n,c,h,w,o,kh,kw,padding,dilation", CONVS[:3] + CONVS[-1:])
def test_conv2d_bias_and_epilogues_match_numpy_on_the_plain_output(n, c, h, w, o, kh, kw,
                                                                    padding, dilation):
    """Bias, then ReLU or ReLU's gradient, in the output's last copy: numpy's bias add and
    maximum (or relu_grad) on the plain output, bit for bit."""
    rng = np.random.default_rng(n * c + h)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((o, c, kh, kw)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    plain = _kernels.conv2d_s1(x, wt, padding, dilation)
    biased = plain + bias.reshape(1, o, 1, 1)
    assert np.array_equal(_kernels.conv2d_s1(x, wt, padding, dilation, bias), biased)
    got = _kernels.conv2d_s1(x, wt, padding, dilation, bias, "relu")
    assert np.array_equal(got, np.maximum(biased, np.float32(0)))
    y = np.maximum(rng.standard_normal(plain.shape), 0).astype(np.float32)
    got = _kernels.conv2d_s1(x, wt, padding, dilation, None, "relu_grad", y)
    assert np.array_equal(got, np.multiply(plain, y > 0))
    with pytest.raises(ValueError, match="relu_grad"):
        _kernels.conv2d_s1(x, wt, padding, dilation, None, "relu_grad", y[:, :1])
    with pytest.raises(ValueError, match="bias"):
        _kernels.conv2d_s1(x, wt, padding, dilation, bias[:-1])


@needs_native
def test_conv2d_rejects_mismatched_shapes():
    x = np.ones((1, 3, 5, 5), np.float32)
    with pytest.raises(ValueError, match="do not match"):
        _kernels.conv2d_s1(x, np.ones((2, 4, 3, 3), np.float32), (0, 0), (1, 1))
    with pytest.raises(ValueError, match="larger than"):
        _kernels.conv2d_s1(x, np.ones((2, 3, 7, 7), np.float32), (0, 0), (1, 1))
    with pytest.raises(ValueError, match="do not match"):
        _kernels.conv2d_s1_grad_weight(x, np.ones((1, 2, 4, 4), np.float32), (3, 3), (0, 0), (1, 1))


def _run_both(monkeypatch, fn):
    """fn() with the native kernels forced on, then forced off."""
    monkeypatch.setattr(native, "_MODE", "always")
    on = fn()
    monkeypatch.setattr(native, "_MODE", "never")
    return on, fn()


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 1, 1, 1), (1, 0, 2, 1), (2, 1, 1, 1), (1, 1, 1, 2)])
@needs_native
def test_conv_ops_native_and_numpy_paths_agree(monkeypatch, stride, padding, dilation, groups):
    rng = np.random.default_rng(stride + 3 * padding + 5 * dilation + 7 * groups)
    x = rng.standard_normal((8, 8, 20, 18)).astype(np.float32)
    w = rng.standard_normal((16, 8 // groups, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    fwd = Convolution(stride, padding, dilation, groups)
    y_on, y_off = _run_both(monkeypatch, lambda: fwd.kernel(x, w, b))
    assert _rel_err(y_on, y_off) < 1e-5
    dy = rng.standard_normal(y_off.shape).astype(np.float32)
    data = ConvolutionBackwardData(stride, padding, dilation, groups, in_hw=x.shape[2:])
    filt = ConvolutionBackwardFilter(stride, padding, dilation, groups, kernel_hw=(3, 3))
    gx_on, gx_off = _run_both(monkeypatch, lambda: data.kernel(dy, w))
    gw_on, gw_off = _run_both(monkeypatch, lambda: filt.kernel(x, dy))
    assert _rel_err(gx_on, gx_off) < 1e-5 and _rel_err(gw_on, gw_off) < 1e-5
    assert y_on.dtype == gx_on.dtype == gw_on.dtype == np.float32
    # with the bias gradient as a second output: the same weight gradient, and dy's sums
    filt_b = ConvolutionBackwardFilter(stride, padding, dilation, groups, (3, 3), with_bias=True)
    (gw2_on, gb_on), (gw2_off, gb_off) = _run_both(monkeypatch, lambda: filt_b.kernel(x, dy))
    assert np.array_equal(gw2_on, gw_on) and np.array_equal(gw2_off, gw_off)
    want_b = dy.astype(np.float64).sum(axis=(0, 2, 3))
    assert _rel_err(gb_on, want_b) < 1e-5 and _rel_err(gb_off, want_b) < 1e-5
    assert gb_on.shape == gb_off.shape == (16,) and gb_on.dtype == np.float32


@needs_native
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_matrix_mul_native_and_numpy_paths_agree(monkeypatch, ta, tb):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 130) if ta else (130, 300)).astype(np.float32)
    b = rng.standard_normal((70, 300) if tb else (300, 70)).astype(np.float32)
    op = MatrixMul(ta, tb)
    on, off = _run_both(monkeypatch, lambda: op.kernel(a, b))
    assert on.shape == off.shape == (130, 70) and _rel_err(on, off) < 1e-5


@needs_native
def test_auto_mode_follows_the_blas_thread_count(monkeypatch):
    monkeypatch.setattr(native, "_MODE", "auto")
    monkeypatch.setattr(native, "_blas_threads", lambda: 1)
    assert native.active()
    monkeypatch.setattr(native, "_blas_threads", lambda: 2)
    assert not native.active()
    a = np.ones((128, 128), np.float32)
    assert native.matmul(a, a) is None          # numpy's threaded BLAS runs it
    monkeypatch.setattr(native, "_MODE", "never")
    monkeypatch.setattr(native, "_blas_threads", lambda: 1)
    assert not native.active()


@needs_native
def test_relu_grad_matches_numpy_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(3)
    dy = rng.standard_normal(1000 + 7).astype(np.float32)
    y = np.maximum(rng.standard_normal(dy.size).astype(np.float32), 0)
    dy[:5] = [np.nan, np.inf, -np.inf, -1.0, 2.0]
    y[:5] = [0.0, 0.0, 0.0, 0.0, np.nan]
    with np.errstate(invalid="ignore"):
        want = np.multiply(dy, y > 0)
    got = native.relu_grad(dy, y, None)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))      # -0.0 where numpy has it
    native.relu_grad(dy, y, dy)                                     # in place
    assert np.array_equal(dy, want, equal_nan=True)
    monkeypatch.setattr(native, "_MODE", "never")
    assert native.relu_grad(dy, y, None) is None
    with pytest.raises(TypeError, match="float32"):
        _kernels.relu_grad(dy.astype(np.float64), y, dy)


@needs_native
@pytest.mark.parametrize("n", [1, 7, 8, 9, 31, 1000 + 7, 70_000])
def test_relu_matches_numpys_maximum_bit_for_bit(n):
    # numpy's maximum against a scalar zero runs a scalar loop: relu is a native pass that
    # must give its bits, NaNs (sign and payload) kept and -0 made +0
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    x[-min(n, 6):] = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf],
                              np.float32)[:min(n, 6)]
    want = np.maximum(x, np.zeros((), np.float32))
    assert np.array_equal(_kernels.relu(x).view(np.int32), want.view(np.int32))
    got = F.relu(imp.Tensor(x.reshape(1, n))).numpy().ravel()
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    _kernels.relu(x, x)                                               # in place
    assert np.array_equal(x.view(np.int32), want.view(np.int32))
    with pytest.raises(TypeError, match="float32"):
        _kernels.relu(x.astype(np.float64))


def test_relu_off_the_native_loop_is_numpys_maximum():
    # float16, int32 and a transposed view take numpy's maximum
    x = np.random.default_rng(5).standard_normal((64, 48)) * 10
    for value in (x.astype(np.float16), x.astype(np.int32)):
        want = np.maximum(value, np.zeros((), value.dtype))
        got = F.relu(imp.Tensor(value)).numpy()
        assert got.dtype == want.dtype and np.array_equal(got, want)
    value = x.astype(np.float32)
    got = F.relu(imp.Tensor(value).T).numpy()
    assert np.array_equal(got.view(np.int32), np.maximum(value.T, np.float32(0)).view(np.int32))


def test_axpy_matches_numpy_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((33, 65)).astype(np.float32)
    y = rng.standard_normal((33, 65)).astype(np.float32)
    want = np.add(x, np.multiply(y, np.float32(-0.03)))
    assert np.array_equal(native.axpy(x, -0.03, y, None), want)
    native.axpy(x, -0.03, y, x)                                      # in place, as SGD runs
    assert np.array_equal(x, want)
    assert native.axpy(x.astype(np.float64), 0.5, y, None) is None   # numpy handles float64
    monkeypatch.setattr(native, "_MODE", "never")
    assert native.axpy(x, 0.5, y, None) is None


def _one_step_grads(seed):
    """Loss and parameter gradients of one forward/backward pass of a conv net and an MLP
    head whose shapes all take the native paths (stride-1 convs, big enough products)."""
    import imperative as imp
    from imperative import F, nn
    from imperative.autodiff import GradManager
    imp.random.seed(seed)
    model = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 16, 3, padding=2, dilation=2), nn.ReLU())
    head = nn.Sequential(nn.Linear(16 * 16 * 16, 128), nn.ReLU(), nn.Linear(128, 10))
    rng = np.random.default_rng(seed)
    x = imp.Tensor(rng.standard_normal((8, 8, 16, 16)).astype(np.float32))
    y = imp.Tensor(rng.integers(0, 10, 8).astype(np.int32))
    params = model.parameters() + head.parameters()
    gm = GradManager().attach(params)
    with gm:
        loss = F.cross_entropy(head(model(x).reshape(8, -1)), y)
        gm.backward(loss)
    return float(loss), [p.grad.numpy().copy() for p in params]


@needs_native
def test_training_gradients_agree_between_native_and_numpy_paths(monkeypatch):
    (loss_on, grads_on), (loss_off, grads_off) = _run_both(monkeypatch, lambda: _one_step_grads(5))
    assert abs(loss_on - loss_off) < 1e-5 * max(1.0, abs(loss_off))
    for g_on, g_off in zip(grads_on, grads_off):
        assert g_on.shape == g_off.shape and _rel_err(g_on, g_off) < 1e-4


@pytest.mark.parametrize("shape", [(16, 8, 9, 7), (5, 3), (2, 4, 33), (2, 1, 1, 1)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_native_and_numpy_paths_agree(monkeypatch, shape, training):
    from imperative.ops.nn import BatchNormForward
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    c = shape[1]
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    rm, rv = rng.standard_normal(c).astype(np.float32), rng.random(c).astype(np.float32) + 0.5
    op = BatchNormForward(training, 0.1, 1e-5)
    on, off = _run_both(monkeypatch, lambda: op.kernel(x, w, b, rm, rv))
    for a, e in zip(on, off):
        assert a.dtype == e.dtype and _rel_err(a, e) < 1e-5
    mean, var = _kernels.channel_moments(x)
    axes = (0,) + tuple(range(2, x.ndim))
    assert np.allclose(mean, x.astype(np.float64).mean(axis=axes), rtol=1e-6, atol=1e-6)
    assert np.allclose(var, x.astype(np.float64).var(axis=axes), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,normalized", [((64, 300), (300,)), ((4, 6, 5, 7), (5, 7)),
                                               ((3, 17), (17,))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_native_and_numpy_paths_agree(monkeypatch, shape, normalized, affine):
    from imperative.ops.nn import LayerNormForward
    rng = np.random.default_rng(len(shape) + len(normalized))
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    args = (x,)
    if affine:
        args += (rng.standard_normal(normalized).astype(np.float32),
                 rng.standard_normal(normalized).astype(np.float32))
    op = LayerNormForward(normalized, eps=1e-5)
    on, off = _run_both(monkeypatch, lambda: op.kernel(*args))
    assert on.shape == off.shape == shape and on.dtype == off.dtype == np.float32
    assert _rel_err(on, off) < 1e-5


@needs_native
@pytest.mark.parametrize("rows,size", [(1, 1), (3, 17), (4, 768), (7, 100), (5, 16)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_from_its_statistics_gives_the_same_bits(rows, size, affine):
    """A recomputation (DTR) reads the rows' statistics the first run wrote and makes the
    output pass only: the same bits as the first run, whose rows go two at a time (an odd
    last one with itself) and whose sums run beside the previous pair's outputs."""
    rng = np.random.default_rng(rows * size)
    x = (rng.standard_normal((rows, size)) * 4 - 3).astype(np.float32)
    w, b = rng.standard_normal((2, size)).astype(np.float32) if affine else (None, None)
    stats = np.empty(2 * rows, np.float32)
    first = native.layer_norm(x, w, b, size, 1e-5, stats=stats)
    again = native.layer_norm(x, w, b, size, 1e-5, stats=stats.copy(), stats_given=True)
    assert np.array_equal(first.view(np.uint32), again.view(np.uint32))
    assert np.array_equal(first.view(np.uint32),
                          native.layer_norm(x, w, b, size, 1e-5).view(np.uint32))
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    if affine:
        want = want * w + b
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)


@needs_native
@pytest.mark.parametrize("rows,size", [(4097, 768), (2049, 1540), (1025, 2055)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_streamed_past_the_caches_gives_the_same_bits(rows, size, affine):
    """An output of 8 MiB or more is written with non-temporal stores (where its rows are
    16-byte aligned: size % 4 == 0), a smaller one with plain stores: the same bits either
    way, an odd last row and a row's tail past its 16-float blocks included."""
    rng = np.random.default_rng(rows + size)
    x = (rng.standard_normal((rows, size)) * 2 + 1).astype(np.float32)
    w, b = rng.standard_normal((2, size)).astype(np.float32) if affine else (None, None)
    whole = native.layer_norm(x, w, b, size, 1e-5)
    assert whole.nbytes >= 8 << 20
    in_pieces = np.concatenate([native.layer_norm(x[r:r + 255], w, b, size, 1e-5)
                                for r in range(0, rows, 255)])
    assert np.array_equal(whole.view(np.uint32), in_pieces.view(np.uint32))


# ---- the worker's block cache (_pool.c)

def test_worker_arrays_come_from_the_block_cache():
    import imperative as imp
    before = _kernels.pool_stats()
    x = imp.Tensor(np.ones((256, 512), np.float32))       # 512 KiB results: cached sizes
    with imp.option("async_level", 2):                    # level 0 computes on this thread
        for _ in range(6):
            y = (x * 2.0 + 1.0).numpy()
            assert (y == 3.0).all()
        imp.sync()
    after = _kernels.pool_stats()
    assert after["hits"] > before["hits"]                 # freed blocks were reused
    assert after["cached"] > 0                            # ... and stay mapped for reuse
    # what sizes that room: the most handed out at once and the largest block recently,
    # with a quarter more and the scattered bytes (_pool.c: cache_room, no budget)
    assert after["highest"] >= 512 << 10 and after["largest"] >= 512 << 10
    wanted = (after["highest"] + after["highest"] // 4 + after["largest"] + after["scattered"]
              - after["in_use"])
    assert after["reserve"] == 0 and after["room"] == max(wanted, 0, after["limit"])


def test_block_cache_keeps_to_the_dtr_budget():
    import imperative as imp
    assert _kernels.pool_stats()["reserve"] == 0              # no budget: a 64 MiB cache
    old_threshold = imp.get_option("dtr_eviction_threshold")
    imp.dtr.enable(eviction_threshold=8 << 20)
    try:
        a = imp.Tensor(np.ones((64, 64), np.float32))
        (a + 1).numpy()                                       # an op under the memory manager
        imp.sync()
        assert _kernels.pool_stats()["reserve"] == 8 << 20
        with imp.option("async_level", 2):
            x = imp.Tensor(np.ones((512, 512), np.float32))   # 1 MiB values
            for _ in range(6):
                ys = [x * float(i) for i in range(5)]
                assert float(ys[4].sum()) == 4.0 * 512 * 512
                del ys
            imp.sync()
            stats = _kernels.pool_stats()
            assert stats["in_use"] + stats["cached"] <= 8 << 20
    finally:
        imp.dtr.disable()
        imp.set_option("dtr_eviction_threshold", old_threshold)
    assert _kernels.pool_stats()["reserve"] == 0


_IN_A_FRESH_PROCESS = """
import resource, sys
import numpy as np
from imperative import _kernels
_kernels.install_pool()                     # this (main) thread's context: a fresh pool

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def stats():
    return _kernels.pool_stats()
"""


def _in_a_fresh_process(body):
    """Run `body` after _IN_A_FRESH_PROCESS in a new interpreter (a pool no other test has
    shaped); its printed last line, evaluated."""
    done = subprocess.run([sys.executable, "-c", _IN_A_FRESH_PROCESS + textwrap.dedent(body)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])


def test_freed_blocks_join_and_serve_another_size_from_the_same_memory():
    # A step's sizes change with what DTR evicts: 1 + 0.5 + 1.5 MiB freed must serve 3 MiB,
    # and 3 MiB freed must serve 2 + 1 MiB, without new pages (an exact-size cache let
    # malloc's arena grow beside it to the unconstrained run's size).
    result = _in_a_fresh_process("""
        blocks = [np.ones(kib << 10, np.uint8) for kib in (1024, 512, 1536)]
        del blocks
        before = faults()
        whole = np.ones(3 << 20, np.uint8)
        joined = faults() - before
        del whole
        before = faults()
        parts = [np.ones(kib << 10, np.uint8) for kib in (2048, 1024)]
        split = faults() - before
        print({"joined": joined, "split": split, "misses": stats()["misses"]})
    """)
    assert result["joined"] < 64 and result["split"] < 64       # pages; 768 if fresh
    assert result["misses"] == 1                                # one segment mapped


def test_pool_under_a_budget_hands_pages_back_past_it():
    # Freed memory stays mapped as far as the most handed out at once needs (the next step
    # asks for it again); under a budget, what is handed out plus the free memory kept
    # mapped stays within the budget (or that most) with room for fragmentation, and the
    # rest of the freed memory goes back to the system.
    result = _in_a_fresh_process("""
        _kernels.pool_set_reserve(4 << 20)
        big = [np.ones(1 << 20, np.uint8) for _ in range(12)]     # 12 MiB: past the budget
        del big[4:]                                               # 4 MiB still held
        kept = stats()
        _kernels.pool_set_reserve(4 << 20)        # anew: the 12 MiB at once forgotten
        budgeted = stats()
        del big
        print({"kept": kept["cached"], "in_use": budgeted["in_use"],
               "cached": budgeted["cached"], "after": stats()["cached"]})
    """)
    assert result["kept"] >= 8 << 20
    bound = max(4 << 20, result["in_use"]) * 5 // 4        # (a block takes a page more)
    assert result["in_use"] + result["cached"] <= bound
    assert 0 < result["after"] <= bound + (2 << 20)          # + the largest block


def test_pool_under_a_budget_stops_faulting_once_a_steps_pieces_are_known():
    # The free memory a step leaves can lie in pieces too small for its next blocks, which
    # fault pages in; the memory kept mapped makes room for as much, so that the next steps
    # find those pages (a DenseNet at 0.3 P, its concatenations a new size each layer,
    # faulted 3,200 pages in every step without it).
    result = _in_a_fresh_process("""
        kib = 1 << 10
        _kernels.pool_set_reserve(4 << 20)

        def step():
            small = [np.ones(256 * kib, np.uint8) for _ in range(16)]      # 4 MiB
            del small[::2]                          # 2 MiB free, in pieces of 256 KiB
            large = [np.ones(512 * kib, np.uint8) for _ in range(4)]       # none fits one
            del small, large

        for _ in range(3):
            step()
        before = faults()
        for _ in range(3):
            step()
        print({"faults per step": (faults() - before) / 3})
    """)
    assert result["faults per step"] < 16        # pages; 256 without the room


def test_a_passing_peak_stops_holding_memory_two_windows_later():
    # One large batch (an evaluation, say) must not keep the process at its size for good:
    # the pool keeps what the most handed out at once needs over the last two windows of
    # 16,384 blocks, and no less than its 64 MiB limit.
    result = _in_a_fresh_process("""
        MiB = 1 << 20
        peak = [np.ones(32 * MiB, np.uint8) for _ in range(8)]     # 256 MiB at once
        del peak
        after_peak = stats()["cached"]
        for _ in range(2 * 16384 + 1):
            np.empty(256 << 10, np.uint8)                          # small steps' blocks
        print({"after_peak": after_peak, "later": stats()["cached"]})
    """)
    assert result["after_peak"] >= 256 << 20                # kept for the next such step
    assert result["later"] <= 65 << 20                      # then let go


_POOL_PROGRAMS = st.lists(
    st.tuples(st.sampled_from(["make", "free", "budget"]), st.integers(0, 12 << 20)),
    min_size=1, max_size=60)


@settings(max_examples=40, deadline=None)
@given(program=_POOL_PROGRAMS)
def test_pool_random_programs_keep_every_value_and_the_room(program):
    # Random arrays of 0-12 MiB made and freed in any order, budgets set between them:
    # every array keeps what was written into it (chunks split, join and hand pages back
    # around it), and the free memory kept mapped stays within the room the pool gives it
    # (each free chunk's header page stays).
    failures = []

    def body():
        _kernels.install_pool()                               # this thread's context only
        held = []
        try:
            for step, (what, n) in enumerate(program):
                if what == "make":
                    held.append((step % 251, np.full(n, step % 251, np.uint8)))
                elif what == "free" and held:
                    value, a = held.pop(n % len(held))
                    if not (a == value).all():
                        failures.append(("changed", step))
                else:
                    _kernels.pool_set_reserve(n)
                stats = _kernels.pool_stats()
                if stats["cached"] > stats["room"] + 64 * 4096:
                    failures.append(("room", step, stats))
            failures.extend(("changed", "end") for value, a in held if not (a == value).all())
        finally:
            _kernels.pool_set_reserve(0)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert failures == []


def _malloc_tuned_by_the_user():
    return any(k in os.environ for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
                                          "MALLOC_TOP_PAD_")) or "malloc." in os.environ.get(
        "GLIBC_TUNABLES", "")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not hasattr(resource, "RUSAGE_THREAD")
                    or _malloc_tuned_by_the_user(),
                    reason="glibc's malloc settings, counted per thread on Linux")
@pytest.mark.parametrize("budget_mib", [None, 16])
def test_freed_blocks_are_reused_without_page_faults(budget_mib):
    # Freed memory within the pool's limit (or the budget) stays mapped for the next
    # allocation: glibc's own thresholds trimmed the heap's top past twice the largest
    # block mmap'd so far, and every step faulted it in again.
    import threading
    results = {}

    def cycle():
        held = [np.ones(3 << 20, np.uint8) for _ in range(3)]   # written: faults if fresh
        del held

    def body():
        _kernels.install_pool()                                  # this thread's context
        if budget_mib:
            _kernels.pool_set_reserve(budget_mib << 20)
        for _ in range(2):
            cycle()
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        for _ in range(5):
            cycle()
        results["faults per cycle"] = (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
                                       - before) / 5

    t = threading.Thread(target=body)
    t.start()
    t.join()
    _kernels.pool_set_reserve(0)
    assert results["faults per cycle"] < 64        # pages; 2,300 with glibc's own thresholds


def test_block_cache_allocator_malloc_calloc_realloc_free_in_a_thread():
    import threading
    results = {}

    def body():
        _kernels.install_pool()                           # this thread's context only
        a = np.arange(100_000, dtype=np.float64)          # 800 KB: a cached size
        z = np.zeros(70_000, dtype=np.float64)            # calloc
        a.resize(150_000, refcheck=False)                 # realloc keeps the first values
        results["ok"] = (a[:100_000] == np.arange(100_000)).all() and not z.any()
        results["small"] = np.ones(10).sum()              # small blocks go to malloc
        del a, z

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert results == {"ok": True, "small": 10.0}
    _kernels.pool_trim()                  # hands every free page back but the chunks' headers
    assert _kernels.pool_stats()["cached"] < 64 * 4096


# ---- the instruction set (AVX-512 or AVX2), chosen once per process

def _cpu_flags():
    """The x86 feature flags of this CPU from /proc/cpuinfo, or None where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def test_native_isa_is_the_widest_this_cpu_runs():
    """An AVX2-only CPU (AMD before Zen 4, Intel desktop parts) runs the AVX2 kernels rather
    than leaving the products to numpy."""
    flags = _cpu_flags()
    if flags is None or not _kernels.NATIVE_BUILD:
        pytest.skip("needs /proc/cpuinfo and an x86-64 build")
    want = ("avx512" if {"avx512f", "fma"} <= flags else
            "avx2" if {"avx2", "fma"} <= flags else None)
    assert _kernels.isa() == want
    assert _kernels.supported() == (want is not None)


_ISA_SCRIPT = """
import sys, warnings
import numpy as np
warnings.simplefilter("error")
try:
    from imperative import _kernels
except RuntimeWarning as w:
    print("WARN", w); sys.exit(0)
rng = np.random.default_rng(0)
a = rng.standard_normal((70, 900)).astype(np.float32)
b = rng.standard_normal((900, 50)).astype(np.float32)
x = rng.standard_normal((2, 5, 12, 13)).astype(np.float32)
w = rng.standard_normal((9, 5, 3, 3)).astype(np.float32)
y = _kernels.conv2d_s1(x, w, (1, 1), (1, 1))
gw = _kernels.conv2d_s1_grad_weight(x, y, (3, 3), (1, 1), (1, 1))
rows = (rng.standard_normal((9, 1037)) * 10).astype(np.float32)   # 16-lane blocks and tails
rows.flat[::13] = -1e30
labels = rng.integers(0, 1037, 9)
norm = (rng.standard_normal((9, 1037)) * 3 + 1).astype(np.float32)   # an odd row count too
gain, shift = rng.standard_normal((2, 1037)).astype(np.float32)
np.savez(sys.argv[1], isa=str(_kernels.isa()),
         layer_norm=_kernels.layer_norm_rows(norm, gain, shift, 1e-5, None, False),
         ab=_kernels.sgemm(a, b, np.empty((70, 50), np.float32)), y=y, gw=gw,
         softmax=_kernels.softmax_rows(rows), log_softmax=_kernels.log_softmax_rows(rows),
         cross_entropy=_kernels.cross_entropy_rows(rows, labels)[0])
"""


def _run_with_isa(tmp_path, value, name):
    out = tmp_path / f"{name}.npz"
    env = dict(os.environ, IMPERATIVE_NATIVE_ISA=value)
    done = subprocess.run([sys.executable, "-c", _ISA_SCRIPT, str(out)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, (dict(np.load(out)) if out.exists() else None)


@needs_native
def test_native_isa_environment_variable(tmp_path):
    """IMPERATIVE_NATIVE_ISA=avx2 runs the AVX2 kernels (on an AVX-512 CPU too); a garbage
    value, or a set this CPU lacks, warns at import and keeps the default."""
    _, forced = _run_with_isa(tmp_path, "avx2", "forced")
    assert str(forced["isa"]) == "avx2"
    text, _ = _run_with_isa(tmp_path, "avx3", "garbage")
    assert "IMPERATIVE_NATIVE_ISA='avx3'" in text and "auto" in text
    if _kernels.isa() != "avx512":
        text, _ = _run_with_isa(tmp_path, "avx512", "missing")
        assert "does not run it; using avx2" in text


@pytest.mark.skipif(native._kernels is None or native._kernels.isa() != "avx512",
                    reason="needs an AVX-512 CPU to compare the two instruction sets")
def test_avx2_and_avx512_kernels_agree(tmp_path):
    """The sgemm and the convolution sum each value along k in the same order with either
    instruction set, so they give the same bits, and so do the row kernels (their exp runs
    16 lanes at a time under AVX-512, each lane as in 8); the weight gradient sums
    positions in 16 or 8 lanes first and differs by rounding."""
    _, wide = _run_with_isa(tmp_path, "avx512", "wide")
    _, narrow = _run_with_isa(tmp_path, "avx2", "narrow")
    assert (str(wide["isa"]), str(narrow["isa"])) == ("avx512", "avx2")
    assert np.array_equal(wide["ab"], narrow["ab"])
    assert np.array_equal(wide["y"], narrow["y"])
    for rows in ("softmax", "log_softmax", "cross_entropy"):    # exp over 16 lanes or 8
        assert np.array_equal(wide[rows], narrow[rows]), rows
    assert np.array_equal(wide["layer_norm"], narrow["layer_norm"])
    assert _rel_err(narrow["gw"], wide["gw"].astype(np.float64)) < 1e-5
