# Included by _core.pyx: the host-compute decisions and the tiny-op path.
#
# An op whose inputs are resident and whose inputs and outputs are small runs on the
# caller's thread (PERF_NOTES: handing a tiny op to the worker costs more than running it,
# and ops under ~1 ms never overlap with the caller because of the GIL). Such an op needs
# no Command at all when it succeeds: no buffer, no sequence number, no site (the site is
# wanted only for an error's message). `_run_tiny` runs it straight from dispatch; when it
# does not apply, or the kernel raises, it returns False and dispatch issues the Command as
# always, whose run (again) reports any error the usual way, at the async level's place.


cdef inline bint _worker_busy_under_budget(Channel self):
    """DTR has a budget and the worker has commands still to run: an op run here now
    would run beside the worker's, each having made room without the other's output,
    and the peak could pass the budget by both (issue 12, rule 1)."""
    return (self._opts[OPT_DTR_AUTO] and self._opts[OPT_DTR_THRESHOLD] > 0
            and self._processed != self._seq)


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


cdef bint _run_tiny(Channel self, OpDef op, list inputs, list outputs, bint fast,
                    Inferred inferred) except -1:
    """Run `op` now, without a Command, when host compute takes it (inputs resident, small,
    or async level 0), no memory manager or profile watches (a trace is told of the op by
    dispatch all the same), and it may run twice (not an RNG op: a kernel that raises here
    runs again on the general path). `inferred` (None on the elementwise fast path) holds
    the op's direct kernel, if it has one, which runs instead of its kernel. True when it
    ran."""
    cdef TensorInfo info
    if self._memory_on or _profiling or not op.recomputable:
        return False
    for info in inputs:
        if info.status != PRODUCED or info.packed:
            return False
    # (counted once: the pool's test takes the same count, a view's source left out)
    cdef Py_ssize_t n = _host_elements(inputs, outputs, op.cost_by_output)
    if self._opts[OPT_ASYNC_LEVEL] != 0 and not (self._opts[OPT_HOST_COMPUTE]
                                                   and _small_enough(op, inputs, outputs, n, True)):
        return False
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
        return False
    finally:
        _leave_pool(previous_allocator)
    return True
