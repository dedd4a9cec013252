"""The base of every op: an immutable value with parameters, `infer` and `kernel`."""
import functools
import numbers

import numpy as np

from .._core import OpDef
from ..dtype import dtype_name, dtype_promotion, is_quantize

_FLOAT32 = np.dtype(np.float32)


class Op(OpDef):
    """An op is a small immutable value: equal when its parameters are equal, hashable,
    with a readable repr. Subclasses list their parameter names in `_fields` and call
    `self._set(name=value, ...)` from `__init__`.

    Flags the interpreter reads (class attributes): RECOMPUTABLE (False for RNG ops),
    INPLACE_CAPABLE, ALIASES_INPUT (outputs may be views of inputs), VALUE_DEPENDENT
    (output shape known only after the kernel runs), EPILOGUE_CAPABLE (`kernel(...,
    epilogue=)` can do the next op's work) and EPILOGUE_KIND (the epilogue that does this
    op's work; an instance sets `epilogue_kind` where it depends on a parameter, as
    Elemwise("RELU") does). See imperative/backend/epilogue.py.
    """

    _fields = ()

    def _set(self, **params):
        for name, value in params.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _params(self):
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other):
        return type(self) is type(other) and self._params() == other._params()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((type(self).__name__, self._params()))

    def __repr__(self):
        args = ", ".join(f"{f}={_show(getattr(self, f))}" for f in self._fields)
        return f"{type(self).__name__}({args})"

    @property
    def name(self):
        """The op's name in profiles (`Elemwise.ADD` style where a mode exists)."""
        return type(self).__name__


def _show(value):
    try:
        if hasattr(value, "kind") and hasattr(value, "itemsize"):
            return dtype_name(value)
        return repr(value)
    except Exception:
        return repr(value)


def cached_op(cls, *params):
    """`cls(*params)`, interned: ops are immutable values, and reusing one object lets the
    core reuse its inference cache. Parameters must be hashable.

    Parameters of different types make different ops, inside tuples too: True == 1 == 1.0
    hash alike, and an op made of a rejected `axis=1.0` (its infer raises) once served every
    later `axis=1` of the process. Ops made of ints, strs and Nones only (tuples of those
    too) are kept by their values alone, the others by value and type (0.03 us more a
    call), and those with other tuples by the types inside too."""
    plain = True
    for p in params:
        tp = type(p)
        if tp is tuple:
            if not _plain_tuple(p):
                return _interned_by_types(cls, _types_of(params), *params)
        elif not (tp is int or tp is str or p is None):
            plain = False
    return _interned(cls, *params) if plain else _interned_typed(cls, *params)


@functools.lru_cache(maxsize=4096)      # (plain parameters only: see cached_op)
def _interned(cls, *params):
    return cls(*params)


@functools.lru_cache(maxsize=4096, typed=True)      # (typed: 1, 1.0 and True differ)
def _interned_typed(cls, *params):
    return cls(*params)


@functools.lru_cache(maxsize=1024)
def _interned_by_types(cls, types, *params):
    return cls(*params)


def _plain_tuple(values):
    """Ints, strs, Nones and such tuples only: values equal to nothing of another type."""
    for v in values:
        tp = type(v)
        if not (tp is int or tp is str or v is None or tp is tuple and _plain_tuple(v)):
            return False
    return True


def _types_of(value):
    """The types of `value`, tuple by tuple: a key that (0, 1) and (0.0, 1) differ in."""
    if type(value) is tuple:
        return tuple(_types_of(v) for v in value)
    return type(value)


def remember(memo, key, value, limit):
    """memo[key] = value; a memo holding `limit` entries starts afresh, so that the keys a
    program uses now are memoised again however many others it met before (one that stopped
    growing once full left every later shape on the slow path for good)."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value


def without_dispatch(fn):
    """numpy's function `fn` without its __array_function__ dispatcher, which runs a Python
    function each call to find overrides that plain ndarrays never have (0.17 us of a 0.6 us
    np.concatenate): for direct kernels, whose inputs are the core's ndarrays. `fn` itself
    where numpy has no such attribute."""
    return getattr(fn, "_implementation", fn)


def writable_view(array, shape):
    """`array` reshaped to `shape` for a kernel that writes its result through the new
    shape. `ndarray.reshape` silently returns a copy when the layout does not allow a view
    (a transposed or Fortran-ordered array), and writes into that copy would be lost: this
    raises instead. Allocate buffers meant for it C-ordered (`np.empty(shape, dtype)`, not
    `np.empty_like`, which keeps the input's layout)."""
    view = array.reshape(shape)
    if array.size and not np.may_share_memory(view, array):
        raise ValueError(f"writable_view: a {array.shape} array with strides {array.strides} "
                         f"cannot be viewed as {shape} without a copy")
    return view


def as_buffer(value):
    """A numpy result as an array that later passes can write into with `out=`: ufuncs and
    products of 0-d or 1-d operands return a numpy scalar, which no `out=` accepts."""
    return value if type(value) is np.ndarray else np.asarray(value)


def check_arity(op, inputs, n):
    if len(inputs) != n:
        raise ValueError(f"op {op!r} takes {n} input(s), got {len(inputs)}")


def reject_quantized(op, inputs):
    for i, t in enumerate(inputs):
        if is_quantize(t.dtype):
            raise TypeError(f"op {op!r} does not support quantized dtype {dtype_name(t.dtype)} "
                            f"(input {i}); convert with astype('float32') first")


def check_axis(axis, op):
    """`axis` as an int, or a TypeError naming `op`, as numpy's for a bool or a float:
    `int(axis)` took 1.0 and True as 1, and truncated 1.5."""
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}")
    return int(axis)


def normalize_axis(axis, ndim, op):
    """An int axis in [-ndim, ndim) as a non-negative int; IndexError otherwise."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}")
    # a 0-d tensor counts as one value along one axis, 0 or -1, as in PyTorch
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise IndexError(f"{op}: axis {axis} is out of range for a tensor with {ndim} dimension(s)")
    return axis % ndim if ndim else 0


def normalize_axes(axis, ndim, op):
    """None, an int or a tuple of ints → a sorted tuple of distinct non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(sorted(normalize_axis(a, ndim, op) for a in axes))
    if ndim == 0:
        return ()               # a 0-d tensor's one axis (0 or -1) holds its one value
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return out


_PROMOTED = {}     # tuple of plain dtypes -> dtype_promotion's answer


def promoted_dtype(dtypes):
    """dtype_promotion of these dtypes, memoised for plain dtypes: kernels ask at every
    call, and dtype_promotion costs microseconds (quantized dtypes, whose metadata numpy
    ignores in == and hash, are never memoised)."""
    dtypes = tuple(dtypes)
    found = _PROMOTED.get(dtypes)
    if found is None:
        found = dtype_promotion(list(dtypes))
        if all(d.metadata is None for d in dtypes):
            remember(_PROMOTED, dtypes, found, 256)
    return found


def float_dtype(dtypes):
    """Result dtype of a float-only function of these input dtypes (ints and bools give
    float32, as the contract says)."""
    dt = promoted_dtype(dtypes)
    return _FLOAT32 if dt.kind in "biu" else dt


def promote_inputs(op, inputs):
    """The one dtype several data inputs are promoted to (numpy's rule, then downcast)."""
    reject_quantized(op, inputs)
    return dtype_promotion([t.dtype for t in inputs])


def check_real(value, fn, name):
    """`value` as a Python float when it is a real number (a bool is no number here);
    TypeError naming the function and the argument otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    return float(value)
