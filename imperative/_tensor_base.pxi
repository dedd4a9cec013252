# Included by _core.pyx: TensorBase, the fast part of imperative.Tensor (its record and its
# operators), `apply`, and the operands of binary operators (Python scalars, arrays, dtype
# promotion). The facade (imperative/tensor.py) binds its Tensor class and the ops the
# operators issue at its import (bind_facade).

cdef object _tensor_cls = None   # imperative.tensor.Tensor
cdef object _typecvt_op = None   # imperative.ops.TypeCvt: casts operands of mixed dtypes


def bind_facade(tensor_cls, typecvt, dict operator_ops):
    """Called once, by imperative/tensor.py at its import: the class of the Tensors the core
    makes (a TensorBase subclass), the TypeCvt op factory, and the ops the operators issue
    by name (ADD, SUB, ..., MATMUL)."""
    global _tensor_cls, _typecvt_op
    if not issubclass(tensor_cls, TensorBase):
        raise TypeError("the tensor class must derive from TensorBase")
    _tensor_cls = tensor_cls
    _typecvt_op = typecvt
    _set_operator_ops(operator_ops)


# --------------------------------------------------------------------------- tensors

cdef tuple _EMPTY_TUPLE = ()


cdef inline TensorBase _wrap(TensorInfo info):
    """A new Tensor object for a record (every result goes through here)."""
    # Call the type's tp_new directly: `TensorBase.__new__(cls)` would look `__new__` up by name.
    cdef TensorBase t = <TensorBase>(<PyTypeObject*>_tensor_cls).tp_new(
        _tensor_cls, <PyObject*>_EMPTY_TUPLE, NULL)
    t._info = info
    t._user_name = ""
    info.tensor_refs += 1
    return t


cdef int _rebind(TensorBase t, TensorInfo info) except -1:
    """TensorBase._set_info_from for a record (a replay's effects: no Tensor made for it)."""
    cdef TensorInfo old = t._info
    if _tracing:
        _trace_rebind(t, old)
    t._info = info
    info.tensor_refs += 1
    if t._user_name:                   # (the new value is still the named tensor's)
        info.user_name = t._user_name
    if _channel._memory_on and (old is None or old.persistent or old.producer is None):
        # A new value of a leaf (a parameter's update, an optimizer's state, data written
        # in place) is persistent: its recipe would reach back through every earlier
        # update. A new value of a computed tensor (a buffer a forward pass fills by
        # setitem, an accumulator) keeps its recipe, like any op's output: made a leaf,
        # its value had to stay resident, past its last reader, for as long as recipes
        # read it, and could not be evicted (an RNN writing its states into a
        # preallocated buffer had its whole peak as its floor). The recipe chain such
        # updates make is bounded as any other (_MAX_DEAD_CHAIN).
        _channel.mm.make_persistent(info)
    if old is not None:
        old.tensor_refs -= 1
        if old.tensor_refs == 0:
            _channel.release(old)
    return 0


def wrap_info(TensorInfo info):
    return _wrap(info)


cpdef tuple apply_infos(OpDef op, list infos):
    """Run `op` on records; returns new Tensors for its outputs."""
    cdef list outs = _channel.dispatch(op, infos)
    if len(outs) == 1:
        return (_wrap(outs[0]),)
    return tuple([_wrap(o) for o in outs])


cdef list _checked_infos(object op, tuple tensors):
    if not isinstance(op, OpDef):
        raise TypeError(f"apply expects an op (imperative.ops.*) first, got {type(op).__name__}")
    cdef list infos = []
    if _tracing:
        _trace_inputs(tensors)
    for t in tensors:
        if not isinstance(t, TensorBase):
            raise TypeError(f"op {type(op).__name__} expects Tensor inputs, got {type(t).__name__}")
        infos.append((<TensorBase>t)._info)
    return infos


