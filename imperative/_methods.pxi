# Included by _core.pyx: the Tensor methods that issue one op (the reductions, reshape,
# transpose, astype, basic indexing) and the conversions to Python numbers, in Cython
# (issue 16). A method
# finds its op in a dict keyed by the call's own arguments and dispatches it, with no
# Python frame between the call and the handle table. imperative/tensor.py puts these
# functions on Tensor, and binds (bind_methods) the Python helpers that make an op the
# first time a key is seen: they validate the arguments and raise the facade's errors, so
# the first call with any argument behaves exactly as the facade always did. Keys are
# memoised only where equal keys mean the same op: plain ints and tuples of ints, strings,
# dtypes without quantization metadata (numpy ignores metadata in == and hash).

cdef object _make_reduce = None      # (mode, axis, keepdims) -> Reduce op
cdef object _make_reshape = None     # (shape arguments,) -> Reshape op
cdef object _make_transpose = None   # (axes arguments, ndim) -> Dimshuffle op
cdef object _make_astype = None      # (dtype argument, input dtype) -> TypeCvt op or None
cdef object _make_getitem = None     # (tensor, index) -> (op, index operand Tensors)
cdef object _setitem = None          # (tensor, index, value) -> (the op it ran, operands)
cdef object _keyword_error = None    # (function name, keyword) -> TypeError or None
cdef object _array_target = None     # an array's dtype -> the Tensor's dtype, or None

cdef dict _reduce_ops = {}
cdef dict _reshape_ops = {}
cdef dict _transpose_ops = {}
cdef dict _astype_ops = {}
cdef dict _getitem_ops = {}
cdef dict _setitem_ops = {}
cdef object _np_dtype = np.dtype


def bind_methods(make_reduce, make_reshape, make_transpose, make_astype, make_getitem,
                 setitem, keyword_error, array_target):
    """Called once, by imperative/tensor.py at its import: the op factories of the methods
    below (each validates its arguments as the facade does), the facade's setitem,
    torch_hints.keyword_error and dtype.array_target."""
    global _make_reduce, _make_reshape, _make_transpose, _make_astype, _make_getitem
    global _setitem, _keyword_error, _array_target
    _make_reduce, _make_reshape, _make_transpose = make_reduce, make_reshape, make_transpose
    _make_astype, _make_getitem, _setitem = make_astype, make_getitem, setitem
    _keyword_error, _array_target = keyword_error, array_target


cdef object _last_array_dtype = None     # the dtype of the last array Tensor(array) took
cdef object _last_array_target = None    # and the Tensor's dtype for it (None: general rules)


cdef object _c_ordered_copy(cnp.ndarray data):
    """A C-ordered copy of `data`: a memcpy into a new array where `data` is C-contiguous
    and the new array has its very dtype (numpy's copy machinery, casts and overlap checks
    set up for nothing, cost as much as a small array's copy), numpy's copy otherwise."""
    cdef cnp.ndarray out
    if cnp.PyArray_IS_C_CONTIGUOUS(data):
        out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(data), cnp.PyArray_DIMS(data),
                                cnp.PyArray_TYPE(data), 0)
        if _dtype_of(out) is _dtype_of(data):
            memcpy(cnp.PyArray_DATA(out), cnp.PyArray_DATA(data), cnp.PyArray_NBYTES(data))
            return out
    return cnp.PyArray_NewCopy(data, cnp.NPY_CORDER)


cdef bint _init_from_array(TensorBase self, object data) except -1:
    """`Tensor(data)` of a plain ndarray whose dtype the rules keep, or narrow by a cast
    alone (float64 -> float32): numpy's copy, C-ordered, made the value of a new record,
    with the rules asked once per dtype (by identity: numpy hashes a dtype slowly). False,
    nothing done, for anything else: the facade's rules (dtype.as_tensor_data) take it.
    (TensorBase.__init__ calls it, in C, before any frame of the facade's.)"""
    global _last_array_dtype, _last_array_target
    if type(data) is not _ndarray or self._info is not None:
        return False
    dtype = _dtype_of(data)
    if dtype is _last_array_dtype:
        target = _last_array_target
    else:       # (a dtype with metadata, quantized or 4-bit, takes the general rules)
        target = _array_target(dtype) if dtype.metadata is None else None
        _last_array_dtype, _last_array_target = dtype, target
    if target is None:
        return False
    if target is dtype:
        array = _c_ordered_copy(<cnp.ndarray>data)
    else:
        array = data.astype(target, order="C")
    _take_value(self, array, _shape_of(array), target, _channel.default_device)
    return True


cdef inline object _one(OpDef op, TensorBase x):
    if _tracing:
        _trace_inputs((x,))     # (as apply() reports them: imperative/_tracing.pxi)
    return _wrap(_channel.dispatch(op, [x._info])[0])


