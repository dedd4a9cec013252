"""Quantized dtypes: their construction, inspection, quantize / dequantize, and the packing
of 4-bit values two per byte. It depends on numpy only; imperative.dtype re-exports every
public name here.

Quantized dtypes are ordinary numpy integer dtypes carrying metadata::

    dt.metadata["qdtype"] == {"name": "quint8", "scale": 0.1, "zero_point": 3}

Beware: numpy ignores metadata when comparing or hashing dtypes, so
``quint8(0.1, 3) == np.uint8`` is True.  Use :func:`same_dtype` and
:func:`is_quantize` whenever the difference matters.
"""

import math
import numbers
from typing import NamedTuple

import numpy as np

__all__ = ["dtype_name", "same_dtype", "quint8", "qint8", "qint32", "quint4", "qint4",
           "is_quantize", "get_scale", "get_zero_point", "qdtype_name", "is_4bit", "qrange",
           "quantize", "dequantize", "convert_to_quint8", "convert_to_qint8", "convert_to_qint32",
           "convert_to_quint4", "convert_to_qint4", "convert_from_quint8", "convert_from_qint8",
           "convert_from_qint32", "convert_from_quint4", "convert_from_qint4", "pack_4bit",
           "unpack_4bit"]


# ---------------------------------------------------------------------------
# Quantized dtype descriptions
# ---------------------------------------------------------------------------


class _QSpec(NamedTuple):
    storage: np.dtype  # the numpy integer dtype holding the values
    lo: int  # smallest representable quantized value
    hi: int  # largest representable quantized value
    asymmetric: bool  # True when the type has a zero point


QSPECS = {
    "quint8": _QSpec(np.dtype(np.uint8), 0, 255, True),
    "qint8": _QSpec(np.dtype(np.int8), -128, 127, False),
    "qint32": _QSpec(np.dtype(np.int32), -(2**31), 2**31 - 1, False),
    "quint4": _QSpec(np.dtype(np.uint8), 0, 15, True),
    "qint4": _QSpec(np.dtype(np.int8), -8, 7, False),
}

_FOUR_BIT = frozenset({"quint4", "qint4"})


def qinfo(dt):
    """Return the qdtype metadata dict of dt, or None if dt is not quantized.

    Accepts anything; only numpy dtype instances can be quantized.  A dtype
    whose qdtype metadata is inconsistent with its storage is rejected so a
    hand-built bad dtype fails here rather than deep inside a conversion.
    """
    if not isinstance(dt, np.dtype):
        return None
    meta = dt.metadata
    if meta is None:
        return None
    info = meta.get("qdtype")
    if info is None:
        return None
    spec = QSPECS.get(info.get("name")) if isinstance(info, dict) else None
    if spec is None or dt != spec.storage or "scale" not in info:
        raise TypeError(f"malformed quantized dtype metadata {info!r} on {dt}")
    return info


def _require_qinfo(dt, what):
    """Like qinfo but a non-quantized dt is an error (what names the caller)."""
    info = qinfo(dt)
    if info is None:
        raise ValueError(
            f"{what}: expected a quantized dtype, got {dtype_name(dt)}"
        )
    return info


# ---------------------------------------------------------------------------
# Naming and comparison
# ---------------------------------------------------------------------------


def dtype_name(dt):
    """Human readable name: "float32" or "quint8(scale=0.1, zero_point=3)".

    Never raises, because it is used while building error messages.
    """
    try:
        info = qinfo(dt)
    except TypeError:
        info = None
    if info is not None:
        name = info["name"]
        if QSPECS[name].asymmetric:
            return (
                f"{name}(scale={info['scale']!r}, "
                f"zero_point={info['zero_point']!r})"
            )
        return f"{name}(scale={info['scale']!r})"
    if isinstance(dt, np.dtype):
        return str(dt)
    try:
        return str(np.dtype(dt))
    except Exception:  # not a dtype at all: show what it is
        return repr(dt)


def same_dtype(a, b):
    """True when a and b are the same dtype *including* quantization params.

    numpy's ``==`` ignores metadata, so quint8(0.1, 3) == quint8(0.2, 3) ==
    uint8 there; this function tells them apart.
    """
    a = a if isinstance(a, np.dtype) else np.dtype(a)
    b = b if isinstance(b, np.dtype) else np.dtype(b)
    if a != b:
        return False
    qa, qb = qinfo(a), qinfo(b)
    if qa is None or qb is None:
        return qa is qb  # both plain
    return (
        qa["name"] == qb["name"]
        and qa["scale"] == qb["scale"]
        and qa.get("zero_point", 0) == qb.get("zero_point", 0)
    )


# ---------------------------------------------------------------------------
# Quantized dtype constructors and accessors
# ---------------------------------------------------------------------------


def _check_scale(name, scale):
    # bool is an int subclass but a scale of True is surely a mistake.
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real):
        raise ValueError(
            f"{name}: scale must be a finite positive real number, got "
            f"{scale!r} ({type(scale).__name__})"
        )
    try:
        value = float(scale)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{name}: scale must be a finite positive real number, got {scale!r}"
        )
    return value


