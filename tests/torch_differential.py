"""Random programs run by imperative and by PyTorch on the same inputs (issue 19).

A program is a chain of ops drawn by hypothesis over API.md §2's op set, starting from a
leaf that may be 0-d, zero-size, small or large (thousands of elements; the test of large
programs turns host compute off, so that the worker thread runs them), and laid out
C-ordered, Fortran-ordered, transposed, strided or broadcast. Ops that take a second
operand draw a new leaf for it. Each step is one closure `step(F, x, leaves)` written once
against the functional API: `F` is `imp.functional` or `TorchF`, an adapter that spells
PyTorch's functions the way imperative does, so both frameworks run the same program.

What is compared, for a program and for a few steps of an optimizer on an `nn` model:
  * forward values, first-order gradients of `sum(y * w)` and second-order gradients (of
    `sum(g * v)` over the first-order ones) against PyTorch in float64, with a tolerance
    from PyTorch's own float32 error on the same program (so an ill-conditioned program
    tolerates what float32 cannot do better, and a well-conditioned one almost nothing);
  * the bits of every result between async levels 0 and 2.

Programs avoid, rather than tolerate, the points where the frameworks differ on purpose
(docs/api.md): ties of max/min (both share a tied gradient equally for a reduction, but
the choice is a convention), and dtype promotion (§5): every tensor is float32, with
Python scalars and integer index tensors only.
"""
import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from hypothesis import reject, strategies as st

import imperative as imp


# ---------------------------------------------------------------------------------------
# The two frameworks behind one functional interface


class ImpF:
    """imperative.functional plus how a program makes its tensors."""

    def __getattr__(self, name):
        return getattr(imp.functional, name)

    @staticmethod
    def const(array):
        return imp.Tensor(array)

    @staticmethod
    def leaf(array):
        return imp.Parameter(array)


def _dims(x, axis):
    return tuple(range(x.dim())) if axis is None else axis


def _reduction(torch_fn):
    """torch_fn(x, dim, keepdim=...) spelled with numpy's axis (None: every axis)."""
    def reduce(x, axis=None, keepdims=False):
        return torch_fn(x, _dims(x, axis), keepdim=keepdims)
    return staticmethod(reduce)