cdef int _reject_keywords(str name, dict keywords) except -1:
    """PyTorch's `dim=` and the like raise a TypeError naming imperative's spelling."""
    for given in keywords:
        error = _keyword_error(name, given)
        raise error if error is not None else TypeError(
            f"{name}() got an unexpected keyword argument {given!r}")
    return 0


cdef inline bint _is_int_tuple(tuple args):
    for a in args:
        if type(a) is not int:
            return False
    return True


cdef inline bint _memo_key(object args):
    """Plain ints, or one tuple of plain ints: a key whose equality is the op's."""
    if type(args) is not tuple:
        return type(args) is int or args is None
    if len(<tuple>args) == 1 and type((<tuple>args)[0]) is tuple:
        return _is_int_tuple((<tuple>args)[0])
    return _is_int_tuple(<tuple>args)


cdef object _memoised(dict memo, object key, bint cacheable, object make, tuple params):
    op = memo.get(key) if cacheable else None
    if op is None:
        op = make(*params)
        if cacheable:
            _remember(memo, key, op)
    return op


cdef object _reduce(str mode, str name, TensorBase x, object axis, object keepdims,
                    dict keywords):
    if keywords:
        _reject_keywords(name, keywords)
    cdef bint cacheable = _memo_key(axis) and (keepdims is True or keepdims is False)
    key = (mode, axis, keepdims)
    return _one(_memoised(_reduce_ops, key, cacheable, _make_reduce, key), x)


def tensor_sum(TensorBase self, axis=None, keepdims=False, **torch_keywords):
    """Sum over `axis` (an int, a tuple, or None for all); `keepdims` keeps the reduced
    axes with length 1. PyTorch's `dim=` / `keepdim=` raise a TypeError naming these."""
    return _reduce("SUM", "Tensor.sum", self, axis, keepdims, torch_keywords)


def tensor_mean(TensorBase self, axis=None, keepdims=False, **torch_keywords):
    """Mean over `axis` (an int, a tuple, or None for all); `keepdims` keeps the reduced
    axes with length 1. PyTorch's `dim=` / `keepdim=` raise a TypeError naming these."""
    return _reduce("MEAN", "Tensor.mean", self, axis, keepdims, torch_keywords)


def tensor_max(TensorBase self, axis=None, keepdims=False, **torch_keywords):
    """Maximum over `axis` (an int, a tuple, or None for all); `keepdims` keeps the reduced
    axes with length 1. PyTorch's `dim=` / `keepdim=` raise a TypeError naming these."""
    return _reduce("MAX", "Tensor.max", self, axis, keepdims, torch_keywords)


def tensor_min(TensorBase self, axis=None, keepdims=False, **torch_keywords):
    """Minimum over `axis` (an int, a tuple, or None for all); `keepdims` keeps the reduced
    axes with length 1. PyTorch's `dim=` / `keepdim=` raise a TypeError naming these."""
    return _reduce("MIN", "Tensor.min", self, axis, keepdims, torch_keywords)


def tensor_prod(TensorBase self, axis=None, keepdims=False, **torch_keywords):
    """Product over `axis` (an int, a tuple, or None for all); `keepdims` keeps the reduced
    axes with length 1. PyTorch's `dim=` / `keepdim=` raise a TypeError naming these."""
    return _reduce("PRODUCT", "Tensor.prod", self, axis, keepdims, torch_keywords)


def tensor_reshape(TensorBase self, *shape):
    """The value with another shape of the same size: `reshape(2, 3)` or `reshape((2, 3))`;
    one -1 stands for what is left. Never copies needlessly (values are immutable)."""
    return _one(_memoised(_reshape_ops, shape, _memo_key(shape), _make_reshape, (shape,)), self)


def tensor_transpose(TensorBase self, *axes):
    """Axes permuted: `transpose(1, 0, 2)`, negative ones counted from the end; no axes
    reverses them (as `.T`)."""
    cdef TensorInfo info = self._info
    cdef bint cacheable = _memo_key(axes)
    # no axes (reversed), negative ones or others than plain ints: the rank is read (and
    # is in the key); plain non-negative ints make one op for every rank
    cdef bint by_rank = not axes or not cacheable or _has_negative(axes)
    if by_rank:
        if _tracing:
            _trace_read(info, READ_SHAPE)
        if info.shape is None:
            _channel.wait_produced(info, "shape")
    key = (axes, len(info.shape) if by_rank else -1)
    return _one(_memoised(_transpose_ops, key, cacheable, _make_transpose, key), self)


cdef bint _has_negative(tuple args):
    """Whether plain ints `args`, or one tuple of them, hold a negative one."""
    if len(args) == 1 and type(args[0]) is tuple:
        args = <tuple>args[0]
    for a in args:
        if a < 0:
            return True
    return False


