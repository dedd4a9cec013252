# Included by _core.pyx: the host-compute decisions, the operators' host fast paths
# (_host_ufunc, _host_cast, and _tensor_base.pxi's _host_matmul through _host_run) and the
# tiny-op path. Functions that take the Channel as `self`. Under the memory manager both
# paths record the op's recipe and do run_managed's duties around the kernel.
#
# An op whose inputs are resident and whose inputs and outputs are small runs on the
# caller's thread (PERF_NOTES: handing a tiny op to the worker costs more than running it,
# and ops under ~1 ms never overlap with the caller because of the GIL). Such an op needs
# no Command at all when it succeeds: no buffer, no sequence number, no site (the site is
# wanted only for an error's message). `_run_tiny` runs it straight from dispatch; when it
# does not apply, or the kernel raises, it returns False and dispatch issues the Command as
# always, whose run (again) reports any error the usual way, at the async level's place.
#
# Under a budget such an op runs beside the worker's only where both fit the budget
# (MemoryManager.reserve holds a running kernel's room); a worker that must evict below
# that waits for it (_waited_for_ops_beside).

from posix.unistd cimport usleep


cdef inline bint _beside_the_worker_over_budget(Channel self, Py_ssize_t needed,
                                                Device device):
    """DTR has a budget, the worker has commands still to run, and an op making `needed`
    bytes here now would have to evict to hold the budget: it runs on the worker after
    them instead, so that no two ops evict for room at once (issue 12, rule 1: each op
    makes room for its own outputs only). Room a running kernel holds is counted
    (MemoryManager.reserve), so an op that fits beside it runs here, as it would without
    DTR. Queued whenever the worker was busy, a dropout MLP's small ops waited on every
    product before them: its steps took 1.19x with recipes recorded, 1.02x now. The
    budget itself, not the high water make_room leaves alone above it: two ops over the
    budget at once would pass it by both their outputs."""
    if not (self._opts[OPT_DTR_AUTO] and self._opts[OPT_DTR_THRESHOLD] > 0
            and self._processed != self._seq):
        return False
    if device is None:
        device = self.default_device
    return device.stats.allocated + self.mm.reserved + needed > self.mm.opts.budget


# An op run beside a busy worker makes its values before the worker has run the ops issued
# earlier, and the deletions queued behind those: a value so made exists from now until the
# queued op that reads it runs, however far behind the worker is. An mLSTM's backward pass
# made each time step's (8, 32, 8, 16) slice gradient here (zeros, then a setitem) while
# the worker was a few hundred ops behind, and the sums that read them were queued: its
# step peaked at 37.7 MiB against 11.7 at async level 0 (and under a budget of 0.5 P,
# those values took the worker's room, which it made by evicting: 1,385 recomputations of
# values already brought back, a step). Such values are allowed a small share of memory
# (_ahead_fits).
cdef Py_ssize_t _AHEAD_MIN_BYTES = 1 << 20    # ... or this much, for small programs


cdef inline bint _ahead_of_worker(Channel self):
    """Whether an op run now on the caller's thread runs ahead of the worker: commands wait
    for it, queued or still in the caller's buffer. When none do, what was made ahead is
    the program's own by now: the count starts afresh (a new epoch)."""
    if self._processed != self._seq or len(self._buffer) != 0:
        return True
    if self._ahead_bytes:
        self._ahead_epoch += 1
        self._ahead_bytes = 0
    return False


cdef inline bint _ahead_fits(Channel self, Py_ssize_t needed, Device device):
    """Whether `needed` more bytes made ahead of the worker keep the storages made so and
    still held within a sixteenth of the bytes allocated on `device`, or _AHEAD_MIN_BYTES."""
    if device is None:
        device = self.default_device
    return self._ahead_bytes + needed <= max(_AHEAD_MIN_BYTES, device.stats.allocated >> 4)


cdef inline bint _room_beside(Channel self, Py_ssize_t needed, Device device, bint ahead):
    """Whether an op making `needed` bytes on `device` may run now on the caller's thread
    (`ahead`: beside the worker, which has work): _ahead_fits, and under a budget not
    _beside_the_worker_over_budget. The one rule of _submit (_may_run_beside), _run_tiny
    and _host_run."""
    return (not ahead or _ahead_fits(self, needed, device)) and not (
        self._memory_on and _beside_the_worker_over_budget(self, needed, device))


