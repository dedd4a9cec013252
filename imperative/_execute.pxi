# Included by _core.pyx: the executor. Running one command, on the worker or on the
# caller's thread (host compute, async level 0): the elementwise ufunc fast path, a kernel and
# the storing of its results (the one way results are stored: a recomputation takes it too),
# in-place reuse of a dying input's buffer, epilogue planning, and failures as ErrorRecords.
# Under the memory manager, MemoryManager.run_managed wraps the run. Each function takes the
# Channel as `self` (see imperative/_channel.pxi).

from .backend.epilogue import Epilogue     # imports nothing of the package


cdef void _plan_epilogue(Channel self, Command cmd, Command nxt):
    """Let `cmd` (a product) do `nxt`'s work in its kernel (backend/epilogue.py) when `nxt`
    has an epilogue kind (ReLU, ReLU's gradient: the op says so) and reads cmd's one
    output, that output dies at `nxt` (nothing else can read it), and `nxt` can take over
    its buffer. Under the memory manager too: the product's recipe stays the op without
    its epilogue (a recomputation gives the plain product), and the product is pinned
    from its kernel to `nxt` (_epilogue_of), so that no eviction or recomputation can
    replace the buffer that holds `nxt`'s result before `nxt` takes it over."""
    if nxt.kind != CMD_APPLY or nxt.dels is None:
        return
    if len(cmd.outputs) != 1 or len(nxt.outputs) != 1 or not nxt.inputs:
        return
    cdef TensorInfo product = cmd.outputs[0], out = nxt.outputs[0]
    if nxt.inputs[0] is not product or (<OpDef>nxt.op).epilogue_kind is None:
        return
    if out.dtype is not product.dtype or out.shape != product.shape:
        return
    # (its other input: a separate array of the product's own shape)
    if any(info is product or info.shape != product.shape for info in nxt.inputs[1:]):
        return
    if not any(info is product for info in nxt.dels):
        return
    cmd.epilogue = nxt


cdef object _epilogue_of(Channel self, Command cmd):
    """The Epilogue to hand cmd's kernel, or None (then the follower runs by itself).
    The follower is then `prefused`, and cmd's product pinned until the follower ran."""
    cdef Command nxt = cmd.epilogue
    cdef TensorInfo info
    arrays = []
    for info in nxt.inputs[1:]:
        if info.status != PRODUCED:
            return None
        arrays.append(_unpacked_value(info))
    nxt.prefused = True
    (<TensorInfo>cmd.outputs[0]).pins += 1
    return Epilogue(nxt.op, *arrays)


cdef int _execute(Channel self, Command cmd) except -1:
    cdef TensorInfo info
    cdef long long t0
    if cmd.kind == CMD_APPLY:
        t0 = _now_ns() if _profiling else 0
        try:
            _execute_apply(self, cmd)
            if _profiling and t0:    # recording started while it ran: skip it
                _record_exec(t0, cmd)
        finally:
            for info in cmd.inputs:
                info.pending_uses -= 1
            for info in cmd.outputs:
                info.pending_uses -= 1
            if cmd.prefused:         # the product's pin from _epilogue_of, before it dies
                (<TensorInfo>cmd.inputs[0]).pins -= 1
        # after the counts: a dying input must not look held by its own last reader to
        # the memory manager deciding what may go
        _free_dels(self, cmd)
    elif cmd.kind == CMD_DEL:
        info = cmd.target
        info.pending_uses -= 1
        self._delete(info)
    return 0


cdef int _execute_apply(Channel self, Command cmd) except -1:
    """Run one op's kernel (worker, or caller for host compute); never raises
    unless catch_worker_exception is 0."""
    cdef TensorInfo info
    cdef OpDef op = cmd.op
    cdef bint gone = False           # an input dropped or swapped out: restore first
    for info in cmd.inputs:
        if info.status == INVALID:
            for out in cmd.outputs:
                _mark_invalid(self, out, info.error)
            return 0
        if info.status == DROPPED or info.status == SWAPPED:
            gone = True
    try:
        if self._memory_on or gone:
            self.mm.run_managed(cmd)
        else:
            _run_unmanaged(self, cmd)
    except BaseException as exc:
        if not self._opts[OPT_CATCH] and threading.current_thread() is self._thread:
            raise
        rec = ErrorRecord(exc, _describe_failure(cmd, exc))
        for out in cmd.outputs:
            _mark_invalid(self, out, rec)
        self._errors.append(rec)
    return 0


cdef inline int _run_unmanaged(Channel self, Command cmd) except -1:
    """Run an op's kernel and store its results (under the memory manager, its run_managed
    calls this between pinning and unpinning)."""
    if cmd.fast:
        return _run_ufunc(self, cmd)
    return _run_kernel(self, cmd)


cdef void _mark_invalid(Channel self, TensorInfo out, ErrorRecord rec):
    if out.status == PRODUCED:
        self._free_value(out)
    out.status = INVALID
    out.error = rec


cdef void _free_dels(Channel self, Command cmd):
    cdef TensorInfo info
    if cmd.dels is None:
        return
    for info in cmd.dels:
        self._delete(info)
    cmd.dels = None


