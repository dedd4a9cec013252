"""Convolution and its two gradients (ConvolutionBackwardData, ConvolutionBackwardFilter)."""
import math
import numbers

import numpy as np

from ..backend import native
from ..backend.epilogue import finish
from .base import Op, check_arity, float_dtype, reject_quantized, writable_view
from . import depthwise, nn_common
from .nn_common import (check_ndim, compute_dtype, gemm_chunk, output_size,
                        positive_pair, scratch, window_chunks)

_FLOAT32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Convolution


def _conv_flops(y_shape, w_shape):
    """Multiply-adds of a convolution (either gradient costs the same): 2 x outputs x
    (C/groups x kh x kw); for the memory manager's recompute-cost estimate."""
    return 2.0 * math.prod(y_shape) * math.prod(w_shape[1:])   # (np.prod: microseconds)


class Convolution(Op):
    """`Convolution(stride=1, padding=0, dilation=1, groups=1)`: 2-D cross-correlation as
    PyTorch's conv2d. Inputs: x (N, C, H, W), weight (O, C/groups, kh, kw) and optionally
    bias (O,); output (N, O, Ho, Wo). Ints or pairs for stride, padding, dilation."""

    _fields = ("stride", "padding", "dilation", "groups")
    # the worker may hand kernel() a following ReLU or ReLU gradient (backend/epilogue.py)
    EPILOGUE_CAPABLE = True

    def __init__(self, stride=1, padding=0, dilation=1, groups=1):
        if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
        self._set(stride=positive_pair(stride, "conv2d: stride"),
                  padding=positive_pair(padding, "conv2d: padding", 0),
                  dilation=positive_pair(dilation, "conv2d: dilation"), groups=int(groups))

    def infer(self, inputs):
        if len(inputs) not in (2, 3):
            raise ValueError(f"op {self!r} takes 2 or 3 inputs (input, weight[, bias]), "
                             f"got {len(inputs)}")
        reject_quantized(self, inputs)
        x, w = inputs[:2]
        check_ndim("conv2d", "input", x.shape, 4, "(N, C, H, W)")
        check_ndim("conv2d", "weight", w.shape, 4, "(out_channels, in_channels/groups, kh, kw)")
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        g = self.groups
        if c != cg * g:
            raise ValueError(f"conv2d: weight {w.shape} with groups={g} expects {cg * g} input "
                             f"channels, got input of shape {x.shape} ({c} channels)")
        if o % g:
            raise ValueError(f"conv2d: out_channels {o} (weight {w.shape}) must be divisible "
                             f"by groups={g}")
        if len(inputs) == 3 and inputs[2].shape != (o,):
            raise ValueError(f"conv2d: bias must have shape ({o},) (out_channels), "
                             f"got {inputs[2].shape}")
        ho, wo = self._output_hw(h, wd, kh, kw)
        return (((n, o, ho, wo), float_dtype(t.dtype for t in inputs)),)

    def estimate_flops(self, in_shapes, out_shapes):
        return _conv_flops(out_shapes[0], in_shapes[1])

    def _output_hw(self, h, w, kh, kw):
        return tuple(output_size("conv2d", dim, size, k, s, p, d) for dim, size, k, s, p, d in zip(
            ("height", "width"), (h, w), (kh, kw), self.stride, self.padding, self.dilation))

    def kernel(self, x, w, b=None, epilogue=None):
        """`epilogue` (a backend.epilogue.Epilogue): the output with it applied, in the native
        kernel's last copy of the output where it can be, else by the follower's kernel."""
        out_dtype = float_dtype(a.dtype for a in (x, w, b) if a is not None)
        compute = compute_dtype(out_dtype)
        x, w = x.astype(compute, copy=False), w.astype(compute, copy=False)
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        g = self.groups
        ho, wo = self._output_hw(h, wd, kh, kw)
        k, l = cg * kh * kw, ho * wo
        out = native.conv2d(x, w, self.stride, self.padding, self.dilation, g,
                            None if b is None else b.astype(compute, copy=False), epilogue)
        if out is not None:
            return out.astype(out_dtype, copy=False)
        if depthwise.applies(g, c, w.shape, x, w):
            out = depthwise.forward(x, w, self.stride, self.padding, self.dilation, (ho, wo))
        else:
            out = self._numpy_conv(x, w, n, c, o, k, l, ho, wo, compute)
        return self._finish(out, b, n, o, ho, wo, compute, out_dtype, epilogue)

    def _numpy_conv(self, x, w, n, c, o, k, l, ho, wo, compute):
        """The product as (N, O, Ho*Wo) in `compute`, through im2col and numpy's sgemm."""
        g = self.groups
        kh, kw = w.shape[2:]
        weight = w.reshape(g, o // g, k)
        out = np.empty((n, o, l), dtype=compute)
        if k < 64 or l >= nn_common.GEMM_COLUMNS:
            # a short K (or a large image) gains nothing from wider products: one sgemm per
            # image and group (batched by np.matmul), landing directly in NCHW order
            step = gemm_chunk(n, l, c * kh * kw * l * x.itemsize)
            cols = np.empty(c * kh * kw * step * l, dtype=compute)
            for start, stop, win in window_chunks(x, (kh, kw), self.stride, self.padding,
                                                  self.dilation, 0, 0, step=step):
                m = stop - start
                part = scratch(cols, (m, c, kh, kw, ho, wo))
                np.copyto(part, win.transpose(0, 1, 4, 5, 2, 3))
                np.matmul(weight, part.reshape(m, g, k, l),
                          out=writable_view(out[start:stop], (m, g, o // g, l)))
            return out
        # One (O/g, K) x (K, m*Ho*Wo) sgemm per group over a chunk of m images side by side
        # (im2col in (C, kh, kw, m, Ho, Wo) order: the copy moves rows of Wo contiguous
        # values), then one copy of the product into NCHW order.
        step = gemm_chunk(n, l, (c * kh * kw + o) * l * x.itemsize)
        cols = np.empty(c * kh * kw * step * l, dtype=compute)
        prod = np.empty(o * step * l, dtype=compute)
        for start, stop, win in window_chunks(x, (kh, kw), self.stride, self.padding,
                                              self.dilation, 0, 0, step=step):
            m = stop - start
            part = scratch(cols, (c, kh, kw, m, ho, wo))
            np.copyto(part, win.transpose(1, 4, 5, 0, 2, 3))
            res = scratch(prod, (g, o // g, m * l))
            np.matmul(weight, part.reshape(g, k, m * l), out=res)
            np.copyto(out[start:stop], res.reshape(o, m, l).transpose(1, 0, 2))
        return out

    @staticmethod
    def _finish(out, b, n, o, ho, wo, compute, out_dtype, epilogue):
        out = out.reshape(n, o, ho, wo)
        if b is not None:
            out += b.astype(compute).reshape(1, o, 1, 1)
        return finish(out.astype(out_dtype, copy=False), epilogue)


class _ConvolutionGrad(Op):
    """Shared parameters of the two convolution gradients (those of the forward op)."""

    _fields = ("stride", "padding", "dilation", "groups")

    def __init__(self, stride=1, padding=0, dilation=1, groups=1):
        if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
            raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
        self._set(stride=positive_pair(stride, "conv2d: stride"),
                  padding=positive_pair(padding, "conv2d: padding", 0),
                  dilation=positive_pair(dilation, "conv2d: dilation"), groups=int(groups))

    def forward_op(self):
        return Convolution(self.stride, self.padding, self.dilation, self.groups)

    def _check(self, dy, x_shape, w_shape):
        fwd = self.forward_op()
        ((shape, _),) = fwd.infer((_Desc(x_shape, _FLOAT32), _Desc(w_shape, _FLOAT32)))
        if tuple(dy.shape) != tuple(shape):
            raise ValueError(f"{self!r}: output gradient of shape {dy.shape} does not match "
                             f"the convolution of {x_shape} by {w_shape} ({shape})")


class _Desc:
    """A shape/dtype description, to reuse Convolution.infer's checks."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


class ConvolutionBackwardData(_ConvolutionGrad):
    """`ConvolutionBackwardData(stride, padding, dilation, groups, in_hw)`: inputs dy
    (N, O, Ho, Wo) and weight (O, C/groups, kh, kw); the gradient of conv2d's input
    (N, C, H, W), H, W = in_hw (a transposed convolution). One sgemm per image and group
    (weight^T @ dy) then one strided add per kernel tap (col2im)."""

    _fields = ("stride", "padding", "dilation", "groups", "in_hw")
    EPILOGUE_CAPABLE = True        # as Convolution's

    def __init__(self, stride=1, padding=0, dilation=1, groups=1, in_hw=(1, 1)):
        super().__init__(stride, padding, dilation, groups)
        self._set(in_hw=positive_pair(in_hw, "conv2d: input size"))

    def estimate_flops(self, in_shapes, out_shapes):
        return _conv_flops(in_shapes[0], in_shapes[1])

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        dy, w = inputs
        check_ndim("conv2d backward", "dy", dy.shape, 4, "(N, O, Ho, Wo)")
        check_ndim("conv2d backward", "weight", w.shape, 4, "(O, C/groups, kh, kw)")
        x_shape = (dy.shape[0], w.shape[1] * self.groups) + self.in_hw
        self._check(dy, x_shape, w.shape)
        return ((x_shape, float_dtype([dy.dtype, w.dtype])),)

    def kernel(self, dy, w, epilogue=None):
        out_dtype = float_dtype([dy.dtype, w.dtype])
        compute = compute_dtype(out_dtype)
        dy, w = dy.astype(compute, copy=False), w.astype(compute, copy=False)
        n, o, ho, wo = dy.shape
        _, cg, kh, kw = w.shape
        g = self.groups
        c = cg * g
        h, wd = self.in_hw
        (sh, sw), (ph, pw), (dh, dw) = self.stride, self.padding, self.dilation
        k, l = cg * kh * kw, ho * wo
        if depthwise.applies(g, c, w.shape, dy, w):
            gx = depthwise.backward_data(dy, w, self.stride, self.padding, self.dilation,
                                         self.in_hw)
            return finish(gx.astype(out_dtype, copy=False), epilogue)
        if ((sh, sw) == (1, 1) and (c >= o or native.active()) and dh * (kh - 1) >= ph
                and dw * (kw - 1) >= pw):
            # a stride-1 transposed convolution is a convolution of dy by the flipped,
            # transposed weight: its im2col copy (O channels) costs less than col2im's adds
            # (C channels) when C >= O, and the native direct convolution copies nothing
            flipped = w.reshape(g, o // g, cg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(
                c, o // g, kh, kw)[:, :, ::-1, ::-1]
            conv = Convolution(1, (dh * (kh - 1) - ph, dw * (kw - 1) - pw), (dh, dw), g)
            if compute != out_dtype:
                # the epilogue belongs to the output's dtype
                return finish(conv.kernel(dy, flipped).astype(out_dtype), epilogue)
            return conv.kernel(dy, flipped, epilogue=epilogue)
        # per chunk of m images: cols (g, K, m*Ho*Wo) = weight^T @ dy, as one sgemm per group
        # over the images side by side, then one strided add per kernel tap into a padded
        # (C, m, Hp, Wp) buffer, cropped and copied into NCHW order
        wt = w.reshape(g, o // g, k).transpose(0, 2, 1)        # (g, K, O/g)
        gx = np.empty((n, c, h, wd), dtype=compute)
        hp, wp = h + 2 * ph, wd + 2 * pw
        step = gemm_chunk(n, l, (o + c * kh * kw) * l * dy.itemsize + c * hp * wp * dy.itemsize)
        dy_buf = np.empty(o * step * l, dtype=compute)
        cols_buf = np.empty(c * kh * kw * step * l, dtype=compute)
        pad_buf = np.empty(c * step * hp * wp, dtype=compute)
        dy3 = dy.reshape(n, o, l)
        for start in range(0, n, step):
            stop = min(n, start + step)
            m = stop - start
            d = scratch(dy_buf, (o, m, l))
            np.copyto(d, dy3[start:stop].transpose(1, 0, 2))
            cols = scratch(cols_buf, (g, k, m * l))
            np.matmul(wt, d.reshape(g, o // g, m * l), out=cols)
            cols = cols.reshape(c, kh, kw, m, ho, wo)
            target = scratch(pad_buf, (c, m, hp, wp))
            target.fill(0)
            for i in range(kh):
                for j in range(kw):
                    r0, c0 = i * dh, j * dw
                    target[:, :, r0:r0 + (ho - 1) * sh + 1:sh, c0:c0 + (wo - 1) * sw + 1:sw] \
                        += cols[:, i, j]
            np.copyto(gx[start:stop], target[:, :, ph:ph + h, pw:pw + wd].transpose(1, 0, 2, 3))
        return finish(gx.astype(out_dtype, copy=False), epilogue)


class ConvolutionBackwardFilter(_ConvolutionGrad):
    """`ConvolutionBackwardFilter(stride, padding, dilation, groups, kernel_hw,
    with_bias=False)`: inputs x (N, C, H, W) and dy (N, O, Ho, Wo); the gradient of conv2d's
    weight (O, C/groups, kh, kw), kh, kw = kernel_hw: one sgemm (dy @ im2col(x)^T) per group
    over a chunk of images. with_bias: a second output, the bias gradient (O,) = dy summed
    over images and positions, taken while dy is read for the weight's (a separate reduction
    cost 3% of a small CNN's training step)."""

    _fields = ("stride", "padding", "dilation", "groups", "kernel_hw", "with_bias")

    def __init__(self, stride=1, padding=0, dilation=1, groups=1, kernel_hw=(1, 1),
                 with_bias=False):
        super().__init__(stride, padding, dilation, groups)
        self._set(kernel_hw=positive_pair(kernel_hw, "conv2d: kernel size"),
                  with_bias=bool(with_bias))

    def estimate_flops(self, in_shapes, out_shapes):
        return _conv_flops(in_shapes[1], out_shapes[0])

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        x, dy = inputs
        check_ndim("conv2d backward", "input", x.shape, 4, "(N, C, H, W)")
        check_ndim("conv2d backward", "dy", dy.shape, 4, "(N, O, Ho, Wo)")
        if x.shape[1] % self.groups:
            raise ValueError(f"{self!r}: input channels {x.shape[1]} not divisible by groups")
        w_shape = (dy.shape[1], x.shape[1] // self.groups) + self.kernel_hw
        self._check(dy, x.shape, w_shape)
        dtype = float_dtype([x.dtype, dy.dtype])
        return ((w_shape, dtype),) + ((((dy.shape[1],), dtype),) if self.with_bias else ())

    def kernel(self, x, dy):
        out_dtype = float_dtype([x.dtype, dy.dtype])
        compute = compute_dtype(out_dtype)
        x, dy = x.astype(compute, copy=False), dy.astype(compute, copy=False)
        n, c, h, wd = x.shape
        _, o, ho, wo = dy.shape
        kh, kw = self.kernel_hw
        g = self.groups
        cg = c // g
        k, l = cg * kh * kw, ho * wo
        done = native.conv2d_grad_weight(x, dy, self.kernel_hw, self.stride, self.padding,
                                         self.dilation, g, self.with_bias)
        if done is None and depthwise.applies(g, c, (o, cg), x, dy):
            done = depthwise.backward_filter(x, dy, self.kernel_hw, self.stride, self.padding,
                                             self.dilation, self.with_bias)
        if done is not None:
            if self.with_bias:
                return tuple(gr.astype(out_dtype, copy=False) for gr in done)
            return done.astype(out_dtype, copy=False)
        gwt = np.zeros((g, k, o // g), dtype=compute)
        gb = np.zeros(o, dtype=compute) if self.with_bias else None
        step = gemm_chunk(n, l, (c * kh * kw + o) * l * x.itemsize)
        cols = np.empty(c * kh * kw * step * l, dtype=compute)
        dy_buf = np.empty(o * step * l, dtype=compute)
        dy3 = dy.reshape(n, o, l)
        for start, stop, win in window_chunks(x, (kh, kw), self.stride, self.padding,
                                              self.dilation, 0, 0, step=step):
            m = stop - start
            # (C, kh, kw, m, Ho, Wo): the images side by side, so one sgemm covers the chunk
            part = scratch(cols, (c, kh, kw, m, ho, wo))
            np.copyto(part, win.transpose(1, 4, 5, 0, 2, 3))
            d = scratch(dy_buf, (o, m, l))
            np.copyto(d, dy3[start:stop].transpose(1, 0, 2))
            if gb is not None:
                gb += d.reshape(o, m * l).sum(axis=1)
            # gw^T (K, O/g) = cols @ dy^T: OpenBLAS runs this orientation ~20% faster
            gwt += np.matmul(part.reshape(g, k, m * l),
                             d.reshape(g, o // g, m * l).transpose(0, 2, 1))
        gw = gwt.transpose(0, 2, 1).reshape(o, cg, kh, kw).astype(out_dtype, copy=False)
        return (gw, gb.astype(out_dtype, copy=False)) if self.with_bias else gw
