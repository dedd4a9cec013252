"""Cumulative sums and products along an axis: `Cumulative(mode, axis, reverse)`, and
`CumprodGrad(axis)`, the exact gradient of a cumulative product (zeros included).

Both kernels are numpy's (and a fixed loop), deterministic: recomputed under a memory
manager they give the same bits. Their backward rules are in autodiff/rules_scan.py."""
import numpy as np

from .base import Op, check_arity, normalize_axis, reject_quantized

_INT32 = np.dtype(np.int32)
_RUN = {"SUM": np.cumsum, "PROD": np.cumprod}


def _out_dtype(dtype):
    # integers and bools accumulate in int32, the widest integer dtype here (torch: int64)
    return _INT32 if dtype.kind in "biu" else dtype


class Cumulative(Op):
    """`Cumulative(mode, axis, reverse=False)`: numpy.cumsum (mode "SUM") or numpy.cumprod
    ("PROD") along `axis`, a non-negative int; `reverse` accumulates from the end (a sum
    only: it is the gradient of a cumulative sum). Floats keep their dtype, integers and
    bools give int32."""

    _fields = ("mode", "axis", "reverse")

    def __init__(self, mode, axis, reverse=False):
        if mode not in _RUN:
            raise ValueError(f"Cumulative: mode must be one of {sorted(_RUN)}, got {mode!r}")
        if reverse and mode != "SUM":
            raise ValueError("Cumulative: only a sum accumulates in reverse")
        self._set(mode=mode, axis=axis, reverse=bool(reverse))

    @property
    def name(self):
        return f"Cumulative.{self.mode}"

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        x = inputs[0]
        if not x.shape:
            raise ValueError(f"{self!r}: a 0-d tensor has no axis (reshape it to (1,))")
        normalize_axis(self.axis, len(x.shape), self.name)
        return ((x.shape, _out_dtype(x.dtype)),)

    def kernel(self, x):
        run, dtype = _RUN[self.mode], _out_dtype(x.dtype)
        if not self.reverse:
            return run(x, axis=self.axis, dtype=dtype)
        return np.ascontiguousarray(np.flip(run(np.flip(x, self.axis), axis=self.axis,
                                                dtype=dtype), self.axis))


class CumprodGrad(Op):
    """`CumprodGrad(axis)`: inputs x and dy (float, of one shape and dtype), output the
    gradient of sum(cumprod(x, axis) * dy) with respect to x, exact where x has zeros.

    Along the axis, dx[k] = sum_{j >= k} dy[j] * prod_{i <= j, i != k} x[i]
                          = prod_{i < k} x[i] * s[k],  s[k] = dy[k] + x[k + 1] * s[k + 1],
    so no division by x (the usual reversed-cumsum-of-dy*y-over-x formula fails at a zero).
    s runs as a loop over the axis, each step over all other elements at once. This op has
    no gradient itself (a cumprod's second derivative is not supported)."""

    _fields = ("axis",)

    def __init__(self, axis):
        self._set(axis=axis)

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        x, dy = inputs
        if x.shape != dy.shape or x.dtype != dy.dtype:
            raise ValueError(f"{self!r}: x {x.shape} {x.dtype} and dy {dy.shape} {dy.dtype} "
                             "must have one shape and dtype")
        normalize_axis(self.axis, len(x.shape), "CumprodGrad")
        return ((x.shape, x.dtype),)

    def kernel(self, x, dy):
        xs, gs = np.moveaxis(x, self.axis, 0), np.moveaxis(dy, self.axis, 0)
        out = np.empty(xs.shape, x.dtype)
        if len(xs):
            out[0] = 1
            np.cumprod(xs[:-1], axis=0, out=out[1:])     # prod_{i < k} x[i]
            s = gs[-1].copy()
            out[-1] *= s
            for k in range(len(xs) - 2, -1, -1):
                s = gs[k] + xs[k + 1] * s
                out[k] *= s
        return np.ascontiguousarray(np.moveaxis(out, 0, self.axis))