class TorchF:
    """PyTorch in `dtype`, spelled as imperative.functional (numpy's names and axes)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def const(self, array):
        array = np.asarray(array)
        if array.dtype.kind == "f":
            return torch.tensor(array, dtype=self.dtype)
        return torch.tensor(array, dtype=torch.int64 if array.dtype.kind in "iu" else torch.bool)

    def leaf(self, array):
        return torch.tensor(np.asarray(array), dtype=self.dtype, requires_grad=True)

    # elementwise
    relu, sigmoid, tanh, exp, log, sqrt = (torch.relu, torch.sigmoid, torch.tanh, torch.exp,
                                           torch.log, torch.sqrt)
    sin, cos, erf, abs, neg, expm1, log1p = (torch.sin, torch.cos, torch.erf, torch.abs,
                                             torch.neg, torch.expm1, torch.log1p)
    maximum, minimum, where, matmul = torch.maximum, torch.minimum, torch.where, torch.matmul
    softplus = staticmethod(torch.nn.functional.softplus)
    silu = staticmethod(torch.nn.functional.silu)
    elu = staticmethod(torch.nn.functional.elu)

    @staticmethod
    def gelu(x, approximate="none"):
        return torch.nn.functional.gelu(x, approximate=approximate)

    @staticmethod
    def clip(x, lower=None, upper=None):
        return torch.clamp(x, lower, upper)

    # reductions (numpy's axis=None is every axis)
    sum, mean, max, min = map(_reduction, (torch.sum, torch.mean, torch.amax, torch.amin))

    @staticmethod
    def prod(x, axis=None, keepdims=False):
        if axis is None:
            r = torch.prod(x)
            return r.reshape((1,) * x.dim()) if keepdims else r
        return torch.prod(x, axis, keepdim=keepdims)

    @staticmethod
    def var(x, axis=None, keepdims=False, ddof=0):
        return torch.var(x, _dims(x, axis), correction=ddof, keepdim=keepdims)

    # shapes
    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def transpose(x, axes=None):
        return x.permute(tuple(reversed(range(x.dim()))) if axes is None else axes)

    @staticmethod
    def roll(x, shifts, axis=None):
        return torch.roll(x, shifts) if axis is None else torch.roll(x, shifts, axis)

    @staticmethod
    def broadcast_to(x, shape):
        return torch.broadcast_to(x, shape)

    @staticmethod
    def expand_dims(x, axis):
        return x.unsqueeze(axis)

    @staticmethod
    def squeeze(x, axis=None):
        return x.squeeze() if axis is None else x.squeeze(axis)

    @staticmethod
    def flatten(x, start_axis=0, end_axis=-1):
        return x.reshape(-1) if x.dim() == 0 else torch.flatten(x, start_axis, end_axis)

    @staticmethod
    def concat(tensors, axis=0):
        return torch.cat(tensors, axis)

    @staticmethod
    def stack(tensors, axis=0):
        return torch.stack(tensors, axis)

    @staticmethod
    def split(x, indices_or_sections, axis=0):
        return torch.tensor_split(x, indices_or_sections, axis)

    # NN
    @staticmethod
    def softmax(x, axis=-1):
        return torch.softmax(x, axis)

    @staticmethod
    def log_softmax(x, axis=-1):
        return torch.log_softmax(x, axis)

    @staticmethod
    def logsumexp(x, axis, keepdims=False):
        return torch.logsumexp(x, axis, keepdims)

    @staticmethod
    def pad(x, pad, mode="constant", value=0.0):
        return torch.nn.functional.pad(x, pad, mode, value)

    @staticmethod
    def cross_entropy(logits, labels, axis=-1, reduction="mean"):
        return torch.nn.functional.cross_entropy(torch.movedim(logits, axis, 1), labels,
                                                 reduction=reduction)

    linear = staticmethod(torch.nn.functional.linear)
    conv2d = staticmethod(torch.nn.functional.conv2d)
    layer_norm = staticmethod(torch.nn.functional.layer_norm)
    embedding = staticmethod(torch.nn.functional.embedding)

    @staticmethod
    def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
                   momentum=0.1, eps=1e-5):
        # PyTorch 2.13's CPU batch_norm backward (eval mode) reads garbage for expanded
        # (stride-0) inputs or weights: give it contiguous ones
        x, weight, bias = (None if t is None else t.contiguous() for t in (x, weight, bias))
        return torch.nn.functional.batch_norm(x, running_mean, running_var, weight, bias,
                                              training, momentum, eps)

    @staticmethod
    def max_pool2d(x, kernel_size, stride=None, padding=0):
        return torch.nn.functional.max_pool2d(x, kernel_size, stride, padding)

    @staticmethod
    def avg_pool2d(x, kernel_size, stride=None, padding=0):
        return torch.nn.functional.avg_pool2d(x, kernel_size, stride, padding,
                                              count_include_pad=False)


IMP, T32, T64 = ImpF(), TorchF(torch.float32), TorchF(torch.float64)


# ---------------------------------------------------------------------------------------
# Leaves: a float32 array and the layout the program sees it in

LAYOUTS = ("c", "fortran", "transposed", "strided", "broadcast")


@dataclass
class Leaf:
    """`base` is what gradients are taken with respect to; the program reads `view(base)`."""
    base: np.ndarray
    layout: str
    shape: tuple

    def realize(self, F):
        """(the gradient leaf, the tensor the program reads) in framework F."""
        leaf = self.make(F)
        return leaf, self.view(F, leaf)

    def make(self, F):
        base = self.base
        if self.layout == "fortran" and F is IMP:
            base = np.asfortranarray(base)
        return F.leaf(base)

    def view(self, F, leaf):
        """What the program reads of `leaf` (inside the gradient recording: a view is an op)."""
        if self.layout == "transposed":
            return F.transpose(leaf)
        if self.layout == "strided":
            return leaf[..., ::2]
        if self.layout == "broadcast":
            return F.broadcast_to(leaf, self.shape)
        return leaf


def make_leaf(draw, rng, shape, low=-2.0, high=2.0):
    """A Leaf of `shape` in a drawn layout, values uniform in [low, high)."""
    layouts = ["c"] + (["transposed", "strided"] if len(shape) >= 1 else [])
    if len(shape) >= 2:
        layouts.append("fortran")
    if len(shape) >= 1 and shape[0] != 1:
        layouts.append("broadcast")
    layout = draw(st.sampled_from(layouts))
    base_shape = {"transposed": tuple(reversed(shape)),
                  "strided": shape[:-1] + (2 * shape[-1],) if shape else shape,
                  "broadcast": (1,) + shape[1:]}.get(layout, shape)
    base = rng.uniform(low, high, size=base_shape).astype(np.float32)
    return Leaf(base, layout, tuple(shape))


# ---------------------------------------------------------------------------------------
# Ops: each draws its parameters for the current value and returns a Step


@dataclass
class Step:
    text: str
    fn: object                  # fn(F, x, leaves) -> the next x
    smooth: bool = True         # twice differentiable at the program's points in both


class Drawing:
    """What an op's drawing sees: hypothesis' draw, a numpy generator for values, the
    current value (PyTorch float64), and how to add a leaf."""

    def __init__(self, draw, rng, program):
        self.draw, self.rng, self.program = draw, rng, program
        self.x = None

    def new_leaf(self, shape, low=-2.0, high=2.0):
        self.program.leaves.append(make_leaf(self.draw, self.rng, tuple(shape), low, high))
        return len(self.program.leaves) - 1

    def axis(self, allow_none=False):
        choices = list(range(-self.x.dim(), self.x.dim())) or [0]
        return self.draw(st.sampled_from(choices + ([None] if allow_none else [])))

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))


def _ties(x, axis):
    """Whether a max/min along `axis` (None: all) of x (float32 values) has a tie."""
    x32 = x.detach().to(torch.float32)
    dims = _dims(x32, axis)
    if x32.numel() == 0:
        return False
    for extreme in (torch.amax, torch.amin):
        hits = (x32 == extreme(x32, dims, keepdim=True)).sum(dims) if dims else torch.ones(1)
        if (hits > 1).any():
            return True
    return False


def op_binary(d):
    """x (+ - * max min) a new leaf broadcasting against x, or x / a leaf away from 0."""
    shape = tuple(d.x.shape)
    other = shape[d.draw(st.integers(0, len(shape))):] if shape else ()
    if other and d.draw(st.booleans()):
        other = (1,) + other[1:]
    name = d.pick(["add", "sub", "mul", "div", "maximum", "minimum"])
    if name == "div":
        i = d.new_leaf(other, 0.5, 2.0)
        return Step(f"x / leaf{i}{other}", lambda F, x, L: x / L[i])
    i = d.new_leaf(other)
    fn = {"add": lambda F, x, L: x + L[i], "sub": lambda F, x, L: L[i] - x,
          "mul": lambda F, x, L: x * L[i], "maximum": lambda F, x, L: F.maximum(x, L[i]),
          "minimum": lambda F, x, L: F.minimum(x, L[i])}[name]
    return Step(f"{name}(x, leaf{i}{other})", fn, smooth=name in ("add", "sub", "mul"))


def op_scalar(d):
    """x with a Python scalar on either side."""
    c = d.pick([2, -3, 0.5, 1.5, -2.25])
    name = d.pick(["radd", "rsub", "mul", "rmul", "div", "pow2", "pow3"])
    fn = {"radd": lambda F, x, L: c + x, "rsub": lambda F, x, L: c - x,
          "mul": lambda F, x, L: x * c, "rmul": lambda F, x, L: c * x,
          "div": lambda F, x, L: x / c, "pow2": lambda F, x, L: x ** 2,
          "pow3": lambda F, x, L: x ** 3}[name]
    return Step(f"{name}(x, {c})", fn)


# unary math, each on inputs it is defined and well-conditioned for
UNARY = {
    "relu": (lambda F, x: F.relu(x), False),
    "gelu": (lambda F, x: F.gelu(x), True),
    "gelu_tanh": (lambda F, x: F.gelu(x, approximate="tanh"), True),
    "sigmoid": (lambda F, x: F.sigmoid(x), True),
    "tanh": (lambda F, x: F.tanh(x), True),
    "exp": (lambda F, x: F.exp(F.tanh(x)), True),
    "log": (lambda F, x: F.log(x * x + 0.5), True),
    "sqrt": (lambda F, x: F.sqrt(x * x + 0.25), True),
    "sin": (lambda F, x: F.sin(x), True),
    "cos": (lambda F, x: F.cos(x), True),
    "erf": (lambda F, x: F.erf(x), True),
    "abs": (lambda F, x: F.abs(x), False),
    "neg": (lambda F, x: -x, True),
    "expm1": (lambda F, x: F.expm1(F.tanh(x)), True),
    "log1p": (lambda F, x: F.log1p(x * x), True),
    "softplus": (lambda F, x: F.softplus(x), True),
    "silu": (lambda F, x: F.silu(x), True),
    "elu": (lambda F, x: F.elu(x, 0.7), True),
}


def op_unary(d):
    name = d.pick(sorted(UNARY))
    fn, smooth = UNARY[name]
    return Step(name, lambda F, x, L: fn(F, x), smooth)


def op_reduce(d):
    name = d.pick(["sum", "mean", "max", "min", "var", "prod"])
    axis = d.axis(allow_none=True) if d.x.dim() else d.pick([None, 0, -1])
    if name == "prod" and (axis is None and d.x.numel() > 8 or
                           axis is not None and d.x.dim() and d.x.shape[axis] > 8):
        name = "sum"                     # products of many factors under/overflow float32
    if name in ("max", "min") and (_ties(d.x, axis) or d.x.numel() == 0):
        name = "mean"
    keepdims = d.draw(st.booleans())
    return Step(f"{name}(x, axis={axis}, keepdims={keepdims})",
                lambda F, x, L: getattr(F, name)(x, axis=axis, keepdims=keepdims),
                smooth=name not in ("max", "min"))


def op_matmul(d):
    """x @ W for a new leaf W (vector · vector when x is 1-D and W is drawn 1-D)."""
    k = d.x.shape[-1]
    shape = (k,) if d.x.dim() == 1 and d.draw(st.booleans()) else (k, d.draw(st.integers(1, 5)))
    i = d.new_leaf(shape)
    return Step(f"matmul(x, leaf{i}{shape})", lambda F, x, L: F.matmul(x, L[i]))


def op_shape(d):
    x = d.x
    name = d.pick(["flatten", "transpose", "expand_squeeze", "broadcast", "reshape_rev", "roll"])
    if name == "roll":
        shifts = d.draw(st.integers(-7, 7))
        if x.dim() and d.draw(st.booleans()):
            axis = d.axis()
            return Step(f"roll(x, {shifts}, {axis})", lambda F, x, L: F.roll(x, shifts, axis))
        return Step(f"roll(x, {shifts})", lambda F, x, L: F.roll(x, shifts))
    if name == "transpose":
        axes = tuple(d.draw(st.permutations(range(x.dim()))))
        return Step(f"transpose{axes}", lambda F, x, L: F.transpose(x, axes))
    if name == "expand_squeeze":
        axis = d.draw(st.integers(0, x.dim()))
        return Step(f"squeeze(expand_dims(x, {axis}))",
                    lambda F, x, L: F.squeeze(F.expand_dims(x, axis) * 1, axis))
    if name == "broadcast":
        shape = (2,) + tuple(x.shape)
        return Step(f"broadcast_to{shape}", lambda F, x, L: F.broadcast_to(x, shape))
    if name == "reshape_rev":
        shape = tuple(reversed(x.shape))
        return Step(f"reshape{shape}", lambda F, x, L: F.reshape(x, shape))
    return Step("flatten", lambda F, x, L: F.flatten(x))


def op_join(d):
    """concat or stack x with a new leaf of its shape; or split x and rejoin its pieces."""
    shape, axis = tuple(d.x.shape), d.axis()
    name = d.pick(["concat", "stack", "split", "pad"])
    if name == "pad" and d.x.dim():
        widths = []
        for size in reversed(d.x.shape[d.draw(st.integers(0, d.x.dim() - 1)):]):
            before = d.draw(st.integers(-size, 2))
            widths += [before, d.draw(st.integers(-(size + min(before, 0)), 2))]
        value = d.draw(st.sampled_from([0.0, -1.5, 2.0]))
        return Step(f"pad(x, {tuple(widths)}, value={value})",
                    lambda F, x, L: F.pad(x, tuple(widths), value=value))
    if name == "split" and d.x.dim():
        n = d.x.shape[axis]
        cuts = sorted(set(d.draw(st.lists(st.integers(0, n), max_size=3))))
        # reverse the pieces, so that the result is not x itself
        return Step(f"concat(reversed(split(x, {cuts}, {axis})))",
                    lambda F, x, L: F.concat(list(F.split(x, cuts, axis))[::-1], axis))
    i = d.new_leaf(shape)
    if name == "stack" or not d.x.dim():
        axis = d.draw(st.integers(-d.x.dim() - 1, d.x.dim()))
        return Step(f"stack([x, leaf{i}], {axis})", lambda F, x, L: F.stack([x, L[i]], axis))
    return Step(f"concat([leaf{i}, x], {axis})", lambda F, x, L: F.concat([L[i], x], axis))


def op_select(d):
    """where and clip, away from their kinks' exact points."""
    if d.draw(st.booleans()):
        i = d.new_leaf(tuple(d.x.shape))
        return Step(f"where(x > 0.3, x, leaf{i})",
                    lambda F, x, L: F.where(x > 0.3, x, L[i]), smooth=False)
    lo, hi = sorted(d.draw(st.lists(st.sampled_from([-1.5, -0.5, 0.25, 1.0]), min_size=2,
                                    max_size=2, unique=True)))
    return Step(f"clip(x, {lo}, {hi})", lambda F, x, L: F.clip(x, lo, hi), smooth=False)


