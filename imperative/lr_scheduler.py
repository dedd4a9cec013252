"""Learning-rate schedules: `sched = StepLR(opt, step_size=30)`; call `sched.step()` once per
epoch (or per iteration), after `opt.step()`, as in PyTorch. Each schedule is a closed form of
the step count, so `state_dict()` is just that count and the base rate.

Every schedule takes `warmup_steps`: for the first `warmup_steps` steps the rate rises
linearly, `base_lr * (step + 1) / (warmup_steps + 1)`, and the schedule proper starts at
`step == warmup_steps` from its own step 0 (the usual "linear warmup, then decay").
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Callable, Mapping, Sequence

from .optim import Optimizer

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR",
           "CosineAnnealingLR", "ConstantLR", "OneCycleLR"]


class LRScheduler:
    """Base class: subclasses give `schedule(step)`, the factor of the base rate."""

    def __init__(self, optimizer: Optimizer, warmup_steps: int = 0) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an imperative Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        self.warmup_steps = _non_negative_int(type(self).__name__, "warmup_steps", warmup_steps)
        self.base_lr = optimizer.lr
        self.last_step = 0
        self._set_rates(0)

    def _set_rates(self, step: int) -> None:
        """Set the optimizer's settings for `step` (the rate; OneCycleLR also the momentum)."""
        self.optimizer.lr = self.lr_at(step)

    def lr_at(self, step: int) -> float:
        """The rate after `step` calls of `step()`."""
        if step < self.warmup_steps:
            return self.base_lr * (step + 1) / (self.warmup_steps + 1)
        return self.base_lr * self.schedule(step - self.warmup_steps)

    def schedule(self, step: int) -> float:
        """The factor of the base rate at the schedule's own `step` (after the warmup)."""
        raise NotImplementedError

    def step(self) -> None:
        """Advance one step and set the optimizer's rate."""
        self.last_step += 1
        self._set_rates(self.last_step)

    def get_last_lr(self) -> list[float]:
        """[the rate in use], a list as in PyTorch (one entry: one parameter group here)."""
        return [self.optimizer.lr]

    def state_dict(self) -> dict[str, Any]:
        """The step count and the base rate: all a closed-form schedule needs."""
        return {"base_lr": self.base_lr, "last_step": self.last_step}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from `state_dict()`'s output, setting the optimizer's rate."""
        base_lr, last_step = float(state["base_lr"]), int(state["last_step"])
        self.base_lr, self.last_step = base_lr, last_step
        self._set_rates(last_step)


class ConstantLR(LRScheduler):
    """The base rate throughout (after the warmup, if any): a warmup on its own."""

    def schedule(self, step: int) -> float:
        return 1.0


class StepLR(LRScheduler):
    """The base rate times `gamma` every `step_size` steps, as PyTorch's StepLR."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 warmup_steps: int = 0) -> None:
        self.step_size = _positive_int("StepLR", "step_size", step_size)
        self.gamma = float(gamma)
        super().__init__(optimizer, warmup_steps)

    def schedule(self, step: int) -> float:
        return self.gamma ** (step // self.step_size)


class MultiStepLR(LRScheduler):
    """The base rate times `gamma` at each of the `milestones` (step counts; one listed
    twice multiplies twice), as PyTorch's MultiStepLR."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1,
                 warmup_steps: int = 0) -> None:
        if isinstance(milestones, (str, bytes)) or not hasattr(milestones, "__iter__"):
            raise TypeError(f"MultiStepLR: milestones must be a sequence of ints, got "
                            f"{milestones!r}")
        self.milestones = sorted(_non_negative_int("MultiStepLR", "milestones", m)
                                 for m in milestones)
        self.gamma = _real("MultiStepLR", "gamma", gamma)
        super().__init__(optimizer, warmup_steps)

    def schedule(self, step: int) -> float:
        return self.gamma ** bisect.bisect_right(self.milestones, step)


class ExponentialLR(LRScheduler):
    """The base rate times `gamma` every step, as PyTorch's ExponentialLR."""

    def __init__(self, optimizer: Optimizer, gamma: float, warmup_steps: int = 0) -> None:
        self.gamma = _real("ExponentialLR", "gamma", gamma)
        super().__init__(optimizer, warmup_steps)

    def schedule(self, step: int) -> float:
        return self.gamma ** step


class LambdaLR(LRScheduler):
    """The base rate times `lr_lambda(step)`, as PyTorch's LambdaLR (one parameter group:
    one function, or a list holding one)."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] |
                 Sequence[Callable[[int], float]], warmup_steps: int = 0) -> None:
        if isinstance(lr_lambda, (list, tuple)) and len(lr_lambda) == 1:
            lr_lambda = lr_lambda[0]
        if not callable(lr_lambda):
            raise TypeError(f"LambdaLR: lr_lambda must be a function of the step count (or a "
                            f"list of one), got {lr_lambda!r}")
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, warmup_steps)

    def schedule(self, step: int) -> float:
        return float(self.lr_lambda(step))


class CosineAnnealingLR(LRScheduler):
    """From the base rate down to `eta_min` along half a cosine over `T_max` steps, then
    `eta_min` (PyTorch's CosineAnnealingLR without restarts)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 warmup_steps: int = 0) -> None:
        self.T_max = _positive_int("CosineAnnealingLR", "T_max", T_max)
        self.eta_min = float(eta_min)
        super().__init__(optimizer, warmup_steps)

    def schedule(self, step: int) -> float:
        progress = min(step, self.T_max) / self.T_max
        low = self.eta_min / self.base_lr if self.base_lr else 0.0
        return low + (1 - low) * (1 + math.cos(math.pi * progress)) / 2


class OneCycleLR(LRScheduler):
    """PyTorch's OneCycleLR (Smith's 1cycle): from `max_lr / div_factor` up to `max_lr` over
    the first `pct_start` of `total_steps` (or `epochs * steps_per_epoch`), then down to
    `max_lr / div_factor / final_div_factor` (`three_phase`: back to the start, then down),
    along half cosines or lines (`anneal_strategy`); the momentum (SGD's, RMSprop's) or
    Adam's beta1 cycles the other way between `max_momentum` and `base_momentum` unless
    `cycle_momentum=False`. The optimizer's own rate is not used. Stepping past
    `total_steps` is a ValueError, as in PyTorch."""

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float = 0.85, max_momentum: float = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False) -> None:
        where = "OneCycleLR"
        if isinstance(max_lr, (list, tuple)) and len(max_lr) == 1:
            max_lr = max_lr[0]
        max_lr = _real(where, "max_lr", max_lr)
        if total_steps is not None:
            self.total_steps = _positive_int(where, "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            self.total_steps = (_positive_int(where, "epochs", epochs)
                                * _positive_int(where, "steps_per_epoch", steps_per_epoch))
        else:
            raise ValueError(f"{where}: give total_steps, or epochs and steps_per_epoch; got "
                             f"total_steps={total_steps}, epochs={epochs}, "
                             f"steps_per_epoch={steps_per_epoch}")
        pct_start = _real(where, "pct_start", pct_start)
        if pct_start > 1:
            raise ValueError(f"{where}: pct_start must lie in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"{where}: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        for name, value in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
            if _real(where, name, value) == 0:
                raise ValueError(f"{where}: {name} must be > 0, got {value!r}")
        self.anneal_strategy = anneal_strategy
        initial = max_lr / div_factor
        low = initial / final_div_factor
        top, bottom = _real(where, "max_momentum", max_momentum), \
            _real(where, "base_momentum", base_momentum)
        # (end step, start rate, end rate, start momentum, end momentum), as PyTorch's
        end = pct_start * self.total_steps
        self.phases = ([(end - 1, initial, max_lr, top, bottom),
                        (2 * end - 2, max_lr, initial, bottom, top),
                        (self.total_steps - 1, initial, low, top, top)] if three_phase else
                       [(end - 1, initial, max_lr, top, bottom),
                        (self.total_steps - 1, max_lr, low, bottom, top)])
        self.cycle_momentum = bool(cycle_momentum)
        if self.cycle_momentum:
            _check_momentum_optimizer(optimizer, top)
        super().__init__(optimizer)
        self.base_lr = max_lr

    def _at(self, step):
        """(rate, momentum) at `step`: PyTorch's phase lookup and anneal, in closed form."""
        start = 0.0
        for i, (end, lr0, lr1, m0, m1) in enumerate(self.phases):
            if step <= end or i == len(self.phases) - 1:
                # (a phase of no length, where PyTorch divides by zero, is at its end)
                pct = (step - start) / (end - start) if end != start else 1.0
                return self._anneal(lr0, lr1, pct), self._anneal(m0, m1, pct)
            start = end

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def lr_at(self, step: int) -> float:
        return self._at(step)[0]

    def momentum_at(self, step: int) -> float:
        """The momentum (or Adam's beta1) after `step` calls of `step()`."""
        return self._at(step)[1]

    def _set_rates(self, step: int) -> None:
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, past total_steps="
                             f"{self.total_steps}")
        super()._set_rates(step)
        if self.cycle_momentum:
            momentum = self.momentum_at(step)
            if hasattr(self.optimizer, "betas"):
                self.optimizer.betas = (momentum,) + tuple(self.optimizer.betas[1:])
            else:
                self.optimizer.momentum = momentum

    def step(self) -> None:
        if self.last_step + 1 > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {self.last_step + 1} times, past "
                             f"total_steps={self.total_steps}")
        super().step()


def _check_momentum_optimizer(optimizer, first_momentum):
    """cycle_momentum needs Adam's betas or a momentum. An optimizer built with momentum 0
    gets one, as in PyTorch (whose step makes the buffer once the scheduler has set the
    momentum): here its state is made when it is built, so the buffer is made now."""
    if hasattr(optimizer, "betas"):
        return
    if not hasattr(optimizer, "momentum"):
        raise ValueError(f"OneCycleLR: cycle_momentum=True needs an optimizer with momentum "
                         f"or betas, got {type(optimizer).__name__}; pass "
                         f"cycle_momentum=False")
    if not optimizer.momentum:
        optimizer.momentum = first_momentum
        optimizer._add_missing_state()


def _non_negative_int(where: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {name} must be an int >= 0, got {value!r}")
    return value


def _real(where: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{where}: {name} must be a number >= 0, got {value!r}")
    return float(value)


def _positive_int(where: str, name: str, value: Any) -> int:
    if _non_negative_int(where, name, value) == 0:
        raise ValueError(f"{where}: {name} must be an int >= 1, got 0")
    return value