cdef int _run_ufunc(Channel self, Command cmd) except -1:
    cdef OpDef op = cmd.op
    cdef TensorInfo out = cmd.outputs[0]
    cdef TensorInfo reuse = _written_over(self, cmd)
    cdef list inputs = cmd.inputs
    cdef Py_ssize_t n = len(inputs)
    a = (<TensorInfo>inputs[0]).value
    if reuse is not None:
        target = reuse.value
        if cmd.prefused and reuse is inputs[0]:
            pass                # the product before it wrote this result (its epilogue)
        elif n == 1:
            op.ufunc(a, out=target)
        else:
            op.ufunc(a, (<TensorInfo>inputs[1]).value, out=target)
        _take_over(self, reuse, out, target)
        _gone_to_reader(self, reuse)
        return 0
    self._set_value(out, _ufunc_result(op, inputs, out), None)
    return 0


cdef object _ufunc_result(OpDef op, list inputs, TensorInfo out):
    """The elementwise op's ufunc on its inputs' values, as an array of out's dtype."""
    a = (<TensorInfo>inputs[0]).value
    r = op.ufunc(a) if len(inputs) == 1 else op.ufunc(a, (<TensorInfo>inputs[1]).value)
    if type(r) is not _ndarray or _dtype_of(r) is not out.dtype:
        r = _np_asarray(r, dtype=out.dtype)
    return r


cdef void _take_over(Channel self, TensorInfo dying, TensorInfo out, object value):
    """`out`'s value was written over the dying input's: the storage passes to `out`,
    and the input, whose value is gone, no longer holds it (nothing may take it for a
    value another tensor shares)."""
    self._set_value(out, value, dying.storage)
    self._free_value(dying)
    (<Device>out.device).stats.inplace_reuses += 1


cdef inline void _gone_to_reader(Channel self, TensorInfo dying):
    """A dying input's value became its last reader's output (_take_over). Under the
    memory manager one that can be recomputed is dropped at once, as its deletion right
    after would: until then it looked resident while it held no value, and a walk over a
    long dead chain could cut it there, leaving its reader's recipe a leaf without a value
    (a small DenseNet at 0.3 P, async level 2, failed in backward recomputing the ReLU
    gradient from the convolution's gradient it had been written over)."""
    if self._memory_on and dying.producer is not None:
        self.mm.drop_dead(dying, "written over by its reader")


cdef TensorInfo _written_over(Channel self, Command cmd):
    """The dying input `cmd`'s one output will be written over, or None: an elementwise op
    on the fast path, or an INPLACE_CAPABLE op (which takes `out=`), with a candidate."""
    if len(cmd.outputs) != 1 or not (cmd.fast or (<OpDef>cmd.op).inplace_capable):
        return None
    return _inplace_candidate(self, cmd, cmd.outputs[0])


cdef TensorInfo _inplace_candidate(Channel self, Command cmd, TensorInfo out):
    """A dying input whose storage the output may overwrite; first the product whose
    epilogue wrote this op's result (prefused), if it qualifies."""
    cdef TensorInfo info
    if cmd.dels is None or cmd.outputs is None:
        return None
    if cmd.prefused:
        for info in cmd.dels:
            if info is cmd.inputs[0] and _overwritable(self, info, out):
                return info
    for info in cmd.dels:
        if _overwritable(self, info, out):
            return info
    return None


cdef Py_ssize_t _bytes_to_allocate(Channel self, Command cmd):
    """The bytes `cmd`'s outputs will take when it runs: none for an output written over
    a dying input's storage, as _run_ufunc and _run_kernel will write it (a kernel that
    declines its `out=` after all allocates; the budget then counts one overshoot). Room
    made for it anyway evicted values later ops read back (an attention block's softmax
    gradient, written over its 4 MiB input, evicted the block's gradients: 128
    recomputations a step at 0.5 P where 41 do), and its bytes, never allocated, raised
    the floor that make_room leaves alone."""
    if _written_over(self, cmd) is not None:
        return 0                     # (its one output)
    return _outputs_bytes(cmd.outputs)


cdef bint _overwritable(Channel self, TensorInfo info, TensorInfo out):
    """A dying input's storage can hold `out`: same shape and dtype, contiguous, owning
    its whole storage, and no view of it anywhere."""
    cdef Storage st = info.storage
    if st is None or st.refs != 1 or st.exported or info.dtype is not out.dtype:
        return False
    value = info.value
    if not isinstance(value, _ndarray) or info.shape != out.shape:
        return False
    # (the memory manager last: for a leaf, its answer cuts recipes)
    return (cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>value) and cnp.PyArray_ISWRITEABLE(
        <cnp.ndarray>value) and cnp.PyArray_NBYTES(<cnp.ndarray>value) == st.nbytes
        and (not self._memory_on or self.mm.may_overwrite(info)))


