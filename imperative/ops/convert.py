"""Type conversion and device copies."""
import numpy as np

from .. import dtype as D
from .._core import as_device
from .base import Op, check_arity


class TypeCvt(Op):
    """`TypeCvt(dtype)`: cast; to a quantized dtype quantizes (round, clip), from one
    dequantizes to float32 first."""

    _fields = ("dtype",)

    def __init__(self, dtype):
        self._set(dtype=D.canonical_dtype(dtype))

    def __eq__(self, other):
        return type(other) is TypeCvt and D.same_dtype(self.dtype, other.dtype)

    def __hash__(self):
        return hash(("TypeCvt", D.dtype_name(self.dtype)))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        return ((inputs[0].shape, self.dtype),)

    def kernel(self, x):
        # 4-bit storage is unpacked by the core before kernels see it, packed after.
        if D.is_quantize(x.dtype):
            x = D.dequantize(x)
        if D.is_quantize(self.dtype):
            return D.quantize(x, self.dtype)
        return np.asarray(x).astype(self.dtype)

    def direct_kernel(self, inputs):
        if D.is_quantize(inputs[0].dtype) or D.is_quantize(self.dtype):
            return None
        return np.ndarray.astype, (self.dtype,)


class Copy(Op):
    """`Copy(device)`: a copy of the input on `device`."""

    _fields = ("device",)

    def __init__(self, device):
        self._set(device=str(as_device(device)))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        return ((inputs[0].shape, inputs[0].dtype, self.device),)

    def kernel(self, x):
        return np.array(x, copy=True)
