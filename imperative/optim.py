"""Optimizers. `step()` computes each new value with ordinary ops (so the update runs
through the interpreter) and rebinds the Parameter to it, in place: the object the model
holds stays the same."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import math

import numpy as np

from . import _core
from ._core import apply
from .ops.base import cached_op
from .ops.elemwise import ScaledAdd
from .ops.optim import AdamStep
from . import functional as F
from .tensor import Tensor


def _axpy(x, alpha, y):
    """x + alpha * y, as one op when x and y match (the usual parameter and gradient)."""
    if x.shape == y.shape and x.dtype == y.dtype and x.dtype.kind == "f":
        return apply(cached_op(ScaledAdd, float(alpha)), x, y)[0]
    return x + y * alpha

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
           "clip_grad_norm", "clip_grad_norm_"]

_FLOAT32 = np.dtype(np.float32)


def _check_number(name, value, low=0.0):
    # (`not value >= low`: a NaN is no number here either)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
        raise ValueError(f"{name} must be a number >= {low}, got {value!r}")
    return float(value)


def _check_fraction(name, value):
    if _check_number(name, value) > 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


class Optimizer:
    """Base class: `step()` updates every parameter that has a `.grad`; subclasses give
    `_update` and list their settings in `hyperparameters` (saved by `state_dict()`)."""

    hyperparameters = ("lr",)

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float) -> None:
        params = [params] if isinstance(params, Tensor) else list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer parameters must be Tensors, got {type(p).__name__}")
        self.params = params
        self.lr = _check_number("lr", lr)
        # id(param) -> per-parameter state (momentum buffers, moments, step counts), made
        # here, not on the first step, and updated in place by rebinding (Tensor.
        # _set_info_from): no Python value changes from one step to the next, so that a
        # traced training step (imp.jit.trace) replays every step the same way
        self.state = {}

    def clear_grad(self) -> None:
        """Set every parameter's `.grad` to None."""
        for p in self.params:
            p.grad = None

    zero_grad = clear_grad

    def _make_state(self):
        """Subclasses call this at the end of __init__, once their settings are known."""
        self.state = {id(p): self._initial_state(p) for p in self.params}

    def _initial_state(self, param):
        return {}

    def _add_missing_state(self):
        """The state entries a changed setting now needs (momentum turned on by a scheduler,
        as PyTorch's step would make its buffer), made as at construction; the others stay."""
        for p in self.params:
            state = self.state[id(p)]
            for name, value in self._initial_state(p).items():
                state.setdefault(name, value)

    def step(self) -> None:
        """Update every parameter that has a `.grad` (in place: the objects stay)."""
        for p in self.params:
            grad = p.grad
            if grad is not None:
                p._set_info_from(self._update(p, grad, self.state[id(p)]))

    def _update(self, param, grad, state):
        raise NotImplementedError

    # ---- saving (API.md §8)

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {name: Tensor or number}}, "param_groups": [{settings...,
        "params": [indices]}]}: PyTorch's layout, parameters numbered in the order given."""
        state = {i: dict(self.state[id(p)]) for i, p in enumerate(self.params)
                 if self.state.get(id(p))}
        group = {name: getattr(self, name) for name in self.hyperparameters}
        group["params"] = list(range(len(self.params)))
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore settings and per-parameter state from `state_dict()`'s output. Checked
        before anything changes: the parameter count and each state tensor's shape."""
        try:
            (group,) = state_dict["param_groups"]
            saved_state = state_dict["state"]
        except (KeyError, TypeError, ValueError):
            raise ValueError("load_state_dict: expected a dict with 'state' and one "
                             "'param_groups' entry, as Optimizer.state_dict() gives") from None
        if len(group.get("params", ())) != len(self.params):
            raise ValueError(f"load_state_dict: the saved optimizer has "
                             f"{len(group.get('params', ()))} parameters, this one "
                             f"{len(self.params)}")
        missing = [name for name in self.hyperparameters if name not in group]
        if missing:
            raise KeyError(f"load_state_dict: settings {missing} missing from param_groups")
        loaded = []
        for index, entry in saved_state.items():
            param = self.params[int(index)]
            own = self.state[id(param)]
            for name, value in entry.items():
                if name not in own:
                    raise KeyError(f"load_state_dict: state[{index}] has {name!r}, which "
                                   f"this optimizer does not keep ({sorted(own)})")
                loaded.append((own[name], self._loaded_state(index, name, own[name], value)))
        for name in self.hyperparameters:
            setattr(self, name, type(getattr(self, name))(group[name]))
        for tensor, value in loaded:       # in place: the state objects stay (traced steps)
            tensor._set_info_from(value)

    @staticmethod
    def _loaded_state(index, name, like, value):
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value, like.dtype))
        if value.shape != like.shape and value.size == like.size == 1:
            value = value.reshape(like.shape)      # a count saved as a 1-element array
        if value.shape != like.shape:
            raise ValueError(f"load_state_dict: state[{index}][{name!r}] has shape "
                             f"{value.shape}, expected {like.shape}")
        return value.to(like.device).astype(like.dtype)


