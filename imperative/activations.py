"""Activations of torch.nn.functional (and torch.logaddexp) composed of existing ops:
logaddexp, softsign, logsigmoid, glu and gumbel_softmax (docs/api.md). The functional
API re-exports them. PyTorch's `dim` is `axis` here, as everywhere in imperative."""
from __future__ import annotations

from . import _compose as C
from . import ops as O
from . import random as R
from ._core import apply, apply_one
from ._types import TensorLike
from .creation import arange
from .ops.base import cached_op, check_real, normalize_axis
from .tensor import Tensor

__all__ = ["logaddexp", "softsign", "logsigmoid", "glu", "gumbel_softmax"]

_TINY = 1.1754944e-38          # float32's smallest normal number: log of it is finite


def logaddexp(x1: TensorLike, x2: TensorLike) -> Tensor:
    """log(exp(x1) + exp(x2)) without overflow, as torch.logaddexp: max(x1, x2) +
    softplus(-|x1 - x2|). Where x1 == x2 the difference is taken as 0 (so two equal
    infinities give that infinity, not NaN); there each input gets half the gradient."""
    x1 = C.as_float(x1)
    x2 = C.as_float(x2, x1.device)
    if x2.dtype != x1.dtype:
        x2 = x2.astype(x1.dtype)
    same = x1 == x2
    diff = C.where(same, 0.0, x1) - C.where(same, 0.0, x2)     # (no inf - inf)
    return C.maximum(x1, x2) + C.softplus(-abs(diff))


def softsign(input: TensorLike) -> Tensor:
    """input / (1 + |input|), as torch.nn.functional.softsign."""
    x = C.as_float(input)
    return x / (abs(x) + 1.0)


def logsigmoid(input: TensorLike) -> Tensor:
    """log(sigmoid(input)) = -softplus(-input), stable for large |input|, as
    torch.nn.functional.logsigmoid."""
    return -C.softplus(-C.as_float(input))


def glu(input: TensorLike, axis: int = -1) -> Tensor:
    """a * sigmoid(b) for the two halves a, b of input along `axis` (of even length), as
    torch.nn.functional.glu."""
    x = C.as_float(input)
    if x.ndim == 0:
        raise ValueError("glu: input must have at least one axis, got a 0-d tensor")
    axis = normalize_axis(axis, x.ndim, "glu")
    if x.shape[axis] % 2:
        raise ValueError(f"glu: axis {axis} of input {x.shape} must have an even length, to "
                         f"halve it; it has {x.shape[axis]}")
    a, b = apply(cached_op(O.Split, axis, 2), x)
    return a * C.sigmoid(b)


def gumbel_softmax(logits: TensorLike, tau: float = 1.0, hard: bool = False,
                   axis: int = -1) -> Tensor:
    """softmax((logits + g) / tau) along `axis`, g Gumbel(0, 1) noise drawn with
    imperative.random (seeded by imp.random.seed), as torch.nn.functional.gumbel_softmax.
    With hard, the one-hot of each sample's largest value, with the soft sample's gradient
    (one_hot - soft.detach() + soft: the straight-through estimator)."""
    tau = check_real(tau, "gumbel_softmax", "tau")
    if not tau > 0:
        raise ValueError(f"gumbel_softmax: tau must be > 0, got {tau!r}")
    x = C.as_float(logits)
    if x.ndim == 0:
        raise ValueError("gumbel_softmax: logits must have a class axis, got a 0-d tensor")
    axis = normalize_axis(axis, x.ndim, "gumbel_softmax")
    # -log(E), E ~ Exp(1) = -log(U), U uniform in (0, 1): kept off 0, where log is -inf
    uniform = R.uniform(size=x.shape, dtype=x.dtype, device=x.device)
    gumbel = -C.log(-C.log(C.maximum(uniform, _TINY)))
    soft = C.along(O.Softmax, (x + gumbel) / tau if tau != 1.0 else x + gumbel, axis)
    if not hard:
        return soft
    top = apply_one(cached_op(O.Argmax, axis, True), soft)
    classes = arange(x.shape[axis], dtype=top.dtype, device=x.device)
    one_hot = (top == classes.reshape(C.class_axis_shape(x.ndim, axis))).astype(x.dtype)
    return one_hot - soft.detach() + soft
