"""Arguments and results as a structure of leaves: tuples, lists and dicts are walked (any
depth), Tensors become numbered leaves and everything else is kept in the structure, so
that two calls with equal structures differ only in their Tensors."""
from .._core import TensorBase

TENSOR = "T"     # a Tensor leaf's tag in the structure


def flatten(obj, tensors):
    """The hashable structure of `obj`; its Tensors are appended to `tensors`."""
    if isinstance(obj, TensorBase):
        tensors.append(obj)
        return TENSOR
    kind = type(obj)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple([flatten(x, tensors) for x in obj]))
    if kind is dict:
        return ("dict", tuple([(k, flatten(v, tensors)) for k, v in obj.items()]))
    try:
        hash(obj)
    except TypeError:
        raise TypeError(f"imp.jit.trace: an argument or result of type {kind.__name__} is "
                        "neither a Tensor, a tuple, list or dict of them, nor hashable "
                        "(non-tensor arguments key the trace's cache)") from None
    return ("=", kind, obj)


def unflatten(structure, tensors):
    """`flatten`'s inverse: the structure with its Tensor leaves taken from `tensors` (an
    iterator)."""
    if structure == TENSOR:
        return next(tensors)
    tag = structure[0]
    if tag == "=":
        return structure[2]
    if tag == "dict":
        return {k: unflatten(v, tensors) for k, v in structure[1]}
    items = [unflatten(x, tensors) for x in structure[1]]
    return tuple(items) if tag == "tuple" else items


def sharing(tensors):
    """For each Tensor, the position of the first one holding the same record: the program
    reads an argument given twice (f(x, x)) as one value, so that is part of a signature."""
    first = {}
    return tuple([first.setdefault(t._record, i) for i, t in enumerate(tensors)])