def _log(beta):
    return math.log(beta) if beta > 0 else -math.inf


def _zeros_like(param):
    return _core.persistent(F.zeros(param.shape, param.dtype, param.device))


class SGD(Optimizer):
    """`SGD(params, lr, momentum=0.0, weight_decay=0.0, nesterov=False)`, as PyTorch's."""

    hyperparameters = ("lr", "momentum", "weight_decay", "nesterov")

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        super().__init__(params, lr)
        self.momentum = _check_number("momentum", momentum)
        self.weight_decay = _check_number("weight_decay", weight_decay)
        self.nesterov = bool(nesterov)
        if self.nesterov and self.momentum == 0:
            raise ValueError("nesterov momentum needs momentum > 0")
        self._make_state()

    def _initial_state(self, param):
        return {"momentum": _zeros_like(param)} if self.momentum else {}

    def _update(self, param, grad, state):
        if self.weight_decay:
            grad = _axpy(grad, self.weight_decay, param)
        if self.momentum:
            # (the buffer starts at zero: its first value is the gradient itself)
            buf = state["momentum"]
            buf._set_info_from(buf * self.momentum + grad)
            grad = _axpy(grad, self.momentum, buf) if self.nesterov else buf
        return _axpy(param, -self.lr, grad)


class Adam(Optimizer):
    """`Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)`: L2 weight
    decay added to the gradient, as PyTorch's Adam."""

    decoupled = False
    hyperparameters = ("lr", "betas", "eps", "weight_decay")

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"betas must be in [0, 1), got {betas!r}")
        self.betas = (float(b1), float(b2))
        self.eps = _check_number("eps", eps)
        self.weight_decay = _check_number("weight_decay", weight_decay)
        self._step_op = None
        self._make_state()

    def _initial_state(self, param):
        # the step count: a float32 Tensor (exact up to 2 ** 24 steps)
        count = _core.persistent(F.zeros((), "float32", param.device))
        return {"m": _zeros_like(param), "v": _zeros_like(param), "t": count}

    def _adam_step(self, params):
        """The AdamStep op of the current settings for `params` parameters (made again
        only when they change: a learning-rate schedule changes lr between steps)."""
        key = (self.lr, self.betas, self.eps, params)
        if self._step_op is None or self._step_op[0] != key:
            b1, b2 = self.betas
            self._step_op = (key, AdamStep(self.lr, b1, b2, self.eps, _log(b1), _log(b2),
                                           params))
        return self._step_op[1]

    def step(self) -> None:
        """Update every parameter that has a `.grad`: the float32 ones together, as one
        AdamStep op (bit-identical to the update op by op, ops/optim.py), the others op by
        op."""
        fused, operands = [], []
        for p in self.params:
            grad = p.grad
            if grad is None:
                continue
            state = self.state[id(p)]
            param, grad = self._with_weight_decay(p, grad)
            m = state["m"]
            if param.dtype is _FLOAT32 is grad.dtype is m.dtype and param.shape == grad.shape:
                fused.append((p, state))
                operands += (param, grad, m, state["v"], state["t"])
            else:
                p._set_info_from(self._update_op_by_op(param, grad, state))
        if not fused:
            return
        outputs = apply(self._adam_step(len(fused)), *operands)
        for i, (p, state) in enumerate(fused):
            p._set_info_from(outputs[4 * i])
            state["m"]._set_info_from(outputs[4 * i + 1])
            state["v"]._set_info_from(outputs[4 * i + 2])
            state["t"]._set_info_from(outputs[4 * i + 3])

    def _with_weight_decay(self, param, grad):
        """(param, grad) with the weight decay applied: added to the gradient (Adam) or
        shrinking the parameter (decoupled, AdamW)."""
        if self.weight_decay and not self.decoupled:
            grad = grad + param * self.weight_decay
        if self.weight_decay and self.decoupled:
            param = param * (1 - self.lr * self.weight_decay)
        return param, grad

    def _update_op_by_op(self, param, grad, state):
        b1, b2 = self.betas
        t, m, v = state["t"], state["m"], state["v"]
        t._set_info_from(t + 1.0)
        m._set_info_from(m * b1 + grad * (1 - b1))
        v._set_info_from(v * b2 + (grad * grad) * (1 - b2))
        # 1 - beta ** t as -expm1(t log beta): in float32 to about one rounding (the
        # subtraction from 1 would lose the digits of 0.001 = 1 - 0.999); beta = 0 gives 1
        correction1 = -F.expm1(t * _log(b1))
        correction2 = -F.expm1(t * _log(b2))
        step = (m / correction1) / (F.sqrt(v / correction2) + self.eps)
        return _axpy(param, -self.lr, step)


