"""`imp.save(obj, path)` / `imp.load(path)`: tensors, numpy arrays, numbers, strings, None and
nested dicts/lists/tuples of them, in a file that loading never executes (no pickle).

The file is a numpy `.npz` archive: one array per tensor or ndarray (`a0`, `a1`, ...) and
`structure`, the UTF-8 bytes of a JSON document describing the object, in which every value
is a small tagged dict (`{"type": "tensor", "array": "a0", "dtype": "float32", ...}`).
`np.load(..., allow_pickle=False)` refuses object arrays, and JSON only builds plain data, so
a crafted file can give wrong values or an error, never run code.
"""
from __future__ import annotations

import json
from typing import IO, Any
import os
import zipfile

import numpy as np

from . import dtype as D
from .quantized import QSPECS
from .tensor import Parameter, Tensor

__all__ = ["save", "load"]

_FORMAT = "imperative.save/1"
_QUANTIZED = ("quint8", "qint8", "qint32", "quint4", "qint4")


def save(obj: Any, path: str | os.PathLike[str] | IO[bytes]) -> None:
    """Write `obj` to `path` (a file name or a binary file object)."""
    arrays = {}
    structure = {"format": _FORMAT, "root": _encode(obj, arrays, "obj")}
    arrays["structure"] = np.frombuffer(json.dumps(structure).encode("utf-8"), dtype=np.uint8)
    if isinstance(path, (str, os.PathLike)):
        # np.savez on a name appends ".npz"; through a file object the name stays the user's
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    else:
        np.savez(path, **arrays)


def load(path: str | os.PathLike[str] | IO[bytes]) -> Any:
    """Read what `save` wrote. Tensors come back as Tensors (Parameters as Parameters) on
    their saved device, numpy arrays as arrays, tuples as tuples."""
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):       # a plain .npy: one array
            raise ValueError("it holds one numpy array, as np.save writes; read it with "
                             "np.load")
        with loaded as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, ValueError, EOFError) as e:
        raise ValueError(f"imp.load: {path!r} is not a file written by imp.save ({e})") from None
    if "structure" not in arrays:
        raise ValueError(f"imp.load: {path!r} has no structure record; not written by imp.save")
    structure = json.loads(arrays.pop("structure").tobytes().decode("utf-8"))
    if not isinstance(structure, dict) or structure.get("format") != _FORMAT:
        raise ValueError(f"imp.load: {path!r} is not in the {_FORMAT} format")
    return _decode(structure["root"], arrays)


# ---- encoding: Python object -> tagged JSON value (arrays set aside)

def _encode(obj, arrays, where):
    if obj is None or isinstance(obj, (bool, str)):
        return {"type": "value", "value": obj}
    if isinstance(obj, (int, np.integer)):
        return {"type": "int", "value": int(obj)}
    if isinstance(obj, (float, np.floating)):
        # JSON has no inf or nan: floats travel as repr strings, read back exactly
        return {"type": "float", "value": repr(float(obj))}
    if isinstance(obj, Tensor):
        return _encode_tensor(obj, arrays)
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"imp.save: {where} is an object array, which cannot be saved "
                            "without pickle")
        return {"type": "ndarray", "array": _set_aside(obj, arrays)}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {"type": "tuple" if isinstance(obj, tuple) else "list", "items": items}
    if isinstance(obj, dict):
        for key in obj:
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"imp.save: dict keys must be str or int, got "
                                f"{type(key).__name__} {key!r} in {where}")
        return {"type": "dict", "items": [[_encode(k, arrays, where),
                                           _encode(v, arrays, f"{where}[{k!r}]")]
                                          for k, v in obj.items()]}
    raise TypeError(f"imp.save: cannot save {type(obj).__name__} at {where}; supported: "
                    "Tensor, numpy array, int, float, bool, str, None, and dicts, lists and "
                    "tuples of them")


def _set_aside(array, arrays):
    name = f"a{len(arrays)}"
    array = np.ascontiguousarray(array)
    # a quantized dtype's metadata is not kept by .npz (its scale goes in the structure)
    arrays[name] = array.view(np.dtype(array.dtype.str)) if array.dtype.metadata else array
    return name


def _encode_tensor(t, arrays):
    node = {"type": "tensor", "array": _set_aside(t.numpy(), arrays),
            "dtype": D.dtype_name(t.dtype), "device": str(t.device), "name": t.name,
            "parameter": isinstance(t, Parameter)}
    if D.is_quantize(t.dtype):
        # the .npz keeps the integer storage; the scale and zero point go here
        node["dtype"] = D.qdtype_name(t.dtype)
        node["scale"] = repr(float(D.get_scale(t.dtype)))
        asymmetric = QSPECS[node["dtype"]].asymmetric   # symmetric ones take no zero point
        node["zero_point"] = int(D.get_zero_point(t.dtype)) if asymmetric else None
    return node


# ---- decoding

def _decode(node, arrays):
    kind = node.get("type") if isinstance(node, dict) else None
    if kind == "value":
        return node["value"]
    if kind == "int":
        return int(node["value"])
    if kind == "float":
        return float(node["value"])
    if kind == "ndarray":
        return _array(node, arrays)
    if kind == "tensor":
        return _decode_tensor(node, arrays)
    if kind in ("list", "tuple"):
        items = [_decode(v, arrays) for v in node["items"]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {_decode(k, arrays): _decode(v, arrays) for k, v in node["items"]}
    raise ValueError(f"imp.load: unknown entry {str(node)[:80]!r} in the structure record")


def _array(node, arrays):
    try:
        return arrays[node["array"]]
    except KeyError:
        raise ValueError(f"imp.load: the structure names array {node.get('array')!r}, which "
                         "the file does not hold") from None


def _decode_tensor(node, arrays):
    array = _array(node, arrays)
    if "scale" in node:
        if node["dtype"] not in _QUANTIZED:
            raise ValueError(f"imp.load: unknown quantized dtype {node['dtype']!r}")
        make = getattr(D, node["dtype"])
        args = (float(node["scale"]),) + (() if node["zero_point"] is None
                                          else (node["zero_point"],))
        dtype = make(*args)
        array = array.view(dtype)            # the stored integers, with their scale again
    else:
        dtype = D.canonical_dtype(node["dtype"])
    cls = Parameter if node.get("parameter") else Tensor
    return cls(array, dtype=dtype, device=node.get("device"), name=node.get("name") or None)