def _index_arrays(d, shape):
    """A numpy index for x of `shape`: ints, slices and at most one integer array (with
    repeats)."""
    index = []
    for n in shape[:d.draw(st.integers(1, len(shape)))]:
        array_ok = n and not any(isinstance(ix, np.ndarray) for ix in index)
        kind = d.pick(["slice", "int", "array"] if array_ok
                      else ["slice", "int"] if n else ["slice"])
        if kind == "slice":
            # (PyTorch has no negative steps)
            index.append(slice(d.draw(st.integers(0, 2)), None, d.pick([1, 2])))
        elif kind == "int":
            index.append(int(d.rng.integers(-n, n)))
        else:
            index.append(d.rng.integers(0, n, size=d.draw(st.integers(1, 4))))
    return tuple(index)


def _index_for(F, index):
    """`index` as framework F takes it with numpy's meaning (the contract's): beside an
    integer array, numpy counts an int as an advanced index too, so that an int and an
    array apart (`x[2, :, [1, 3]]`) put their dimension first; PyTorch takes the int as a
    basic index there. As a one-element array it is advanced in both, with numpy's result."""
    if F is IMP or not any(isinstance(ix, np.ndarray) for ix in index):
        return index
    return tuple(np.array([ix]) if isinstance(ix, int) else ix for ix in index)