def apply(op, *tensors):
    """Run one op on Tensors; returns a tuple of Tensors."""
    if _traced_rule(op):
        return op._apply_traced(tensors)
    return apply_infos(<OpDef>op, _checked_infos(op, tensors))


def apply_one(op, *tensors):
    """Run one op on Tensors; returns its first output (functional's calls)."""
    if _traced_rule(op):
        return op._apply_traced(tensors)[0]
    cdef list infos = _checked_infos(op, tensors)
    return apply_infos(<OpDef>op, infos)[0]


def apply_tensors(OpDef op, object tensors):
    """`apply_one(op, *tensors)` where `tensors` is a non-empty list or tuple of Tensors;
    else None, and the caller converts its arguments as usual (functional's fast paths:
    its Python argument handling cost as much as the op)."""
    if (type(tensors) is not list and type(tensors) is not tuple) or not tensors:
        return None
    cdef list infos = []
    for t in tensors:
        if not isinstance(t, TensorBase):
            return None
        infos.append((<TensorBase>t)._info)
    if _tracing:
        _trace_inputs(tuple(tensors))
    return _wrap(_channel.dispatch(op, infos)[0])


cdef object _promote = _dtypes.dtype_promotion
cdef object _promote_pair = _dtypes.promote_pair
cdef object _as_tensor_data = _dtypes.as_tensor_data    # user data to (array, dtype)


cdef object _BOOL = np.dtype(np.bool_)
cdef object _INT32 = np.dtype(np.int32)
cdef object _FLOAT32 = np.dtype(np.float32)


cdef inline int _category(object dtype):
    k = dtype.kind
    if k == "f":
        return 3
    if k == "i" or k == "u":
        return 2
    if k == "b":
        return 1
    return 0


cdef TensorInfo _scalar_info(object value, object dtype, Device device):
    """A resident 0-d constant for a Python scalar operand (no handle, never freed by Del)."""
    cdef TensorInfo info = TensorInfo.__new__(TensorInfo)
    info.birth = _next_birth()
    info.handle = -1
    info.shape = ()
    info.dtype = dtype
    info.device = device
    info.size = cnp.PyDataType_ELSIZE(<cnp.dtype>dtype)
    try:
        info.value = _scalar_array(value, dtype)
    except OverflowError:      # numpy's words for a Python int past 64 bits name no operand
        raise OverflowError(f"the scalar operand {value} does not fit {dtype}, the "
                            f"tensor's dtype") from None
    info.status = PRODUCED
    return info


cdef dict _scalar_arrays = {}       # (type, value, dtype) -> a read-only 0-d array
cdef Py_ssize_t _MAX_MEMO = 1024      # entries in each memo of ops or constants


cdef inline int _remember(dict memo, object key, object op) except -1:
    """memo[key] = op; a full memo starts afresh, so that the keys a program uses now are
    memoised again however many others it used before (a memo that stopped growing once
    full sent every later new index or shape down the general path for good)."""
    if len(memo) >= _MAX_MEMO:
        memo.clear()
    memo[key] = op
    return 0


cdef object _scalar_array(object value, object dtype):
    """`np.array(value, dtype=dtype)`, kept per value and dtype (read-only: every operator
    with a Python number shares it; making it cost as much as the op on a small tensor).
    Not kept: float zeros (-0.0 == 0.0 would share one), NaNs (never equal), quantized
    dtypes (numpy's dtype equality ignores their metadata)."""
    tp = type(value)
    if (not (tp is float or tp is int) or value != value or (tp is float and value == 0)
            or _has_metadata(dtype)):
        return np.array(value, dtype=dtype)
    key = (tp, value, dtype)
    array = _scalar_arrays.get(key)
    if array is None:
        array = np.array(value, dtype=dtype)
        array.flags.writeable = False
        _remember(_scalar_arrays, key, array)
    return array


