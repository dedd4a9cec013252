"""Indexing: `getitem(tensor, index)` and `setitem(tensor, index, value)` for Tensor."""
from .. import _core
from .base import cached_op
from .shape import Subtensor

__all__ = []


def getitem(tensor, index):
    """`tensor[index]` (basic indexing for now: ints, slices, `...`, None)."""
    return _core.apply(Subtensor(index), tensor)[0]


def setitem(tensor, index, value):
    """`tensor[index] = value`: rebinds `tensor` to a new value."""
    raise NotImplementedError("Tensor.__setitem__ lands with the op library's indexing work")
