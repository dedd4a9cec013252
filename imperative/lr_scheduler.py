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
           "CosineAnnealingLR", "ConstantLR"]


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
        optimizer.lr = self.lr_at(0)

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
        self.optimizer.lr = self.lr_at(self.last_step)

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
        self.optimizer.lr = self.lr_at(last_step)


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
