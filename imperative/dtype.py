"""Dtype rules of the imperative runtime.

This module decides which numpy dtypes a tensor may have and how dtypes are inferred and
promoted. The quantized dtypes (their representation and conversions) are in
imperative/quantized.py, whose public names this module re-exports. It depends on numpy
only.
"""

import collections.abc

import numpy as np

from .quantized import (convert_from_qint4, convert_from_qint8, convert_from_qint32,
                        convert_from_quint4, convert_from_quint8, convert_to_qint4,
                        convert_to_qint8, convert_to_qint32, convert_to_quint4,
                        convert_to_quint8, dequantize, dtype_name, get_scale, get_zero_point,
                        is_4bit, is_quantize, pack_4bit, qdtype_name, qinfo, qint4, qint8,
                        qint32, qrange, quantize, quint4, quint8, same_dtype, unpack_4bit)

__all__ = [
    "SUPPORTED",
    "canonical_dtype",
    "downcast",
    "dtype_promotion",
    "promote_pair",
    "dtype_name",
    "same_dtype",
    "quint8",
    "qint8",
    "qint32",
    "quint4",
    "qint4",
    "is_quantize",
    "get_scale",
    "get_zero_point",
    "qdtype_name",
    "is_4bit",
    "qrange",
    "quantize",
    "dequantize",
    "convert_to_quint8",
    "convert_to_qint8",
    "convert_to_qint32",
    "convert_to_quint4",
    "convert_to_qint4",
    "convert_from_quint8",
    "convert_from_qint8",
    "convert_from_qint32",
    "convert_from_quint4",
    "convert_from_qint4",
    "pack_4bit",
    "unpack_4bit",
]

# ---------------------------------------------------------------------------
# Supported plain dtypes
# ---------------------------------------------------------------------------

_SUPPORTED_ORDER = (
    np.dtype(np.bool_),
    np.dtype(np.uint8),
    np.dtype(np.int8),
    np.dtype(np.uint16),
    np.dtype(np.int16),
    np.dtype(np.int32),
    np.dtype(np.float16),
    np.dtype(np.float32),
)

#: The plain (non-quantized) dtypes a tensor may have.  Note that a quantized
#: dtype also tests as a member (numpy ignores metadata in ``==``/hash).
SUPPORTED = frozenset(_SUPPORTED_ORDER)

_SUPPORTED_TEXT = (
    ", ".join(dt.name for dt in _SUPPORTED_ORDER) + " and quantized dtypes"
)

_INT32 = np.dtype(np.int32)
_FLOAT32 = np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)


def _native(dt):
    """The metadata-free, native-byte-order dtype equal in kind and size to dt.

    Big-endian or metadata-carrying variants of a supported dtype would not
    be found in caches and would leak into results, so they are normalised.
    """
    return np.dtype(dt.type)


# ---------------------------------------------------------------------------
# Explicit dtypes and inference from data
# ---------------------------------------------------------------------------


def canonical_dtype(dt):
    """Validate an explicitly requested dtype and return it as an np.dtype.

    dt may be a name ("float32"), a numpy scalar type, an np.dtype or a
    quantized dtype (returned unchanged so its metadata survives).
    """
    if dt is None:
        # np.dtype(None) silently means float64, which is never what a
        # caller passing None intends.
        raise TypeError(
            f"dtype must be given, got None: imperative supports {_SUPPORTED_TEXT}"
        )
    if isinstance(dt, np.dtype):
        resolved = dt
    else:
        try:
            resolved = np.dtype(dt)
        except (TypeError, ValueError):
            raise TypeError(
                f"invalid dtype {dt!r} ({type(dt).__name__}): expected one of "
                f"{_SUPPORTED_TEXT}"
            ) from None
    if qinfo(resolved) is not None:
        return resolved
    plain = _native(resolved)
    if plain in SUPPORTED:
        return plain
    given = f" (given as {dt!r})" if isinstance(dt, str) and dt != str(resolved) else ""
    raise TypeError(
        f"unsupported dtype {resolved}{given}: imperative supports {_SUPPORTED_TEXT}"
    )


