# Included by _core.pyx: the records the channel keeps (imperative/_core.pxd declares their
# fields, with the thread that writes each): Storage, ErrorRecord, TensorInfo, Command and
# the OpDef base, with the helpers that size a record's value and memoise inference.

cdef Py_ssize_t _TILED_COPY_MIN = 4096     # values: below, numpy's copy is as fast


cdef inline object _c_ordered(object array):
    """`array` as the runtime keeps a value it owns: C-contiguous. numpy gives a result the
    layout of its inputs (a Fortran-ordered input makes a Fortran-ordered sum), while a
    result written into a dying input's buffer is C-ordered; without one rule for both, the
    layout, and so the rounding of later products and reductions, would depend on whether
    a buffer was reused, that is on the async level."""
    if isinstance(array, _ndarray):     # (the flag itself, not a flags object per call)
        if cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>array):
            return array
    elif array.flags.c_contiguous:
        return array
    return _c_ordered_copy_of(array)


cdef object _c_ordered_copy_of(object array):
    """A C-contiguous copy: a transposed matrix (or batch of them) of 4-byte values copied in
    tiles (numpy's copy strides across the source for every value: 1.5 ms against 0.1 for
    a 512 x 1024 float32 matrix here, which every elementwise op on a transposed input
    paid), anything else by numpy."""
    if type(array) is _ndarray and cnp.PyArray_SIZE(<cnp.ndarray>array) >= _TILED_COPY_MIN:
        copy = _kernels.swapped_copy(array)
        if copy is not None:
            return copy
    return _np_ascontiguousarray(array)


cdef inline object _dtype_of(object array):
    """`array.dtype` of an ndarray, read from the array (no attribute lookup by name)."""
    return <object>cnp.PyArray_DESCR(<cnp.ndarray>array)


cdef tuple _shape_of(cnp.ndarray array):
    """`array.shape`, made from the array's own dimensions (no attribute lookup by name)."""
    cdef int k, n = cnp.PyArray_NDIM(array)
    cdef tuple shape = PyTuple_New(n)
    cdef object dim         # (an object: the tuple takes the reference made here)
    for k in range(n):
        dim = cnp.PyArray_DIM(array, k)
        Py_INCREF(dim)
        PyTuple_SET_ITEM(shape, k, dim)
    return shape


cdef inline bint _has_shape(cnp.ndarray array, tuple shape):
    """`array.shape == shape`, read from the array's own dimensions (no tuple made)."""
    cdef int k, n = cnp.PyArray_NDIM(array)
    if n != len(shape):
        return False
    for k in range(n):
        if cnp.PyArray_DIM(array, k) != <cnp.npy_intp>shape[k]:
            return False
    return True


cdef inline object _root_array(object array):
    """The array that owns the memory `array` views (itself when it owns its own)."""
    cdef PyObject* base
    while isinstance(array, _ndarray):
        base = cnp.PyArray_BASE(<cnp.ndarray>array)
        if base == NULL or not isinstance(<object>base, _ndarray):
            return array
        array = <object>base
    return array

# --------------------------------------------------------------------------- records

cdef class Storage:
    pass


cdef inline Storage _new_storage(Py_ssize_t nbytes, Device device):
    cdef Storage st = Storage.__new__(Storage)
    st.nbytes = nbytes
    st.device = device
    device.stats.add(nbytes)
    return st


cdef class ErrorRecord:
    def __cinit__(self, exc, str message):
        self.exc = exc
        self.message = message
        self.raised = False


cdef long long _births = 0           # records made so far (TensorInfo.birth)


cdef inline long long _next_birth():
    """The next record's birth number (always with the GIL, which orders them)."""
    global _births
    _births += 1
    return _births


cdef class TensorInfo:
    def __dealloc__(self):
        # A record kept alive only by producers that read it (a leaf whose tensors are
        # gone) still held its value: release the accounting (and any swap file) now.
        cdef Storage st = self.storage
        _unlink_output(self)                # (its producer points to it, borrowed)
        if st is not None:
            st.refs -= 1
            if st.refs == 0:
                (<Device>st.device).stats.allocated -= st.nbytes
        _release_swap_file(self)
        if self.uf_class is not None:       # DTR: its class no longer waits on it
            _leave_evicted_class(self.uf_class, self.cost)

    @property
    def id(self):
        return self.handle & 0xFFFFFFFFLL

    @property
    def generation(self):
        return self.handle >> 32

    def __repr__(self):
        return (f"<TensorInfo {self.handle & 0xFFFFFFFFLL} status={Status(self.status).name} "
                f"shape={self.shape} dtype={self.dtype} device={self.device}>")


