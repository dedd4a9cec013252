"""F.einsum and F.outer, composed of transposes, reshapes, broadcasts, sums and batched
matrix products, so gradients (and recomputation, traces) come with those ops.

einsum contracts its operands pairwise from the left: each pair's labels split into batch
labels (in both, needed later), contracted ones (in both, not needed later) and those of one
side, and the pair becomes one matmul of (batch, rows, inner) by (batch, inner, cols).
Labels of one operand needed nowhere else are summed first. Dimensions of equal label
broadcast where one has size 1, as '...' dimensions do."""
from __future__ import annotations

import math
import string

from . import _core
from . import ops as O
from ._types import TensorLike
from .creation import _as_tensor
from .ops.base import cached_op
from .tensor import Tensor

__all__ = ["einsum", "outer"]


def _term_labels(term, ndim, k):
    """The labels of one operand's subscripts: letters as themselves, the dimensions of
    '...' as the ints -w..-1 (right-aligned, so that they broadcast across operands)."""
    named = term.replace("...", "")
    if set(named) - set(string.ascii_letters) or term.count("...") > 1:
        raise ValueError(f"einsum: operand {k}'s subscripts {term!r} must be letters and at "
                         f"most one '...'")
    width = ndim - len(named)
    if width < 0 or (width and "..." not in term):
        raise ValueError(f"einsum: operand {k} has {ndim} dimension(s) but its subscripts "
                         f"{term!r} name {len(named)}")
    for c in named:
        if named.count(c) > 1:
            raise ValueError(f"einsum: index {c!r} repeats in operand {k} ({term!r}): "
                             f"diagonals are not supported (take one with indexing first)")
    if "..." not in term:
        return list(term)
    before, after = term.split("...")
    return list(before) + list(range(-width, 0)) + list(after)


def _parse(equation, ndims):
    """(each operand's labels, the output's labels)."""
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a str, got {type(equation).__name__}")
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise ValueError(f"einsum: {equation!r} has {len(terms)} operand(s), "
                         f"{len(ndims)} were given")
    inputs = [_term_labels(t, n, k) for k, (t, n) in enumerate(zip(terms, ndims))]
    width = max([-min([l for l in ls if isinstance(l, int)], default=0) for ls in inputs])
    ellipsis = list(range(-width, 0))
    if not arrow:           # implicit: '...' first, then the letters used once, sorted
        letters = [l for ls in inputs for l in ls if isinstance(l, str)]
        return inputs, ellipsis + sorted(c for c in set(letters) if letters.count(c) == 1)
    named = rhs.replace("...", "")
    output = _term_labels(rhs, len(named) + (width if "..." in rhs else 0), "output")
    known = {l for ls in inputs for l in ls}
    for c in named:
        if c not in known:
            raise ValueError(f"einsum: output index {c!r} appears in no operand")
    return inputs, output


def _sum_labels(t, labels, keep):
    """t with the dimensions of labels not in `keep` summed out."""
    axes = tuple(i for i, label in enumerate(labels) if label not in keep)
    if not axes:
        return t, labels
    return t.sum(axis=axes), [label for label in labels if label in keep]


def _arranged(t, labels, order, sizes):
    """t transposed to the labels' `order`, broadcast to `sizes` where it has size 1."""
    perm = tuple(labels.index(label) for label in order)
    if perm != tuple(range(len(perm))):
        t = t.transpose(*perm)
    target = tuple(sizes[label] for label in order)
    return t if t.shape == target else t.broadcast_to(*target)


def _contract(a, la, b, lb, needed):
    """The product of two labelled operands, summed over shared labels not `needed`."""
    a, la = _sum_labels(a, la, set(lb) | needed)
    b, lb = _sum_labels(b, lb, set(la) | needed)
    sizes = {}
    for t, labels in ((a, la), (b, lb)):
        for label, n in zip(labels, t.shape):
            if sizes.get(label, 1) not in (1, n) and n != 1:
                raise ValueError(f"einsum: index {label!r} has sizes {sizes[label]} and {n}"
                                 if isinstance(label, str) else
                                 f"einsum: '...' dimensions of sizes {sizes[label]} and {n} "
                                 f"do not broadcast")
            sizes[label] = max(sizes.get(label, 1), n)
    batch = [label for label in la if label in lb and label in needed]
    inner = [label for label in la if label in lb and label not in needed]
    rows = [label for label in la if label not in lb]
    cols = [label for label in lb if label not in la]

    def size(labels):
        return math.prod(sizes[label] for label in labels)

    lead = (size(batch),) if batch else ()        # no batch: one plain matrix product
    a = _arranged(a, la, batch + rows + inner, sizes).reshape(*lead, size(rows), size(inner))
    b = _arranged(b, lb, batch + inner + cols, sizes).reshape(*lead, size(inner), size(cols))
    out = (a @ b).reshape(*(sizes[label] for label in batch + rows + cols))
    return out, batch + rows + cols


def einsum(equation: str, *operands: TensorLike) -> Tensor:
    """torch.einsum / numpy.einsum: 'bij,bjk->bik', 'bhqd,bhkd->bhqk', 'ij->ji', 'i,j->ij',
    an implicit output ('ij,jk': the indices used once, sorted) and '...' broadcasting. An
    index repeated within one operand (a diagonal, 'ii->i') is refused with a ValueError.
    The operands may also be passed as one list, as torch allows."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum: needs at least one operand")
    tensors = [_as_tensor(t) for t in operands]
    inputs, output = _parse(equation, [t.ndim for t in tensors])
    if len(set(output)) != len(output):
        raise ValueError(f"einsum: an output index repeats in {equation!r}")
    t, labels = tensors[0], inputs[0]
    for k in range(1, len(tensors)):
        needed = set(output).union(*inputs[k + 1:])
        t, labels = _contract(t, labels, tensors[k], inputs[k], needed)
    t, labels = _sum_labels(t, labels, set(output))
    perm = tuple(labels.index(label) for label in output)
    if t is tensors[0] and perm == tuple(range(len(perm))):
        return _core.apply_one(cached_op(O.Identity), t)  # a new Tensor: `y += 1` keeps x
    return t.transpose(*perm)


def outer(a: TensorLike, b: TensorLike) -> Tensor:
    """The outer product of two 1-d tensors (torch.outer): out[i, j] = a[i] * b[j]."""
    a, b = _as_tensor(a), _as_tensor(b)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: a and b must be 1-d, got shapes {a.shape} and {b.shape}")
    return a.reshape(-1, 1) * b.reshape(1, -1)
