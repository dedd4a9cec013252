"""nn.Module, the base of every layer (imperative.nn re-exports it), and the checks and
initialisers the layer modules share. Parameters are found by attribute, named by scope
(`block.linear.weight`), and `__call__` runs `forward` inside the module's scope, so ops and
tensors are named too."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from . import dtype as D
from . import random as R
from .ops.nn_common import check_positive_int  # noqa: F401  (the layers' check)
from .scope import scope
from .tensor import Parameter, Tensor
from .torch_hints import NN_MODULE_HINTS, add_pytorch_names, module_attribute_error

__all__ = ["Module"]

class Module:
    """Base class. Assign Parameters and sub-Modules as attributes; define `forward`."""

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_scope_name", type(self).__name__)

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Module):
            # a child is named after the attribute that holds it
            object.__setattr__(value, "_scope_name", name)
        object.__setattr__(self, name, value)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; subclasses define it, and call the module (not forward) to run it."""
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """`forward(...)` inside the module's scope (ops and tensors are named after it)."""
        try:
            name = self._scope_name
        except AttributeError:
            raise AttributeError(f"{type(self).__name__} has no attribute '_scope_name': its "
                                 "__init__ did not call super().__init__()") from None
        with scope(name):
            return self.forward(*args, **kwargs)

    # ---- parameters

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(attribute name, Module) for each direct child, each once (as PyTorch's)."""
        seen = set()
        for name, value in vars(self).items():
            if isinstance(value, Module) and id(value) not in seen:
                seen.add(id(value))
                yield name, value

    def children(self) -> Iterator[Module]:
        """Each direct child, once."""
        return (child for _, child in self.named_children())

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """(`block.linear`, Module) for this module (named `prefix`, "" by default) and every
        module below it, depth first, self first, each once: PyTorch's order."""
        seen = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            below = [(f"{name}.{child_name}" if name else child_name, child)
                     for child_name, child in module.named_children()]
            stack.extend(reversed(below))

    def modules(self) -> Iterator[Module]:
        """This module and every module below it, depth first, self first, each once."""
        return (module for _, module in self.named_modules())

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call `fn(module)` on every child's tree (children first, recursively), then on
        this module, as PyTorch's (`model.apply(init_weights)`); returns this module."""
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}.apply: fn must be a function of a module, "
                            f"got {type(fn).__name__}")
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(`block.linear.weight`, Parameter) pairs, each Parameter once."""
        return _each_once((n, t) for n, t in self._named_tensors(prefix)
                          if isinstance(t, Parameter))

    def parameters(self) -> list[Parameter]:
        """Every Parameter of the module and its children, once each."""
        return [p for _, p in self.named_parameters()]

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """(`bn.running_mean`, Tensor) pairs: the Tensors a module holds that are not
        Parameters (BatchNorm's running statistics), each once."""
        return _each_once((n, t) for n, t in self._named_tensors(prefix)
                          if not isinstance(t, Parameter))

    def buffers(self) -> list[Tensor]:
        """Every buffer of the module and its children, once each (`named_buffers()`)."""
        return [t for _, t in self.named_buffers()]

    def _named_tensors(self, prefix):
        for name, value in vars(self).items():
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(value, Tensor):
                yield full, value
            elif isinstance(value, Module):
                yield from value._named_tensors(full)

    # ---- saving (API.md §8)

    def state_dict(self) -> OrderedDict[str, Tensor]:
        """An ordered dict name → Tensor: the parameters (named as by `named_parameters()`)
        and the buffers. The Tensors share the module's values (no copy)."""
        return OrderedDict((name, Tensor(t)) for name, t in self._named_state())

    def _named_state(self):
        # PyTorch's order (each module's parameters, its buffers, then its children), so that
        # a state dict lists the same keys in the same order as the PyTorch model's.
        return _each_once(self._state_in_torch_order(""))

    def _state_in_torch_order(self, prefix):
        own = [(f"{prefix}{name}", value) for name, value in vars(self).items()
               if isinstance(value, Tensor)]
        yield from ((n, t) for n, t in own if isinstance(t, Parameter))
        yield from ((n, t) for n, t in own if not isinstance(t, Parameter))
        for name, child in self.named_children():
            yield from child._state_in_torch_order(f"{prefix}{name}.")

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> tuple[list[str], list[str]]:
        """Set parameters and buffers from `state_dict` (Tensors or arrays, as `state_dict()`
        gives). Everything is checked before anything changes: with `strict`, a missing or
        unexpected key raises KeyError naming them; a shape that differs raises ValueError.
        Returns (missing keys, unexpected keys)."""
        if not hasattr(state_dict, "items"):
            raise TypeError(f"load_state_dict: expected a dict name -> Tensor, got "
                            f"{type(state_dict).__name__}")
        own = dict(self._named_state())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict({type(self).__name__}): missing keys {missing}, "
                           f"unexpected keys {unexpected}")
        new_values = {name: _loaded_value(name, own[name], value)
                      for name, value in state_dict.items() if name in own}
        for name, value in new_values.items():
            own[name]._set_info_from(value)
        return missing, unexpected

    # ---- modes

    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active, batch statistics) here and in every child."""
        object.__setattr__(self, "training", bool(mode))
        for _, child in self.named_children():
            child.train(mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode: `train(False)`."""
        return self.train(False)


add_pytorch_names(Module, NN_MODULE_HINTS, module_attribute_error)


def _each_once(named_tensors):
    """The (name, tensor) pairs, skipping a tensor met before under another name."""
    seen = set()
    for name, t in named_tensors:
        if id(t) not in seen:
            seen.add(id(t))
            yield name, t


def _loaded_value(name, target, value):
    """`value` as a Tensor of `target`'s dtype and device, or a ValueError naming `name`."""
    if not isinstance(value, Tensor):
        value = np.asarray(value)
    if tuple(value.shape) != target.shape:
        raise ValueError(f"load_state_dict: {name!r} has shape {tuple(value.shape)}, the module "
                         f"expects {target.shape}")
    if isinstance(value, Tensor):
        return value.to(target.device).astype(target.dtype)
    if not np.can_cast(value.dtype, target.dtype, "same_kind"):
        raise ValueError(f"load_state_dict: {name!r} has dtype {value.dtype}, which does not "
                         f"convert to the module's {D.dtype_name(target.dtype)}")
    return Tensor(value, dtype=target.dtype, device=target.device)


def uniform_parameter(shape, bound):
    """A Parameter drawn from U(-bound, bound) (PyTorch's default init of most layers)."""
    return Parameter(R.uniform(-bound, bound, size=shape))


def check_divisible(module, name, value, by_name, by):
    """`value` (positive ints both, checked) must be a multiple of `by`: a layer's channels
    split into groups or heads."""
    check_positive_int(module, name, value)
    check_positive_int(module, by_name, by)
    if value % by:
        raise ValueError(f"{module}: {name} {value} must be divisible by {by_name} {by}")