cdef inline bint _may_run_beside(Channel self, list outputs, bint ahead):
    """_room_beside for an op making `outputs`, whose bytes are counted only where the
    rule asks."""
    if not (ahead or self._memory_on):
        return True
    return _room_beside(self, _outputs_bytes(outputs),
                        (<TensorInfo>outputs[0]).device if outputs else None, ahead)


cdef void _count_made_ahead(Channel self, list inputs, list outputs):
    """An op ran beside the busy worker: the storages it made (not a view's, which is an
    input's) count as made ahead until freed (Channel._free_value) or the worker is idle."""
    cdef TensorInfo info, i
    cdef Storage st
    cdef bint fresh
    for info in outputs:
        st = info.storage
        if st is None or st.ahead_epoch == self._ahead_epoch:
            continue
        fresh = True
        for i in inputs:
            if i.storage is st:
                fresh = False
                break
        if fresh:
            st.ahead_epoch = self._ahead_epoch
            self._ahead_bytes += st.nbytes


cdef inline Py_ssize_t _host_elements(list inputs, list outputs, bint skip_first):
    """The elements of an op's inputs and outputs together, or -1 where an output's shape
    is not known (a value-dependent one). With skip_first, the first input counts for
    nothing: that of an op that reads only what its outputs hold (a view, a gather:
    op.cost_by_output), a few rows picked from a large table being a small op."""
    cdef TensorInfo info
    cdef Py_ssize_t n = 0, i
    for info in outputs:
        if info.shape is None:
            return -1
        n += info.numel
    for i in range(1 if skip_first else 0, len(inputs)):
        n += (<TensorInfo>inputs[i]).numel
    return n


cdef dict _flops_estimators = {}      # op class -> its estimate_flops function, or None


cdef object _flops_estimator(OpDef op):
    """The op class's `estimate_flops(op, in_shapes, out_shapes)`, or None: looked up once
    per class. (getattr on an op without one raised and formatted an AttributeError each
    time: 2% of a small LSTM's step with recording on, where every op asks.)"""
    cls = type(op)
    try:
        return _flops_estimators[cls]
    except KeyError:
        found = getattr(cls, "estimate_flops", None)
        _flops_estimators[cls] = found
        return found


cdef double _op_flops(OpDef op, list inputs, list outputs):
    """The work of a product or convolution (ops that estimate it; 0 for the others)."""
    cdef TensorInfo info
    estimate = _flops_estimator(op)
    if estimate is None:
        return 0
    for info in outputs:
        if info.shape is None:
            return 0
    return estimate(op, [info.shape for info in inputs], [info.shape for info in outputs])


cdef inline bint _small_enough(OpDef op, list inputs, list outputs, Py_ssize_t n,
                               bint medium):
    """Host compute takes an op of `n` elements (as _host_elements counts them): at most
    _host_max_elements, or, with `medium`, at most _host_medium_elements and no product or
    convolution of _HOST_MAX_FLOPS or more."""
    if n < 0:
        return False
    return n <= _host_max_elements or (medium and n <= _host_medium_elements
                                       and _op_flops(op, inputs, outputs) < _HOST_MAX_FLOPS)


# Host compute of an op at least this large makes its arrays with the worker's caching
# allocator (_pool.c, the size of its smallest pooled block in float32): numpy's own hands
# a large block's pages back when it is freed and faults them in afresh for the next, which
# made a small CNN's step 1.6x slower when its 128K-element convolutions ran here.
cdef Py_ssize_t _POOLED_ELEMENTS = 65536


cdef inline object _enter_pool(Py_ssize_t elements):
    """For an op of `elements` (inputs and outputs): the allocator to give back to
    _kernels.pool_leave, or None where the op is small (a tiny op pays nothing for this)."""
    if elements < _POOLED_ELEMENTS:
        return None
    return _kernels.pool_enter()


cdef inline int _leave_pool(object previous) except -1:
    """Give back what _enter_pool returned (nothing for None)."""
    if previous is not None:
        _kernels.pool_leave(previous)
    return 0


