"""Modules: parameters found by attribute, named by scope (`block.linear.weight`), and a
`__call__` that runs `forward` inside the module's scope, so ops and tensors are named too."""
import math

from . import functional as F
from . import random as R
from .scope import scope
from .tensor import Parameter, Tensor

__all__ = ["Module", "Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "Dropout", "ReLU", "Sequential"]


class Module:
    """Base class. Assign Parameters and sub-Modules as attributes; define `forward`."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_scope_name", type(self).__name__)

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            # a child is named after the attribute that holds it
            object.__setattr__(value, "_scope_name", name)
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def __call__(self, *args, **kwargs):
        with scope(self._scope_name):
            return self.forward(*args, **kwargs)

    # ---- parameters

    def named_children(self):
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value

    def named_parameters(self, prefix=""):
        """(`block.linear.weight`, Parameter) pairs, each Parameter once."""
        seen = set()
        for name, p in self._named_parameters(prefix):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def _named_parameters(self, prefix):
        for name, value in vars(self).items():
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(value, Parameter):
                yield full, value
            elif isinstance(value, Module):
                yield from value._named_parameters(full)

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    # ---- modes

    def train(self, mode=True):
        object.__setattr__(self, "training", bool(mode))
        for _, child in self.named_children():
            child.train(mode)
        return self

    def eval(self):
        return self.train(False)


def _uniform_parameter(shape, bound):
    return Parameter(R.uniform(-bound, bound, size=shape))


class Linear(Module):
    """`y = x @ weight.T + bias`, weight (out_features, in_features), PyTorch's init."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = _uniform_parameter((out_features, in_features), bound)
        self.bias = _uniform_parameter((out_features,), bound) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


class Conv2d(Module):
    """NCHW convolution, weight (out, in/groups, kh, kw), PyTorch's init."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True):
        super().__init__()
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels {in_channels} and out_channels {out_channels} "
                             f"must be divisible by groups {groups}")
        bound = 1.0 / math.sqrt(in_channels // groups * kh * kw)
        self.weight = _uniform_parameter((out_channels, in_channels // groups, kh, kw), bound)
        self.bias = _uniform_parameter((out_channels,), bound) if bias else None
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class BatchNorm2d(Module):
    """Batch statistics in training (updating the running ones), running ones in eval."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = Parameter(F.ones((num_features,))) if affine else None
        self.bias = Parameter(F.zeros((num_features,))) if affine else None
        self.running_mean = F.zeros((num_features,))
        self.running_var = F.ones((num_features,))

    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=self.training, momentum=self.momentum, eps=self.eps)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(F.ones(shape)) if elementwise_affine else None
        self.bias = Parameter(F.zeros(shape)) if elementwise_affine else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, training=self.training)


class ReLU(Module):
    def forward(self, x):
        return F.relu(x)


class Sequential(Module):
    """Modules applied in order; named `0`, `1`, ... as in PyTorch."""

    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential takes Modules, got {type(m).__name__} at position {i}")
            setattr(self, str(i), m)
        object.__setattr__(self, "_length", len(modules))

    def __len__(self):
        return self._length

    def __getitem__(self, i):
        return getattr(self, str(range(self._length)[i]))

    def forward(self, x):
        for i in range(self._length):
            x = self[i](x)
        return x
