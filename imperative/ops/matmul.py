"""Matrix products with numpy's matmul semantics."""
import math

import numpy as np

from ..dtype import downcast, dtype_promotion
from .._core import ProductOfTransposed, matmul_apart, swap_last_axes
from ..backend import native
from ..backend.epilogue import Epilogue, finish
from .base import Op, as_buffer, check_arity, reject_quantized


def _matmul_shape(a, b, op):
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"{op}: matmul needs inputs with at least 1 dimension, got {a} and {b}")
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"{op}: shapes {a} and {b} do not match: {a2[-1]} (last dim of the "
                         f"first) != {b2[-2]} (first matrix dim of the second)")
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(f"{op}: batch dimensions of {a} and {b} cannot be broadcast") from None
    shape = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b) == 1:
        shape = shape[:-1]
    return shape


def _macs(a, b):
    """Multiply-adds of a (..., M, K) @ (K, N) product."""
    return math.prod(a[:-1]) * a[-1] * b[-1]


def _flat_fits(epilogue):
    """An epilogue's other operand (shaped as the product) can be viewed as rows too."""
    return epilogue is None or epilogue.y is None or epilogue.y.flags.c_contiguous


def _flat_epilogue(epilogue):
    if epilogue is None or epilogue.y is None:
        return epilogue
    return Epilogue(epilogue.op, epilogue.y.reshape(-1, epilogue.y.shape[-1]), epilogue.kind)


def _t(shape):
    return shape[:-2] + (shape[-1], shape[-2]) if len(shape) >= 2 else shape


class MatrixMul(Op):
    """`MatrixMul(transpose_a=False, transpose_b=False)`: `a @ b` as numpy.matmul,
    optionally transposing the last two dimensions of an input first."""

    _fields = ("transpose_a", "transpose_b")
    MIN_NDIM = 1
    # the worker may hand kernel() a following ReLU or ReLU gradient (backend/epilogue.py)
    EPILOGUE_CAPABLE = True

    def __init__(self, transpose_a=False, transpose_b=False):
        self._set(transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        a, b = inputs
        if len(a.shape) < self.MIN_NDIM or len(b.shape) < self.MIN_NDIM:
            raise ValueError(f"{self!r}: needs inputs with at least {self.MIN_NDIM} dimensions, "
                             f"got {a.shape} and {b.shape}")
        sa = _t(a.shape) if self.transpose_a else a.shape
        sb = _t(b.shape) if self.transpose_b else b.shape
        dt = downcast(dtype_promotion([a.dtype, b.dtype]))
        return ((_matmul_shape(sa, sb, repr(self)), dt),)

    def direct_kernel(self, inputs):
        # kernel()'s numpy branch: same dtypes and no product native takes (the shapes as
        # transposed); a transposed operand is the kernel's view of it
        a, b = inputs
        sa = _t(a.shape) if self.transpose_a else a.shape
        sb = _t(b.shape) if self.transpose_b else b.shape
        if (a.dtype is not b.dtype or len(sa) >= 2 and len(sb) == 2
                and _macs(sa, sb) >= native._MIN_MACS):
            return None
        if self.transpose_a or self.transpose_b:
            return ProductOfTransposed(self.transpose_a, self.transpose_b), ()
        return matmul_apart, ()

    def estimate_flops(self, in_shapes, out_shapes):
        """For the memory manager's recompute-cost estimate: 2 x outputs x inner size."""
        a = in_shapes[0]
        inner = a[-2] if self.transpose_a and len(a) >= 2 else a[-1]
        return 2.0 * math.prod(out_shapes[0]) * inner   # (np.prod: microseconds)

    def kernel(self, a, b, epilogue=None):
        """`epilogue` (a backend.epilogue.Epilogue): the product with it applied, native in the
        product's stores where it can be, else by the follower's own kernel afterwards."""
        if self.transpose_a:
            a = swap_last_axes(a)
        if self.transpose_b:
            b = swap_last_axes(b)
        if (a.ndim > 2 and b.ndim == 2 and _macs(a.shape, b.shape) >= native._MIN_MACS
                and a.flags.c_contiguous and _flat_fits(epilogue)):
            # a batch of row blocks times one matrix (a Linear layer on (batch, tokens,
            # features)) is one product of all the rows: one large GEMM, on the native
            # kernel where it runs, instead of numpy's one small product per batch entry.
            # (Decided by shapes as direct_kernel decides: the tiny path's direct product
            # and this kernel then give the same bits.)
            flat = self._product(a.reshape(-1, a.shape[-1]), b, _flat_epilogue(epilogue))
            return flat.reshape(a.shape[:-1] + flat.shape[-1:])
        return self._product(a, b, epilogue)

    def _product(self, a, b, epilogue):
        if (epilogue is None and a.dtype is b.dtype
                and (a.ndim != 2 or b.ndim != 2 or _macs(a.shape, b.shape) < native._MIN_MACS)):
            return as_buffer(matmul_apart(a, b))   # numpy's product, which native leaves it
        if a.dtype != b.dtype:
            dt = downcast(dtype_promotion([a.dtype, b.dtype]))
            a, b = a.astype(dt, copy=False), b.astype(dt, copy=False)
        # a^T @ b is how a backward pass makes a weight gradient (dy^T @ x), which nothing
        # reads before the optimizer runs, after the rest of the backward pass
        out = native.matmul(a, b, epilogue, streaming=self.transpose_a)
        return finish(as_buffer(matmul_apart(a, b)), epilogue) if out is None else out


class BatchedMatrixMul(MatrixMul):
    """MatrixMul over a batch: inputs of at least 3 dimensions, batch dims broadcast."""

    MIN_NDIM = 3