class AdamW(Adam):
    """Adam with decoupled weight decay (`param *= 1 - lr * weight_decay`), as PyTorch's."""

    decoupled = True

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


def _step_count(param):
    """A parameter's step count, PyTorch's "step": a float32 0-d Tensor (exact up to 2 ** 24
    steps), counted by ops so that a traced step replays it."""
    return _core.persistent(F.zeros((), "float32", param.device))


def _count_step(state):
    step = state["step"]
    step._set_info_from(step + 1.0)
    return step


def _moving_average(average, value, keep):
    """average * keep + value * (1 - keep), rebinding `average` (in place)."""
    average._set_info_from(average * keep + value * (1 - keep))
    return average


class RMSprop(Optimizer):
    """`RMSprop(params, lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False)`, as PyTorch's: the gradient divided by the root of its squares'
    moving average (less the squared moving average of the gradient when centered),
    plus eps; with momentum, a buffer of those steps."""

    hyperparameters = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float = 0.01,
                 alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.0, centered: bool = False) -> None:
        super().__init__(params, lr)
        self.alpha = _check_fraction("alpha", alpha)
        self.eps = _check_number("eps", eps)
        self.weight_decay = _check_number("weight_decay", weight_decay)
        self.momentum = _check_number("momentum", momentum)
        self.centered = bool(centered)
        self._make_state()

    def _initial_state(self, param):
        state = {"step": _step_count(param), "square_avg": _zeros_like(param)}
        if self.momentum:
            state["momentum_buffer"] = _zeros_like(param)
        if self.centered:
            state["grad_avg"] = _zeros_like(param)
        return state

    def _update(self, param, grad, state):
        _count_step(state)
        if self.weight_decay:
            grad = _axpy(grad, self.weight_decay, param)
        square_avg = _moving_average(state["square_avg"], grad * grad, self.alpha)
        if self.centered:
            grad_avg = _moving_average(state["grad_avg"], grad, self.alpha)
            square_avg = square_avg - grad_avg * grad_avg
        step = grad / (F.sqrt(square_avg) + self.eps)
        if self.momentum:
            buf = state["momentum_buffer"]
            buf._set_info_from(buf * self.momentum + step)
            step = buf
        return _axpy(param, -self.lr, step)


