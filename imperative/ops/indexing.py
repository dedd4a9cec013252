"""Indexing ops, numpy-exact, and numpy's rules on index items and shapes that the Tensor's
index front end (imperative/tensor_index.py) checks a user's index with.

An index is split at dispatch into a hashable structure, the op's `items`, and the index
arrays, which become the op's extra inputs: `x[1:, idx, None]` runs
`IndexingMultiAxisVec(items=[1:, <tensor>, None])` on the inputs `(x, idx)`. Each item is

* an int, `None`, `Ellipsis`,
* `("slice", start, stop, step)` (a slice; slices are not hashable before Python 3.12),
* `("bool", b)`: a 0-d boolean index (numpy: a new axis of length 1 or 0),
* `TENSOR`: the next index input, an integer array or a boolean mask.

Everything known at dispatch is checked there (IndexError as numpy raises it: Python ints
out of range, too many indices, mask shapes, numpy index arrays out of range); the values of
index *tensors* are known only to the kernel, which reports them as an async error.
Only a boolean-mask tensor makes the result's shape depend on values (a VALUE_DEPENDENT op).

Tensor values are immutable: `tensor[index] = value` computes the new value with SetSubtensor /
IndexingSetMultiAxisVec and rebinds the tensor to it. Those ops are INPLACE_CAPABLE, so the
worker writes into the old buffer when nothing else holds it.
"""
import functools
import operator

import numpy as np

from .. import dtype as D
from ..backend import native
from .._core import CopyWithAssigned
from .base import Op, check_arity, reject_quantized
from .nn_common import check_int_dtype, check_ndim
from .shape import Subtensor

__all__ = ["IndexingMultiAxisVec", "MaskedIndexingMultiAxisVec", "SetSubtensor",
           "IndexingSetMultiAxisVec", "Embedding"]

TENSOR = "tensor"   # the item standing for the next index input
NOT_AN_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) "
                 "and integer or boolean arrays are valid indices")


# --------------------------------------------------------------------------- items


def is_tensor_item(item):
    return isinstance(item, str) and item == TENSOR


def is_basic_item(item):
    """Ints, slices, None and `...` index without copying (numpy's basic indexing)."""
    return not is_tensor_item(item) and not (isinstance(item, tuple) and item[0] == "bool")


def _slice_item(s):
    start, stop, step = (None if v is None else operator.index(v)
                         for v in (s.start, s.stop, s.step))
    if step == 0:
        raise ValueError("slice step cannot be zero")
    return ("slice", start, stop, step)


def index_item(obj):
    """One index element that is not an array → its hashable item."""
    if obj is None or obj is Ellipsis:
        return obj
    if isinstance(obj, slice):
        return _slice_item(obj)
    if isinstance(obj, tuple) and len(obj) == 4 and obj[0] == "slice":
        return _slice_item(slice(*obj[1:]))
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "bool":
        return ("bool", bool(obj[1]))
    if isinstance(obj, (bool, np.bool_)):
        return ("bool", bool(obj))
    try:
        return operator.index(obj)
    except TypeError:
        raise IndexError(NOT_AN_INDEX) from None


def _to_numpy(item):
    """The item as numpy takes it (for everything but TENSOR)."""
    if isinstance(item, tuple):
        return slice(*item[1:]) if item[0] == "slice" else item[1]
    return item


def _format_item(item):
    if is_tensor_item(item):
        return "<tensor>"
    if item is Ellipsis:
        return "..."
    if isinstance(item, tuple) and item[0] == "slice":
        start, stop, step = ("" if v is None else str(v) for v in item[1:])
        return f"{start}:{stop}" + (f":{step}" if step else "")
    return repr(_to_numpy(item))


# ---------------------------------------------------------------------- numpy's rules on shapes
#
# These work on anything with `.shape` and `.dtype`: the records infer gets, Tensors and numpy
# arrays (the front end checks constant index arrays with them before they become inputs).


