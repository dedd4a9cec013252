"""Type aliases for the public API's annotations (what functions accept)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, Union

import numpy as np

if TYPE_CHECKING:
    from ._core import Device, TensorBase
    from .tensor import Tensor

# a Tensor, or anything `Tensor(data)` takes (an array, a Python number, nested lists)
TensorLike = Union["Tensor", "TensorBase", np.ndarray, int, float, bool, Sequence]
DTypeLike = Union[str, type, np.dtype]
DeviceLike = Union[str, "Device"]
ShapeLike = Union[int, Sequence[int], "TensorBase"]
AxisLike = Union[int, Sequence[int], None]
PairLike = Union[int, Sequence[int]]          # a kernel size, stride, padding: int or (h, w)