cdef int _run_kernel(Channel self, Command cmd) except -1:
    cdef OpDef op = cmd.op
    cdef TensorInfo info
    arrays = [_unpacked_value(info) for info in cmd.inputs]
    cdef TensorInfo reuse = _written_over(self, cmd)
    if reuse is not None:
        # The op may write into the dying input's buffer (INPLACE_CAPABLE ops take `out=`),
        # where the product before it may have written its result already (its epilogue).
        if cmd.prefused and reuse is cmd.inputs[0]:
            result = reuse.value
        else:
            result = op.kernel(*arrays, out=reuse.value)
        if result is reuse.value:
            _take_over(self, reuse, cmd.outputs[0], result)
            _gone_to_reader(self, reuse)
            return 0
    elif cmd.epilogue is not None:
        epilogue = _epilogue_of(self, cmd)
        result = op.kernel(*arrays) if epilogue is None else op.kernel(*arrays, epilogue=epilogue)
    elif op.keeps_memo and self._memory_on:
        result = _run_keeping_memo(op, arrays, cmd.outputs)
    else:
        result = op.kernel(*arrays)
    _store_results(self, op, cmd.inputs, cmd.outputs, result)
    return 0


cdef int _store_results(Channel self, OpDef op, list inputs, list outputs, object result,
                        bint recomputed=False) except -1:
    """Check a kernel's `result` against what infer declared (count, shapes; a
    value-dependent shape is set now), then make each array its output's value. Nothing is
    stored unless every result fits. The one way results are stored: a first run, and a
    recomputation (`recomputed`: the memory manager's, whose `outputs` holds None for an
    output not to be brought back)."""
    cdef TensorInfo out
    cdef Py_ssize_t i
    if not isinstance(result, tuple) and len(outputs) == 1:
        out = outputs[0]        # (the usual case: one array, or numpy scalar, for one output)
        if type(result) is not _ndarray:
            result = _np_asarray(result)
        if out is None:
            return 0
        if out.shape is not None and not out.packed:
            if not _has_shape(<cnp.ndarray>result, <tuple>out.shape):
                raise RuntimeError(f"kernel of {op!r} produced shape {result.shape}, "
                                   f"infer declared {out.shape}")
            return _store_result(self, op, out, result, inputs, recomputed)
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) != len(outputs):
        raise RuntimeError(f"kernel of {op!r} returned {len(result)} arrays, "
                           f"infer declared {len(outputs)}")
    arrays = []
    for i in range(len(result)):
        out = outputs[i]
        r = result[i]
        if type(r) is not _ndarray:
            r = _np_asarray(r)
        if out is not None and out.shape is not None and r.shape != out.shape:
            raise RuntimeError(f"kernel of {op!r} produced shape {r.shape}, "
                               f"infer declared {out.shape}")
        arrays.append(r)
    _chain_memo_begin()
    try:
        for i in range(len(arrays)):
            out = outputs[i]
            if out is None:
                continue
            r = arrays[i]
            if out.shape is None:       # value-dependent shape: known now
                out.shape = r.shape
                out.numel = _num_elements(out.shape)
                out.size = _nbytes_of(out.numel, out.dtype, out.packed)
            if out.packed:
                r = _pack_4bit(r)
            _store_result(self, op, out, r, inputs, recomputed)
    finally:
        _chain_memo_end()
    return 0


cdef inline int _store_result(Channel self, OpDef op, TensorInfo out, object r, list inputs,
                              bint recomputed) except -1:
    """Make the kernel's array `r` the value of `out`: a view of an input shares that
    input's storage (ops that alias their input), anything else gets its own."""
    cdef Storage shared = _shared_storage(r, inputs) if op.aliases_input else None
    if recomputed and shared is not None and _only_on_the_way(shared, inputs):
        # a view of a base brought back only for it: it takes a copy when that needs at
        # most half the base, so that the base can go again instead of staying behind
        # every such view, one base each. The copy keeps the view's strides exactly (it
        # spans what they span, gaps included): a compact copy would change how later
        # sums and products round.
        layout = _layout_of(r)
        if 2 * layout.nbytes <= shared.nbytes:
            # (room for what the copy takes beyond the view's own bytes, for which the
            # recomputation reserved room already: a strided view's copy spans its gaps
            # too. Room for the whole copy counted those bytes twice, and the high water
            # it raised let later ops pass the floor + one op's outputs: a recomputed
            # split's part in a random training program, 384 bytes against 356)
            if layout.nbytes > out.size:
                self.mm.make_room(layout.nbytes - out.size, out.device)
            return self._adopt(out, _value_from_span(_span_of(r, layout).copy(), layout), None)
    return self._set_value(out, r, shared)


cdef Storage _shared_storage(object array, list inputs, list roots=None):
    """The input Storage that `array` is a view of, or None for a fresh array. `roots`: an
    empty list for a caller asking it of several outputs of the same inputs (run_plan),
    which keeps each input's root array, found at the first call."""
    cdef TensorInfo info
    cdef Py_ssize_t k
    root = _root_array(array)
    if roots is not None and not roots:
        for info in inputs:
            roots.append(None if info.value is None else _root_array(info.value))
    for k in range(len(inputs)):
        info = <TensorInfo>inputs[k]
        if info.value is None:
            continue
        if (_root_array(info.value) if roots is None else roots[k]) is root:
            return info.storage
    return None