def pair_items(items, operands):
    """Each item with the operand it stands for (None for the others)."""
    operands = iter(operands)
    return [(item, next(operands) if is_tensor_item(item) else None) for item in items]


def _is_mask(operand):
    return operand is not None and operand.dtype.kind == "b"


def _consumed(item, operand):
    """How many input axes an item indexes: a k-d mask k, None/`...`/0-d bool none."""
    if operand is not None:
        return len(operand.shape) if _is_mask(operand) else 1
    if item is None or item is Ellipsis or isinstance(item, tuple) and item[0] == "bool":
        return 0
    return 1


def first_axes(pairs, ndim):
    """The first input axis each item indexes, and how many axes `...` stands for (0 when
    there is none: the axes left over are then indexed by the implicit trailing `:`)."""
    ellipses = sum(item is Ellipsis for item, _ in pairs)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed(item, operand) for item, operand in pairs)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, "
                         f"but {used} were indexed")
    width = ndim - used if ellipses else 0
    axes, axis = [], 0
    for item, operand in pairs:
        axes.append(axis)
        axis += width if item is Ellipsis else _consumed(item, operand)
    return axes, width


def check_int(i, size, axis):
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")


def check_mask(mask_shape, shape, axis):
    for k, (m, n) in enumerate(zip(mask_shape, shape[axis:])):
        if m != n:
            raise IndexError(f"boolean index did not match indexed array along axis {axis + k}; "
                             f"size of axis is {n} but size of corresponding boolean axis is {m}")


def check_index_dtype(dtype):
    if dtype.kind not in "iub":
        raise IndexError("arrays used as indices must be of integer (or boolean) type, "
                         f"got {D.dtype_name(dtype)}")


def _advanced_shape(item, operand, shape, axis):
    """The shape an advanced item contributes before broadcasting (None: a mask's unknown count)."""
    if operand is None:                       # an int among advanced indices, or a 0-d bool
        if isinstance(item, tuple):
            return (int(item[1]),)
        check_int(item, shape[axis], axis)
        return ()
    check_index_dtype(operand.dtype)
    if _is_mask(operand):
        check_mask(operand.shape, shape, axis)
        return (None,)
    return tuple(operand.shape)


def _basic_dims(item, shape, axis):
    if item is None:
        return (1,)
    if isinstance(item, tuple):               # a slice
        return (len(range(*slice(*item[1:]).indices(shape[axis]))),)
    check_int(item, shape[axis], axis)
    return ()


def _broadcast_index_shapes(shapes):
    """The advanced indices' shapes broadcast; a mask's unknown count stays None."""
    known = [s for s in shapes if None not in s]
    try:
        out = np.broadcast_shapes(*known)
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         "with shapes " + " ".join(map(str, known))) from None
    ndim = max(map(len, shapes))
    out = [1] * (ndim - len(out)) + list(out)
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n is None:
                out[i] = None
    return tuple(out)


def indexed_shape(items, operands, shape):
    """The shape of `x[index]` for an x of `shape`, by numpy's rules; None when a boolean
    mask makes it depend on values: then the mask's count is None, the other dimensions
    are known. Raises IndexError as numpy does.

    Advanced indices (arrays, masks, 0-d bools, and ints once any array is present) broadcast
    together; their dimensions replace the first of them when they are adjacent, and go to
    the front when a slice, None or `...` separates them."""
    pairs = pair_items(items, operands)
    axes, width = first_axes(pairs, len(shape))
    any_advanced = any(not is_basic_item(item) for item, _ in pairs)
    dims, advanced, place, last, adjacent = [], [], None, None, True
    for i, ((item, operand), axis) in enumerate(zip(pairs, axes)):
        if item is Ellipsis:
            dims.extend(shape[axis:axis + width])
        elif not is_basic_item(item) or (any_advanced and isinstance(item, int)):
            advanced.append(_advanced_shape(item, operand, shape, axis))
            if place is None:
                place = len(dims)
            adjacent = adjacent and (last is None or last == i - 1)
            last = i
        else:
            dims.extend(_basic_dims(item, shape, axis))
    consumed = sum(_consumed(item, operand) for item, operand in pairs) + width
    dims.extend(shape[consumed:])
    if not advanced:
        return tuple(dims)
    joined = _broadcast_index_shapes(advanced)
    if not adjacent:
        place = 0
    return tuple(dims[:place]) + tuple(joined) + tuple(dims[place:])