def downcast(dt):
    """dtype a tensor gets for data whose dtype was not chosen explicitly.

    numpy defaults to 64-bit types (Python ints and floats), which the
    runtime does not support, so they are narrowed: int64/uint32/uint64 ->
    int32 and float64 -> float32.  Supported dtypes pass unchanged.
    """
    if not isinstance(dt, np.dtype):
        dt = np.dtype(dt)
    if qinfo(dt) is not None:
        return dt
    kind, size = dt.kind, dt.itemsize
    # Test kind+size rather than equality so aliases (longlong, uintp, ...)
    # and non-native byte orders are handled alike.
    if (kind == "i" and size == 8) or (kind == "u" and size in (4, 8)):
        return _INT32
    if kind == "f" and size == 8:
        return _FLOAT32
    plain = _native(dt)
    if plain in SUPPORTED:
        return plain
    raise TypeError(
        f"unsupported dtype {dt}: imperative supports {_SUPPORTED_TEXT}"
    )


_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1


# dtype of a user's array (no metadata) -> the dtype its Tensor takes where that needs no look
# at the values (the array's own, or float64's narrowing), None where it does (int64) or is
# refused: asked once per dtype by the core's Tensor(array) (imperative/_methods.pxi)
_ARRAY_TARGETS = {}


def array_target(dt):
    """The dtype of `Tensor(a)` for a plain ndarray `a` of dtype `dt` (no metadata) where
    no value of `a` needs a look (its own dtype, or float64 narrowed), else None."""
    target = _ARRAY_TARGETS.get(dt, False)
    if target is False:
        try:
            target = downcast(dt)
        except TypeError:
            target = None
        if target is not None and target != dt and dt.kind != "f":
            target = None                   # (narrowing integers checks their range)
        if len(_ARRAY_TARGETS) < 256:
            _ARRAY_TARGETS[dt] = target
    return target


def as_tensor_data(data, dtype):
    """User data → (a fresh array the runtime owns, its dtype), by API.md §1's rules."""
    if isinstance(data, collections.abc.Iterator):
        # numpy makes a 0-d object array of it: "unsupported dtype object" named no cause
        raise TypeError(f"Tensor(data): data is a {type(data).__name__} (an iterator), "
                        f"not an array, number or sequence; pass list(data)")
    if dtype is not None:
        dt = canonical_dtype(dtype)
        if is_quantize(dt):
            src = np.asarray(data)
            if same_dtype(src.dtype, dt):
                return np.array(src, dtype=dt, copy=True), dt
            return quantize(src, dt), dt
        return np.array(data, dtype=dt, copy=True), dt
    arr = np.array(data, copy=True)
    if is_quantize(arr.dtype):
        return arr, arr.dtype
    if arr.dtype.kind == "O" and arr.size and all(_is_int(v) for v in arr.flat):
        _check_int32_range(min(arr.flat), max(arr.flat))    # ints past 64 bits
    dt = downcast(arr.dtype)
    if dt != arr.dtype or arr.dtype.metadata is not None:
        if dt.kind == "i" and arr.dtype.kind in "iu" and arr.size:
            _check_int32_range(arr.min(), arr.max())
        arr = arr.astype(dt)
    return arr, dt


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int32_range(lo, hi):
    if lo < _INT32_MIN or hi > _INT32_MAX:
        raise ValueError(f"integer data in [{lo}, {hi}] does not fit int32, the widest "
                         "integer dtype imperative supports")


# ---------------------------------------------------------------------------
# Promotion
# ---------------------------------------------------------------------------

# Category of a dtype kind: a higher category wins regardless of size.
_CATEGORY = {"f": 3, "i": 2, "u": 2, "b": 1}

# dtype Python scalars stand for, by category.
_SCALAR_DTYPE = {1: _BOOL, 2: _INT32, 3: _FLOAT32}


def _category(dt):
    return _CATEGORY.get(dt.kind, 0)