def _check_zero_point(name, zero_point, spec):
    # Reject floats even when integral (3.0): a float zero point usually
    # means the caller confused it with the scale.
    if isinstance(zero_point, (bool, np.bool_)) or not isinstance(
        zero_point, numbers.Integral
    ):
        raise ValueError(
            f"{name}: zero_point must be an integer in [{spec.lo}, {spec.hi}], "
            f"got {zero_point!r} ({type(zero_point).__name__})"
        )
    value = int(zero_point)
    if not spec.lo <= value <= spec.hi:
        raise ValueError(
            f"{name}: zero_point must be an integer in [{spec.lo}, {spec.hi}], "
            f"got {value}"
        )
    return value


def _make_qdtype(name, scale, zero_point):
    spec = QSPECS[name]
    info = {"name": name, "scale": _check_scale(name, scale)}
    if spec.asymmetric:
        info["zero_point"] = _check_zero_point(name, zero_point, spec)
    elif zero_point is not None:
        raise ValueError(
            f"{name} is symmetric and takes no zero_point, got zero_point="
            f"{zero_point!r}"
        )
    return np.dtype(spec.storage, metadata={"qdtype": info})


def quint8(scale, zero_point):
    """Asymmetric 8-bit quantized dtype stored as uint8, values in [0, 255]."""
    return _make_qdtype("quint8", scale, zero_point)


def qint8(scale, zero_point=None):
    """Symmetric 8-bit quantized dtype stored as int8, values in [-128, 127]."""
    return _make_qdtype("qint8", scale, zero_point)


def qint32(scale, zero_point=None):
    """Symmetric 32-bit quantized dtype stored as int32."""
    return _make_qdtype("qint32", scale, zero_point)


def quint4(scale, zero_point):
    """Asymmetric 4-bit quantized dtype stored unpacked in uint8, [0, 15]."""
    return _make_qdtype("quint4", scale, zero_point)


def qint4(scale, zero_point=None):
    """Symmetric 4-bit quantized dtype stored unpacked in int8, [-8, 7]."""
    return _make_qdtype("qint4", scale, zero_point)


def is_quantize(dt):
    """True if dt is a quantized dtype; False for anything else."""
    try:
        return qinfo(dt) is not None
    except TypeError:
        return False


def qdtype_name(dt):
    """"quint8", "qint4", ... for a quantized dtype, None otherwise."""
    info = qinfo(dt)
    return None if info is None else info["name"]


def get_scale(dt):
    """Scale of a quantized dtype (float)."""
    return _require_qinfo(dt, "get_scale")["scale"]


def get_zero_point(dt):
    """Zero point of a quantized dtype; 0 for the symmetric (signed) types."""
    return _require_qinfo(dt, "get_zero_point").get("zero_point", 0)


def is_4bit(dt):
    """True for quint4/qint4 dtypes."""
    info = qinfo(dt)
    return info is not None and info["name"] in _FOUR_BIT


def qrange(dt):
    """(lo, hi) inclusive range of the quantized values of dt."""
    spec = QSPECS[_require_qinfo(dt, "qrange")["name"]]
    return spec.lo, spec.hi


# ---------------------------------------------------------------------------
# Quantize / dequantize
# ---------------------------------------------------------------------------


def _quantize_as(name, array, dt):
    info = qinfo(dt)
    if info is None or info["name"] != name:
        raise ValueError(
            f"convert_to_{name}: dt must be a {name} dtype, got {dtype_name(dt)}"
        )
    x = np.asarray(array)
    if qinfo(x.dtype) is not None:
        raise ValueError(
            f"convert_to_{name}: array is already quantized as "
            f"{dtype_name(x.dtype)}; dequantize it first"
        )
    if x.dtype.kind not in "biuf":
        raise TypeError(
            f"convert_to_{name}: array must hold real numbers, got dtype {x.dtype}"
        )
    # float64 holds every float32 and int32 exactly, so the only rounding
    # is the deliberate round-half-to-even below.
    xf = x.astype(np.float64)
    if np.isnan(xf).any():
        raise ValueError(f"convert_to_{name}: cannot quantize NaN values")
    spec = QSPECS[name]
    q = np.round(xf / info["scale"]) + info.get("zero_point", 0)
    q = np.clip(q, spec.lo, spec.hi)
    # asarray keeps 0-d inputs as arrays; astype to dt carries the metadata.
    return np.asarray(q).astype(dt)


def _dequantize_as(name, array):
    x = np.asarray(array)
    info = qinfo(x.dtype)
    if info is None or info["name"] != name:
        raise ValueError(
            f"convert_from_{name}: array must have a {name} dtype, got "
            f"{dtype_name(x.dtype)}"
        )
    # Compute in float64 so the only rounding is the final cast.
    real = (x.astype(np.float64) - info.get("zero_point", 0)) * info["scale"]
    return np.asarray(real, dtype=np.float32)


def convert_to_quint8(array, dt):
    """Quantize real values to quint8 dtype dt (round half to even, clip)."""
    return _quantize_as("quint8", array, dt)