cdef TensorInfo _cast_info(TensorInfo info, object dtype):
    """`info` converted to `dtype` through a TypeCvt op (used when operands' dtypes differ)."""
    if info.dtype is dtype or info.dtype == dtype:
        return info
    return _channel.dispatch(_typecvt_op(dtype), [info])[0]


cdef list _binary_infos(object x, object y):
    """Operands of a binary operator as records of one promoted dtype."""
    cdef TensorInfo a, b
    if isinstance(x, TensorBase) and isinstance(y, TensorBase):
        a = (<TensorBase>x)._info
        b = (<TensorBase>y)._info
        if a.dtype is b.dtype:
            return [a, b]
        dt = _promote_pair(a.dtype, b.dtype)
        return [_cast_info(a, dt), _cast_info(b, dt)]
    if isinstance(x, TensorBase):
        return _tensor_and_other((<TensorBase>x)._info, y, False)
    return _tensor_and_other((<TensorBase>y)._info, x, True)


cdef list _tensor_and_other(TensorInfo a, object other, bint other_first):
    cdef TensorInfo b
    cdef int cat_scalar
    tp = type(other)
    if tp is float or tp is int or tp is bool:
        # Python scalars: the tensor's dtype wins unless the scalar's category is higher.
        cat_scalar = 3 if tp is float else (2 if tp is int else 1)
        if cat_scalar > _category(a.dtype):
            dt = _FLOAT32 if tp is float else (_INT32 if tp is int else _BOOL)
            a = _cast_info(a, dt)
        else:
            dt = a.dtype
        b = _scalar_info(other, dt, a.device)
    else:
        # numpy arrays/scalars and lists count as tensors in promotion (API.md section 5)
        arr, arr_dtype = _as_tensor_data(other, None)
        dt = _promote((a, arr))
        a = _cast_info(a, dt)
        b = _channel.put(arr.astype(dt, copy=False), tuple(arr.shape), dt, a.device)
    return [b, a] if other_first else [a, b]


cdef tuple _OPERAND_TYPES = (int, float, bool, np.ndarray, np.generic, list, tuple)


# x ** 2, x ** 3 and x ** 4 of float32 x are products, as PyTorch computes them: numpy's
# power takes a slow path for negative bases (60 ns a float32 value here, against 0.1 ns
# a product; a hand-written GELU's x ** 3 was 600 times PyTorch's), and its square (x * x's
# bits) makes a new array where a product may reuse a dying buffer. Not float16, whose
# products would round twice where numpy's power computes in float32, rounds once.
cdef object _power_by_products(object x, object exponent):
    """x * x, x * x * x or (x * x) * (x * x), each product rounded (x ** 3 and x ** 4 up to
    2 ulp from the exact power, where numpy's power is within 1)."""
    square = _binary(x, x, _MUL, False)
    if exponent == 2:
        return square
    return _binary(square, x if exponent == 3 else square, _MUL, False)


cdef object _binary(object x, object y, OpDef op, bint reflected):
    """Operator dispatch: `x op y` (or `y op x` when reflected)."""
    tp = type(y)
    if not (isinstance(y, TensorBase) or tp is float or tp is int or tp is bool):
        if y is None:
            raise TypeError(f"unsupported operand for {op!r}: None (expected a Tensor, array or number)")
        if not isinstance(y, _OPERAND_TYPES):
            return NotImplemented
    cdef TensorInfo fast
    if _tracing:
        _trace_inputs((x, y))
    if op.ufunc is not None and isinstance(y, TensorBase):
        fast = (_host_ufunc(_channel, op, (<TensorBase>y)._info, (<TensorBase>x)._info)
                if reflected
                else _host_ufunc(_channel, op, (<TensorBase>x)._info, (<TensorBase>y)._info))
        if fast is not None:
            return _wrap(fast)
    if op is _MATMUL and not reflected and isinstance(y, TensorBase):
        fast = _host_matmul(_channel, op, (<TensorBase>x)._info, (<TensorBase>y)._info)
        if fast is not None:
            return _wrap(fast)
    cdef list infos = _binary_infos(y, x) if reflected else _binary_infos(x, y)
    cdef list outs
    try:
        if op.ufunc is not None:     # a Python scalar (a 0-d constant now) or promoted operands
            fast = _host_ufunc(_channel, op, infos[0], infos[1])
            if fast is not None:
                return _wrap(fast)
        outs = _channel.dispatch(op, infos)
    finally:
        _release_temporaries(infos)
    return _wrap(outs[0])


