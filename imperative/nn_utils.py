"""`imperative.nn.utils` (reached as `nn.utils`): PyTorch's `torch.nn.utils` gradient
clipping, for a ported training loop (`nn.utils.clip_grad_norm_(model.parameters(), 1.0)`).
Both rebind each parameter's `.grad` with ops (nothing waits for the gradients)."""
from __future__ import annotations

from typing import Iterable

from . import _core
from . import functional as F
from .optim import clip_grad_norm, clip_grad_norm_
from .tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_"]


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clip every `.grad` of `parameters` to [-clip_value, clip_value], as PyTorch's."""
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if (isinstance(clip_value, bool) or not isinstance(clip_value, (int, float))
            or not clip_value >= 0):
        raise ValueError(f"clip_grad_value_: clip_value must be a number >= 0, got "
                         f"{clip_value!r}")
    for p in params:
        if p.grad is not None:
            p.grad = _core.persistent(F.clip(p.grad, -float(clip_value), float(clip_value)))
