"""PyTorch's loss functions (torch.nn.functional's names, arguments, defaults and
reductions), composed of existing ops (docs/api.md): gradients, recomputation under a
memory manager and traces come with those ops. The functional API re-exports them.

Deliberate differences from PyTorch: input and target must have the same shape (PyTorch
broadcasts some of them with a warning, a classic silent mistake), and nothing reads a
tensor's values to check them (that would wait for them, and a trace could not replay
the check): binary_cross_entropy's input outside [0, 1] gives NaN rather than an error.
Labels are checked by the kernel that reads them, as cross_entropy's own op does."""
from __future__ import annotations

import numpy as np

from . import _core
from . import _compose as C
from . import ops as O
from ._types import TensorLike
from .creation import _as_tensor, arange, ones
from .ops.base import cached_op, check_real, normalize_axis
from .tensor import Tensor

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "nll_loss", "kl_div"]

_apply1 = _core.apply_one
_REDUCTIONS = ("mean", "sum", "none")
_LOG_FLOOR = -100.0     # PyTorch's binary cross entropy clamps its logs here


# ---------------------------------------------------------------------------------------
# Shared pieces: arguments and reductions


def check_reduction(fn: str, reduction, choices=_REDUCTIONS) -> str:
    if not isinstance(reduction, str) or reduction not in choices:
        raise ValueError(f"{fn}: reduction must be one of {choices}, got {reduction!r}")
    return reduction


def reduced(loss: Tensor, reduction: str) -> Tensor:
    """The elementwise `loss` averaged ("mean"), summed ("sum") or as it is ("none")."""
    if reduction == "none":
        return loss
    return C.reduce("SUM" if reduction == "sum" else "MEAN", loss)


def _pair(fn, input, target, reduction, names=("input", "target")):
    """(input, target) as float Tensors of one dtype and the same shape, the reduction
    checked."""
    check_reduction(fn, reduction)
    input = C.as_float(input)
    target = _as_tensor(target, input.device)
    if input.shape != target.shape:
        raise ValueError(f"{fn}: {names[0]} has shape {input.shape} but {names[1]} has "
                         f"shape {target.shape}; reshape one of them")
    return input, target if target.dtype == input.dtype else target.astype(input.dtype)


def _scale(fn, name, value, like):
    """An optional per-element factor (weight, pos_weight) as a Tensor of `like`'s dtype
    that broadcasts to `like`'s shape, or None."""
    if value is None:
        return None
    value = _as_tensor(value, like.device)
    try:
        fits = np.broadcast_shapes(value.shape, like.shape) == like.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{fn}: {name} of shape {value.shape} does not broadcast to the "
                         f"input's shape {like.shape}")
    return value if value.dtype == like.dtype else value.astype(like.dtype)


def check_smoothing(fn, value):
    value = check_real(value, fn, "label_smoothing")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be in [0, 1], got {value!r}")
    return value


def check_positive(fn, name, value, allow_zero):
    value = check_real(value, fn, name)
    if value < 0 or (value == 0 and not allow_zero) or value != value:
        raise ValueError(f"{fn}: {name} must be {'>= 0' if allow_zero else '> 0'}, "
                         f"got {value!r}")
    return value


# ---------------------------------------------------------------------------------------
# Regression losses