cdef TensorInfo _host_ufunc(Channel self, OpDef op, TensorInfo a, TensorInfo b):
    """The fast path of elementwise operators: equal shapes (or one 0-d operand, a Python
    scalar's constant) and dtypes, resident inputs and a small size (any size at async
    level 0) run now on the caller's thread. Returns None when it does not apply or the
    kernel raised; the general path then runs the op (again) and reports any error. A
    one-argument op that is no ufunc runs its `host_fn` (its kernel) the same way."""
    cdef long long t0 = _now_ns() if _profiling else 0
    if not _host_ready(self, a):
        return None
    fn = op.ufunc if op.ufunc is not None else op.host_fn
    if fn is None or (b is not None and op.ufunc is None):
        return None
    cdef TensorInfo big = a if b is None else _ufunc_result_operand(a, b)
    out_dtype = None if big is None else _ufunc_out_dtype(op, a, b)
    if out_dtype is None:
        return None
    cdef Py_ssize_t elements = big.numel * (2 if b is None else 3)
    if not _host_small(self, elements):
        return None
    return _host_run(self, op, a, b, fn, None if b is None else b.value, big.shape,
                     out_dtype, elements, t0)


cdef TensorInfo _host_cast(Channel self, OpDef op, TensorInfo a, object dtype):
    """`x.astype(dtype)` (op: its TypeCvt) as host_ufunc runs a one-argument op, by the
    op's direct kernel, ndarray.astype; None where that does not apply."""
    cdef long long t0 = _now_ns() if _profiling else 0
    cdef Py_ssize_t elements = 2 * a.numel
    if _has_metadata(dtype) or not (_host_ready(self, a) and _host_small(self, elements)):
        return None
    return _host_run(self, op, a, None, _ndarray_astype, dtype, a.shape, dtype, elements, t0)


cdef bint _host_ready(Channel self, TensorInfo a):
    """Whether an op on `a` may run now on the caller's thread: nothing queued or
    failed, `a` resident and plain, no serving replay watching (the memory manager's
    conditions are _host_run's)."""
    return not (self._state != 0 or a.status != PRODUCED or a.quantized or _serving)


cdef bint _host_small(Channel self, Py_ssize_t elements):
    """Whether an op touching `elements` (inputs and output) is small enough for the
    caller's thread (at async level 0, any size is)."""
    return self._opts[OPT_ASYNC_LEVEL] == 0 or elements <= (
        _host_max_elements if self._opts[OPT_HOST_COMPUTE] else -1)


cdef TensorInfo _host_run(Channel self, OpDef op, TensorInfo a, TensorInfo b, object fn,
                          object second, tuple shape, object out_dtype,
                          Py_ssize_t elements, long long t0):
    """`fn(a.value)`, or `fn(a.value, second)`, run now on the caller's thread, and its
    result's record, C-ordered in `out_dtype`, profiled and reported to the gradient
    and trace recorders as the general path reports an op; None where fn raised.
    Under the memory manager as _run_tiny runs an op: the result's recipe recorded,
    run_managed's duties done around fn (None where the general path must run it)."""
    cdef bint managed = self._memory_on
    cdef bint ahead = _ahead_of_worker(self)
    cdef list ins = None
    cdef long long start = 0
    cdef Py_ssize_t reserved = 0, needed = 0
    if ahead or managed:
        needed = _nbytes_of(_num_elements(shape), out_dtype, False)
        if not _room_beside(self, needed, a.device, ahead):
            return None
    if managed:
        if (not op.recomputable or op.keeps_memo
                or (b is not None and b.status != PRODUCED)):
            return None
        ins = [a] if b is None else [a, b]
        reserved = self.mm.will_run_here(ins, needed, a.device)
        start = _now_ns()
    previous_allocator = _enter_pool(elements)
    try:
        r = fn(a.value) if second is None else fn(a.value, second)
    except Exception:
        if managed:
            self.mm.ran_here(op, ins, None, reserved, -1)
        return None
    finally:
        _leave_pool(previous_allocator)
    cdef TensorInfo info = None
    cdef Storage st
    cdef list outs = None
    try:
        if type(r) is not _ndarray or _dtype_of(r) is not out_dtype:
            r = _np_asarray(r, dtype=out_dtype)
        r = _c_ordered(r)
        info = self.new_info(shape, out_dtype, a.device, False)
        info.op = op
        info.scope = _current_scope
        if managed:
            self.mm.on_dispatch(op, ins, [info])   # (before the value: on_produced reads it)
            self._set_value(info, r, None)
            outs = [info]
        else:
            st = _new_storage(info.size, info.device)
            st.refs = 1
            info.storage = st
            info.value = r
            info.status = PRODUCED
    finally:
        if managed:           # (nothing pinned or reserved stays after an error)
            self.mm.ran_here(op, ins, outs, reserved,
                             -1 if outs is None else _now_ns() - start)
    if ahead:
        _count_made_ahead(self, [a] if b is None else [a, b], [info])
    if _profiling and t0:
        _record_host_op(t0, op, a, b, info)
    if _grad_hook is not None or _tracing:
        if ins is None:
            ins = [a] if b is None else [a, b]
        if _grad_hook is not None:
            _grad_hook(op, ins, [info])
        if _tracing: _trace_op(op, ins, [info])
    return info