def _check_promotable(dt):
    """Reject tensor dtypes that no operation can take part in."""
    if qinfo(dt) is not None:
        raise TypeError(
            f"cannot promote quantized dtype {dtype_name(dt)}: dequantize first"
        )
    # Category 0 (complex, object, str...) would otherwise lose silently to
    # any scalar or bool/int/float tensor and hide a bad operand.
    if _category(dt) == 0:
        raise TypeError(
            f"unsupported dtype {dt}: imperative supports {_SUPPORTED_TEXT}"
        )


def _promote_tensor_dtypes(dtypes):
    """result_type over the dtypes in the highest category, then downcast."""
    top = max(_category(dt) for dt in dtypes)
    winners = [dt for dt in dtypes if _category(dt) == top]
    return downcast(np.result_type(*winners))


def _tensor_dtype(obj, position):
    """np.dtype of an argument with a .dtype attribute (array, Tensor...)."""
    dt = obj.dtype
    if isinstance(dt, np.dtype):
        return dt
    try:
        return np.dtype(dt)
    except (TypeError, ValueError):
        raise TypeError(
            f"dtype_promotion: argument {position} ({type(obj).__name__}) has "
            f"dtype {dt!r} which is not a numpy dtype"
        ) from None


def dtype_promotion(*args):
    """Result dtype of an operation mixing tensors and Python scalars.

    Tensors (anything with a .dtype, or an np.dtype itself) and Python
    scalars are grouped by category (float > int > bool).  A scalar only
    decides the result when its category is above every tensor's, so
    ``int8_tensor + 1`` stays int8 but ``int32_tensor + 1.5`` is float32.
    A single list or tuple argument is expanded; None is skipped.
    """
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    tensors = []
    scalar_top = 0
    for position, arg in enumerate(args):
        if arg is None:
            continue
        # .dtype first: numpy scalars such as np.float64 subclass float
        # but must count as tensors.
        if isinstance(arg, np.dtype):
            tensors.append(arg)
        elif isinstance(arg, type):
            # Classes like np.float32 have a class-level .dtype descriptor.
            raise TypeError(
                f"dtype_promotion: argument {position} is the type "
                f"{arg.__name__}; pass an array, a tensor or an np.dtype"
            )
        elif hasattr(arg, "dtype"):
            tensors.append(_tensor_dtype(arg, position))
        elif isinstance(arg, bool):  # before int: bool subclasses int
            scalar_top = max(scalar_top, 1)
        elif isinstance(arg, int):
            scalar_top = max(scalar_top, 2)
        elif isinstance(arg, float):
            scalar_top = max(scalar_top, 3)
        else:
            raise TypeError(
                f"dtype_promotion: argument {position} must be a tensor, array, "
                f"bool, int, float or None, got {type(arg).__name__}"
            )
    if not tensors and scalar_top == 0:
        raise ValueError(
            "dtype_promotion: no dtype to promote (no tensor or scalar given)"
        )
    for dt in tensors:
        _check_promotable(dt)
    tensor_top = max((_category(dt) for dt in tensors), default=-1)
    if scalar_top > tensor_top:
        return _SCALAR_DTYPE[scalar_top]
    return _promote_tensor_dtypes(tensors)


_PAIR_CACHE = {}


def promote_pair(a, b):
    """dtype_promotion for exactly two tensor dtypes (np.dtype instances).

    Hot path: results are memoised.  Quantized dtypes hash like their plain
    storage type, so any dtype with metadata bypasses the cache.
    """
    try:
        plain = a.metadata is None and b.metadata is None
    except AttributeError:
        raise TypeError(
            f"promote_pair expects two numpy dtypes, got {type(a).__name__} "
            f"and {type(b).__name__}"
        ) from None
    if plain:
        hit = _PAIR_CACHE.get((a, b))
        if hit is not None:
            return hit
    _check_promotable(a)
    _check_promotable(b)
    result = _promote_tensor_dtypes((a, b))
    if plain:
        _PAIR_CACHE[(a, b)] = result
    return result