cdef inline bint _is_suffix(tuple part, tuple whole):
    """`part` is the trailing dimensions of `whole` (numpy broadcasts it by repeating)."""
    cdef Py_ssize_t n = len(part), m = len(whole)
    return n <= m and (n == 0 or whole[m - n:] == part)


cdef inline TensorInfo _ufunc_result_operand(TensorInfo a, TensorInfo b):
    """For the elementwise host fast path (_host_ufunc): the operand whose shape the
    result of `a op b` takes when they need no promotion, and no broadcasting beyond
    repeating one operand whose shape ends the other's (a Python scalar's 0-d constant, a
    bias beside a batch); None when the fast path does not apply."""
    if b.status != PRODUCED or b.dtype is not a.dtype or b.device is not a.device or b.quantized:
        return None
    if b.shape is a.shape or b.shape == a.shape or b.shape == ():
        return a
    if a.shape is None or b.shape is None:
        return None
    if _is_suffix(b.shape, a.shape):
        return a
    return b if _is_suffix(a.shape, b.shape) else None


cdef object _ufunc_out_dtype(OpDef op, TensorInfo a, TensorInfo b):
    """The output dtype of the elementwise `op` on operands of a's dtype (memoised in
    op._same_dtype_out, as dispatch does), or None where the host fast path does not take
    it: a float-only ufunc on non-float inputs, or a dtype infer rejects."""
    out = op._same_dtype_out.get(a.dtype)
    if out is None and not (op.ufunc_floats_only and a.dtype.kind != "f"):
        try:
            out = op.infer((a,) if b is None else (a, a))[0][1]
        except Exception:
            return None
        op._same_dtype_out[a.dtype] = out
    return out


# Not tracked by the garbage collector: a Command can be in no reference cycle (nothing it
# refers to refers to a Command, and its input and output lists are untracked too,
# Channel.dispatch), and the worker's queue holds thousands of them while Python issues
# tiny ops faster than they run. Tracked, they and their lists made each collection walk
# the whole queue and pushed it into the oldest generation, whose full collections then
# came every 20,000 ops: the collector took 0.9 of a tiny op's 2.2 us, now 0.65 of 1.75.
@cython.no_gc
cdef class Command:
    def __cinit__(self):
        self.dels = None


cdef class OpDef:
    """Subclasses (see imperative.ops) set the class attributes RECOMPUTABLE,
    INPLACE_CAPABLE, ALIASES_INPUT, VALUE_DEPENDENT, COST_BY_OUTPUT (default:
    ALIASES_INPUT), EPILOGUE_CAPABLE and EPILOGUE_KIND (or
    the instance's `epilogue_kind`, where it depends on a parameter) and implement `infer`
    and `kernel`. KEEPS_MEMO: the op also has `kernel_keeping(*arrays)`, which returns
    (kernel's result, memo), and `kernel_from(memo, *arrays)`, which returns the same bits
    with less work; a recorded run keeps the memo with its recipe for recomputations."""

    def __cinit__(self, *args, **kwargs):
        cls = type(self)
        self.recomputable = getattr(cls, "RECOMPUTABLE", True)
        self.inplace_capable = getattr(cls, "INPLACE_CAPABLE", False)
        self.aliases_input = getattr(cls, "ALIASES_INPUT", False)
        self.value_dependent = getattr(cls, "VALUE_DEPENDENT", False)
        self.cost_by_output = getattr(cls, "COST_BY_OUTPUT", self.aliases_input)
        self.epilogue_capable = getattr(cls, "EPILOGUE_CAPABLE", False)
        self.keeps_memo = getattr(cls, "KEEPS_MEMO", False)
        self.epilogue_kind = getattr(cls, "EPILOGUE_KIND", None)
        self.ufunc = None
        self.host_fn = None
        self._same_dtype_out = {}
        self._infer_cache = {}
        self._fastest = {}

    def infer(self, inputs):
        """inputs: tuple of TensorInfo (.shape, .dtype, .device).
        Returns a tuple of (shape, dtype) or (shape, dtype, device) per output."""
        raise NotImplementedError(f"{type(self).__name__}.infer")

    def kernel(self, *arrays):
        """numpy arrays in, an array or a tuple of arrays out."""
        raise NotImplementedError(f"{type(self).__name__}.kernel")

    def direct_kernel(self, inputs):
        """For inputs of these descriptions (TensorInfo: .shape, .dtype), a C-level callable
        and a tuple of trailing arguments, `(fn, tail)`, such that `fn(*arrays, *tail)`
        returns what `kernel(*arrays)` would, bit for bit; or None (the default: the
        kernel runs). Asked once per op and descriptions; the tiny-op path then calls `fn`
        with no Python frame in between (issue 16)."""
        return None


