"""Dropout's application in one op: x * mask / (1 - p) for a float x and a boolean mask,
or that mask packed 8 to a byte."""
import math

import numpy as np

from .. import _kernels
from .base import Op, check_arity, reject_quantized
from .rng import packed_bytes


class DropoutApply(Op):
    """`DropoutApply(keep)`: x * mask / keep, x floating point and mask boolean of x's shape,
    rounded as that product and that quotient are (x * True is x, x * False is 0 with x's
    sign), in one pass and one output. The composite made the mask a float copy and the
    product a second value of x's size, both recomputed under a DTR budget (a dropout MLP's
    cast, product and quotient were 3 of its 4 evictions a layer). Its gradient is the same
    op applied to dy.

    The mask may also come packed 8 to a byte (DropoutBitsRNG's uint8 vector of
    ceil(x.size / 8) bytes, little bit order), as `F.dropout` draws it: the same bits out,
    an eighth of the mask's bytes kept for the backward."""

    _fields = ("keep",)

    def __init__(self, keep):
        keep = float(keep)
        if not 0 < keep <= 1:
            raise ValueError(f"DropoutApply: keep must be in (0, 1], got {keep}")
        self._set(keep=keep)

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        x, mask = inputs
        packed = (packed_bytes(math.prod(x.shape)),)
        if x.dtype.kind != "f" or not (mask.dtype == np.dtype(bool) and mask.shape == x.shape
                                       or mask.dtype == np.dtype(np.uint8)
                                       and mask.shape == packed):
            raise TypeError(f"{self!r}: x must be floating point and mask boolean of its shape "
                            f"(or packed 8 to a byte, uint8 {packed}), "
                            f"got {x.dtype} {x.shape} and {mask.dtype} {mask.shape}")
        return ((x.shape, x.dtype),)

    def kernel(self, x, mask):
        if mask.dtype == np.uint8:
            out = _kernels.dropout_bits(x, mask, self.keep)
            if out is not None:
                return out
            mask = np.unpackbits(mask, count=x.size, bitorder="little").view(bool)
            mask = mask.reshape(x.shape)
        out = np.multiply(x, mask, out=np.empty(x.shape, x.dtype))   # (an array when 0-d too)
        return np.true_divide(out, x.dtype.type(self.keep), out=out)