def op_getitem(d):
    if d.draw(st.booleans()):
        # a boolean Tensor mask: the result's shape depends on values
        return Step("x[x > 0]", lambda F, x, L: x[x > 0], smooth=False)
    index = _index_arrays(d, tuple(d.x.shape))
    return Step(f"x[{_show(index)}]", lambda F, x, L: x[_index_for(F, index)])


def op_setitem(d):
    """y = x * 1; y[index] = leaf (a mask, or ints/slices/one integer array without
    repeats, so that which write wins is not in question)."""
    shape = tuple(d.x.shape)
    if d.draw(st.booleans()):
        i = d.new_leaf(())
        return Step(f"y[y < 0] = leaf{i}", lambda F, x, L: _assign(x, lambda y: y < 0, L[i]),
                    smooth=False)
    index = tuple(np.unique(ix) if isinstance(ix, np.ndarray) else ix
                  for ix in _index_arrays(d, shape))
    target = np.empty(shape)[index].shape
    value = target[d.draw(st.integers(0, len(target))):]
    i = d.new_leaf(value)
    return Step(f"y[{_show(index)}] = leaf{i}{value}",
                lambda F, x, L: _assign(x, lambda y: _index_for(F, index), L[i]))


def _assign(x, index_of, value):
    y = x * 1
    y[index_of(y)] = value
    return y


def op_softmax(d):
    axis = d.axis() if d.x.dim() else d.pick([0, -1])
    name = d.pick(["softmax", "log_softmax", "logsumexp"])
    if name == "logsumexp" and d.x.dim() and d.x.shape[axis]:
        keepdims = d.draw(st.booleans())
        return Step(f"logsumexp(x, {axis}, keepdims={keepdims})",
                    lambda F, x, L: F.logsumexp(x, axis, keepdims))
    name = "softmax" if name == "logsumexp" else name
    return Step(f"{name}(x, {axis})", lambda F, x, L: getattr(F, name)(x, axis))