cdef inline Py_ssize_t _num_elements(tuple shape):
    cdef Py_ssize_t n = 1
    for s in shape:
        n *= <Py_ssize_t>s
    return n


# 4-bit quantized values are stored packed two per byte; kernels see them unpacked.
cdef object _is_4bit = _dtypes.is_4bit
cdef object _pack_4bit = _dtypes.pack_4bit
cdef object _unpack_4bit = _dtypes.unpack_4bit


cdef inline bint _has_metadata(object dtype):
    """`dtype.metadata is not None` (quantized dtypes carry it), read from the descriptor:
    every op's outputs ask, and the attribute costs a lookup by name."""
    if cnp.PyArray_DescrCheck(dtype):
        return cnp.PyDataType_METADATA(<cnp.dtype>dtype) != NULL
    return dtype.metadata is not None


cdef inline bint _dtype_is_packed(object dtype):
    return _has_metadata(dtype) and _is_4bit(dtype)


cdef inline Py_ssize_t _nbytes_of(Py_ssize_t numel, object dtype, bint packed):
    """Bytes of storage for `numel` elements (4-bit values: two per byte)."""
    if packed:
        return (numel + 1) // 2
    return numel * (<cnp.dtype>dtype).itemsize


cdef inline object _unpacked_value(TensorInfo info):
    """The value as kernels and users see it (4-bit storage unpacked)."""
    if info.packed:
        return _unpack_4bit(info.value, info.shape, info.dtype)
    return info.value


cdef int _check_held(list inputs, object op) except -1:
    """[memory manager] Every input of `op`, about to run or be recomputed, holds a value.
    One that does not (a race, or a rule that let it go too early) is named with its state
    here, where the kernel would fail on None with no clue to why: seen once in hundreds of
    runs, a Glow's weight gradient at async level 2 ("'NoneType' object has no attribute
    'dtype'")."""
    cdef TensorInfo info
    cdef Py_ssize_t k
    for k in range(len(inputs)):
        info = inputs[k]
        if info.value is None:
            raise RuntimeError(
                f"internal error: input {k} of {op!r}, about to run, holds no value: "
                f"{info!r}, pins {info.pins}, tensor_refs {info.tensor_refs}, pending_uses "
                f"{info.pending_uses}, {'a leaf' if info.producer is None else 'recomputable'}"
                f", storage {'gone' if info.storage is None else 'held'}")
    return 0


cdef object _descriptions(list inputs):
    """The inputs' shapes, dtypes and devices, as a key: all an op's inference (and, nearly,
    its running time) depends on."""
    cdef TensorInfo info
    if len(inputs) == 1:        # (most ops: the key without a list)
        info = inputs[0]
        return (info.shape, info.dtype, info.device)
    key = []
    for info in inputs:
        key.append(info.shape)
        key.append(info.dtype)
        key.append(info.device)
    return tuple(key)


# Tests only (_core.set_cost_jitter): every measured run time is multiplied by a factor drawn
# log-uniformly from [e^-jitter, e^jitter], so that a test meets the decisions of other
# machines' timings, not only this one's. Results never depend on costs; the memory
# manager's rules (peak bounds, no storms) must hold whatever the costs.
cdef double _cost_jitter = 0.0
cdef unsigned long long _jitter_state = 1


