"""Arguments and results as a structure of leaves: tuples, lists and dicts are walked (any
depth; their subclasses too, namedtuples included, rebuilt with their own type), Tensors
become numbered leaves and everything else is kept in the structure (a float with its
bits: 0.0 and -0.0 differ, a NaN equals itself), so that two calls with equal structures
differ only in their Tensors."""
# TENSOR (a Tensor leaf's tag), flatten(obj, tensors) (the hashable structure of `obj`, its
# Tensors appended to `tensors`), sharing(tensors) (for each Tensor, the first position
# holding its record) and call_signature(args, kwargs) are in the core
# (imperative/_replay.pxi): they run at every recording and every call the fast replay
# declines.
import gc
import types
from collections import defaultdict

from .._core import TENSOR, TensorBase, call_signature, flatten, sharing  # noqa: F401

# objects whose references a search for Tensors inside a kept object does not follow: a
# function's globals, a module or a class are not the object's own contents
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, types.FrameType)


def unflatten(structure, tensors):
    """`flatten`'s inverse: the structure with its Tensor leaves taken from `tensors` (an
    iterator)."""
    if structure == TENSOR:
        return next(tensors)
    tag = structure[0]
    if tag == "=":
        return structure[2]
    if tag == "~":                  # (a float, kept with its bits: InexactLeaf)
        return structure[1].value
    if tag == "dict":
        return {k: unflatten(v, tensors) for k, v in structure[1]}
    if tag == "seq":
        return _rebuilt(structure[1], [unflatten(x, tensors) for x in structure[2]])
    if tag == "map":
        kind, pairs, factory = structure[1:]
        items = [(k, unflatten(v, tensors)) for k, v in pairs]
        return _rebuilt(kind, items, factory if issubclass(kind, defaultdict) else None)
    items = [unflatten(x, tensors) for x in structure[1]]
    return tuple(items) if tag == "tuple" else items


def _rebuilt(kind, items, factory=None):
    """A tuple, list or dict subclass made from its items (a namedtuple by `_make`, a
    defaultdict with its factory); TypeError naming the type where its constructor does
    not take them."""
    try:
        if issubclass(kind, tuple) and hasattr(kind, "_make"):
            return kind._make(items)
        return kind(items) if factory is None else kind(factory, items)
    except Exception as e:
        raise TypeError(f"imp.jit.trace: a result of type {kind.__name__} (a "
                        f"{kind.__mro__[1].__name__} subclass) cannot be rebuilt from its "
                        f"items: {kind.__name__}(items) raised {e!r}; return a tuple, list, "
                        "dict or namedtuple") from e


def kept_objects(structure):
    """The objects a structure keeps as they are (not walked: neither a Tensor nor a
    tuple, list or dict)."""
    if structure == TENSOR:
        return
    tag = structure[0]
    if tag == "=":
        yield structure[2]
    elif tag in ("dict", "map"):
        for _, v in structure[1 if tag == "dict" else 2]:
            yield from kept_objects(v)
    elif tag in ("tuple", "list", "seq"):
        for x in structure[1 if tag != "seq" else 2]:
            yield from kept_objects(x)


def tensors_inside(obj):
    """The Tensors an object refers to, at any depth (its attributes, its items), not
    through functions, modules and classes."""
    seen, stack = {id(obj)}, [obj]
    while stack:
        for ref in gc.get_referents(stack.pop()):
            if id(ref) in seen or isinstance(ref, _OPAQUE):
                continue
            seen.add(id(ref))
            if isinstance(ref, TensorBase):
                yield ref
            else:
                stack.append(ref)