def _without_leading_ones(shape):
    """A value's shape for assignment: leading 1s never matter when it broadcasts, and
    numpy's boolean-mask assignment takes only 0-d or 1-d values."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _check_value_shape(value_shape, target):
    """numpy's assignment rule: the value broadcasts to the target (extra leading 1s
    allowed). A None in target (a mask's count, known only when the kernel runs) takes
    any size there, for the kernel to check."""
    trimmed = _without_leading_ones(value_shape)
    ok = len(trimmed) <= len(target) and all(
        v == 1 or t is None or v == t for v, t in zip(trimmed[::-1], target[::-1]))
    if not ok:
        dims = ", ".join("N" if n is None else str(n) for n in target)
        raise ValueError(f"could not broadcast input array from shape {tuple(value_shape)} "
                         f"into shape ({dims}{',' if len(target) == 1 else ''})"
                         + (" (N: the number of True elements of the mask)"
                            if None in target else ""))


# --------------------------------------------------------------------------- ops


class _IndexOp(Op):
    """`items` describes the index; each TENSOR item is one more input after the fixed ones."""

    _fields = ("items",)
    _ALLOWS_ADVANCED = True
    _FIXED_INPUTS = 1          # x (getitem); x and the value (setitem)

    def __init__(self, items):
        items = tuple(i if is_tensor_item(i) else index_item(i)
                      for i in (items if isinstance(items, (tuple, list)) else (items,)))
        if not self._ALLOWS_ADVANCED and not all(map(is_basic_item, items)):
            raise ValueError(f"{type(self).__name__} takes ints, slices, None and '...' only; "
                             "use the MultiAxisVec ops for array and boolean indices")
        # numpy's index with a hole at each TENSOR item, made once: index() runs per kernel
        self._set(items=items, _numpy_items=tuple(None if is_tensor_item(i) else _to_numpy(i)
                                                  for i in items),
                  _tensor_slots=tuple(k for k, i in enumerate(items) if is_tensor_item(i)))

    def __repr__(self):
        return f"{type(self).__name__}([{', '.join(map(_format_item, self.items))}])"

    def _target_shape(self, inputs):
        """Check the inputs and return (x, the shape of x[index] or None)."""
        n_tensors = sum(map(is_tensor_item, self.items))
        check_arity(self, inputs, self._FIXED_INPUTS + n_tensors)
        x = inputs[0]
        return x, indexed_shape(self.items, inputs[self._FIXED_INPUTS:], x.shape)

    def index(self, arrays):
        """The numpy index, given the index inputs' arrays."""
        if len(self._tensor_slots) == len(self._numpy_items):   # Tensors only: x[idx]
            return tuple(arrays)
        if not self._tensor_slots:
            return self._numpy_items
        index = list(self._numpy_items)
        for slot, array in zip(self._tensor_slots, arrays):
            index[slot] = array
        return tuple(index)


class IndexingMultiAxisVec(_IndexOp):
    """`x[index]` with integer index arrays among the items: inputs (x, *index_arrays).
    The result is a copy, as in numpy."""

    COST_BY_OUTPUT = True       # it reads only the elements it picks

    def infer(self, inputs):
        x, shape = self._target_shape(inputs)
        if None in shape:               # a mask's count: the shape depends on values
            shape = None
        if shape is None and not self.value_dependent:
            raise TypeError(f"{self!r}: a boolean mask input makes the shape depend on values; "
                            "use MaskedIndexingMultiAxisVec")
        return ((shape, x.dtype),)

    def kernel(self, x, *indices):
        return np.asarray(x[self.index(indices)])

    def direct_kernel(self, inputs):
        # x[idx], one index array and nothing else: numpy's own subscript (a copy, as the
        # kernel's), without the kernel's Python frames
        if type(self) is IndexingMultiAxisVec and len(self.items) == 1 and self._tensor_slots:
            return operator.getitem, ()
        return None


class MaskedIndexingMultiAxisVec(IndexingMultiAxisVec):
    """`x[index]` with a boolean-mask tensor among the index inputs: the number of selected
    elements, hence the shape, is known only when the kernel has run."""

    VALUE_DEPENDENT = True


class SetSubtensor(_IndexOp):
    """The value of `x` after `x[index] = value` for a basic index: inputs (x, value), the
    value already of x's dtype. Writes into x's buffer only when the core hands it over
    (`out=`, x dying and unshared); otherwise into a copy."""

    _ALLOWS_ADVANCED = False
    _FIXED_INPUTS = 2
    INPLACE_CAPABLE = True

    def infer(self, inputs):
        x, target = self._target_shape(inputs)
        value = inputs[1]
        if not D.same_dtype(value.dtype, x.dtype):
            raise TypeError(f"{self!r}: the value has dtype {D.dtype_name(value.dtype)}, the "
                            f"tensor {D.dtype_name(x.dtype)}; convert it first")
        _check_value_shape(value.shape, target)
        return ((x.shape, x.dtype),)

    def kernel(self, x, value, *indices, out=None):
        # `out` is some dying input of x's shape and dtype: it may be the value or an index
        # array, and only x's own buffer may be overwritten.
        result = out if out is x else x.copy()
        result[self.index(indices)] = value.reshape(_without_leading_ones(value.shape))
        return result

    def direct_kernel(self, inputs):
        # a basic index (no index arrays): the kernel's copy and write, without its frames
        if type(self) is not SetSubtensor or self._tensor_slots:
            return None
        shape = tuple(inputs[1].shape)
        trimmed = _without_leading_ones(shape)
        return CopyWithAssigned(self._numpy_items, None if trimmed == shape else trimmed), ()


class IndexingSetMultiAxisVec(SetSubtensor):
    """SetSubtensor for any index: inputs (x, value, *index_arrays)."""

    _ALLOWS_ADVANCED = True


class IndexingIncrMultiAxisVec(IndexingSetMultiAxisVec):
    # (not in __all__: the scatter-add behind the gradients of gathers, autodiff/rules_indexing.py)
    """The value of `x` after `x[index] += value`, repeated indices accumulating
    (numpy.add.at): inputs (x, value, *index_arrays), the value of x's dtype."""

    def kernel(self, x, value, *indices, out=None):
        result = out if out is x else x.copy()
        index = self.index(indices)
        if not native.rows_add(result, index, value):
            np.add.at(result, index, value)
        return result


@functools.lru_cache(maxsize=1024)
@functools.lru_cache(maxsize=1024)
def subtensor_op(items):
    """Basic indexing is a view: shape.Subtensor, interned by our hashable items (one op
    object per index, so that the core's inference cache serves the next `x[1:3]`)."""
    return Subtensor(tuple(_to_numpy(item) for item in items))


class Embedding(Op):
    """`Embedding()`: inputs integer indices (any shape) and weight (num_embeddings, dim);
    output indices.shape + (dim,), the rows of weight. An index outside
    [0, num_embeddings) is an IndexError when the op runs (negative ones too, as in PyTorch)."""

    def __init__(self):
        pass

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        indices, weight = inputs
        check_int_dtype("embedding", "indices", indices.dtype)
        check_ndim("embedding", "weight", weight.shape, 2, "(num_embeddings, embedding_dim)")
        return ((indices.shape + weight.shape[1:], weight.dtype),)

    def kernel(self, indices, weight):
        rows = weight.shape[0]
        if indices.size and (indices.min() < 0 or indices.max() >= rows):
            bad = indices[(indices < 0) | (indices >= rows)].flat[0]
            raise IndexError(f"embedding: index {bad} is out of range for {rows} embeddings")
        return weight[indices]