# products of fewer multiply-adds are numpy's in MatrixMul's direct kernel, larger ones the
# native kernel's (backend/native.py _MIN_MACS; a test checks that the two agree)
NUMPY_PRODUCT_MACS = 1 << 18
cdef double _NUMPY_PRODUCT_MACS = NUMPY_PRODUCT_MACS


cdef TensorInfo _host_matmul(Channel ch, OpDef op, TensorInfo a, TensorInfo b):
    """`a @ b` of two small resident float32 matrices on the caller's thread, as _host_ufunc
    runs an elementwise op: numpy's product (matmul_apart), which MatrixMul's direct kernel
    calls at these sizes (the same bits). None where that does not apply (the general path
    then runs the op, and reports a shape error) or numpy raised."""
    cdef long long t0 = _now_ns() if _profiling else 0
    sa, sb = a.shape, b.shape
    if (sa is None or sb is None or len(sa) != 2 or len(sb) != 2 or a.dtype is not _FLOAT32
            or b.dtype is not _FLOAT32 or b.status != PRODUCED or b.device is not a.device):
        return None
    cdef Py_ssize_t m = sa[0], k = sa[1], n = sb[1]
    cdef Py_ssize_t elements = a.numel + b.numel + m * n
    if (sb[0] != k or <double>m * k * n >= _NUMPY_PRODUCT_MACS
            or 2.0 * m * k * n > _HOST_MAX_FLOPS
            or not (_host_ready(ch, a) and _host_small(ch, elements))):
        return None
    return _host_run(ch, op, a, b, matmul_apart, b.value, (m, n), _FLOAT32, elements, t0)


cdef int _take_value(TensorBase t, object array, tuple shape, object dtype,
                     Device device) except -1:
    """Make a runtime-owned array the value of a new record, held by the new Tensor `t`."""
    _channel.check_usable()
    cdef TensorInfo info = _channel.put(array, shape, dtype, device)
    t._info = info
    info.tensor_refs += 1
    return 0


cdef void _release_temporaries(list infos):
    """Operands created for this call only (numpy arrays) have no Tensor: release them."""
    cdef TensorInfo info
    for info in infos:
        if info.tensor_refs == 0 and info.handle >= 0 and info.status != DELETED:
            _channel.release(info)


cdef object _unary(object x, OpDef op):
    cdef TensorInfo fast
    if _tracing:
        _trace_inputs((x,))
    if op.ufunc is not None or op.host_fn is not None:
        fast = _host_ufunc(_channel, op, (<TensorBase>x)._info, None)
        if fast is not None:
            return _wrap(fast)
    cdef list outs = _channel.dispatch(op, [(<TensorBase>x)._info])
    return _wrap(outs[0])


def unary(OpDef op, object x):
    """A one-input op on a Tensor as the operators run it (an elementwise op's host fast
    path, else dispatch), or None when x is no Tensor: functional's one-argument functions
    call this first and convert other arguments themselves."""
    return _unary(x, op) if isinstance(x, TensorBase) else None


# Ops used by the operators, bound by imperative.tensor at import. Module globals, not a
# dict: an operator call reads one pointer.
cdef OpDef _ADD, _SUB, _MUL, _TRUE_DIV, _FLOOR_DIV, _MOD, _POW, _AND, _OR, _XOR
cdef OpDef _EQ, _NE, _LT, _LEQ, _NEGATE, _ABS, _NOT, _MATMUL


