"""The Tensor's index front end: a user's index, as `Tensor.__getitem__` and `__setitem__`
receive it, turned into an indexing op's hashable items and its index operands, with every
error numpy raises at the call raised here (ops/indexing.py holds the ops and numpy's rules).
"""
import numpy as np

from . import _core
from .ops.base import cached_op
from .ops.indexing import (NOT_AN_INDEX, TENSOR, IndexingMultiAxisVec, IndexingSetMultiAxisVec,
                           MaskedIndexingMultiAxisVec, SetSubtensor, check_index_dtype,
                           check_int, check_mask, first_axes, index_item, is_basic_item,
                           is_tensor_item, pair_items, subtensor_op)
from .ops.shape import check_index_range


def _as_index_array(obj):
    """A list, tuple or array index element → a numpy array (numpy's conversion)."""
    try:
        arr = np.asarray(obj)
    except ValueError:                       # ragged nesting
        raise IndexError(NOT_AN_INDEX) from None
    if arr.size == 0 and not isinstance(obj, np.ndarray):
        arr = arr.astype(np.intp)            # numpy reads `[]` as an empty integer index
    if arr.dtype.kind == "O":                # Python ints past 64 bits
        for item in arr.flat:
            if isinstance(item, int) and not isinstance(item, bool):
                check_index_range(item)
    if arr.dtype.kind not in "iub":
        raise IndexError(NOT_AN_INDEX if arr.ndim == 0 or arr.dtype.kind in "OUSV" else
                         "arrays used as indices must be of integer (or boolean) type")
    return arr


def _parse(index):
    """A user index → (items, operands); operands are Tensors or numpy arrays."""
    items, operands = [], []
    for obj in index if isinstance(index, tuple) else (index,):
        if isinstance(obj, _core.TensorBase):
            check_index_dtype(obj.dtype)
            items.append(TENSOR)
            operands.append(obj)
        elif obj is None or obj is Ellipsis or isinstance(obj, (slice, bool, np.generic)) \
                or hasattr(obj, "__index__") and not isinstance(obj, np.ndarray):
            items.append(index_item(obj))
        else:                                # sequences and arrays, as numpy reads them
            arr = _as_index_array(obj)
            if arr.ndim == 0:                # numpy takes 0-d arrays as scalars
                items.append(index_item(arr[()]))
            else:
                items.append(TENSOR)
                operands.append(arr)
    return items, operands


def _constants_to_tensors(items, operands, shape, tensor_cls):
    """Numpy index arrays are known now: check them like Python ints (IndexError at the
    call) and turn them into index inputs (`tensor_cls` objects). A numpy mask becomes its
    nonzero() arrays, which numpy defines it to be, so its result shape is known at
    dispatch."""
    axes, _ = first_axes(pair_items(items, operands), len(shape))
    out_items, out_operands, operands = [], [], iter(operands)
    for item, axis in zip(items, axes):
        operand = next(operands) if is_tensor_item(item) else None
        if not isinstance(operand, np.ndarray):
            out_items.append(item)
            if operand is not None:
                out_operands.append(operand)
            continue
        if operand.dtype.kind == "b":
            check_mask(operand.shape, shape, axis)
            parts = operand.nonzero()
        else:
            if operand.size:
                for bound in (operand.min(), operand.max()):
                    check_int(int(bound), shape[axis], axis)
            parts = (operand,)
        out_items.extend([TENSOR] * len(parts))
        out_operands.extend(tensor_cls(p) for p in parts)
    return out_items, out_operands


def prepare(tensor, index, tensor_cls):
    """A user's index into `tensor` as (items, operands): the op's hashable items and its index
    inputs, numpy index arrays made `tensor_cls` objects (the Tensor class) at the call."""
    items, operands = _parse(index)
    # Reading .shape waits for a value-dependent producer (x = y[mask]): infer needs shapes.
    shape = tensor.shape
    for operand in operands:
        operand.shape  # noqa: B018
    if any(isinstance(o, np.ndarray) for o in operands):
        items, operands = _constants_to_tensors(items, operands, shape, tensor_cls)
    return tuple(items), operands


def read_op(items, operands):
    """The op of `tensor[index]`, as numpy: basic indices give a view sharing storage
    (Subtensor); arrays and masks give a copy (IndexingMultiAxisVec, or its masked variant)."""
    if not operands and all(map(is_basic_item, items)):
        return subtensor_op(items)
    masked = any(o.dtype.kind == "b" for o in operands)
    return cached_op(MaskedIndexingMultiAxisVec if masked else IndexingMultiAxisVec, items)


def write_op(items, operands):
    """The op of `tensor[index] = value`: inputs (tensor, value, *operands)."""
    basic = not operands and all(map(is_basic_item, items))
    return cached_op(SetSubtensor if basic else IndexingSetMultiAxisVec, items)