class Adagrad(Optimizer):
    """`Adagrad(params, lr=0.01, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10)`, as PyTorch's: the gradient divided by the root of the sum of its squares
    (from initial_accumulator_value) plus eps, at the rate lr / (1 + (step - 1) *
    lr_decay)."""

    hyperparameters = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float = 0.01,
                 lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10) -> None:
        super().__init__(params, lr)
        self.lr_decay = _check_number("lr_decay", lr_decay)
        self.weight_decay = _check_number("weight_decay", weight_decay)
        self.initial_accumulator_value = _check_number("initial_accumulator_value",
                                                       initial_accumulator_value)
        self.eps = _check_number("eps", eps)
        self._make_state()

    def _initial_state(self, param):
        total = F.full(param.shape, self.initial_accumulator_value, param.dtype, param.device)
        return {"step": _step_count(param), "sum": _core.persistent(total)}

    def _update(self, param, grad, state):
        step = _count_step(state)
        if self.weight_decay:
            grad = _axpy(grad, self.weight_decay, param)
        total = state["sum"]
        total._set_info_from(total + grad * grad)
        ratio = grad / (F.sqrt(total) + self.eps)
        if not self.lr_decay:
            return _axpy(param, -self.lr, ratio)
        # the decayed rate from the step count, a Tensor: the same ops on every step
        return param - ratio * (self.lr / ((step - 1.0) * self.lr_decay + 1.0))


class Adadelta(Optimizer):
    """`Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0)`, as PyTorch's: the
    gradient scaled by sqrt(moving average of squared steps + eps) / sqrt(moving average
    of squared gradients + eps), times lr."""

    hyperparameters = ("lr", "rho", "eps", "weight_decay")

    def __init__(self, params: Tensor | Iterable[Tensor], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.rho = _check_fraction("rho", rho)
        self.eps = _check_number("eps", eps)
        self.weight_decay = _check_number("weight_decay", weight_decay)
        self._make_state()

    def _initial_state(self, param):
        return {"step": _step_count(param), "square_avg": _zeros_like(param),
                "acc_delta": _zeros_like(param)}

    def _update(self, param, grad, state):
        _count_step(state)
        if self.weight_decay:
            grad = _axpy(grad, self.weight_decay, param)
        square_avg = _moving_average(state["square_avg"], grad * grad, self.rho)
        acc_delta = state["acc_delta"]
        delta = F.sqrt(acc_delta + self.eps) / F.sqrt(square_avg + self.eps) * grad
        _moving_average(acc_delta, delta * delta, self.rho)
        return _axpy(param, -self.lr, delta)


def clip_grad_norm(params: Tensor | Iterable[Tensor], max_norm: float,
                   norm_type: float = 2.0) -> Tensor:
    """Scale the `.grad` of `params` together so that their joint norm is at most `max_norm`
    (PyTorch's `clip_grad_norm_`); returns the norm before clipping, as a Tensor. The scale
    is computed by ops, so nothing waits for the gradients."""
    params = [params] if isinstance(params, Tensor) else list(params)
    max_norm = _check_number("max_norm", max_norm)
    norm_type = float(norm_type)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return Tensor(0.0)
    if norm_type == float("inf"):
        total = F.max(F.stack([F.max(F.abs(g)) for g in grads]))
    elif norm_type > 0:
        total = F.sum(F.stack([F.sum(F.abs(g) ** norm_type) for g in grads])) ** (1 / norm_type)
    else:
        raise ValueError(f"clip_grad_norm: norm_type must be > 0 or inf, got {norm_type}")
    # min(1, max_norm / norm): gradients already inside the ball are left as they are
    scale = F.minimum(max_norm / (total + 1e-6), 1.0)
    for p in params:
        if p.grad is not None:
            p.grad = _core.persistent(p.grad * scale)
    return total


clip_grad_norm_ = clip_grad_norm       # PyTorch's name (it clips in place there too)