cdef void _set_operator_ops(dict ops) except *:
    global _ADD, _SUB, _MUL, _TRUE_DIV, _FLOOR_DIV, _MOD, _POW, _AND, _OR, _XOR
    global _EQ, _NE, _LT, _LEQ, _NEGATE, _ABS, _NOT, _MATMUL
    _ADD, _SUB, _MUL, _TRUE_DIV = ops["ADD"], ops["SUB"], ops["MUL"], ops["TRUE_DIV"]
    _FLOOR_DIV, _MOD, _POW = ops["FLOOR_DIV"], ops["MOD"], ops["POW"]
    _AND, _OR, _XOR = ops["AND"], ops["OR"], ops["XOR"]
    _EQ, _NE, _LT, _LEQ = ops["EQ"], ops["NE"], ops["LT"], ops["LEQ"]
    _NEGATE, _ABS, _NOT, _MATMUL = ops["NEGATE"], ops["ABS"], ops["NOT"], ops["MATMUL"]


cdef class TensorBase:
    """The fast part of imperative.Tensor: its record and its operators."""
    cdef TensorInfo _info
    cdef object _user_name           # `.name` (None: never set, read as "")
    cdef public object _grad_slot    # used by autodiff
    cdef object __weakref__

    __array_priority__ = 1000        # ndarray <op> Tensor defers to the Tensor

    def __init__(self, data, dtype=None, device=None, **options):
        """`Tensor(ndarray)` takes the core's short path here (_init_from_array), as the
        type's own C initialiser: through the facade's `__init__`, a Python-level method
        with keyword-only arguments, the call alone cost more than a third of numpy's
        copy. Everything else is the subclass's `_init` (imperative.tensor.Tensor)."""
        if dtype is None and device is None and not options and _init_from_array(self, data):
            return
        self._init(data, dtype, device, **options)

    def __dealloc__(self):
        cdef TensorInfo info = self._info
        if info is None:
            return
        info.tensor_refs -= 1
        if info.tensor_refs == 0 and _channel is not None:
            _channel.release(info)

    # ---- record access

    @property
    def _handle(self):
        return self._info.handle

    @property
    def _record(self):
        return self._info

    @property
    def shape(self):
        """The shape as a tuple; waits only for ops whose output shape depends on values."""
        cdef TensorInfo info = self._info
        if _tracing:
            _trace_read(info, READ_SHAPE)
        if info.shape is None:
            _channel.wait_produced(info, "shape")
        return info.shape

    @property
    def dtype(self):
        return self._info.dtype

    @property
    def device(self):
        return self._info.device

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _num_elements(self.shape)

    def _value(self):
        """The value as a numpy array (waits for the worker; not a copy: do not write)."""
        if _tracing:
            _trace_read(self._info, READ_DATA)
        return _channel.get_value(self._info)

    def numpy(self):
        """The value as a read-only numpy array (zero-copy where the storage allows)."""
        if _tracing:
            _trace_read(self._info, READ_VALUE)
        return _channel.get_readonly_view(self._info)

    def _use_cnt(self):
        return self._info.tensor_refs

    @property
    def name(self):
        """The user's name for this tensor, a str ("" by default); the profile's memory
        events name the value by it (§7)."""
        return "" if self._user_name is None else self._user_name

    @name.setter
    def name(self, value):
        if not isinstance(value, str):
            raise TypeError(f"Tensor.name must be a str, got {type(value).__name__} "
                            f"({value!r})")
        self._user_name = value
        if self._info is not None:
            self._info.user_name = value

    def _isscalar(self):
        return self._info.shape == ()

    def _share(self, TensorBase other):
        """Make this (fresh) object share `other`'s value."""
        if self._info is not None:
            raise RuntimeError("tensor already initialised")
        self._info = other._info
        self._info.tensor_refs += 1

    def _set_info_from(self, TensorBase other):
        """Rebind this tensor to `other`'s value (in-place operators, __setitem__, optimizer
        updates). The new value of a leaf is persistent for the memory manager (_rebind)."""
        _rebind(self, other._info)

    def _init_value(self, array, dtype, device):
        """Initialise from a runtime-owned array (already copied and converted)."""
        if self._info is not None:
            raise RuntimeError("tensor already initialised")
        _take_value(self, array, tuple(array.shape), dtype, as_device(device))

    def _init_packed(self, packed, shape, dtype, device):
        """Initialise a 4-bit tensor from its packed bytes and logical shape."""
        _take_value(self, packed, tuple(shape), dtype, as_device(device))

    # ---- operators

    def __add__(self, other):
        return _binary(self, other, _ADD, False)

    def __radd__(self, other):
        return _binary(self, other, _ADD, True)

    def __sub__(self, other):
        return _binary(self, other, _SUB, False)

    def __rsub__(self, other):
        return _binary(self, other, _SUB, True)

    def __mul__(self, other):
        return _binary(self, other, _MUL, False)

    def __rmul__(self, other):
        return _binary(self, other, _MUL, True)

    def __truediv__(self, other):
        return _binary(self, other, _TRUE_DIV, False)

    def __rtruediv__(self, other):
        return _binary(self, other, _TRUE_DIV, True)

    def __floordiv__(self, other):
        return _binary(self, other, _FLOOR_DIV, False)

    def __rfloordiv__(self, other):
        return _binary(self, other, _FLOOR_DIV, True)

    def __mod__(self, other):
        return _binary(self, other, _MOD, False)

    def __rmod__(self, other):
        return _binary(self, other, _MOD, True)

    def __pow__(self, other, mod=None):
        if type(other) is int or type(other) is float:
            if 2 <= other <= 4 and other == <int>other and self._info.dtype is _FLOAT32:
                return _power_by_products(self, other)
        if (isinstance(other, (int, np.integer)) and other < 0 and type(other) is not bool
                and self._info.dtype.kind in "bi" and not self._info.quantized):
            # numpy's error, at the call: the worker would raise it at the next sync only
            raise ValueError("Integers to negative integer powers are not allowed.")
        return _binary(self, other, _POW, False)

    def __rpow__(self, other, mod=None):
        return _binary(self, other, _POW, True)

    def __and__(self, other):
        return _binary(self, other, _AND, False)

    def __rand__(self, other):
        return _binary(self, other, _AND, True)

    def __or__(self, other):
        return _binary(self, other, _OR, False)

    def __ror__(self, other):
        return _binary(self, other, _OR, True)

    def __xor__(self, other):
        return _binary(self, other, _XOR, False)

    def __rxor__(self, other):
        return _binary(self, other, _XOR, True)

    def __eq__(self, other):
        return _binary(self, other, _EQ, False)

    def __ne__(self, other):
        return _binary(self, other, _NE, False)

    def __lt__(self, other):
        return _binary(self, other, _LT, False)

    def __le__(self, other):
        return _binary(self, other, _LEQ, False)

    def __gt__(self, other):
        return _binary(self, other, _LT, True)

    def __ge__(self, other):
        return _binary(self, other, _LEQ, True)

    def __matmul__(self, other):
        return _binary(self, other, _MATMUL, False)

    def __rmatmul__(self, other):
        return _binary(self, other, _MATMUL, True)

    def __neg__(self):
        return _unary(self, _NEGATE)

    def __pos__(self):
        # a new Tensor sharing the value, as numpy's `+a` is a new array: `u = +t; u += 1`
        # rebinds u alone
        return _wrap(self._info)

    def __abs__(self):
        return _unary(self, _ABS)

    def __invert__(self):
        return _unary(self, _NOT)

    def __hash__(self):
        return _pointer(self) >> 4      # (id(self) without the audit event its call raises)