def op_cross_entropy(d):
    n, c = d.x.shape
    labels = d.rng.integers(0, c, size=n)
    reduction = d.pick(["mean", "sum", "none"])
    return Step(f"cross_entropy(x, {labels.tolist()}, {reduction})",
                lambda F, x, L: F.cross_entropy(x, F.const(labels.astype(np.int32)),
                                                reduction=reduction))


def _spread_out(x, dims):
    """Whether every group x normalises over (`dims`) has a variance of 1e-3 or more. A
    near-constant group is ill-conditioned: 1/std (up to 1/sqrt(eps) = 316) amplifies the
    roundings of terms that cancel exactly (normalising is invariant to the group's shift),
    and the float64 reference cannot tell that from a defect."""
    return bool((torch.var(x.detach(), dims, correction=0) >= 1e-3).all())


def op_layer_norm(d):
    shape = tuple(d.x.shape[-d.draw(st.integers(1, min(2, d.x.dim()))):])
    if not _spread_out(d.x, tuple(range(-len(shape), 0))):
        return op_softmax(d)
    w, b = d.new_leaf(shape, 0.5, 1.5), d.new_leaf(shape)
    return Step(f"layer_norm(x, {shape}, leaf{w}, leaf{b})",
                lambda F, x, L: F.layer_norm(x, shape, L[w], L[b]))


def op_batch_norm(d):
    c = d.x.shape[1]
    w, b = d.new_leaf((c,), 0.5, 1.5), d.new_leaf((c,))
    mean = d.rng.uniform(-1, 1, c).astype(np.float32)
    var = d.rng.uniform(0.5, 2, c).astype(np.float32)
    training = d.draw(st.booleans())
    if training and not _spread_out(d.x, (0,) + tuple(range(2, d.x.dim()))):
        training = False
    return Step(f"batch_norm(x, training={training})",
                lambda F, x, L: F.batch_norm(x, F.const(mean), F.const(var), L[w], L[b],
                                             training=training))


