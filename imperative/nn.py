"""Modules: parameters found by attribute, named by scope (`block.linear.weight`), and a
`__call__` that runs `forward` inside the module's scope, so ops and tensors are named too."""
from __future__ import annotations

import math
import operator
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, overload

import numpy as np

from . import dtype as D
from . import functional as F
from . import random as R
from .ops.base import check_real
from .scope import scope
from ._types import PairLike, TensorLike
from .tensor import Parameter, Tensor
from .torch_hints import NN_MODULE_HINTS, add_pytorch_names, module_attribute_error
from .nn_losses import (BCELoss, BCEWithLogitsLoss, CosineSimilarity,  # noqa: F401
                        CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                        PairwiseDistance, SmoothL1Loss)

__all__ = ["Module", "Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "Dropout", "ReLU", "GELU",
           "ELU", "SiLU", "Sigmoid", "Tanh", "Flatten", "Embedding", "MaxPool2d", "AvgPool2d",
           "ModuleList", "Sequential",
           # PyTorch's loss modules, CosineSimilarity and PairwiseDistance (nn_losses.py)
           "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "CrossEntropyLoss", "NLLLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance"]


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
        """(attribute name, Module) for each direct child."""
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value

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


def _uniform_parameter(shape, bound):
    return Parameter(R.uniform(-bound, bound, size=shape))


class Linear(Module):
    """`y = x @ weight.T + bias`, weight (out_features, in_features), PyTorch's init."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = _uniform_parameter((out_features, in_features), bound)
        self.bias = _uniform_parameter((out_features,), bound) if bias else None

    def forward(self, x: TensorLike) -> Tensor:
        return F.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """NCHW convolution, weight (out, in/groups, kh, kw), PyTorch's init."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: PairLike,
                 stride: PairLike = 1, padding: PairLike = 0, dilation: PairLike = 1,
                 groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels {in_channels} and out_channels {out_channels} "
                             f"must be divisible by groups {groups}")
        bound = 1.0 / math.sqrt(in_channels // groups * kh * kw)
        self.weight = _uniform_parameter((out_channels, in_channels // groups, kh, kw), bound)
        self.bias = _uniform_parameter((out_channels,), bound) if bias else None
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def forward(self, x: TensorLike) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class BatchNorm2d(Module):
    """Batch statistics in training (updating the running ones), running ones in eval."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True) -> None:
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = Parameter(F.ones((num_features,))) if affine else None
        self.bias = Parameter(F.zeros((num_features,))) if affine else None
        self.running_mean = F.zeros((num_features,))
        self.running_var = F.ones((num_features,))

    def forward(self, x: TensorLike) -> Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=self.training, momentum=self.momentum, eps=self.eps)


class LayerNorm(Module):
    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5,
                 elementwise_affine: bool = True) -> None:
        super().__init__()
        shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                 else tuple(normalized_shape))
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(F.ones(shape)) if elementwise_affine else None
        self.bias = Parameter(F.zeros(shape)) if elementwise_affine else None

    def forward(self, x: TensorLike) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Dropout(Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: TensorLike) -> Tensor:
        return F.dropout(x, self.p, training=self.training)


class ReLU(Module):
    def forward(self, x: TensorLike) -> Tensor:
        return F.relu(x)


class GELU(Module):
    """x * Phi(x); `approximate="tanh"` for PyTorch's tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: TensorLike) -> Tensor:
        return F.gelu(x, self.approximate)


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1) (F.elu)."""

    def __init__(self, alpha: float = 1.0) -> None:
        super().__init__()
        self.alpha = check_real(alpha, "ELU", "alpha")

    def forward(self, x: TensorLike) -> Tensor:
        return F.elu(x, self.alpha)


class SiLU(Module):
    """x * sigmoid(x) (F.silu)."""

    def forward(self, x: TensorLike) -> Tensor:
        return F.silu(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)) (F.sigmoid)."""

    def forward(self, x: TensorLike) -> Tensor:
        return F.sigmoid(x)


class Tanh(Module):
    """The hyperbolic tangent (F.tanh)."""

    def forward(self, x: TensorLike) -> Tensor:
        return F.tanh(x)


class Flatten(Module):
    """Merge dimensions start_axis..end_axis; by default all but the batch dimension."""

    def __init__(self, start_axis: int = 1, end_axis: int = -1) -> None:
        super().__init__()
        self.start_axis, self.end_axis = start_axis, end_axis

    def forward(self, x: TensorLike) -> Tensor:
        return F.flatten(x, self.start_axis, self.end_axis)


class Embedding(Module):
    """A table of `num_embeddings` rows of `embedding_dim` floats, looked up by integer
    indices; initialised from N(0, 1) as in PyTorch."""

    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        _check_positive_int("Embedding", "num_embeddings", num_embeddings)
        _check_positive_int("Embedding", "embedding_dim", embedding_dim)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(R.normal(0.0, 1.0, size=(num_embeddings, embedding_dim)))

    def forward(self, indices: TensorLike) -> Tensor:
        return F.embedding(indices, self.weight)


def _check_positive_int(module, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{module}: {name} must be a positive int, got {value!r}")


class _Pool2d(Module):
    pool = None       # the functional: F.max_pool2d or F.avg_pool2d

    def __init__(self, kernel_size: PairLike, stride: PairLike | None = None,
                 padding: PairLike = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: TensorLike) -> Tensor:
        return type(self).pool(x, self.kernel_size, self.stride, self.padding)


class MaxPool2d(_Pool2d):
    """Max over windows of x (N, C, H, W); stride defaults to kernel_size."""
    pool = staticmethod(F.max_pool2d)


class AvgPool2d(_Pool2d):
    """Mean over windows of x (N, C, H, W), padding excluded from the count (PyTorch's
    `count_include_pad=False`); stride defaults to kernel_size."""
    pool = staticmethod(F.avg_pool2d)


class ModuleList(Module):
    """A list of Modules whose parameters the parent finds; named `0`, `1`, ... as in
    PyTorch. It has no forward: index or iterate it."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        object.__setattr__(self, "_length", 0)
        self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add `module` at the end, named by its position."""
        if not isinstance(module, Module):
            # (a function, plain or compiled, by its name: F.relu where nn.ReLU() was meant)
            what = (f"the function {module.__name__}" if callable(module)
                    and not isinstance(module, type) and hasattr(module, "__name__")
                    else type(module).__name__)
            raise TypeError(f"{type(self).__name__} takes Modules, got {what} "
                            f"at position {self._length}")
        setattr(self, str(self._length), module)
        object.__setattr__(self, "_length", self._length + 1)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append each of `modules`."""
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[Module]:
        return (self[i] for i in range(self._length))

    @overload
    def __getitem__(self, i: int) -> Module: ...

    @overload
    def __getitem__(self, i: slice) -> ModuleList: ...

    def __getitem__(self, i: int | slice) -> Module | ModuleList:
        """The module at position `i`, or for a slice a new container of the same kind
        holding those modules (shared, not copied), as PyTorch's."""
        positions = range(self._length)
        if isinstance(i, slice):
            return self._holding([self[k] for k in positions[i]])
        try:
            return getattr(self, str(positions[operator.index(i)]))
        except TypeError:
            raise TypeError(f"{type(self).__name__} indices must be integers or slices, "
                            f"not {type(i).__name__}") from None
        except IndexError:
            raise IndexError(f"{type(self).__name__} index {i} is out of range for "
                             f"{self._length} modules") from None

    @classmethod
    def _holding(cls, modules: list[Module]) -> ModuleList:
        return cls(modules)


class Sequential(ModuleList):
    """Modules applied in order; named `0`, `1`, ... as in PyTorch."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    @classmethod
    def _holding(cls, modules: list[Module]) -> Sequential:
        return cls(*modules)

    def forward(self, x: TensorLike) -> Tensor:
        for module in self:
            x = module(x)
        return x
