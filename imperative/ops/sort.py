"""`Argsort(axis, descending, k)`: the positions that sort a tensor along an axis, stably.

The functions built on it (F.sort, F.argsort, F.topk in imperative/sorting.py) take the
values with a gather at these positions, so that gradients flow back to the chosen
positions through the gather's own rule: this op itself has no gradient (integer output).
"""
import numpy as np

from .base import Op, check_arity, normalize_axis, reject_quantized

_INT32 = np.dtype(np.int32)


class Argsort(Op):
    """int32 positions of the `k` first elements of a stable sort along `axis` (k None:
    all of them), ascending, or descending when `descending`.

    Stable both ways: equal values keep their order of position (the lower position first),
    as torch.sort(stable=True). NaN sorts as the largest value (last ascending, first
    descending), as in numpy and PyTorch. Deterministic, so recomputing it under a memory
    manager gives the same bits."""

    _fields = ("axis", "descending", "k")

    def __init__(self, axis, descending=False, k=None):
        self._set(axis=axis, descending=bool(descending), k=k)

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        shape = inputs[0].shape
        if not shape:
            raise ValueError(f"{self!r}: a 0-d tensor has no axis to sort (reshape it to (1,))")
        axis = normalize_axis(self.axis, len(shape), "argsort")
        if self.k is None:
            return ((shape, _INT32),)
        if not 0 <= self.k <= shape[axis]:
            raise ValueError(f"topk: k={self.k} is out of range for axis {self.axis} of size "
                             f"{shape[axis]}")
        return ((shape[:axis] + (self.k,) + shape[axis + 1:], _INT32),)

    def kernel(self, x):
        axis = self.axis
        if not self.descending:
            order = np.argsort(x, axis=axis, kind="stable")
        else:
            # a stable ascending sort of the reversed values, reversed back: descending, equal
            # values in ascending position, NaN first (negating would overflow integers, and
            # would put NaN last)
            n = x.shape[axis]
            order = (n - 1) - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"),
                                      axis)
        if self.k is not None:
            order = order[(slice(None),) * axis + (slice(0, self.k),)]
        return np.ascontiguousarray(order, dtype=_INT32)