# `.T`'s op by the tensor's rank, found without making and hashing a key (a tenth of the call)
cdef list _reversal_ops = [None] * 9


def tensor_T(TensorBase self):
    """The tensor with its axes reversed."""
    cdef TensorInfo info = self._info
    if info.shape is None or _tracing:
        return tensor_transpose(self)       # (the shape waited for, or read by a trace)
    cdef Py_ssize_t rank = len(info.shape)
    if rank >= len(_reversal_ops):
        return tensor_transpose(self)
    op = _reversal_ops[rank]
    if op is None:       # (transpose()'s op for the same reversal: one inference cache)
        key = ((), rank)
        op = _reversal_ops[rank] = _memoised(_transpose_ops, key, True, _make_transpose, key)
    return _one(op, self)


# the last astype call's (argument, input dtype) -> op, checked by identity before the
# memo's tuple key is made and hashed (numpy hashes a dtype slowly: a tenth of a tiny
# astype's time)
cdef object _last_astype_arg = None, _last_astype_in = None, _last_astype_op = None


def tensor_astype(TensorBase self, dtype):
    """This tensor converted to `dtype`; a new Tensor sharing the value when it already has
    that dtype (as numpy's copy: in-place operators on either leave the other be)."""
    global _last_astype_arg, _last_astype_in, _last_astype_op
    cdef TensorInfo info = self._info
    if dtype is _last_astype_arg and info.dtype is _last_astype_in:
        op = _last_astype_op
        return _wrap(self._info) if op is None else _cast(self, op)
    tp = type(dtype)
    cdef bint cacheable = not info.quantized and (
        tp is str or tp is type or (isinstance(dtype, _np_dtype) and dtype.metadata is None))
    key = (dtype, info.dtype)
    op = _astype_ops.get(key, False) if cacheable else False
    if op is False:
        op = _make_astype(dtype, info.dtype)
        if cacheable:
            _remember(_astype_ops, key, op)
    if cacheable:
        _last_astype_arg, _last_astype_in, _last_astype_op = dtype, info.dtype, op
    return _wrap(self._info) if op is None else _cast(self, op)


cdef object _cast(TensorBase x, object op):
    """`x` through its TypeCvt `op`: on the caller's thread where it is small and resident
    (as a unary elementwise op runs), else dispatched."""
    if _tracing:
        _trace_inputs((x,))
    fast = _host_cast(_channel, <OpDef>op, x._info, op.dtype)
    if fast is not None:
        return _wrap(fast)
    return _wrap(_channel.dispatch(<OpDef>op, [x._info])[0])



cdef object _index_item_key(object item):
    """A plain int, a slice of plain ints and Nones, None or `...` as a hashable key (slices
    are unhashable before Python 3.12); None for anything else."""
    tp = type(item)
    if tp is int:
        return item
    if item is None:
        return ("None",)
    if item is Ellipsis:
        return ("...",)
    if tp is slice:
        start, stop, step = (<slice>item).start, (<slice>item).stop, (<slice>item).step
        if ((start is None or type(start) is int) and (stop is None or type(stop) is int)
                and (step is None or type(step) is int)):
            return ("slice", start, stop, step)
    return None


cdef object _basic_index_key(object index):
    """The memo key of a basic index (the same op for every tensor: its bounds are checked
    by inference, per shape), or None."""
    if type(index) is not tuple:
        index = (index,)
    keys = []
    for item in <tuple>index:
        key = _index_item_key(item)
        if key is None:
            return None
        keys.append(key)
    return tuple(keys)


cdef object _tensor_index_key(tuple index):
    """The memo key of an index of basic items and index Tensors (`x[rows, 1:9]`, `x[idx]`),
    or None. An index Tensor stands in the key by its dtype alone: the facade makes the op
    from the index's items and its Tensors' dtypes only (integer: a gather; bool: a mask),
    their shapes being checked by inference, per call."""
    keys = []
    for item in index:
        if isinstance(item, TensorBase):
            dtype = (<TensorBase>item)._info.dtype
            if dtype.metadata is not None:
                return None
            keys.append(("tensor", dtype))
            continue
        key = _index_item_key(item)
        if key is None:
            return None
        keys.append(key)
    return tuple(keys)


cdef dict _tensor_index_ops = {}     # _tensor_index_key -> the op of x[index]


cdef tuple _index_tensors(tuple index):
    return tuple([item for item in index if isinstance(item, TensorBase)])


cdef bint _same_objects(tuple a, tuple b):
    if len(a) != len(b):
        return False
    for i in range(len(a)):
        if a[i] is not b[i]:
            return False
    return True