def convert_to_qint8(array, dt):
    """Quantize real values to qint8 dtype dt (round half to even, clip)."""
    return _quantize_as("qint8", array, dt)


def convert_to_qint32(array, dt):
    """Quantize real values to qint32 dtype dt (round half to even, clip)."""
    return _quantize_as("qint32", array, dt)


def convert_to_quint4(array, dt):
    """Quantize real values to quint4 dtype dt; result is unpacked (uint8)."""
    return _quantize_as("quint4", array, dt)


def convert_to_qint4(array, dt):
    """Quantize real values to qint4 dtype dt; result is unpacked (int8)."""
    return _quantize_as("qint4", array, dt)


def convert_from_quint8(array):
    """float32 values (q - zero_point) * scale of a quint8 array."""
    return _dequantize_as("quint8", array)


def convert_from_qint8(array):
    """float32 values q * scale of a qint8 array."""
    return _dequantize_as("qint8", array)


def convert_from_qint32(array):
    """float32 values q * scale of a qint32 array."""
    return _dequantize_as("qint32", array)


def convert_from_quint4(array):
    """float32 values (q - zero_point) * scale of an unpacked quint4 array."""
    return _dequantize_as("quint4", array)


def convert_from_qint4(array):
    """float32 values q * scale of an unpacked qint4 array."""
    return _dequantize_as("qint4", array)


def quantize(array, dt):
    """Quantize real values to any quantized dtype dt."""
    return _quantize_as(_require_qinfo(dt, "quantize")["name"], array, dt)


def dequantize(array):
    """float32 values of an array with any quantized dtype."""
    x = np.asarray(array)
    return _dequantize_as(_require_qinfo(x.dtype, "dequantize")["name"], x)


# ---------------------------------------------------------------------------
# 4-bit packing
# ---------------------------------------------------------------------------


def _nibble_range(dt):
    """Allowed value range of data to pack, from its dtype."""
    info = qinfo(dt)
    if info is not None:
        if info["name"] not in _FOUR_BIT:
            raise ValueError(
                f"pack_4bit: values must be quint4/qint4 or plain integers, got "
                f"{dtype_name(dt)}"
            )
        spec = QSPECS[info["name"]]
        return spec.lo, spec.hi
    # Plain integers: signed nibbles go down to -8, unsigned up to 15.
    return -8, 15


def pack_4bit(values):
    """Pack 4-bit values two per byte into a 1-D uint8 array.

    Element 2k goes in the low nibble of byte k and element 2k+1 in the high
    nibble; an odd count leaves the last high nibble 0.  Negative values are
    stored as two's complement nibbles.  The input is read in C order.
    """
    x = np.asarray(values)
    if x.dtype.kind not in "biu":
        raise TypeError(f"pack_4bit: values must be integers, got dtype {x.dtype}")
    lo, hi = _nibble_range(x.dtype)
    flat = x.reshape(-1).astype(np.int16)  # int16 holds every int8/uint8 value
    if flat.size and (flat.min() < lo or flat.max() > hi):
        raise ValueError(
            f"pack_4bit: values must lie in [{lo}, {hi}], got range "
            f"[{flat.min()}, {flat.max()}]"
        )
    nibbles = (flat & 0xF).astype(np.uint8)  # & 0xF gives two's complement
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return nibbles[0::2] | (nibbles[1::2] << 4)


def _unpack_signedness(dt):
    """True if nibbles unpack as signed, from a 4-bit or plain int8/uint8 dt."""
    info = qinfo(dt)
    if info is not None:
        if info["name"] not in _FOUR_BIT:
            raise ValueError(
                f"unpack_4bit: dt must be quint4 or qint4, got {dtype_name(dt)}"
            )
        return info["name"] == "qint4"
    if dt == np.int8:
        return True
    if dt == np.uint8:
        return False
    raise ValueError(
        f"unpack_4bit: dt must be quint4, qint4, int8 or uint8, got {dtype_name(dt)}"
    )


def unpack_4bit(packed, shape, dt):
    """Inverse of pack_4bit: values of the given shape with dtype dt.

    dt is a quint4/qint4 dtype (or plain uint8/int8); for signed types the
    nibbles are sign-extended.
    """
    dt = dt if isinstance(dt, np.dtype) else np.dtype(dt)
    signed = _unpack_signedness(dt)
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    count = math.prod(shape)
    p = np.asarray(packed)
    if p.dtype != np.uint8 or p.ndim != 1:
        raise ValueError(
            f"unpack_4bit: packed must be a 1-D uint8 array, got {p.ndim}-D {p.dtype}"
        )
    if p.size != (count + 1) // 2:
        raise ValueError(
            f"unpack_4bit: shape {shape} needs {(count + 1) // 2} packed bytes, "
            f"got {p.size}"
        )
    nibbles = np.empty(2 * p.size, dtype=np.int16)
    nibbles[0::2] = p & 0xF
    nibbles[1::2] = p >> 4
    values = nibbles[:count]
    if signed:
        values = np.where(values >= 8, values - 16, values)
    return values.reshape(shape).astype(dt)
