"""The layers (`imperative.nn`): Module (imperative/module.py) and PyTorch's layers, those
defined here and those of the modules below, re-exported (each module one family)."""
from __future__ import annotations

import copy
import numbers
import operator
import sys
from typing import Iterable, Iterator, overload

from . import functional as F
from . import functional as functional    # torch.nn.functional's place (imp.F is the same)
from . import nn_init as init
from . import nn_utils as utils
from . import random as R
from .creation import _as_tensor
from .module import Module, check_positive_int
# the layers of each family, re-exported
from .nn_attention import MultiheadAttention, TransformerEncoderLayer
from .nn_basic import Dropout, LayerNorm, Linear
from .nn_conv_norm import (BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, ConvTranspose2d,
                           GroupNorm, InstanceNorm2d)
from .nn_elementwise import (Dropout2d, Hardsigmoid, Hardswish, Identity, LeakyReLU,
                             LogSoftmax, Mish, PReLU, Softmax, Softplus)
from .nn_pool1d import AdaptiveAvgPool1d, AdaptiveMaxPool1d, AvgPool1d, MaxPool1d
from .nn_recurrent import GRU, LSTM, GRUCell, LSTMCell
from .nn_resize import (AdaptiveAvgPool2d, AdaptiveMaxPool2d, ConstantPad2d, PixelShuffle,
                        PixelUnshuffle, ReflectionPad2d, ReplicationPad2d, Unflatten, Upsample,
                        ZeroPad2d)
from .ops.base import check_real
from ._types import PairLike, TensorLike
from .tensor import Parameter, Tensor
from .nn_losses import (BCELoss, BCEWithLogitsLoss, CosineSimilarity,  # noqa: F401
                        CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                        PairwiseDistance, SmoothL1Loss)

__all__ = ["Module", "functional", "init", "utils", "Linear", "LayerNorm", "Dropout", "ReLU",
           "GELU", "ELU", "SiLU", "Sigmoid", "Tanh", "Flatten", "Embedding", "MaxPool2d",
           "AvgPool2d", "ModuleList", "Sequential",
           # imperative/nn_conv_norm.py
           "Conv1d", "Conv2d", "ConvTranspose2d", "BatchNorm1d", "BatchNorm2d", "GroupNorm",
           "InstanceNorm2d",
           # imperative/nn_elementwise.py
           "Identity", "LeakyReLU", "Softplus", "Mish", "Hardswish", "Hardsigmoid", "PReLU",
           "Softmax", "LogSoftmax", "Dropout2d",
           # imperative/nn_resize.py
           "ZeroPad2d", "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d", "Unflatten",
           "PixelShuffle", "PixelUnshuffle", "Upsample", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool2d",
           # imperative/nn_pool1d.py
           "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d",
           # imperative/nn_recurrent.py
           "LSTMCell", "GRUCell", "LSTM", "GRU",
           # imperative/nn_attention.py
           "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           # PyTorch's loss modules, CosineSimilarity and PairwiseDistance (nn_losses.py)
           "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
           "CrossEntropyLoss", "NLLLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance"]

# PyTorch's imports (`import torch.nn.functional as F`, `from torch.nn.init import ...`) name
# submodules of a package; nn is one module here, so its three are registered under those
# names for `import imperative.nn.functional as F` to find them.
for _name, _module in (("functional", functional), ("init", init), ("utils", utils)):
    sys.modules.setdefault(f"{__name__}.{_name}", _module)


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
    indices; initialised from N(0, 1) as in PyTorch. Row `padding_idx` (negative counts from
    the end) starts as zeros and never receives a gradient: where an index is padding_idx
    the output comes from a detached lookup, elsewhere from the attached one."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False) -> None:
        super().__init__()
        check_positive_int("Embedding", "num_embeddings", num_embeddings)
        check_positive_int("Embedding", "embedding_dim", embedding_dim)
        for name, value, default in (("max_norm", max_norm, None),
                                     ("scale_grad_by_freq", scale_grad_by_freq, False),
                                     ("sparse", sparse, False)):
            if value is not default and value != default:
                raise NotImplementedError(f"Embedding: {name}={value!r} is not supported "
                                          f"(only {name}={default!r}; gradients are dense)")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _padding_index(padding_idx, num_embeddings)
        weight = R.normal(0.0, 1.0, size=(num_embeddings, embedding_dim))
        if self.padding_idx is not None:
            weight[self.padding_idx] = F.zeros((embedding_dim,))
        self.weight = Parameter(weight)

    def forward(self, indices: TensorLike) -> Tensor:
        if self.padding_idx is None:
            return F.embedding(indices, self.weight)
        indices = _as_tensor(indices, self.weight.device)
        padding = F.expand_dims(indices == self.padding_idx, -1)
        return F.where(padding, F.embedding(indices, self.weight.detach()),
                       F.embedding(indices, self.weight))


def _padding_index(padding_idx, num_embeddings):
    """PyTorch's padding_idx as a row in [0, num_embeddings) (a negative one counts from the
    end), or None."""
    if padding_idx is None:
        return None
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, numbers.Integral):
        raise TypeError(f"Embedding: padding_idx must be an int or None, got {padding_idx!r}")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"Embedding: padding_idx must lie in [-{num_embeddings}, "
                         f"{num_embeddings}) (num_embeddings={num_embeddings}), got "
                         f"{padding_idx}")
    return int(padding_idx) % num_embeddings


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


class TransformerEncoder(Module):
    """PyTorch's stack of `num_layers` deep copies of `encoder_layer` (`layers.0`,
    `layers.1`, ...: each starts with the layer's parameters, as PyTorch's), then `norm`
    if given. forward(src, mask=None, src_key_padding_mask=None, is_causal=None) passes the
    masks to every layer."""

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a Module (a "
                            f"TransformerEncoderLayer), got {type(encoder_layer).__name__}")
        check_positive_int("TransformerEncoder", "num_layers", num_layers)
        if norm is not None and not isinstance(norm, Module):
            raise TypeError(f"TransformerEncoder: norm must be a Module (a LayerNorm) or None, "
                            f"got {type(norm).__name__}")
        self.layers = ModuleList(copy.deepcopy(encoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: TensorLike, mask: TensorLike | None = None,
                src_key_padding_mask: TensorLike | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)