def set_cost_jitter(double jitter, unsigned long long seed=1):
    """[tests] Jitter every measured run time by a factor in [e^-jitter, e^jitter] (0: off),
    drawn from a generator seeded with `seed`."""
    global _cost_jitter, _jitter_state
    if not jitter >= 0:
        raise ValueError(f"set_cost_jitter: jitter must be >= 0, got {jitter!r}")
    _cost_jitter = jitter
    _jitter_state = seed * 2654435761 + 1          # (xorshift needs a state other than 0)


cdef double _jittered(double seconds):
    global _jitter_state
    _jitter_state ^= _jitter_state << 13
    _jitter_state ^= _jitter_state >> 7
    _jitter_state ^= _jitter_state << 17
    cdef double uniform = (_jitter_state >> 11) * (1.0 / 9007199254740992.0)    # [0, 1)
    return seconds * exp(_cost_jitter * (2.0 * uniform - 1.0))


cdef double _fastest_run(OpDef op, list inputs, double seconds):
    """The least time `op` took on inputs like these, this run included: a recompute cost
    that a busy machine's preemptions (which only ever add time) do not make up. Costed
    by one run each, the same gate of each step of an unrolled GRU looked 0.5x-5x as dear
    as its neighbours on a loaded machine, and evictions followed the noise."""
    cdef tuple key = op._fastest_key
    cdef double fastest_s
    if key is None or not _described_by(key, inputs):
        # (an op runs mostly on inputs described as last time, by the very same shape
        # tuples: found so without making a key and hashing it, 1% of a small LSTM's step
        # under recording)
        key = <tuple>_descriptions(inputs)
        fastest = op._fastest.get(key)
        op._fastest_key = key
        op._fastest_s = <double>fastest if fastest is not None else INFINITY
    fastest_s = op._fastest_s
    if seconds < fastest_s:
        fastest_s = op._fastest_s = seconds
        if len(op._fastest) >= 256:
            op._fastest.clear()
        op._fastest[key] = seconds     # (may run a key's __eq__: read nothing of op after)
    if _cost_jitter > 0:
        return _jittered(fastest_s)    # (the fastest runs kept stay the measured ones)
    return fastest_s


@cython.final
cdef class Inferred:
    """What dispatch memoises per op and input descriptions: infer's output descriptions
    and, asked of the op once, its direct kernel for such inputs (OpDef.direct_kernel)."""
    cdef object descs
    cdef tuple key                      # the input descriptions it was found for
    cdef object direct_fn               # None: the op's own kernel runs
    cdef tuple direct_tail
    cdef bint asked


cdef Inferred _inferred(object descs, bint ask):
    cdef Inferred found = Inferred.__new__(Inferred)
    found.descs = descs
    found.asked = not ask
    return found


cdef Inferred _infer_cached(OpDef op, list inputs):
    """op.infer, memoised on the inputs' descriptions (infer never looks at values)."""
    cdef TensorInfo info
    if op.value_dependent:
        return _inferred(op.infer(tuple(inputs)), False)
    for info in inputs:
        if info.quantized:      # numpy ignores metadata in == and hash
            return _inferred(op.infer(tuple(inputs)), False)
    last = op._last_inferred
    if last is not None and _described_by((<Inferred>last).key, inputs):
        return <Inferred>last
    key = _descriptions(inputs)
    found = op._infer_cache.get(key)
    if found is None:
        found = _inferred(op.infer(tuple(inputs)), True)
        (<Inferred>found).key = key
        if len(op._infer_cache) >= 256:
            op._infer_cache.clear()
        op._infer_cache[key] = found
    op._last_inferred = found       # (one store: a reader sees a key and its Inferred)
    return <Inferred>found


cdef inline bint _described_by(tuple key, list inputs):
    """`key == _descriptions(inputs)`, by identity (no key made, nothing hashed): shapes
    are the tuples inference made, dtypes and devices singletons, so an op issued again on
    like inputs (a chain's next step, a training loop's next iteration) mostly matches."""
    cdef Py_ssize_t n = len(inputs), i
    cdef TensorInfo info
    if len(key) != 3 * n:
        return False
    for i in range(n):
        info = inputs[i]
        if (key[3 * i] is not info.shape or key[3 * i + 1] is not info.dtype
                or key[3 * i + 2] is not info.device):
            return False
    return True


