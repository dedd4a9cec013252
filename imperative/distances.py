"""Norms and distances of torch.nn.functional: normalize, cosine_similarity,
pairwise_distance and cdist, composed of existing ops (docs/api.md). The functional API
re-exports them. PyTorch's `dim` is `axis` here, as everywhere in imperative.

A norm's gradient at a zero vector is 0 here, as PyTorch's: the root is taken only where
the sum it roots is positive (the gradient of sqrt at 0 would be inf, times 0: NaN)."""
from __future__ import annotations

import math

import numpy as np

from . import _compose as C
from . import ops as O
from ._core import apply_one
from ._types import TensorLike
from .ops.base import cached_op, check_real, normalize_axis
from .tensor import Tensor

__all__ = ["normalize", "cosine_similarity", "pairwise_distance", "cdist"]


def _check_p(fn, p, allow_zero=False):
    """A norm's order: a real number > 0 (>= 0 with allow_zero), or inf."""
    p = check_real(p, fn, "p")
    if not (p > 0 or (allow_zero and p == 0)):
        raise ValueError(f"{fn}: p must be {'>= 0' if allow_zero else '> 0'} (or inf), "
                         f"got {p!r}")
    return p


def _root(total, p):
    """total ** (1 / p) where total > 0, else 0, with a zero gradient there."""
    positive = total > 0
    safe = C.where(positive, total, 1.0)
    rooted = C.sqrt(safe) if p == 2 else safe ** (1.0 / p)
    return C.where(positive, rooted, 0.0)


def vector_norm(x: Tensor, p: float, axis, keepdims: bool = False) -> Tensor:
    """The p-norm of x along `axis`: (sum |x| ** p) ** (1 / p), max |x| for p = inf, the
    count of non-zeros for p = 0."""
    if p == math.inf:
        return C.reduce("MAX", abs(x), axis, keepdims)
    if p == 0:
        return C.reduce("SUM", (x != 0).astype(x.dtype), axis, keepdims)
    if p == 1:
        return C.reduce("SUM", abs(x), axis, keepdims)
    if p == 2:
        return _root(C.reduce("SUM_SQR", x, axis, keepdims), 2)
    return _root(C.reduce("SUM", abs(x) ** p, axis, keepdims), p)


def _float_pair(x1, x2):
    x1 = C.as_float(x1)
    x2 = C.as_float(x2, x1.device)
    if x2.dtype != x1.dtype:
        x2 = x2.astype(x1.dtype)
    return x1, x2


def _broadcast_shape(fn, x1, x2):
    try:
        return np.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ValueError(f"{fn}: shapes {x1.shape} and {x2.shape} do not broadcast") from None


def normalize(input: TensorLike, p: float = 2.0, axis: int = 1,
              eps: float = 1e-12) -> Tensor:
    """input / max(its p-norm along `axis`, eps), as torch.nn.functional.normalize."""
    p = _check_p("normalize", p)
    eps = check_real(eps, "normalize", "eps")
    x = C.as_float(input)
    axis = normalize_axis(axis, x.ndim, "normalize")
    return x / C.maximum(vector_norm(x, p, axis, keepdims=True), eps)


def cosine_similarity(x1: TensorLike, x2: TensorLike, axis: int = 1,
                      eps: float = 1e-8) -> Tensor:
    """sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps)) along `axis`, x1 and x2 broadcast,
    as torch.nn.functional.cosine_similarity (each divided by its norm first, as PyTorch
    does, which keeps the result in [-1, 1])."""
    eps = check_real(eps, "cosine_similarity", "eps")
    x1, x2 = _float_pair(x1, x2)
    shape = _broadcast_shape("cosine_similarity", x1, x2)
    axis = normalize_axis(axis, len(shape), "cosine_similarity")
    # broadcast first, as PyTorch: a norm counts every element its vector has there
    x1, x2 = (x if x.shape == shape else apply_one(cached_op(O.Broadcast, shape), x)
              for x in (x1, x2))
    unit1 = x1 / C.maximum(vector_norm(x1, 2, axis, keepdims=True), eps)
    unit2 = x2 / C.maximum(vector_norm(x2, 2, axis, keepdims=True), eps)
    return C.reduce("SUM", unit1 * unit2, axis)


def pairwise_distance(x1: TensorLike, x2: TensorLike, p: float = 2.0, eps: float = 1e-6,
                      keepdims: bool = False) -> Tensor:
    """The p-norm of x1 - x2 + eps along the last axis, x1 and x2 broadcast, as
    torch.nn.functional.pairwise_distance (whose `keepdim` is `keepdims` here)."""
    p = _check_p("pairwise_distance", p, allow_zero=True)
    eps = check_real(eps, "pairwise_distance", "eps")
    x1, x2 = _float_pair(x1, x2)
    if not _broadcast_shape("pairwise_distance", x1, x2):
        raise ValueError("pairwise_distance: the inputs must have at least one axis, got "
                         "two 0-d tensors")
    return vector_norm(x1 - x2 + eps, p, -1, keepdims)


_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
          "donot_use_mm_for_euclid_dist")


def cdist(x1: TensorLike, x2: TensorLike, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2
    (..., R, M): (..., P, R), leading axes broadcast, as torch.cdist. For p = 2 with more
    than 25 rows on a side (or compute_mode "use_mm_for_euclid_dist"), through a matrix
    product, as PyTorch: sqrt(|a|^2 + |b|^2 - 2 a.b), faster and less exact; otherwise
    from the differences, which take P * R * M elements of memory."""
    p = _check_p("cdist", p, allow_zero=True)
    if compute_mode not in _MODES:
        raise ValueError(f"cdist: compute_mode must be one of {_MODES}, got {compute_mode!r}")
    x1, x2 = _float_pair(x1, x2)
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: x1 and x2 must be (..., P, M) and (..., R, M) with the same "
                         f"M, got shapes {x1.shape} and {x2.shape}")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    matmul = p == 2 and (compute_mode == _MODES[1] or (
        compute_mode == _MODES[0] and (rows1 > 25 or rows2 > 25)))
    if matmul:
        squares1 = C.reduce("SUM_SQR", x1, -1, True)                          # (..., P, 1)
        squares2 = apply_one(cached_op(O.AddAxis, -2), C.reduce("SUM_SQR", x2, -1))
        products = apply_one(cached_op(O.MatrixMul, False, True), x1, x2)     # (..., P, R)
        return _root(C.maximum(squares1 + squares2 - products * 2.0, 0.0), 2)
    diff = (apply_one(cached_op(O.AddAxis, -2), x1)       # (..., P, 1, M)
            - apply_one(cached_op(O.AddAxis, -3), x2))    # (..., 1, R, M)
    return vector_norm(diff, p, -1)
