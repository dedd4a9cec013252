"""Optimizers. `step()` computes each new value with ordinary ops (so the update runs
through the interpreter) and rebinds the Parameter to it, in place: the object the model
holds stays the same."""
from . import _core
from ._core import apply
from .ops.base import cached_op
from .ops.elemwise import ScaledAdd
from .tensor import Tensor


def _axpy(x, alpha, y):
    """x + alpha * y, as one op when x and y match (the usual parameter and gradient)."""
    if x.shape == y.shape and x.dtype == y.dtype and x.dtype.kind == "f":
        return apply(cached_op(ScaledAdd, float(alpha)), x, y)[0]
    return x + y * alpha

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


def _check_number(name, value, low=0.0):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise ValueError(f"{name} must be a number >= {low}, got {value!r}")
    return float(value)


class Optimizer:
    def __init__(self, params, lr):
        params = [params] if isinstance(params, Tensor) else list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer parameters must be Tensors, got {type(p).__name__}")
        self.params = params
        self.lr = _check_number("lr", lr)
        self.state = {}          # id(param) -> per-parameter state (momentum buffers, moments)

    def clear_grad(self):
        """Set every parameter's `.grad` to None."""
        for p in self.params:
            p.grad = None

    zero_grad = clear_grad

    def step(self):
        for p in self.params:
            grad = p.grad
            if grad is not None:
                p._set_info_from(self._update(p, grad, self.state.setdefault(id(p), {})))

    def _update(self, param, grad, state):
        raise NotImplementedError


class SGD(Optimizer):
    """`SGD(params, lr, momentum=0.0, weight_decay=0.0, nesterov=False)`, as PyTorch's."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, lr)
        self.momentum = _check_number("momentum", momentum)
        self.weight_decay = _check_number("weight_decay", weight_decay)
        self.nesterov = bool(nesterov)
        if self.nesterov and self.momentum == 0:
            raise ValueError("nesterov momentum needs momentum > 0")

    def _update(self, param, grad, state):
        if self.weight_decay:
            grad = _axpy(grad, self.weight_decay, param)
        if self.momentum:
            buf = state.get("momentum")
            buf = grad if buf is None else buf * self.momentum + grad
            state["momentum"] = _core.persistent(buf)
            grad = _axpy(grad, self.momentum, buf) if self.nesterov else buf
        return _axpy(param, -self.lr, grad)


class Adam(Optimizer):
    """`Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)`: L2 weight
    decay added to the gradient, as PyTorch's Adam."""

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"betas must be in [0, 1), got {betas!r}")
        self.betas = (float(b1), float(b2))
        self.eps = _check_number("eps", eps)
        self.weight_decay = _check_number("weight_decay", weight_decay)

    def _update(self, param, grad, state):
        b1, b2 = self.betas
        if self.weight_decay and not self.decoupled:
            grad = grad + param * self.weight_decay
        t = state["t"] = state.get("t", 0) + 1
        m = grad * (1 - b1) if "m" not in state else state["m"] * b1 + grad * (1 - b1)
        v = (grad * grad) * (1 - b2) if "v" not in state else state["v"] * b2 + (grad * grad) * (1 - b2)
        state["m"], state["v"] = _core.persistent(m), _core.persistent(v)
        step = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)) ** 0.5 + self.eps)
        if self.weight_decay and self.decoupled:
            param = param * (1 - self.lr * self.weight_decay)
        return _axpy(param, -self.lr, step)


class AdamW(Adam):
    """Adam with decoupled weight decay (`param *= 1 - lr * weight_decay`), as PyTorch's."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)
