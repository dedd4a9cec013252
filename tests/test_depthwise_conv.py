"""Depthwise convolution (groups = in = out channels) on its own path (ops/depthwise.py):
forward, the input's and the weight's gradients against the definition in float64 (and
PyTorch where installed), with the native loops and, where they are off, the general
grouped path, over strides, paddings, dilations, kernel sizes and rows longer and shorter
than the 32-output vector blocks."""
import numpy as np
import pytest

import imperative as imp
from imperative import F
from imperative.autodiff import GradManager
from imperative.backend import native

CASES = [  # (n, c, h, w, k, stride, padding, dilation, bias)
    (2, 3, 7, 9, 3, 1, 1, 1, True), (3, 4, 8, 8, 3, 2, 1, 1, False),
    (2, 5, 9, 6, 5, 2, 2, 1, True), (1, 2, 6, 7, 3, 1, 0, 2, True),
    (2, 3, 5, 5, 1, 1, 0, 1, False), (4, 8, 11, 10, 3, 3, 2, 2, True),
    (2, 6, 9, 70, 3, 1, 1, 1, True),             # rows of 70: two vector blocks and a tail
]


@pytest.fixture(params=["native", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(native, "_MODE", "always" if request.param == "native" else "never")
    return request.param


def _taps(xp, k, stride, dilation, out_hw):
    ho, wo = out_hw
    for i in range(k):
        for j in range(k):
            yield i, j, xp[:, :, i * dilation:i * dilation + (ho - 1) * stride + 1:stride,
                           j * dilation:j * dilation + (wo - 1) * stride + 1:stride]


def reference(x, w, b, dy, stride, padding, dilation):
    """(y, dx, dw, db) by the definition, in float64."""
    x, w, dy = (a.astype(np.float64) for a in (x, w, dy))
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    out_hw = dy.shape[2:]
    y = np.zeros(dy.shape)
    dxp = np.zeros(xp.shape)
    dw = np.zeros(w.shape)
    for i, j, view in _taps(xp, k, stride, dilation, out_hw):
        tap = w[:, 0, i, j].reshape(1, -1, 1, 1)
        y += view * tap
        dw[:, 0, i, j] = (dy * view).sum(axis=(0, 2, 3))
    for i, j, view in _taps(dxp, k, stride, dilation, out_hw):
        view += dy * w[:, 0, i, j].reshape(1, -1, 1, 1)
    h, wd = x.shape[2:]
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y, dxp[:, :, padding:padding + h, padding:padding + wd], dw, dy.sum(axis=(0, 2, 3))


@pytest.mark.parametrize("case", CASES)
def test_depthwise_matches_the_definition(kernels, case):
    n, c, h, wd, k, stride, padding, dilation, bias = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((n, c, h, wd)).astype(np.float32)
    w = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if bias else None
    px, pw = imp.Parameter(x), imp.Parameter(w)
    pb = imp.Parameter(b) if bias else None
    gm = GradManager().attach([p for p in (px, pw, pb) if p is not None])
    with gm:
        y = F.conv2d(px, pw, pb, stride=stride, padding=padding, dilation=dilation, groups=c)
        dy = rng.standard_normal(y.shape).astype(np.float32)
        gm.backward((y * imp.Tensor(dy)).sum())
    want = reference(x, w, b, dy, stride, padding, dilation)
    got = (y.numpy(), px.grad.numpy(), pw.grad.numpy()) + ((pb.grad.numpy(),) if bias else ())
    for g, r in zip(got, want):
        assert g.dtype == np.float32 and g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-4 * max(1.0, np.abs(r).max()))


def test_depthwise_matches_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 16, 33, 40)).astype(np.float32)
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    for stride in (1, 2):
        px, pw = imp.Parameter(x), imp.Parameter(w)
        gm = GradManager().attach([px, pw])
        with gm:
            y = F.conv2d(px, pw, stride=stride, padding=1, groups=16)
            gm.backward((y * y).sum())
        tx, tw = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w))
        ty = torch.nn.functional.conv2d(tx, tw, stride=stride, padding=1, groups=16)
        (ty * ty).sum().backward()
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-2)


def test_a_grouped_convolution_that_is_not_depthwise_keeps_its_path():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((8, 2, 3, 3)).astype(np.float32)      # groups 2, 2 in, 4 out each
    got = F.conv2d(imp.Tensor(x), imp.Tensor(w), padding=1, groups=2).numpy()
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((2, 8, 6, 6))
    for o in range(8):
        g = o // 4
        for ci in range(2):
            for i in range(3):
                for j in range(3):
                    want[:, o] += w[o, ci, i, j] * xp[:, 2 * g + ci, i:i + 6, j:j + 6]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
