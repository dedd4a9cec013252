"""PyTorch's loss modules (`criterion = nn.CrossEntropyLoss(); loss = criterion(out, y)`),
and CosineSimilarity and PairwiseDistance: each holds its settings and calls its function
of imperative.functional (losses.py, distances.py). imperative.nn re-exports them.

They are Modules without parameters (a `weight` Tensor is a buffer, in `state_dict()` as
PyTorch's). A loss's settings after the first are keyword-only: PyTorch's deprecated positional
`size_average` and `reduce` would otherwise land on them silently."""
from __future__ import annotations

from typing import Any

from . import functional as F
from . import losses as L
from .module import Module
from ._types import TensorLike
from .ops.base import check_real
from .tensor import Tensor

__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "CrossEntropyLoss", "NLLLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance"]


class _Functional(Module):
    """Base class: a module that calls one function with its settings (`settings` names
    the attributes its repr shows)."""

    settings: tuple[str, ...] = ()

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.settings
                          if not isinstance(getattr(self, name), Tensor))
        return f"{type(self).__name__}({shown})"


class _Loss(_Functional):
    """Base class of the losses: `reduction` checked when the module is made."""

    settings: tuple[str, ...] = ("reduction",)
    reductions: tuple[str, ...] = ("mean", "sum", "none")

    def __init__(self, *, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = L.check_reduction(type(self).__name__, reduction, self.reductions)


class MSELoss(_Loss):
    """F.mse_loss as a module."""

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """F.l1_loss as a module."""

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """F.smooth_l1_loss(beta) as a module."""

    settings = ("reduction", "beta")

    def __init__(self, *, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.beta = L.check_positive("SmoothL1Loss", "beta", beta, allow_zero=True)

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    """F.huber_loss(delta) as a module."""

    settings = ("reduction", "delta")

    def __init__(self, *, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = L.check_positive("HuberLoss", "delta", delta, allow_zero=False)

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.huber_loss(input, target, self.reduction, self.delta)


class BCELoss(_Loss):
    """F.binary_cross_entropy(weight) as a module."""

    def __init__(self, weight: TensorLike | None = None, *, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.weight = weight

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits(weight, pos_weight) as a module."""

    def __init__(self, weight: TensorLike | None = None, *, reduction: str = "mean",
                 pos_weight: TensorLike | None = None) -> None:
        super().__init__(reduction=reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                  self.pos_weight)


def _class_axis(input: Any) -> int:
    """PyTorch's class axis: 1, or 0 for an unbatched 1-D input."""
    return 1 if getattr(input, "ndim", 2) > 1 else 0


class CrossEntropyLoss(_Loss):
    """F.cross_entropy with classes along axis 1 (0 for a 1-D input) as PyTorch's module:
    integer labels or class probabilities, weight, ignore_index (None by default, where
    PyTorch's is -100, as F.cross_entropy's), label_smoothing."""

    settings = ("reduction", "ignore_index", "label_smoothing")

    def __init__(self, weight: TensorLike | None = None, *, ignore_index: int | None = None,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(reduction=reduction)
        self.weight, self.ignore_index = weight, ignore_index
        self.label_smoothing = L.check_smoothing("CrossEntropyLoss", label_smoothing)

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return F.cross_entropy(input, target, _class_axis(input), self.reduction, self.weight,
                               self.ignore_index, self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss(weight, ignore_index=-100) as a module."""

    settings = ("reduction", "ignore_index")

    def __init__(self, weight: TensorLike | None = None, *, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class KLDivLoss(_Loss):
    """F.kl_div(log_target) as a module; reduction "batchmean" too."""

    settings = ("reduction", "log_target")
    reductions = ("mean", "batchmean", "sum", "none")

    def __init__(self, *, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.log_target = bool(log_target)

    def forward(self, input: TensorLike, target: TensorLike) -> Tensor:
        return L.kl_div(input, target, self.reduction, self.log_target)


class CosineSimilarity(_Functional):
    """F.cosine_similarity(axis, eps) of two inputs as a module (PyTorch's `dim` is
    `axis`)."""

    settings = ("axis", "eps")

    def __init__(self, axis: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.axis, self.eps = int(axis), check_real(eps, "CosineSimilarity", "eps")

    def forward(self, x1: TensorLike, x2: TensorLike) -> Tensor:
        return F.cosine_similarity(x1, x2, self.axis, self.eps)


class PairwiseDistance(_Functional):
    """F.pairwise_distance(p, eps, keepdims) of two inputs as a module (PyTorch's
    `keepdim` is `keepdims`)."""

    settings = ("p", "eps", "keepdims")

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdims: bool = False) -> None:
        super().__init__()
        self.p = check_real(p, "PairwiseDistance", "p")
        self.eps = check_real(eps, "PairwiseDistance", "eps")
        self.keepdims = bool(keepdims)

    def forward(self, x1: TensorLike, x2: TensorLike) -> Tensor:
        return F.pairwise_distance(x1, x2, self.p, self.eps, self.keepdims)
