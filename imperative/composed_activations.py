"""F.mish, F.prelu and softplus with PyTorch's beta and threshold, composed of existing ops
(elementwise ops and where), so gradients, recomputation and traces come with those ops.
The functional API re-exports mish and prelu; nn.Softplus uses softplus_beta."""
from __future__ import annotations

from . import _core
from ._compose import as_float
from . import ops as O
from ._types import TensorLike
from .creation import _as_tensor
from .ops.base import cached_op, check_real
from .tensor import Tensor

__all__ = ["mish", "prelu", "softplus_beta"]

_apply1 = _core.apply_one
_SOFTPLUS = cached_op(O.Elemwise, "SOFTPLUS")
_TANH = cached_op(O.Elemwise, "TANH")
_WHERE = cached_op(O.Where)


def mish(x: TensorLike) -> Tensor:
    """x * tanh(softplus(x)), as torch.nn.functional.mish."""
    x = as_float(x)
    return x * _apply1(_TANH, _apply1(_SOFTPLUS, x))


def prelu(input: TensorLike, weight: TensorLike) -> Tensor:
    """x where x > 0, else weight * x, as torch.nn.functional.prelu: `weight` holds one
    slope, or one per channel (input's axis 1)."""
    x = as_float(input)
    weight = _as_tensor(weight, x.device)
    if weight.ndim != 1:
        raise ValueError(f"prelu: weight must be 1-D (num_parameters,), got shape {weight.shape}")
    channels = x.shape[1] if x.ndim >= 2 else 1
    if weight.shape[0] not in (1, channels):
        raise ValueError(f"prelu: weight has {weight.shape[0]} slopes; expected 1 or the "
                         f"{channels} channels of input {x.shape} (axis 1)")
    if weight.shape[0] > 1:
        weight = weight.reshape((1, channels) + (1,) * (x.ndim - 2))
    return _apply1(_WHERE, x > 0, x, x * weight)


def softplus_beta(x: TensorLike, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """torch.nn.functional.softplus(x, beta, threshold): log(1 + exp(beta * x)) / beta,
    and x itself where beta * x > threshold. With PyTorch's defaults that is F.softplus
    (for x > 20, log(1 + exp(x)) rounds to x in float32, and its gradient to 1)."""
    beta = check_real(beta, "softplus", "beta")
    threshold = check_real(threshold, "softplus", "threshold")
    x = as_float(x)
    if beta == 1.0 and threshold == 20.0:
        return _apply1(_SOFTPLUS, x)
    scaled = x * beta
    soft = _apply1(_SOFTPLUS, scaled)
    return _apply1(_WHERE, scaled > threshold, x, soft if beta == 1.0 else soft / beta)
