"""The Tensor facade. Its record and operators live in the Cython core (`TensorBase`);
this module adds construction, conversions and the methods built from ops."""
from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

from . import _core
from . import dtype as D
from . import ops as O
from . import tensor_index
from .ops.base import cached_op
from .ops.shape import check_int_tuple, check_permutation, check_shape_arg
from .scope import auto_name
from .torch_hints import (TENSOR_ATTRIBUTE_HINTS, PyTorchFlag, add_pytorch_names, keyword_error,
                          keyword_hints, tensor_attribute_error)
from ._core import TensorBase, as_device
from .dtype import as_tensor_data
from ._types import DeviceLike, DTypeLike, ShapeLike

_DL_CPU = 1          # DLPack's kDLCPU device type


def _axis_arg(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _shape_args(args, what, check=check_shape_arg):
    """`reshape(2, 3)`, `reshape((2, 3))` or `reshape(shape_tensor)` → a tuple of ints
    (`check`: check_int_tuple for axes, which are not sizes)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return check(args[0], what)
    if len(args) == 1 and isinstance(args[0], TensorBase):
        return check(args[0].numpy().tolist(), what)
    return check(args, what)


class Tensor(TensorBase):
    """A value computed by the runtime. `Tensor(data, dtype=None, device=None, *, is_const=False,
    no_cache=False, name=None)`: the data is copied (or shared, for a Tensor)."""

    # `Tensor(data, ...)` runs TensorBase.__init__, which takes a plain ndarray on the
    # core's short path and passes anything else here
    def _init(self, data: Any, dtype: DTypeLike | None = None, device: DeviceLike | None = None,
              *, is_const: bool = False, no_cache: bool = False, name: str | None = None,
              **torch_keywords: Any) -> None:
        if torch_keywords:                   # requires_grad=True and friends: say what to do
            keyword = next(iter(torch_keywords))
            raise keyword_error(type(self).__name__, keyword) or TypeError(
                f"{type(self).__name__}() got an unexpected keyword argument {keyword!r}")
        if isinstance(data, TensorBase):
            if dtype is not None and not D.same_dtype(D.canonical_dtype(dtype), data.dtype):
                raise ValueError(f"Tensor(t, dtype={D.dtype_name(D.canonical_dtype(dtype))}): "
                                 f"t has dtype {D.dtype_name(data.dtype)}; "
                                 f"use t.astype(...) to convert")
            if device is not None and as_device(device) is not data.device:
                raise ValueError(f"Tensor(t, device={device!r}): t is on {data.device}; "
                                 "use t.to(device) to copy")
            self._share(data)
        else:
            array, dt = as_tensor_data(data, dtype)
            dev = _core.get_default_device() if device is None else device
            if dt.metadata is not None and D.is_4bit(dt):
                self._init_packed(D.pack_4bit(array), array.shape, dt, dev)
            else:
                self._init_value(array, dt, dev)
        if name is not None:
            self.name = str(name)

    # ---- PyTorch habits (imperative/torch_hints.py)

    # x.view, x.backward, ... (TENSOR_ATTRIBUTE_HINTS) are added after the class; this one
    # also refuses assignment, which would otherwise silently set an unused attribute
    requires_grad = PyTorchFlag(tensor_attribute_error)

    @property
    def size(self) -> int:
        """The number of elements, an int; calling it as PyTorch's `x.size(dim)` / `x.size()`
        gives `x.shape[dim]` / `x.shape`."""
        return _Size(TensorBase.size.__get__(self), self.shape)

    # ---- conversions

    @property
    def _name(self):
        """Automatic name from the scope stack and the producing op (`block.linear.MatrixMul:0`)."""
        return auto_name(self._record)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (waits for it)."""
        return self.numpy().item()

    def tolist(self) -> Any:
        """The value as nested Python lists of numbers (waits for it)."""
        return self.numpy().tolist()

    # float(t), int(t), bool(t) of a one-element tensor (Cython: imperative/_methods.pxi)
    __float__ = _core.tensor_float
    __int__ = _core.tensor_int
    __bool__ = _core.tensor_bool

    def __index__(self):
        if self.dtype.kind not in "iub" or self.size != 1:
            raise TypeError(f"only an integer tensor with one element can be used as an index, "
                            f"got {D.dtype_name(self.dtype)} of shape {self.shape}")
        return int(self.numpy().reshape(()).item())

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:       # (numpy's words, raised by iter() itself as numpy's)
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None:
            return arr.astype(dtype)
        return np.array(arr, copy=True) if copy else arr

    def __format__(self, spec: str) -> str:
        # f"{loss:.4f}" formats the number, as for a Python float; a spec means nothing for a
        # whole array, so only the empty one is accepted there (as numpy does).
        if self.size == 1:
            return format(self.numpy().reshape(()).item(), spec)
        if spec:
            raise TypeError(f"format spec {spec!r} needs a tensor with one element, got shape "
                            f"{self.shape}; format t.numpy() or each element instead")
        return str(self)

    # numpy's protocols: np.add(t, 1), np.sum(t) give Tensors. imperative/numpy_protocol.py
    # installs __array_ufunc__ and __array_function__ on this class at its import.

    def __repr__(self):
        body = np.array2string(self.numpy(), separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={D.dtype_name(self.dtype)}, device={self.device})"

    def __reduce__(self):
        return (_rebuild, (type(self), self.numpy(), str(self.device), self.name))

    # ---- DLPack (API.md §1): a zero-copy, read-only view of the value after a sync

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the value for `torch.from_dlpack(t)` / `np.from_dlpack(t)` (waits for it).
        The consumer gets a read-only view; the value is never overwritten in place after."""
        return self.numpy().__dlpack__(stream=stream, max_version=max_version,
                                       dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCPU, 0) for every CPU device: they all live in host memory. Does not wait."""
        return (_DL_CPU, 0)

    # ---- gradient slot (API.md §8)

    @property
    def grad(self) -> Tensor | None:
        """The gradient a GradManager's backward left here; None until one lands."""
        return self._grad_slot

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, TensorBase):
                raise TypeError(f"Tensor.grad must be a Tensor or None, got {type(value).__name__}")
            if value.shape != self.shape:
                raise ValueError(f"Tensor.grad must have the tensor's shape {self.shape}, got "
                                 f"{value.shape}")
        if _core.tracing_active():       # an effect of a traced call (imperative/jit)
            _core.report_grad_write(self, self._grad_slot)
        self._grad_slot = value

    # ---- values sharing this one

    def detach(self) -> Tensor:
        """A Tensor sharing this value, outside every gradient record."""
        if _core.get_grad_hook() is not None:
            # Gradients are tracked per record: while recording, a detached tensor needs a
            # record of its own (FastpathCopy aliases the storage, copies nothing).
            return _core.apply(cached_op(O.FastpathCopy), self)[0]
        t = Tensor.__new__(Tensor)
        t._share(self)
        t.name = ""
        return t

    # ---- methods built from ops

    # astype, reshape, transpose, .T and the reductions find their op by their arguments and
    # dispatch it without a Python frame (imperative/_methods.pxi; the op factories are
    # _astype_op, _reshape_op, _transpose_op and _reduce_op below)
    astype = _core.tensor_astype

    def to(self, device: DeviceLike) -> Tensor:
        """A copy on `device` ("cpu1"), or itself when it is there already."""
        if as_device(device) is self.device:
            return self
        return _core.apply(cached_op(O.Copy, str(as_device(device))), self)[0]

    reshape = _core.tensor_reshape

    def flatten(self) -> Tensor:
        """The value as a 1-D tensor."""
        return self.reshape(-1)

    transpose = _core.tensor_transpose

    T = property(_core.tensor_T)    # (no Python frame between `x.T` and the core's method)

    def broadcast_to(self, *shape: ShapeLike) -> Tensor:
        """The value repeated to `shape` by numpy's broadcasting rules."""
        return _core.apply(cached_op(O.Broadcast, _shape_args(shape, "broadcast_to")), self)[0]

    sum = _core.tensor_sum
    mean = _core.tensor_mean
    max = _core.tensor_max
    min = _core.tensor_min
    prod = _core.tensor_prod

    @keyword_hints
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index (int32) of the maximum along `axis`, of the flattened tensor for None."""
        return _core.apply(cached_op(O.Argmax, axis, bool(keepdims)), self)[0]

    @keyword_hints
    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index (int32) of the minimum along `axis`, of the flattened tensor for None."""
        return _core.apply(cached_op(O.Argmin, axis, bool(keepdims)), self)[0]

    __getitem__ = _core.tensor_getitem       # `self[index]`, as numpy (_getitem_op below)

    # `self[index] = value`: rebinds this tensor to the new value (values are immutable;
    # other Tensors sharing the old value keep it); the value is cast to this dtype, as
    # numpy casts on assignment (_setitem below; a Python number at a basic index: the core)
    __setitem__ = _core.tensor_setitem

    # ---- in-place operators keep the object (a Parameter stays a Parameter)

    def _inplace(self, result):
        if not D.same_dtype(result.dtype, self.dtype):
            raise TypeError(f"in-place result has dtype {D.dtype_name(result.dtype)}, which "
                            f"differs from the tensor's {D.dtype_name(self.dtype)}")
        if result.shape != self.shape:
            raise ValueError(f"in-place result has shape {result.shape}, which differs from "
                             f"the tensor's {self.shape}")
        self._set_info_from(result)
        return self

    def __iadd__(self, other):
        return self._inplace(self + other)

    def __isub__(self, other):
        return self._inplace(self - other)

    def __imul__(self, other):
        return self._inplace(self * other)

    def __itruediv__(self, other):
        return self._inplace(self / other)

    def __ifloordiv__(self, other):
        return self._inplace(self // other)

    def __imod__(self, other):
        return self._inplace(self % other)

    def __ipow__(self, other):
        return self._inplace(self ** other)

    def __imatmul__(self, other):
        return self._inplace(self @ other)

    def __iand__(self, other):
        return self._inplace(self & other)

    def __ior__(self, other):
        return self._inplace(self | other)

    def __ixor__(self, other):
        return self._inplace(self ^ other)

    # ---- memory-management hooks (API.md §4)

    def _drop(self):
        """Free the value, keeping how to recompute it; the next use recomputes it."""
        _core.drop_tensor(self)

    def _swap_out(self):
        """Move the value to a file in imperative.dtr.swap_dir; any use reads it back."""
        _core.swap_out_tensor(self)

    def _swap_in(self):
        _core.swap_in_tensor(self)


add_pytorch_names(Tensor, TENSOR_ATTRIBUTE_HINTS, tensor_attribute_error)


class _Size(int):
    """Tensor.size: an int (the element count) that PyTorch code may also call."""

    def __new__(cls, count, shape):
        self = super().__new__(cls, count)
        self._shape = shape
        return self

    def __call__(self, dim=None):
        if dim is None:
            return self._shape
        try:
            return self._shape[dim]
        except (IndexError, TypeError):
            raise IndexError(f"size({dim!r}): dimension out of range for shape "
                             f"{self._shape}") from None


class Parameter(Tensor):
    """A trainable Tensor. Arithmetic on it gives plain Tensors."""

    def __repr__(self):
        return "Parameter" + super().__repr__()[len("Tensor"):]


def from_dlpack(obj: Any) -> Tensor:
    """A Tensor holding a copy of a DLPack producer's value (a torch tensor, a numpy array,
    anything with `__dlpack__`), with API.md §1's dtype rules (float64 → float32, ...)."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"from_dlpack needs an object with __dlpack__ (a torch tensor, a numpy "
                        f"array, ...), got {type(obj).__name__}")
    if isinstance(obj, TensorBase):
        return Tensor(obj.numpy())
    return Tensor(np.from_dlpack(obj))


def _rebuild(cls, array, device, name):
    return cls(array, device=device, name=name or None)


class TensorWeakRef:
    """A weak reference to a tensor's *value*: calling it returns a Tensor sharing the value
    while anything (a Tensor, a detach()ed copy, a saved-for-backward reference) keeps it
    alive, and None after."""

    __slots__ = ("_handle",)

    def __init__(self, tensor):
        if not isinstance(tensor, TensorBase):
            raise TypeError(f"TensorWeakRef needs a Tensor, got {type(tensor).__name__}")
        self._handle = tensor._handle

    def __call__(self):
        info = _core.channel().lookup(self._handle)
        if info is None:
            return None
        return _core.wrap_info(info)


def _astype_op(dtype, current):
    """The op of `astype(dtype)` on a tensor of dtype `current`; None: itself."""
    dt = D.canonical_dtype(dtype)
    if D.same_dtype(dt, current):
        return None
    # numpy ignores quantization metadata in == and hash: never intern those ops
    return O.TypeCvt(dt) if D.is_quantize(dt) else cached_op(O.TypeCvt, dt)


def _reshape_op(args):
    return cached_op(O.Reshape, _shape_args(args, "reshape"))


def _transpose_op(axes, ndim):
    """The op of `transpose(*axes)`; `ndim` is -1 where the axes are non-negative ints (the
    op is then the same for every rank, and inference checks it)."""
    axes = _shape_args(axes, "transpose", check_int_tuple)
    if not axes:
        return cached_op(O.Dimshuffle, tuple(range(ndim))[::-1])
    return cached_op(O.Dimshuffle, axes if ndim < 0 else check_permutation(axes, ndim))


def _reduce_op(mode, axis, keepdims):
    return cached_op(O.Reduce, mode, _axis_arg(axis), bool(keepdims))


def _setitem(tensor, index, value):
    """`tensor[index] = value`; returns the op it issued and its index operands."""
    items, operands = tensor_index.prepare(tensor, index, Tensor)
    if isinstance(value, TensorBase):
        value = value.astype(tensor.dtype)
    else:
        value = Tensor(value, dtype=tensor.dtype, device=tensor.device)
    op = tensor_index.write_op(items, operands)
    tensor._set_info_from(_core.apply(op, tensor, value, *operands)[0])
    return op, operands


def _getitem_op(tensor, index):
    """(the op of `tensor[index]`, its index operands) (tensor_index.py parses the index)."""
    items, operands = tensor_index.prepare(tensor, index, Tensor)
    return tensor_index.read_op(items, operands), operands


def _setup():
    """Bind this facade to the core: the class of the Tensors it makes, the TypeCvt op for
    operands of mixed dtypes, the ops the operators issue and the op factories of the
    methods the core implements."""
    ops = {mode: O.Elemwise(mode) for mode in O.elemwise.modes()}
    ops["MATMUL"] = O.MatrixMul()
    _core.bind_facade(Tensor, O.TypeCvt, ops)
    _core.bind_methods(_reduce_op, _reshape_op, _transpose_op, _astype_op, _getitem_op,
                       _setitem, keyword_error, D.array_target)


_setup()


class _TensorModule(types.ModuleType):
    """`imp.tensor` is this module; PyTorch's habit `imp.tensor(data)` gets a hint, not
    "'module' object is not callable"."""

    def __call__(self, *args, **kwargs):
        raise TypeError("imp.tensor is a module; for PyTorch's torch.tensor(data), use "
                        "imp.Tensor(data, dtype=None, device=None)")


sys.modules[__name__].__class__ = _TensorModule