cdef class ArraysAsOne


cdef object _direct_result(OpDef op, Inferred inferred, list inputs):
    """Run the op's direct kernel for inputs of these descriptions, asking the op for it
    the first time; returns the kernel's result, or _NO_DIRECT_KERNEL where the op has
    none (it then runs its kernel)."""
    if not inferred.asked:
        inferred.asked = True
        found = op.direct_kernel(tuple(inputs))
        if found is not None:
            inferred.direct_fn, inferred.direct_tail = found
    fn = inferred.direct_fn
    if fn is None:
        return _NO_DIRECT_KERNEL
    # the values in one tuple made here (`fn(*values, *tail)` made a list and two tuples
    # more, a sixth of a tiny view's dispatch), and a second only for trailing arguments
    cdef tuple tail = inferred.direct_tail
    cdef tuple values = _values_tuple(inputs)
    if type(fn) is ArraysAsOne:     # (its function called on the values' tuple at once)
        return (<ArraysAsOne>fn).fn(values, *(<ArraysAsOne>fn).tail)
    return fn(*values) if not tail else fn(*(values + tail))


cdef tuple _values_tuple(list inputs):
    cdef Py_ssize_t n = len(inputs), i
    cdef tuple values = PyTuple_New(n)
    for i in range(n):
        value = (<TensorInfo>inputs[i]).value
        Py_INCREF(value)
        PyTuple_SET_ITEM(values, i, value)
    return values


cdef object _NO_DIRECT_KERNEL = object()


@cython.final
cdef class ArraysAsOne:
    """A direct kernel (OpDef.direct_kernel) for a numpy function that takes its arrays as
    one sequence: `ArraysAsOne(np.concatenate, axis)(a, b)` is `np.concatenate((a, b), axis)`."""
    cdef object fn
    cdef tuple tail

    def __init__(self, fn, *tail):
        self.fn = fn
        self.tail = tail

    def __call__(self, *arrays):
        return self.fn(arrays, *self.tail)


cdef class ProductOfTransposed:
    """A direct kernel for MatrixMul with transposed operands: numpy.matmul of the inputs,
    those asked for with their last two axes swapped (a view, as MatrixMul.kernel makes;
    numpy ignores the transpose of a 1-D operand). A Linear layer's x @ w.T and the two
    products of its gradients."""
    cdef bint transpose_a, transpose_b

    def __init__(self, bint transpose_a, bint transpose_b):
        self.transpose_a, self.transpose_b = transpose_a, transpose_b

    def __call__(self, a, b):
        if self.transpose_a:
            a = swap_last_axes(a)
        if self.transpose_b:
            b = swap_last_axes(b)
        return matmul_apart(a, b)


cdef object _np_matmul = np.matmul
cdef object _ndarray_astype = np.ndarray.astype    # (TypeCvt's direct kernel)


@cython.final
cdef class CopyWithAssigned:
    """A direct kernel for SetSubtensor at a basic index (no index arrays): a copy of x
    with x[index] = value, the value reshaped to `value_shape` first unless it is None
    (the kernel's steps, without its Python frames: `t[1] = 0.5` on a tiny tensor)."""
    cdef object index
    cdef object value_shape

    def __init__(self, index, value_shape):
        self.index, self.value_shape = index, value_shape

    def __call__(self, x, value):
        result = x.copy()
        result[self.index] = value if self.value_shape is None else value.reshape(self.value_shape)
        return result


