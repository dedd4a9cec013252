"""Shape ops. Most return views that share their input's storage (ALIASES_INPUT); Concat and
Split join and cut along an axis."""
import numbers
import operator

import numpy as np

from .. import _kernels
from .._core import ArraysAsOne
from .base import (Op, check_arity, check_axis, normalize_axis, promote_inputs, promoted_dtype,
                   remember)

_INT32 = np.dtype(np.int32)


def check_shape_arg(shape, what):
    """`shape` (an int or a sequence of integers) as a tuple of ints (see check_int_tuple),
    with no more elements than an array can hold."""
    entries = check_int_tuple(shape, what)
    check_size(entries, what)
    return entries


def check_int_tuple(shape, what):
    """`shape` (an int or a sequence of integers) as a tuple of ints. Entries go through
    `operator.index`, so a float (`reshape(3.7, 2)`) raises TypeError instead of truncating."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        entries = list(shape)
    except TypeError:
        raise TypeError(f"{what}: shape must be an int or a sequence of ints, "
                        f"got {shape!r}") from None
    for i, s in enumerate(entries):
        try:
            entries[i] = operator.index(s)
        except TypeError:
            raise TypeError(f"{what}: expected integers, got {s!r} ({type(s).__name__}) at "
                            f"position {i} of {tuple(shape)!r}") from None
    return tuple(entries)


# numpy's limit (an array's bytes fit a signed 64-bit size); checked here, naming the
# argument, because past it the core's C arithmetic would only say "too large to convert"
MAX_ELEMENTS = 2 ** 63 - 1


def check_size(shape, what):
    """ValueError naming `what` when the dimensions of `shape` (ints; -1 and other negative
    entries are skipped, their own checks reject them) multiply past MAX_ELEMENTS."""
    size = 1
    for s in shape:
        if s > 0:
            size *= s
    if size > MAX_ELEMENTS:
        raise ValueError(f"{what}: shape {tuple(shape)} has {size} elements, more than an "
                         f"array can hold (2**63 - 1)")


def _ints(entries, message):
    """`entries` as a tuple of ints (any integer but a bool); for one that is none, a
    TypeError whose text is `message(entry)`."""
    out = []
    for v in entries:
        try:
            if isinstance(v, bool):
                raise TypeError
            out.append(operator.index(v))
        except TypeError:
            raise TypeError(message(v)) from None
    return tuple(out)


def _roll_ints(value, name):
    """F.roll's `shifts` or `axis` (an int or a sequence of ints) as a tuple of ints."""
    entries = value if isinstance(value, (tuple, list)) else (value,)
    return _ints(entries, lambda v: (
        f"roll: {name} must be an int or a tuple of ints, got {value!r}"
        + (f" (holding {v!r}, a {type(v).__name__})" if entries is value
           else f" ({type(v).__name__})")))


def roll_cuts(shifts, axis, shape):
    """F.roll(x, shifts, axis) on a tensor of `shape` (the flattened one's for axis None)
    as (axis, cut) pairs: each moves the values from `cut` on along `axis` to its front.
    Shifts on one axis add up; whole turns and empty axes are left out."""
    shift = _roll_ints(shifts, "shifts")
    if axis is None:
        if len(shift) != 1:
            raise ValueError(f"roll: with axis=None (the flattened tensor), shifts must be one "
                             f"int, got {shifts!r}; give one axis per shift to roll along "
                             f"several axes")
        axes = (0,)
    else:
        axes = _roll_ints(axis, "axis")
        if len(axes) != len(shift):
            raise ValueError(f"roll: shifts and axis must have the same length (one shift "
                             f"per axis), got shifts={shifts!r} of length {len(shift)} and "
                             f"axis={axis!r} of length {len(axes)}")
    total = {}
    for s, a in zip(shift, axes):
        a = normalize_axis(a, len(shape), "roll")
        total[a] = total.get(a, 0) + s
    # a 0-d tensor's one axis (0 or -1, as for reductions) holds its one value
    sizes = {a: shape[a] if shape else 1 for a in total}
    return [(a, sizes[a] - s % sizes[a]) for a, s in sorted(total.items())
            if sizes[a] and s % sizes[a]]