cdef object _getitem_with_tensors(TensorBase self, tuple index):
    """`self[index]` for an index holding Tensors: the op is memoised by _tensor_index_key
    once the facade has made it from exactly the index's Tensors (no constant it had to
    convert), and issued on self and those Tensors."""
    key = _tensor_index_key(index)
    op = _tensor_index_ops.get(key) if key is not None else None
    cdef tuple tensors = _index_tensors(index)
    if op is None:
        op, operands = _make_getitem(self, index)
        operands = tuple(operands)
        if key is not None and _same_objects(operands, tensors):
            _remember(_tensor_index_ops, key, op)
        tensors = operands
    return apply_infos(<OpDef>op, _checked_infos(op, (self,) + tensors))[0]


def tensor_getitem(TensorBase self, index):
    """`self[index]`, as numpy (ops/indexing.py parses the index)."""
    if isinstance(index, TensorBase):
        return _getitem_with_tensors(self, (index,))
    key = _basic_index_key(index)
    op = _getitem_ops.get(key) if key is not None else None
    if op is not None:
        return _one(<OpDef>op, self)
    if key is None and type(index) is tuple:
        for item in <tuple>index:
            if isinstance(item, TensorBase):
                return _getitem_with_tensors(self, <tuple>index)
    op, operands = _make_getitem(self, index)
    if not operands:
        if key is not None:
            _remember(_getitem_ops, key, op)
        return _one(<OpDef>op, self)
    return apply_infos(<OpDef>op, _checked_infos(op, (self,) + tuple(operands)))[0]


def tensor_setitem(TensorBase self, index, value):
    """`self[index] = value`: a Python number at a basic index is cast to this dtype as a
    constant (as Tensor(value, dtype=) makes it) and written by the memoised op; anything
    else, and a number that does not fit, is the facade's (tensor.py:_setitem)."""
    cdef TensorInfo info = self._info, constant
    key = _basic_index_key(index)
    tp = type(value)
    op = None
    if (key is not None and (tp is float or tp is int or tp is bool) and not info.quantized
            and not _tracing):      # (traced: the value is a constant the trace must see made)
        op = _setitem_ops.get(key)
    if op is not None:
        if _write_in_place(info, <OpDef>op, value):
            return
        try:
            constant = _scalar_info(value, info.dtype, info.device)
        except OverflowError:
            op = None       # the facade raises numpy's own words for it
    if op is None:
        op, operands = _setitem(self, index, value)
        if key is not None and not operands:
            _remember(_setitem_ops, key, op)
        return
    self._set_info_from(_wrap(_channel.dispatch(<OpDef>op, [info, constant])[0]))


cdef bint _write_in_place(TensorInfo info, OpDef op, object number) except -1:
    """`x[basic index] = number` written into x's own buffer, as numpy does, where nothing
    but this one Tensor can see x's old value: no other Tensor shares it (a saved-for-
    backward reference is a Tensor too), no queued op reads it, no recipe, trace, profile or
    gradient recording watches, no view shares its storage or was handed out (numpy(),
    DLPack), and no other Python object holds its array. Otherwise the op makes a new
    value, as always, which copies x: a loop filling a (1000, 1000) tensor row by row
    copied 4 MB a row. The record takes a new handle, as the new value's record would
    have: a TensorWeakRef to the old value finds it gone. False where it does not apply
    or numpy refuses the index; the op then runs and raises its own error."""
    if (_channel._memory_on or _profiling or _tracing or _serving or _grad_hook is not None
            or _deferred or info.tensor_refs != 1 or info.status != PRODUCED
            or info.pending_uses or info.producer is not None or not info.users.empty()
            or not _overwritable(_channel, info, info)):
        return False
    value = info.value
    if Py_REFCNT(value) != 2:          # (info.value and `value` here)
        return False
    try:          # (the number cast as the op's constant is: Tensor(number, dtype=))
        value[op._numpy_items] = _scalar_array(number, info.dtype)
    except (IndexError, TypeError, ValueError, OverflowError):
        return False
    info.op = op
    info.out_index = 0
    info.scope = _current_scope
    _channel._retire_handle(info)
    _channel._add_handle(info)
    return True


cdef object _number(TensorBase x, object kind):
    """float(t), int(t), bool(t): the value of a one-element tensor (waits for it)."""
    cdef TensorInfo info = x._info
    if _tracing:                # (what the facade's size and numpy() reported; the value
        _trace_read(info, READ_VALUE)   # first: an unread one is what a check names)
        _trace_read(info, READ_SHAPE)
    if info.shape is None:
        _channel.wait_produced(info, "shape")
    if _num_elements(info.shape) != 1:
        raise TypeError(f"only a tensor with one element can be converted to "
                        f"{kind.__name__}, got shape {info.shape}")
    return kind(_channel.get_value(info).item())


def tensor_float(TensorBase self):
    return _number(self, float)


def tensor_int(TensorBase self):
    return _number(self, int)


def tensor_bool(TensorBase self):
    return _number(self, bool)
