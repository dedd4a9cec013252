"""Arguments and results as a structure of leaves: tuples, lists and dicts are walked (any
depth), Tensors become numbered leaves and everything else is kept in the structure, so
that two calls with equal structures differ only in their Tensors."""
# TENSOR (a Tensor leaf's tag), flatten(obj, tensors) (the hashable structure of `obj`, its
# Tensors appended to `tensors`), sharing(tensors) (for each Tensor, the first position
# holding its record) and call_signature(args, kwargs) are in the core
# (imperative/_replay.pxi): they run at every recording and every call the fast replay
# declines.
from .._core import TENSOR, call_signature, flatten, sharing  # noqa: F401


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