cdef bint _waited_for_ops_beside(MemoryManager mm):
    """make_room cannot have its room while a caller's op beside the worker holds some:
    wait (the GIL let go) until those have stored their values; True when they have (then
    make room as usual). Counted as allocated, their bytes passed the budget by theirs at
    the moments only evicting down to the floor was left (issue 12, rule 1: a
    gradient-accumulating MLP at 0.7 P, async level 2, 2 runs in 40)."""
    cdef int waits = 0
    while mm.reserved_beside > 0 and waits < 100000:   # (at most about a second)
        with nogil:
            usleep(10)
        waits += 1
    return mm.reserved_beside == 0


cdef Py_ssize_t _outputs_bytes(list outputs):
    cdef TensorInfo info
    cdef Py_ssize_t total = 0
    for info in outputs:
        total += info.size
    return total


cdef bint _run_tiny(Channel self, OpDef op, list inputs, list outputs, bint fast,
                    Inferred inferred) except -1:
    """Run `op` now, without a Command, when host compute takes it (inputs resident, small,
    or async level 0), no profile watches (a trace is told of the op by dispatch all the
    same), and it may run twice (not an RNG op: a kernel that raises here runs again on the
    general path). `inferred` (None on the elementwise fast path) holds the op's direct
    kernel, if it has one, which runs instead of its kernel. True when it ran.

    Under the memory manager too (its recipe was recorded at dispatch), with run_managed's
    duties done around the kernel (MemoryManager.will_run_here, ran_here) and _submit's
    limits: no medium ops (on the worker, a dying input's Del folds into its reader, which
    may write in place), nothing beside a busy worker that would pass the budget. A gather
    of a few rows from a large table runs here as without it (an exception kept from before
    the tiny path, for no reason found: a DeepFM's recording cost, 1.09-1.10x of its step
    with the lookups on the caller or the worker, does not come from them). A Command
    made, queued and run for each tiny op cost a small model with recording on a third
    more step time (Reptile's inner loops: 41.6 against 56.7 ms, with a budget never
    reached)."""
    cdef TensorInfo info
    cdef bint managed = self._memory_on
    cdef long long t0 = 0
    cdef Py_ssize_t reserved = 0, needed = 0
    cdef Device device = None
    cdef bint ahead = _ahead_of_worker(self)
    if _profiling or not op.recomputable:
        return False
    if ahead or managed:
        needed = _outputs_bytes(outputs)
        device = (<TensorInfo>outputs[0]).device if outputs else None
        if not _room_beside(self, needed, device, ahead) or (managed and op.keeps_memo):
            return False
    for info in inputs:
        if info.status != PRODUCED or info.packed:
            return False
    # (counted once: the pool's test takes the same count, a view's source left out)
    cdef Py_ssize_t n = _host_elements(inputs, outputs, op.cost_by_output)
    if self._opts[OPT_ASYNC_LEVEL] != 0 and not (self._opts[OPT_HOST_COMPUTE]
                                                   and _small_enough(op, inputs, outputs, n,
                                                                     not managed)):
        return False
    if managed:
        reserved = self.mm.will_run_here(inputs, needed, device)
        t0 = _now_ns()
    previous_allocator = _enter_pool(n)
    try:
        if fast:
            self._set_value(outputs[0], _ufunc_result(op, inputs, outputs[0]), None)
        else:
            result = _direct_result(op, inferred, inputs)
            if result is _NO_DIRECT_KERNEL:
                result = (op.kernel((<TensorInfo>inputs[0]).value) if len(inputs) == 1
                          else op.kernel(*[(<TensorInfo>info).value for info in inputs]))
            _store_results(self, op, inputs, outputs, result)
    except Exception:
        for info in outputs:        # (results are checked before any is stored)
            if info.status == PRODUCED:
                self._free_value(info)
                info.status = ALLOCATED
        if managed:
            self.mm.ran_here(op, inputs, outputs, reserved, -1)
        return False
    finally:
        _leave_pool(previous_allocator)
    if managed:
        self.mm.ran_here(op, inputs, outputs, reserved, _now_ns() - t0)
    if ahead:
        _count_made_ahead(self, inputs, outputs)
    return True
