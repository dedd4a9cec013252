"""Depthwise convolution (groups = in channels = out channels, as MobileNet's 3x3 layers),
forward and both gradients: on float32, native loops over each zero-padded image plane
(_windows.c: a row of outputs at a time, eight lanes where the stride is 1); otherwise one
multiply-add pass per kernel tap over shifted views of the padded input, a few images at a
time. The general grouped path (imperative/ops/conv.py) copies kh * kw windows of every
value (im2col) and runs one (1 x 9) by (9 x Ho*Wo) product per channel: 4x PyTorch's time
forward and backward on (16, 32, 32, 32) with 3x3 filters."""
import numpy as np

from ..backend import native
from .nn_common import scratch

# images per pass: their padded planes about this many bytes, so that the kh * kw passes
# over them read from cache
_CHUNK_BYTES = 1 << 19


def applies(groups, x_channels, weight_shape):
    """A depthwise convolution: each input channel its own filter, one output channel."""
    return groups > 1 and weight_shape[1] == 1 and weight_shape[0] == groups == x_channels


def _chunks(n, image_bytes):
    step = max(1, _CHUNK_BYTES // max(image_bytes, 1))
    for start in range(0, n, step):
        yield start, min(n, start + step)


def _tap(plane, i, j, out_hw, stride, dilation):
    """The view of `plane` (m, C, Hp, Wp) that kernel tap (i, j) reads for each output."""
    (ho, wo), (sh, sw), (dh, dw) = out_hw, stride, dilation
    r0, c0 = i * dh, j * dw
    return plane[:, :, r0:r0 + (ho - 1) * sh + 1:sh, c0:c0 + (wo - 1) * sw + 1:sw]


def _padded(x, start, stop, padding, buffer):
    """Images start:stop of x (N, C, H, W), zero-padded, in `buffer`."""
    (ph, pw), (m, c, h, w) = padding, (stop - start,) + x.shape[1:]
    plane = scratch(buffer, (m, c, h + 2 * ph, w + 2 * pw))
    if ph or pw:
        plane.fill(0)
    plane[:, :, ph:ph + h, pw:pw + w] = x[start:stop]
    return plane


def _zero_padded(x, padding):
    (ph, pw) = padding
    if not (ph or pw):
        return np.ascontiguousarray(x)
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def _native(*arrays):
    """The native loops take these arrays (float32, and the loops on)."""
    return native.depthwise_on() and all(a.dtype == np.float32 for a in arrays)


def forward(x, w, stride, padding, dilation, out_hw, compute):
    """conv2d of x (N, C, H, W) by w (C, 1, kh, kw) with groups = C, in `compute`."""
    if _native(x, w):
        return native.depthwise_forward(_zero_padded(x, padding), w, out_hw, stride, dilation)
    n, c, h, wd = x.shape
    kh, kw = w.shape[2:]
    (ph, pw), (ho, wo) = padding, out_hw
    image = c * (h + 2 * ph) * (wd + 2 * pw) * x.itemsize
    out = np.empty((n, c) + out_hw, dtype=compute)
    taps = w.reshape(c, kh, kw)
    pad_buf = tmp_buf = None
    for start, stop in _chunks(n, image):
        m = stop - start
        if pad_buf is None:
            pad_buf = np.empty((stop - start) * image // x.itemsize, dtype=compute)
            tmp_buf = np.empty((stop - start) * c * ho * wo, dtype=compute)
        plane = _padded(x, start, stop, padding, pad_buf)
        acc, tmp = out[start:stop], scratch(tmp_buf, (m, c, ho, wo))
        for i in range(kh):
            for j in range(kw):
                weight = taps[:, i, j].reshape(1, c, 1, 1)
                view = _tap(plane, i, j, out_hw, stride, dilation)
                if i == j == 0:
                    np.multiply(view, weight, out=acc)
                else:
                    np.multiply(view, weight, out=tmp)
                    acc += tmp
    return out


def backward_data(dy, w, stride, padding, dilation, in_hw, compute):
    """The gradient of the input of `forward`: each tap's dy * w added into the padded
    plane where that tap read, then cropped."""
    n, c, ho, wo = dy.shape
    kh, kw = w.shape[2:]
    (ph, pw), (h, wd) = padding, in_hw
    hp, wp = h + 2 * ph, wd + 2 * pw
    if _native(dy, w):
        gxp = native.depthwise_grad_input(np.ascontiguousarray(dy), w, (hp, wp), stride,
                                          dilation)
        return np.ascontiguousarray(gxp[:, :, ph:ph + h, pw:pw + wd])
    gx = np.empty((n, c, h, wd), dtype=compute)
    taps = w.reshape(c, kh, kw)
    pad_buf = tmp_buf = None
    for start, stop in _chunks(n, c * hp * wp * dy.itemsize):
        m = stop - start
        if pad_buf is None:
            pad_buf = np.empty(m * c * hp * wp, dtype=compute)
            tmp_buf = np.empty(m * c * ho * wo, dtype=compute)
        plane = scratch(pad_buf, (m, c, hp, wp))
        plane.fill(0)
        tmp = scratch(tmp_buf, (m, c, ho, wo))
        for i in range(kh):
            for j in range(kw):
                np.multiply(dy[start:stop], taps[:, i, j].reshape(1, c, 1, 1), out=tmp)
                _tap(plane, i, j, (ho, wo), stride, dilation)[...] += tmp
        gx[start:stop] = plane[:, :, ph:ph + h, pw:pw + wd]
    return gx


def backward_filter(x, dy, kernel_hw, stride, padding, dilation, compute, with_bias):
    """The gradient of the weight (C, 1, kh, kw) of `forward` (and of a bias, (C,), with
    with_bias): per tap, the sum over images and positions of dy times what the tap read."""
    if _native(x, dy):
        gw = native.depthwise_grad_weight(_zero_padded(x, padding), np.ascontiguousarray(dy),
                                          kernel_hw, stride, dilation)
        return (gw, dy.sum(axis=(0, 2, 3))) if with_bias else gw
    n, c, h, wd = x.shape
    kh, kw = kernel_hw
    _, _, ho, wo = dy.shape
    (ph, pw) = padding
    image = c * (h + 2 * ph) * (wd + 2 * pw) * x.itemsize
    gw = np.zeros((c, kh, kw), dtype=compute)
    gb = np.zeros(c, dtype=compute) if with_bias else None
    pad_buf = tmp_buf = None
    for start, stop in _chunks(n, image):
        m = stop - start
        if pad_buf is None:
            pad_buf = np.empty(m * image // x.itemsize, dtype=compute)
            tmp_buf = np.empty(m * c * ho * wo, dtype=compute)
        plane = _padded(x, start, stop, padding, pad_buf)
        d, tmp = dy[start:stop], scratch(tmp_buf, (m, c, ho, wo))
        for i in range(kh):
            for j in range(kw):
                np.multiply(d, _tap(plane, i, j, (ho, wo), stride, dilation), out=tmp)
                gw[:, i, j] += tmp.sum(axis=(0, 2, 3))
        if gb is not None:
            gb += d.sum(axis=(0, 2, 3))
    gw = gw.reshape(c, 1, kh, kw)
    return (gw, gb) if with_bias else gw