def pad_widths(pad, shape):
    """F.pad's `pad` (PyTorch's flat (before, after) pairs, the first pair for the last
    axis) on a tensor of `shape` as (axis, before, after) for each axis it changes. A
    negative width crops; the cropped axis must keep a size of 0 or more."""
    if not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad: pad must be a tuple of ints ((before, after) pairs from the "
                        f"last axis), got {pad!r} ({type(pad).__name__})")
    widths = _ints(pad, lambda v: f"pad: pad must be a tuple of ints, got {pad!r} (holding "
                                  f"{v!r}, a {type(v).__name__})")
    if len(widths) % 2:
        raise ValueError(f"pad: pad must hold (before, after) pairs, an even number of ints, "
                         f"got {len(widths)}: {pad!r}")
    if len(widths) // 2 > len(shape):
        raise ValueError(f"pad: pad {pad!r} gives {len(widths) // 2} (before, after) pairs "
                         f"but x has only {len(shape)} dimension(s) (shape {shape})")
    out = []
    for i in range(len(widths) // 2):
        axis, before, after = len(shape) - 1 - i, widths[2 * i], widths[2 * i + 1]
        if shape[axis] + min(before, 0) + min(after, 0) < 0:
            raise ValueError(f"pad: pad ({before}, {after}) for axis {axis} of size "
                             f"{shape[axis]} crops more than it holds (shape {shape})")
        if before or after:
            out.append((axis, before, after))
    return out


def _reshape(x, shape):
    """x.reshape(shape); where that copies a view that repeats values (a broadcast), the
    copy made by _repeated instead."""
    if 0 not in x.strides:
        return x.reshape(shape)
    try:
        return x.reshape(shape, copy=False)
    except TypeError:           # numpy before 2.1: no copy=
        return x.reshape(shape)
    except ValueError:          # not as a view
        return _repeated(x).reshape(shape)


def _repeated(x):
    """A C-contiguous copy of x whose stride-0 axes repeat values: the distinct values
    copied once, then np.repeat along each repeating axis, innermost first. numpy's copy
    of such a view runs its inner loop a few values at a time (an upsampling's broadcast
    pairs: 1.6 ms for 4 MiB); these passes are long loops (0.4 ms)."""
    repeating = [a for a in range(x.ndim) if x.strides[a] == 0 and x.shape[a] > 1]
    distinct = np.ascontiguousarray(
        x[tuple(slice(0, 1) if a in repeating else slice(None) for a in range(x.ndim))])
    for a in reversed(repeating):
        distinct = np.repeat(distinct, x.shape[a], axis=a)
    return distinct


class Reshape(Op):
    """`Reshape(shape)`: one -1 allowed; a view when the layout allows."""

    _fields = ("shape",)
    ALIASES_INPUT = True

    def __init__(self, shape):
        shape = check_shape_arg(shape, "reshape")
        if sum(1 for s in shape if s == -1) > 1:
            raise ValueError(f"reshape: at most one -1 is allowed, got {shape}")
        if any(s < -1 for s in shape):
            raise ValueError(f"reshape: negative size in {shape}")
        self._set(shape=shape, _resolved={})

    def resolved(self, in_shape):
        """The output shape for an input of `in_shape` (memoised: it runs at each kernel
        call, and np.prod costs microseconds)."""
        found = self._resolved.get(in_shape)
        if found is None:
            found = self._resolve(in_shape)
            remember(self._resolved, in_shape, found, 64)
        return found

    def _resolve(self, in_shape):
        size = int(np.prod(in_shape, dtype=np.int64))
        known = int(np.prod([s for s in self.shape if s != -1], dtype=np.int64))
        if -1 in self.shape:
            if known == 0 or size % known:
                raise ValueError(f"reshape: cannot reshape {in_shape} (size {size}) "
                                 f"into {self.shape}")
            return tuple(size // known if s == -1 else s for s in self.shape)
        if known != size:
            raise ValueError(f"reshape: cannot reshape {in_shape} (size {size}) into {self.shape}")
        return self.shape

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        return ((self.resolved(inputs[0].shape), inputs[0].dtype),)

    def kernel(self, x):
        return _reshape(x, self.resolved(x.shape))

    def direct_kernel(self, inputs):
        return _reshape, (self.resolved(inputs[0].shape),)


class Broadcast(Op):
    """`Broadcast(shape)`: numpy broadcasting to `shape` (a read-only view)."""

    _fields = ("shape",)
    ALIASES_INPUT = True

    def __init__(self, shape):
        self._set(shape=check_shape_arg(shape, "broadcast_to"))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        src = inputs[0].shape
        ok = len(src) <= len(self.shape) and all(
            s == t or s == 1 for s, t in zip(src[::-1], self.shape[::-1]))
        if not ok or any(s < 0 for s in self.shape):
            raise ValueError(f"broadcast_to: cannot broadcast shape {src} to {self.shape}")
        return ((self.shape, inputs[0].dtype),)

    def kernel(self, x):
        return np.broadcast_to(x, self.shape)


def check_permutation(axes, ndim, shape=None):
    """`axes` (ints) with negative ones counted from the end, as numpy's transpose: a
    ValueError saying which axis is out of range or repeated, or that their number is not
    the rank, unless they permute the `ndim` dimensions."""
    def refuse(why):
        of = f" of shape {tuple(shape)}" if shape is not None else ""
        raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation of the {ndim} "
                         f"dimensions{of}: {why}")
    if len(axes) != ndim:
        refuse(f"{len(axes)} axes given")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            refuse(f"axis {a} is out of range")
        a = a + ndim if a < 0 else a
        if a in out:
            refuse(f"axis {a} is repeated")
        out.append(a)
    return tuple(out)


class Dimshuffle(Op):
    """`Dimshuffle(pattern)`: a permutation of the axes (transpose)."""

    _fields = ("pattern",)
    ALIASES_INPUT = True

    def __init__(self, pattern):
        self._set(pattern=tuple(int(p) for p in pattern))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        shape = inputs[0].shape
        if sorted(self.pattern) != list(range(len(shape))):
            check_permutation(self.pattern, len(shape), shape)   # (raises, saying why)
        return ((tuple(shape[p] for p in self.pattern), inputs[0].dtype),)

    def kernel(self, x):
        return x.transpose(self.pattern)     # (the method: np.transpose's wrapper costs more)

    def direct_kernel(self, inputs):
        return np.ndarray.transpose, (self.pattern,)


class _AxesOp(Op):
    """An op parameterised by one axis or a tuple of axes; its outputs are views."""

    _fields = ("axis",)
    ALIASES_INPUT = True
    _what = None            # the function's name in errors

    def __init__(self, axis):
        axes = axis if isinstance(axis, (list, tuple)) else (axis,)
        self._set(axis=tuple(check_axis(a, self._what) for a in axes))


class AddAxis(_AxesOp):
    """`AddAxis(axis)`: insert size-1 dimensions at the given positions of the output."""

    _what = "expand_dims"

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        nd = len(inputs[0].shape) + len(self.axis)
        axes = sorted(normalize_axis(a, nd, "expand_dims") for a in self.axis)
        shape = list(inputs[0].shape)
        for a in axes:
            shape.insert(a, 1)
        return ((tuple(shape), inputs[0].dtype),)

    def kernel(self, x):
        return np.expand_dims(x, self.axis)


class RemoveAxis(_AxesOp):
    """`RemoveAxis(axis)`: drop size-1 dimensions."""

    _what = "squeeze"

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        shape = inputs[0].shape
        axes = {normalize_axis(a, len(shape), "squeeze") for a in self.axis}
        for a in axes:
            if shape[a] != 1:
                raise ValueError(f"squeeze: dimension {a} of shape {shape} has size "
                                 f"{shape[a]}, not 1")
        return ((tuple(s for i, s in enumerate(shape) if i not in axes), inputs[0].dtype),)

    def kernel(self, x):
        return np.squeeze(x, self.axis)


class GetVarShape(Op):
    """The input's shape as an int32 vector."""

    def __init__(self):
        pass

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        return (((len(inputs[0].shape),), _INT32),)

    def kernel(self, x):
        return np.asarray(x.shape, dtype=_INT32)


class Identity(Op):
    """Returns its input (a new handle sharing the same storage)."""

    ALIASES_INPUT = True

    def __init__(self):
        pass

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        return ((inputs[0].shape, inputs[0].dtype),)

    def kernel(self, x):
        return x


class FastpathCopy(Identity):
    """Shares the input's value; no kernel work."""


def check_index_range(index):
    """`index` (an int) when it fits 64 bits; past that numpy would say it is no integer."""
    if not -MAX_ELEMENTS - 1 <= index <= MAX_ELEMENTS:
        raise IndexError(f"index {index} is out of bounds (indices are 64-bit)")
    return index


def _normalize_index_item(item):
    if isinstance(item, slice):
        return ("slice", item.start, item.stop, item.step)
    if item is None or item is Ellipsis:
        return item
    if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
        return check_index_range(int(item))
    raise IndexError(f"only integers, slices, '...' and None are basic indices, "
                     f"got {type(item).__name__}")


def _index_from_items(items):
    return tuple(slice(*it[1:]) if isinstance(it, tuple) else it for it in items)


class Subtensor(Op):
    """Basic indexing (ints, slices, `...`, None): a view of the input."""

    _fields = ("items",)
    ALIASES_INPUT = True

    def __init__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        items = tuple(_normalize_index_item(i) for i in index)
        self._set(items=items, _index=_index_from_items(items))

    def index(self):
        return self._index

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        x = inputs[0]
        # Index a zero-stride stand-in of the same shape: numpy checks bounds, no data moves.
        probe = np.broadcast_to(np.empty((), dtype=np.bool_), x.shape)
        return ((probe[self.index()].shape, x.dtype),)

    def kernel(self, x):
        return np.asarray(x[self.index()])

    def direct_kernel(self, inputs):
        # (the core makes a numpy scalar, from an all-integer index, an array as asarray does)
        return operator.getitem, (self.index(),)


class Concat(Op):
    """`Concat(axis=0)`: numpy.concatenate of one or more inputs, promoted to one dtype."""

    _fields = ("axis",)

    def __init__(self, axis=0):
        self._set(axis=check_axis(axis, "concat"))

    def infer(self, inputs):
        if not inputs:
            raise ValueError("concat: needs at least one tensor, got none")
        first = inputs[0].shape
        if not first:
            raise ValueError("concat: zero-dimensional tensors cannot be concatenated "
                             "(use stack)")
        axis = normalize_axis(self.axis, len(first), "concat")
        for i, t in enumerate(inputs[1:], 1):
            same_rest = len(t.shape) == len(first) and all(
                a == b for d, (a, b) in enumerate(zip(t.shape, first)) if d != axis)
            if not same_rest:
                raise ValueError(f"concat: tensor {i} has shape {t.shape}, expected the shape "
                                 f"of tensor 0 {first} except along axis {axis}")
        shape = list(first)
        shape[axis] = sum(t.shape[axis] for t in inputs)
        return ((tuple(shape), promote_inputs(self, inputs)),)

    def kernel(self, *arrays):
        first = arrays[0].dtype
        for a in arrays:
            if a.dtype is not first:
                return np.concatenate(arrays, axis=self.axis,
                                      dtype=promoted_dtype([a.dtype for a in arrays]))
        return np.concatenate(arrays, axis=self.axis)       # (one dtype: nothing to promote)

    def direct_kernel(self, inputs):
        first = inputs[0].dtype
        if any(i.dtype is not first for i in inputs):
            return None
        return ArraysAsOne(_kernels.concatenate, self.axis), ()


def _split_points(spec, size, axis):
    """Start offsets of every piece after the first (numpy.split's convention)."""
    if isinstance(spec, int):
        if spec <= 0:
            raise ValueError(f"split: number of sections must be positive, got {spec}")
        if size % spec:
            raise ValueError(f"split: axis {axis} of size {size} does not divide into "
                             f"{spec} equal sections")
        return tuple(size // spec * k for k in range(1, spec))
    # numpy clips indices into [0, size]; a decreasing index gives an empty piece
    return tuple(min(max(i + size if i < 0 else i, 0), size) for i in spec)


class Split(Op):
    """`Split(axis, sections_or_indices)`: numpy.split. An int N gives N equal pieces; a
    tuple of indices gives the pieces between them. Outputs are views of the input."""

    _fields = ("axis", "sections_or_indices")
    ALIASES_INPUT = True

    def __init__(self, axis, sections_or_indices):
        spec = sections_or_indices
        if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
            spec = int(spec)
        elif isinstance(spec, (tuple, list)) and all(
                isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in spec):
            spec = tuple(int(i) for i in spec)
        else:
            raise TypeError(f"split: indices_or_sections must be an int or a sequence of ints, "
                            f"got {sections_or_indices!r}")
        self._set(axis=check_axis(axis, "split"), sections_or_indices=spec)

    def _pieces(self, shape):
        axis = normalize_axis(self.axis, len(shape), "split")
        points = _split_points(self.sections_or_indices, shape[axis], axis)
        bounds = (0,) + points + (shape[axis],)
        return axis, [(lo, max(lo, hi)) for lo, hi in zip(bounds, bounds[1:])]

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        (x,) = inputs
        if not x.shape:
            raise ValueError("split: cannot split a zero-dimensional tensor")
        axis, pieces = self._pieces(x.shape)
        return tuple((x.shape[:axis] + (hi - lo,) + x.shape[axis + 1:], x.dtype)
                     for lo, hi in pieces)

    def kernel(self, x):
        axis, pieces = self._pieces(x.shape)
        head = (slice(None),) * axis
        return tuple(x[head + (slice(lo, hi),)] for lo, hi in pieces)