def op_conv2d(d):
    n, c, h, wd = d.x.shape
    groups = d.pick([g for g in (1, 2) if c % g == 0])
    o = groups * d.draw(st.integers(1, 3))
    k = d.draw(st.integers(1, min(3, h + 2, wd + 2)))
    stride, padding, dilation = d.pick([1, 2]), d.pick([0, 1]), d.pick([1, 2])
    if (min(h, wd) + 2 * padding - dilation * (k - 1)) < 1:
        dilation, padding = 1, 1
    w = d.new_leaf((o, c // groups, k, k), -1, 1)
    b = d.new_leaf((o,)) if d.draw(st.booleans()) else None
    return Step(f"conv2d(x, leaf{w}, bias={b}, stride={stride}, padding={padding}, "
                f"dilation={dilation}, groups={groups})",
                lambda F, x, L: F.conv2d(x, L[w], None if b is None else L[b], stride, padding,
                                         dilation, groups))


def op_pool(d):
    h, w = d.x.shape[2:]
    k = d.draw(st.integers(1, min(3, h, w)))
    stride, padding = d.pick([1, 2]), d.pick([0] + ([1] if k > 1 else []))
    name = d.pick(["avg_pool2d", "max_pool2d"])
    if name == "max_pool2d" and _window_ties(d.x, k, stride, padding):
        name = "avg_pool2d"
    return Step(f"{name}(x, {k}, {stride}, {padding})",
                lambda F, x, L: getattr(F, name)(x, k, stride, padding),
                smooth=name != "max_pool2d")


def _window_ties(x, k, stride, padding):
    """Whether some max-pool window holds its maximum twice (float32 values)."""
    x32 = torch.nn.functional.pad(x.detach().to(torch.float32), (padding,) * 4, value=-math.inf)
    windows = x32.unfold(2, k, stride).unfold(3, k, stride).flatten(-2)
    return bool(((windows == windows.amax(-1, keepdim=True)).sum(-1) > 1).any())


def op_embedding(d):
    """A new weight leaf's rows at integer indices taken from x's shape (x is dropped)."""
    rows, dim = d.draw(st.integers(1, 6)), d.draw(st.integers(1, 4))
    w = d.new_leaf((rows, dim))
    indices = d.rng.integers(0, rows, size=tuple(d.x.shape)[:2]).astype(np.int32)
    return Step(f"embedding({indices.shape}, leaf{w}) + x.sum()",
                lambda F, x, L: F.embedding(F.const(indices), L[w]) + F.sum(x))


def _show(index):
    return ", ".join(f"array{ix.tolist()}" if isinstance(ix, np.ndarray) else repr(ix)
                     for ix in index)


# (op, applies to the current float64 value x)
OPS = [
    (op_binary, lambda x: True),
    (op_scalar, lambda x: True),
    (op_unary, lambda x: True),
    (op_reduce, lambda x: True),
    (op_matmul, lambda x: 1 <= x.dim() <= 3 and x.shape[-1] > 0),
    (op_shape, lambda x: True),
    (op_join, lambda x: True),
    (op_select, lambda x: True),
    (op_getitem, lambda x: x.dim() >= 1),
    (op_setitem, lambda x: x.dim() >= 1),
    (op_softmax, lambda x: True),
    (op_cross_entropy, lambda x: x.dim() == 2 and x.shape[0] > 0 and x.shape[1] > 0),
    (op_layer_norm, lambda x: x.dim() >= 1 and x.shape[-1] > 1 and x.numel() > 0),
    (op_batch_norm, lambda x: x.dim() in (2, 4) and x.shape[0] > 1 and x.numel() > 0),
    (op_conv2d, lambda x: x.dim() == 4 and x.numel() > 0),
    (op_pool, lambda x: x.dim() == 4 and x.numel() > 0),
    (op_embedding, lambda x: x.dim() >= 2),
]


# ---------------------------------------------------------------------------------------
# Programs


SHAPES = {
    "scalar": [()],
    "empty": [(0,), (3, 0), (0, 4, 2)],
    "small": [(5,), (3, 4), (2, 3, 4), (2, 3, 5, 4), (1, 6)],
    "large": [(72, 64), (4, 40, 33), (3, 4, 20, 18), (4800,)],
}


@dataclass
class Program:
    leaves: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    weights: np.ndarray = None      # y's weights in the loss sum(y * w)
    directions: list = None         # one per leaf: the loss of the second order

    @property
    def smooth(self):
        return all(s.smooth for s in self.steps)

    def describe(self):
        leaves = ", ".join(f"leaf{i}{lf.shape}:{lf.layout}" for i, lf in enumerate(self.leaves))
        return f"[{leaves}] " + " -> ".join(s.text for s in self.steps)


@st.composite
def programs(draw, sizes=("scalar", "empty", "small", "small", "large"), max_steps=4):
    """A Program whose every value stays float32 and finite in PyTorch float64."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    program = Program()
    drawing = Drawing(draw, rng, program)
    shape = draw(st.sampled_from(SHAPES[draw(st.sampled_from(sizes))]))
    drawing.new_leaf(shape)
    leaves = [program.leaves[0].realize(T64)[1]]
    x = leaves[0]
    for _ in range(draw(st.integers(1, max_steps))):
        op = draw(st.sampled_from([op for op, applies in OPS if applies(x)]))
        drawing.x = x
        step = op(drawing)
        leaves += [lf.realize(T64)[1] for lf in program.leaves[len(leaves):]]
        try:
            x = step.fn(T64, x, leaves)
        except Exception:       # a drawing PyTorch cannot run: not a program to compare
            reject()
        program.steps.append(step)
    program.weights = rng.standard_normal(tuple(x.shape)).astype(np.float32)
    program.directions = [rng.standard_normal(lf.base.shape).astype(np.float32)
                          for lf in program.leaves]
    return program


def run_program(F, program, second_order):
    """(y, first-order gradients, second-order gradients or None) as float64 arrays."""
    bases = [lf.make(F) for lf in program.leaves]
    weights = F.const(program.weights)
    directions = [F.const(v) for v in program.directions]

    def forward():
        views = [lf.view(F, b) for lf, b in zip(program.leaves, bases)]
        x = views[0]
        for step in program.steps:
            x = step.fn(F, x, views)
        return x

    if F is IMP:
        return _imp_gradients(forward, bases, weights, directions, second_order)
    return _torch_gradients(forward, bases, weights, directions, second_order)


def _as_numpy(t, like):
    if t is None:
        return np.zeros(like.shape)
    return (t.numpy() if isinstance(t, imp.Tensor) else t.detach().numpy()).astype(np.float64)


def _imp_gradients(forward, bases, weights, directions, second_order):
    outer = imp.autodiff.GradManager().attach(bases)
    inner = imp.autodiff.GradManager().attach(bases)
    with outer:
        with inner:
            y = forward()
            inner.backward(imp.functional.sum(y * weights))
        grads = [p.grad for p in bases]
        first = [_as_numpy(g, p) for g, p in zip(grads, bases)]
        for p in bases:
            p.grad = None
        if second_order:
            terms = [imp.functional.sum(g * v) for g, v in zip(grads, directions) if g is not None]
            if terms:
                outer.backward(sum(terms[1:], terms[0]))
    second = [_as_numpy(p.grad, p) for p in bases] if second_order else None
    return y.numpy().astype(np.float64), first, second


def _torch_gradients(forward, bases, weights, directions, second_order):
    y = forward()
    loss = torch.sum(y * weights)
    grads = torch.autograd.grad(loss, bases, create_graph=second_order, allow_unused=True) \
        if loss.requires_grad else [None] * len(bases)
    first = [_as_numpy(g, p) for g, p in zip(grads, bases)]
    second = None
    if second_order:
        terms = [torch.sum(g * v) for g, v in zip(grads, directions)
                 if g is not None and g.requires_grad]
        hess = torch.autograd.grad(sum(terms), bases, allow_unused=True) if terms \
            else [None] * len(bases)
        second = [_as_numpy(h, p) for h, p in zip(hess, bases)]
    return y.detach().numpy().astype(np.float64), first, second


# ---------------------------------------------------------------------------------------
# Training: an nn model, a loss and a few optimizer steps


@dataclass
class Training:
    model: str
    optimizer: str
    hyper: dict
    fortran_weight: bool
    seed: int
    steps: int = 3

    def describe(self):
        return (f"{self.model} + {self.optimizer}{self.hyper}"
                f"{' (Fortran-ordered first weight)' if self.fortran_weight else ''}")


OPTIMIZERS = {
    "SGD": st.fixed_dictionaries({"lr": st.sampled_from([0.1, 0.01]),
                                  "momentum": st.sampled_from([0.0, 0.9]),
                                  "weight_decay": st.sampled_from([0.0, 1e-2])}),
    "SGD-nesterov": st.fixed_dictionaries({"lr": st.just(0.05), "momentum": st.just(0.9),
                                           "nesterov": st.just(True)}),
    "Adam": st.fixed_dictionaries({"lr": st.sampled_from([1e-3, 1e-2]),
                                   "weight_decay": st.sampled_from([0.0, 1e-2])}),
    "AdamW": st.fixed_dictionaries({"lr": st.sampled_from([1e-3, 1e-2]),
                                    "weight_decay": st.sampled_from([0.0, 1e-2])}),
}
MODELS = ("mlp", "mlp-large", "layernorm", "cnn")


@st.composite
def trainings(draw):
    optimizer = draw(st.sampled_from(sorted(OPTIMIZERS)))
    return Training(draw(st.sampled_from(MODELS)), optimizer, draw(OPTIMIZERS[optimizer]),
                    draw(st.booleans()), draw(st.integers(0, 2 ** 32 - 1)))


def _imp_model(name):
    nn = imp.nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), (5, 6)
    if name == "mlp-large":
        return nn.Sequential(nn.Linear(96, 64), nn.ReLU(), nn.Linear(64, 10)), (80, 96)
    if name == "layernorm":
        return nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 3)), (5, 6)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()), (4, 3, 6, 6)


def _torch_twin(model, dtype):
    """The PyTorch module of the same architecture with the imperative model's values."""
    tnn = torch.nn
    layers = []
    for i in range(len(model)):
        m = model[i]
        kind = type(m).__name__
        if kind == "Linear":
            layers.append(tnn.Linear(m.weight.shape[1], m.weight.shape[0]))
        elif kind == "Conv2d":
            layers.append(tnn.Conv2d(m.weight.shape[1], m.weight.shape[0], m.weight.shape[2],
                                     padding=m.padding))
        elif kind == "BatchNorm2d":
            layers.append(tnn.BatchNorm2d(m.weight.shape[0]))
        elif kind == "LayerNorm":
            layers.append(tnn.LayerNorm(m.normalized_shape))
        else:
            layers.append(tnn.ReLU())
    twin = tnn.Sequential(*layers).to(dtype)
    with torch.no_grad():
        for (_, p), q in zip(model.named_parameters(), twin.parameters()):
            q.copy_(torch.tensor(p.numpy(), dtype=dtype))
    return twin


def _loss(F, y, target):
    if y.ndim == 2:
        return F.cross_entropy(y, target)
    return F.mean((y - 0.5) ** 2)


def run_training(training, dtype=None):
    """Loss per step and the parameters (and BatchNorm's running statistics) after the
    steps, as float64 arrays, for imperative (dtype=None) or PyTorch in `dtype`."""
    rng = np.random.default_rng(training.seed)
    imp.random.seed(training.seed)
    imp_model, x_shape = _imp_model(training.model)
    if training.fortran_weight:
        first = imp_model[0]
        first.weight = imp.Parameter(np.asfortranarray(first.weight.numpy()))
    x = rng.standard_normal(x_shape).astype(np.float32)
    labels = rng.integers(0, 3 if training.model != "mlp-large" else 10, size=x_shape[0])
    if dtype is not None:
        return _torch_training(training, _torch_twin(imp_model, dtype), x, labels)
    opt = getattr(imp.optim, training.optimizer.split("-")[0])(imp_model.parameters(),
                                                               **training.hyper)
    gm = imp.autodiff.GradManager().attach(imp_model.parameters())
    losses = []
    xt, target = imp.Tensor(x), imp.Tensor(labels.astype(np.int32))
    for _ in range(training.steps):
        with gm:
            loss = _loss(imp.functional, imp_model(xt), target)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        losses.append(float(loss.numpy()))
    state = [p.numpy() for _, p in imp_model.named_parameters()]
    state += [t.numpy() for m in imp_model for t in _running_stats(m)]
    return np.array(losses), [s.astype(np.float64) for s in state]


def _running_stats(module):
    return [module.running_mean, module.running_var] if hasattr(module, "running_mean") else []


def _torch_training(training, twin, x, labels):
    dtype = next(twin.parameters()).dtype
    opt = getattr(torch.optim, training.optimizer.split("-")[0])(twin.parameters(),
                                                                 **training.hyper)
    xt, target = torch.tensor(x, dtype=dtype), torch.tensor(labels)
    F = T32 if dtype == torch.float32 else T64
    losses = []
    for _ in range(training.steps):
        opt.zero_grad()
        loss = _loss(F, twin(xt), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state = [p.detach().numpy() for p in twin.parameters()]
    state += [b.numpy() for m in twin for b in (
        [m.running_mean, m.running_var] if isinstance(m, torch.nn.BatchNorm2d) else [])]
    return np.array(losses), [s.astype(np.float64) for s in state]


# ---------------------------------------------------------------------------------------
# Comparing


def _spread(ref64, other, finite):
    """The worst difference from the float64 reference of another result (PyTorch float32,
    or float64 on perturbed inputs), on the finite elements."""
    if other is None or other.shape != ref64.shape:
        return 0.0
    diff = np.abs(np.asarray(other, np.float64)[finite] - ref64[finite])
    return float(np.nan_to_num(diff, nan=0.0, posinf=0.0).max(initial=0.0))


def mismatch(got, ref32, ref64, perturbed=None, slack=16.0):
    """None when `got` (imperative, float32) is as close to the float64 reference as
    float32 can be expected to be, else a description of the worst element. Expected: within
    `slack` times the larger of PyTorch float32's worst error on this tensor and the change
    of the float64 result when the inputs move by a float32 rounding (`perturbed`: the
    condition of the program, which PyTorch's formula may happen not to show), plus a few
    float32 roundings of the element and of the tensor's scale."""
    got, ref32, ref64 = (np.asarray(a, np.float64) for a in (got, ref32, ref64))
    if got.shape != ref64.shape:
        return f"shape {got.shape} != {ref64.shape}"
    finite = np.isfinite(ref64) & np.isfinite(ref32)
    if not np.array_equal(np.isnan(got[~finite]), np.isnan(ref32[~finite])):
        return "NaN where PyTorch float32 has none (or the opposite)"
    if not finite.any():
        return None
    spread = max(_spread(ref64, ref32, finite), _spread(ref64, perturbed, finite))
    g, r32, r64 = got[finite], ref32[finite], ref64[finite]
    scale = np.abs(r64).max()
    # programs compute with values of order 1 (leaves in [-2, 2], weights N(0, 1)): a
    # result that cancels to about 0 still carries roundings of that order
    allowed = slack * spread + 4e-6 * np.abs(r64) + 2e-6 * max(1.0, scale)
    err = np.abs(g - r64)
    if not (err <= allowed).all() or not np.isfinite(g).all():
        i = int(np.argmax(np.where(np.isfinite(err), err / allowed, np.inf)))
        return (f"element {i}: imperative {g[i]!r}, PyTorch float64 {r64[i]!r}, float32 "
                f"{r32[i]!r} (allowed {allowed[i]:.3g})")
    return None


def bits_differ(a, b):
    """Whether two results of imperative (one per async level) differ in any bit."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape != b.shape or a.tobytes() != b.tobytes()


@dataclass
class Tally:
    """Counts of what was checked and what differed, by kind."""
    programs: int = 0
    ops: int = 0
    trainings: int = 0
    checks: int = 0
    skipped: int = 0            # programs PyTorch itself could not run
    mismatches: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)

    def add(self, kind, description):
        self.mismatches[kind] = self.mismatches.get(kind, 0) + 1
        self.examples.setdefault(kind, []).append(description)


def _compare_results(tally, what, imp_by_level, ref32, ref64, perturbed=None):
    """Compare one kind of result (a list of arrays) of both async levels with PyTorch."""
    (level0, level2) = imp_by_level
    perturbed = perturbed or [None] * len(ref64)
    for k, (a, b, r32, r64, rp) in enumerate(zip(level0, level2, ref32, ref64, perturbed)):
        tally.checks += 2
        if bits_differ(a, b):
            return "levels", f"{what}[{k}] differs between async levels 0 and 2"
        problem = mismatch(a, r32, r64, rp)
        if problem:
            return what, f"{what}[{k}]: {problem}"
    return None


def _perturbed(program, seed=0):
    """`program` with every leaf value moved by up to one float32 rounding (relative 2^-24)."""
    rng = np.random.default_rng(seed)

    def nudge(a):
        return a.astype(np.float64) * (1 + rng.uniform(-2.0 ** -24, 2.0 ** -24, a.shape))

    return replace(program, leaves=[replace(lf, base=nudge(lf.base)) for lf in program.leaves])


def check_program(program, tally):
    """Run `program` in imperative (async levels 0 and 2) and PyTorch (float32 and float64)
    and record in `tally`; returns the first mismatch as (kind, text) or None."""
    second_order = program.smooth
    try:
        ref32 = run_program(T32, program, second_order)
        ref64 = run_program(T64, program, second_order)
        perturbed = run_program(T64, _perturbed(program), second_order)
    except Exception:             # PyTorch's own limits (a second order of an empty
        tally.skipped += 1        # embedding): nothing to compare with
        return None
    tally.programs += 1
    tally.ops += len(program.steps)
    results = []
    try:
        for level in (0, 2):
            with imp.option("async_level", level):
                results.append(run_program(IMP, program, second_order))
    except Exception as e:
        found = ("error", f"{type(e).__name__}: {e}")
    else:
        found = None
        for i, what in enumerate(("forward", "grad", "grad2")):
            if what == "grad2" and not second_order:
                continue
            pick = (lambda r, i=i: [r[i]]) if i == 0 else (lambda r, i=i: r[i])
            found = _compare_results(tally, what, [pick(r) for r in results], pick(ref32),
                                     pick(ref64), pick(perturbed))
            if found:
                break
    if found:
        tally.add(found[0], f"{program.describe()}: {found[1]}")
    return found


def check_training(training, tally):
    tally.trainings += 1
    try:
        results = []
        for level in (0, 2):
            with imp.option("async_level", level):
                results.append(run_training(training))
    except Exception as e:
        found = ("error", f"{type(e).__name__}: {e}")
    else:
        ref32, ref64 = run_training(training, torch.float32), run_training(training, torch.float64)
        found = _compare_results(tally, "optimizer", [[r[0]] + r[1] for r in results],
                                 [ref32[0]] + ref32[1], [ref64[0]] + ref64[1])
    if found:
        tally.add(found[0], f"{training.describe()}: {found[1]}")
    return found
