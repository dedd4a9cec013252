"""Depthwise convolution (groups = in channels = out channels, as MobileNet's 3x3 layers),
forward and both gradients, on float32 as native loops over each zero-padded image plane
(_windows.c: a row of outputs at a time, eight lanes where the stride is 1). The general
grouped path (imperative/ops/conv.py), which runs everything else and these too where the
native loops are off, copies kh * kw windows of every value (im2col) and runs one (1 x 9)
by (9 x Ho*Wo) product per channel: 4x PyTorch's time forward and backward on
(16, 32, 32, 32) with 3x3 filters."""
import numpy as np

from ..backend import native


def applies(groups, x_channels, weight_shape, *arrays):
    """A depthwise convolution (each input channel its own filter, one output channel) of
    float32 `arrays` that the native loops take."""
    return (groups > 1 and weight_shape[1] == 1 and weight_shape[0] == groups == x_channels
            and native.depthwise_on() and all(a.dtype == np.float32 for a in arrays))


def _zero_padded(x, padding):
    (ph, pw) = padding
    if not (ph or pw):
        return np.ascontiguousarray(x)
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))


def forward(x, w, stride, padding, dilation, out_hw):
    """conv2d of x (N, C, H, W) by w (C, 1, kh, kw) with groups = C."""
    return native.depthwise_forward(_zero_padded(x, padding), w, out_hw, stride, dilation)


def backward_data(dy, w, stride, padding, dilation, in_hw):
    """The gradient of the input of `forward`: each tap's dy * w added into the padded
    plane where that tap read, then cropped."""
    (ph, pw), (h, wd) = padding, in_hw
    gxp = native.depthwise_grad_input(np.ascontiguousarray(dy), w, (h + 2 * ph, wd + 2 * pw),
                                      stride, dilation)
    return np.ascontiguousarray(gxp[:, :, ph:ph + h, pw:pw + wd])


def backward_filter(x, dy, kernel_hw, stride, padding, dilation, with_bias):
    """The gradient of the weight (C, 1, kh, kw) of `forward` (and of a bias, (C,), with
    with_bias): per tap, the sum over images and positions of dy times what the tap read."""
    gw = native.depthwise_grad_weight(_zero_padded(x, padding), np.ascontiguousarray(dy),
                                      kernel_hw, stride, dilation)
    return (gw, dy.sum(axis=(0, 2, 3))) if with_bias else gw