def mse_loss(pred: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """(pred - target) ** 2, averaged ("mean"), summed ("sum") or elementwise ("none"), as
    PyTorch's. The shapes must match: broadcasting a (N,) target against a (N, 1) prediction
    is a classic silent mistake."""
    pred, target = _pair("mse_loss", pred, target, reduction, ("pred", "target"))
    diff = pred - target
    return reduced(diff * diff, reduction)


def l1_loss(input: TensorLike, target: TensorLike, reduction: str = "mean") -> Tensor:
    """|input - target|, reduced, as torch.nn.functional.l1_loss."""
    input, target = _pair("l1_loss", input, target, reduction)
    return reduced(abs(input - target), reduction)


def _quadratic_then_linear(diff, edge, quadratic_divisor, linear_factor):
    """0.5 diff**2 / quadratic_divisor where |diff| < edge, else (|diff| - edge / 2) *
    linear_factor: smooth L1 and Huber, in PyTorch's order of operations."""
    size = abs(diff)
    quadratic = diff * diff * 0.5
    if quadratic_divisor != 1.0:
        quadratic = quadratic / quadratic_divisor
    linear = size - 0.5 * edge
    if linear_factor != 1.0:
        linear = linear * linear_factor
    return C.where(size < edge, quadratic, linear)


def smooth_l1_loss(input: TensorLike, target: TensorLike, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 d**2 / beta where |d| < beta, else |d| - beta / 2 (d = input - target), reduced,
    as torch.nn.functional.smooth_l1_loss; beta = 0 is the L1 loss."""
    beta = check_positive("smooth_l1_loss", "beta", beta, allow_zero=True)
    input, target = _pair("smooth_l1_loss", input, target, reduction)
    diff = input - target
    if beta == 0:
        return reduced(abs(diff), reduction)
    return reduced(_quadratic_then_linear(diff, beta, beta, 1.0), reduction)


def huber_loss(input: TensorLike, target: TensorLike, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d**2 where |d| < delta, else delta * (|d| - delta / 2) (d = input - target),
    reduced, as torch.nn.functional.huber_loss."""
    delta = check_positive("huber_loss", "delta", delta, allow_zero=False)
    input, target = _pair("huber_loss", input, target, reduction)
    return reduced(_quadratic_then_linear(input - target, delta, 1.0, delta), reduction)


# ---------------------------------------------------------------------------------------
# Binary classification


def _clamped_log(log, x, defined, neutral):
    """max(log(x), -100) where `defined`, else -100. Where it is not defined (log of 0)
    the log sees `neutral` instead: no inf, no warning, and no inf * 0 = NaN in the
    gradient, which reaches only the branch taken."""
    logged = C.maximum(log(C.where(defined, x, neutral)), _LOG_FLOOR)
    return C.where(defined, logged, _LOG_FLOOR)


def binary_cross_entropy(input: TensorLike, target: TensorLike,
                         weight: TensorLike | None = None,
                         reduction: str = "mean") -> Tensor:
    """-(target log(input) + (1 - target) log(1 - input)) of probabilities `input`, each log
    clamped at -100 as PyTorch's, times `weight` (broadcast) when given, reduced. The
    gradient is that of the clamped form (finite at 0 and 1), which is PyTorch's wherever
    input * (1 - input) > 1e-12. An input outside [0, 1] gives NaN, not an error."""
    input, target = _pair("binary_cross_entropy", input, target, reduction)
    weight = _scale("binary_cross_entropy", "weight", weight, input)
    log_p = _clamped_log(C.log, input, input > 0, 1.0)
    log_q = _clamped_log(C.log1p, -input, input < 1, 0.0)     # log(1 - input)
    loss = (target - 1) * log_q - target * log_p
    return reduced(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(input: TensorLike, target: TensorLike,
                                     weight: TensorLike | None = None,
                                     reduction: str = "mean",
                                     pos_weight: TensorLike | None = None) -> Tensor:
    """binary_cross_entropy(sigmoid(input), target) computed stably from the logits, as
    PyTorch's: (1 - target) * input + (1 + (pos_weight - 1) * target) * softplus(-input).
    `pos_weight` (broadcast along the last axis, one per class) weighs the positive term;
    `weight` each element."""
    fn = "binary_cross_entropy_with_logits"
    input, target = _pair(fn, input, target, reduction)
    weight = _scale(fn, "weight", weight, input)
    pos_weight = _scale(fn, "pos_weight", pos_weight, input)
    softplus = C.softplus(-input)                               # -log(sigmoid(input))
    if pos_weight is not None:
        softplus = ((pos_weight - 1) * target + 1) * softplus
    loss = (1 - target) * input + softplus
    return reduced(loss if weight is None else loss * weight, reduction)


# ---------------------------------------------------------------------------------------
# Classification with class labels


def _labels(fn, labels, input, axis):
    """Integer class labels of `input`'s shape without `axis`."""
    labels = _as_tensor(labels, input.device)
    if labels.dtype.kind not in "iu":
        raise TypeError(f"{fn}: target must be integer class labels, got dtype "
                        f"{labels.dtype}")
    expected = input.shape[:axis] + input.shape[axis + 1:]
    if labels.shape != expected:
        raise ValueError(f"{fn}: target must have shape {expected} (the input's {input.shape} "
                         f"without its class axis {axis}), got {labels.shape}")
    return labels


def _class_weight(fn, weight, classes, like):
    """The per-class `weight` as a (classes,) Tensor of `like`'s dtype, or None."""
    if weight is None:
        return None
    weight = _as_tensor(weight, like.device)
    if weight.shape != (classes,):
        raise ValueError(f"{fn}: weight must have shape ({classes},), one per class, got "
                         f"{weight.shape}")
    return weight if weight.dtype == like.dtype else weight.astype(like.dtype)


def _ignoring(fn, labels, ignore_index):
    """(labels with the ignored ones set to class 0, mask of the kept ones or None)."""
    if ignore_index is None:
        return labels, None
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"{fn}: ignore_index must be an int, got {ignore_index!r}")
    kept = labels != int(ignore_index)
    return C.where(kept, labels, 0), kept


def item_weights(safe_labels, kept, weight, classes, like, check):
    """Each item's weight: weight[label] (1 without weights), 0 where ignored; None when
    every item weighs 1 and no check is asked. With `check` (or weights) the weights are
    taken by an Embedding op, whose kernel raises an IndexError for a label outside
    [0, classes) when it runs: nll_loss has no op of its own that reads the labels."""
    if weight is None and not check:
        return None if kept is None else kept.astype(like.dtype)
    if weight is None:
        weight = ones((classes,), like.dtype, like.device)
    table = weight.reshape(classes, 1)
    taken = _apply1(cached_op(O.Embedding), safe_labels, table).reshape(safe_labels.shape)
    return taken if kept is None else C.where(kept, taken, 0.0)


def weighted_reduction(loss, weights, reduction):
    """PyTorch's reduction of a weighted classification loss: "mean" divides the sum by
    the items' total weight (the kept items' count without weights)."""
    if reduction != "mean" or weights is None:
        return reduced(loss, reduction)
    return C.reduce("SUM", loss) / C.reduce("SUM", weights)


def _picked(input, labels, axis):
    """input's value at each item's label along `axis` (0 for a label matching no class):
    a comparison with the class numbers, so the gradient is one-hot."""
    classes = arange(input.shape[axis], dtype=labels.dtype, device=input.device)
    hit = _apply1(cached_op(O.AddAxis, axis), labels) == classes.reshape(
        C.class_axis_shape(input.ndim, axis))
    return C.reduce("SUM", C.where(hit, input, 0.0), axis)


def nll_loss(input: TensorLike, target: TensorLike, weight: TensorLike | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """-input[label] of log-probabilities `input` (N, C), (N, C, d1, ...) or (C,) with
    classes along axis 1 (0 for a 1-D input) and integer labels `target`, times
    `weight[label]` when given, as torch.nn.functional.nll_loss: items labelled
    `ignore_index` count for nothing, and "mean" divides by the kept items' total weight.
    A label outside [0, C) is an IndexError when the op reading it runs."""
    check_reduction("nll_loss", reduction)
    input = C.as_float(input)
    if input.ndim == 0:
        raise ValueError("nll_loss: input must have a class axis, got a 0-d tensor")
    axis = 1 if input.ndim > 1 else 0
    labels = _labels("nll_loss", target, input, axis)
    classes = input.shape[axis]
    weight = _class_weight("nll_loss", weight, classes, input)
    safe, kept = _ignoring("nll_loss", labels, ignore_index)
    weights = item_weights(safe, kept, weight, classes, input, check=True)
    # the labels themselves (not the safe ones) pick: an ignored label picks nothing, so
    # that an ignored item's -inf log-probability cannot make 0 * inf = NaN
    return weighted_reduction(-_picked(input, labels, axis) * weights, weights, reduction)


def composed_cross_entropy(logits: Tensor, labels: Tensor, axis: int, reduction: str,
                           weight: TensorLike | None, ignore_index: int | None,
                           label_smoothing: float) -> Tensor:
    """F.cross_entropy with PyTorch's weight, ignore_index, label_smoothing or class
    probabilities as target (F.cross_entropy calls this for any of them). Integer labels
    still go through the CrossEntropy op, per item (it reads and checks them); the
    smoothing term is -sum(weight * log_softmax(logits)) / classes, and "mean" divides
    both by the kept items' total weight, as PyTorch's."""
    check_reduction("cross_entropy", reduction)
    smoothing = check_smoothing("cross_entropy", label_smoothing)
    logits = C.as_float(logits)
    if logits.ndim == 0:
        raise ValueError("cross_entropy: logits must have a class axis, got a 0-d tensor")
    axis = normalize_axis(axis, logits.ndim, "cross_entropy")
    classes = logits.shape[axis]
    weight = _class_weight("cross_entropy", weight, classes, logits)
    along = None if weight is None else weight.reshape(C.class_axis_shape(logits.ndim, axis))
    if labels.dtype.kind == "f":
        return _cross_entropy_of_probabilities(logits, labels, axis, reduction, along,
                                               ignore_index, smoothing)
    labels = _labels("cross_entropy", labels, logits, axis)
    safe, kept = _ignoring("cross_entropy", labels, ignore_index)
    loss = _apply1(cached_op(O.CrossEntropy, axis, "none"), logits, safe)
    weights = item_weights(safe, kept, weight, classes, logits, check=False)
    if weights is not None:
        loss = loss * weights
    if smoothing:
        logp = C.along(O.LogSoftmax, logits, axis)
        smooth = -C.reduce("SUM", logp if along is None else logp * along, axis)
        loss = loss * (1.0 - smoothing) + smooth * (smoothing / classes)
    if kept is not None:        # nothing at all from an ignored item (not even 0 * inf)
        loss = C.where(kept, loss, 0.0)
    return weighted_reduction(loss, weights, reduction)


def _cross_entropy_of_probabilities(logits, target, axis, reduction, along, ignore_index,
                                    smoothing):
    """-sum(weight * target * log_softmax(logits)) along the class axis, the target
    smoothed towards uniform; "mean" averages over the items, as PyTorch's."""
    if ignore_index is not None:
        raise ValueError("cross_entropy: ignore_index applies to class labels, not to a "
                         "target of class probabilities")
    if target.shape != logits.shape:
        raise ValueError(f"cross_entropy: a target of class probabilities must have the "
                         f"logits' shape {logits.shape}, got {target.shape}")
    target = target if target.dtype == logits.dtype else target.astype(logits.dtype)
    if smoothing:
        target = target * (1.0 - smoothing) + smoothing / logits.shape[axis]
    terms = C.along(O.LogSoftmax, logits, axis) * target
    return reduced(-C.reduce("SUM", terms if along is None else terms * along, axis),
                   reduction)


# ---------------------------------------------------------------------------------------
# Distributions


def _xlogx(x):
    """x log x, 0 where x == 0 (PyTorch's xlogy(x, x)); NaN for a negative x."""
    zero = x == 0
    return C.where(zero, 0.0, x * C.log(C.where(zero, 1.0, x)))


def kl_div(input: TensorLike, target: TensorLike, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence of `target` from log-probabilities `input`, pointwise
    target * (log(target) - input) (exp(target) * (target - input) with log_target), as
    torch.nn.functional.kl_div. reduction "batchmean" divides the sum by the batch size
    (input.shape[0]), the true KL divergence; "mean" (PyTorch's default, kept) divides by
    the element count."""
    check_reduction("kl_div", reduction, _REDUCTIONS + ("batchmean",))
    input, target = _pair("kl_div", input, target, "none")
    if log_target:
        loss = C.exp(target) * (target - input)
    else:
        loss = _xlogx(target) - target * input
    if reduction != "batchmean":
        return reduced(loss, reduction)
    total = C.reduce("SUM", loss)
    return total / input.shape[0] if input.ndim else total