cpdef object matmul_apart(object a, object b):
    """numpy.matmul(a, b) with the bits it gives operands in buffers of their own. numpy
    takes a matrix times its own transpose (one buffer read both ways) as a symmetric
    update, whose diagonal rounds otherwise than the general product's; a recomputation
    that brought one operand back in a buffer of its own then gave other bits than the
    run it repeats (x @ x.T of a kept slice: 413.46198 against 413.4619; fuzz seed
    1304609). Where the two share their first element, b is copied, its layout kept.
    An operand BLAS cannot take is copied first (_blas_ready)."""
    a, b = _blas_ready(a), _blas_ready(b)
    if (type(a) is _ndarray and type(b) is _ndarray and cnp.PyArray_NDIM(<cnp.ndarray>a) >= 2
            and cnp.PyArray_NDIM(<cnp.ndarray>b) >= 2
            and cnp.PyArray_DATA(<cnp.ndarray>a) == cnp.PyArray_DATA(<cnp.ndarray>b)):
        b = b.copy(order="K")
    return _np_matmul(a, b)


cdef object _np_broadcast_to = np.broadcast_to


cdef object _blas_ready(object x):
    """`x`, or a copy of it where numpy's matmul would not hand it to BLAS: a float vector
    whose stride is 0 (broadcast) or negative (flipped), a float matrix neither of whose
    last two axes is unit-stride over whole rows or columns (broadcast, every other
    column, overlapping windows). For those numpy sums each product term by term, in
    order: a (4800,) broadcast vector's dot with another was off by 1.5e-5 relative, at
    100,000 terms by 9e-4, where the same values in buffers were within 1e-7 (and were
    summed 3-4x faster); tools/fuzz_torch.py --seed 5901 found it as a second-order
    gradient 3.4e-5 from PyTorch's. Broadcast batch axes stay broadcast (one copy of
    each distinct matrix)."""
    if type(x) is not _ndarray:
        return x
    cdef cnp.ndarray a = <cnp.ndarray>x
    cdef int nd = cnp.PyArray_NDIM(a)
    cdef int typenum = cnp.PyArray_TYPE(a)
    if nd == 0 or cnp.PyArray_SIZE(a) == 0 or (typenum != cnp.NPY_FLOAT
                                                and typenum != cnp.NPY_DOUBLE):
        return x
    cdef Py_ssize_t item = cnp.PyArray_ITEMSIZE(a)
    cdef cnp.npy_intp* shape = cnp.PyArray_DIMS(a)
    cdef cnp.npy_intp* strides = cnp.PyArray_STRIDES(a)
    cdef Py_ssize_t rows, cols, row_stride, col_stride
    if nd == 1:
        if strides[0] > 0 or shape[0] == 1:
            return x
    else:
        rows, cols = shape[nd - 2], shape[nd - 1]
        row_stride, col_stride = strides[nd - 2], strides[nd - 1]
        # whole rows, unit-stride and apart (C-like); or whole columns so (F-like)
        if (col_stride == item or cols == 1) and (rows == 1 or row_stride >= item * cols):
            return x
        if (row_stride == item or rows == 1) and (cols == 1 or col_stride >= item * rows):
            return x
    cdef list first_of_broadcast = [slice(None)] * nd
    cdef bint batch_broadcast = False
    cdef int k
    for k in range(nd - 2):
        if strides[k] == 0 and shape[k] > 1:
            first_of_broadcast[k] = slice(0, 1)
            batch_broadcast = True
    if not batch_broadcast:
        return _np_ascontiguousarray(x)
    return _np_broadcast_to(_np_ascontiguousarray(x[tuple(first_of_broadcast)]), x.shape)


cpdef object swap_last_axes(cnp.ndarray x):
    """x with its last two axes swapped (a view; a 0-d or 1-d array as it is): what
    MatrixMul's kernel and its direct form (ProductOfTransposed) take for a transposed
    operand."""
    cdef int ndim = cnp.PyArray_NDIM(x)
    if ndim < 2:
        return x
    return x.T if ndim == 2 else x.swapaxes(-1, -2)


cdef inline bint _contains(list infos, object info):
    for x in infos:
        if x is info:
            return True
    return False


cdef inline void _pass_reads(TensorInfo info, long long running):
    """Forget the queued reads of `info` up to the op running now (when it read it)."""
    cdef size_t n = info.queued_reads.size()
    while info.queued_reads_from < n and info.queued_reads[info.queued_reads_from] <= running:
        info.queued_reads_from += 1
    if n and info.queued_reads_from == n:     # all read: start the array over
        info.queued_reads.clear()
        info.queued_reads_from = 0
