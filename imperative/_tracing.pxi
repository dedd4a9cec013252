# Included by _core.pyx: the hooks of imp.jit.trace (API.md section 9). While a trace records
# or checks a call (imperative/jit/), the core reports to it: every op issued (after its
# dispatch, as the grad hook sees it), every tensor made from host data (`put`: a constant of
# the traced program), every rebinding of a Tensor object to a new value (`_set_info_from`:
# an effect on a tensor that outlives the call), and every read Python makes of a tensor: its
# shape, its value (numpy(), item(), float(), printing) or its raw data (`_value()`).
#
# The host paths (_host_ufunc, the tiny-op path) report their ops as dispatch does, so
# a traced call runs the kernels of its eager run, as fast. Off, each site costs one test of
# the C flag `_tracing`. A recording call's hooks go to a RecordLog's C methods
# (_recording.pxi), others' (a symbolic=False check) to the tracer's Python methods. On,
# only the thread that started the trace reports: a replay running on another thread at the
# same time is not part of it.

cdef bint _tracing = 0
cdef unsigned long _tracing_thread = 0
cdef object _tracer = None     # the active recorder/checker (imperative/jit/recorder.py)
cdef RecordLog _log = None     # the same when it records: its methods are called in C
cdef bint _serving = 0         # the tracer checks a call and serves its ops' outputs from
                               # the compiled plan (Checker.serve): ops are not run anew


def start_tracing(tracer):
    """Route the trace hooks of this thread to `tracer` (methods `op(op, inputs, outputs)`,
    `put(info)`, `rebind(tensor, old_info)`, `read(info, kind)`). One trace at a time:
    a second (nested, or on another thread) raises RuntimeError."""
    global _tracing, _tracing_thread, _tracer, _log
    if _tracing:
        same = _tracing_thread == PyThread_get_thread_ident()
        raise RuntimeError("imp.jit.trace: a traced function was called while another trace "
                           + ("records or checks a call on this thread (nested traces are "
                              "not supported)" if same else
                              "records on another thread; only one records at a time"))
    _tracer = tracer
    _log = tracer if isinstance(tracer, RecordLog) else None
    _tracing_thread = PyThread_get_thread_ident()
    _tracing = 1


def stop_tracing():
    global _tracing, _tracer, _log, _serving
    _tracing = 0
    _serving = 0
    _tracer = None
    _log = None


cdef class CheckLog            # (imperative/_checking.pxi)


def serve_ops(bint on):
    """While the active tracer (a CheckLog) checks a call: ask its `serve` for each op's
    outputs before running it (a list of records, or None: run the op as always)."""
    global _serving
    _serving = on and _tracing and isinstance(_tracer, CheckLog)


cdef object _served(OpDef op, list inputs):
    if _traced_here():
        return (<CheckLog>_tracer).serve(op, inputs)
    return None


_NOT_KEPT_TEXT = ("imp.jit.trace (symbolic=False): the compiled plan serving this checked call "
                  "kept no value for this tensor (the recorded call neither read it nor let it "
                  "outlive the call); use it as the recorded call did, or trace anew")
cdef ErrorRecord _NOT_KEPT = ErrorRecord(RuntimeError(_NOT_KEPT_TEXT), _NOT_KEPT_TEXT)
_NOT_KEPT.raised = True


cdef TensorInfo _served_info(OpDef op, Py_ssize_t index, tuple shape, object dtype,
                             object device, object array, list inputs):
    """A record for output `index` of a served op: `array` (the plan's value) as its
    value, or, where the plan kept no value (one the recorded call never read and that
    did not outlive it), unusable with a message saying so."""
    cdef Channel ch = _channel
    cdef TensorInfo info = ch.new_info(shape, dtype, as_device(device))
    info.op = op
    info.scope = _current_scope
    info.out_index = index
    if array is None:
        info.status = INVALID
        info.error = _NOT_KEPT
    else:
        ch._set_value(info, array, _shared_storage(array, inputs))
    return info


def tracing_active():
    return bool(_tracing)


cdef object _rule_op_type = None    # GenericPyOp (imperative/generic.py), once imported


def register_rule_op_type(cls):
    """`cls`'s ops run a Python rule that issues other ops (GenericPyOp): applied inside a
    traced call, they run through `cls._apply_traced` (_traced_rule)."""
    global _rule_op_type
    _rule_op_type = cls


cdef inline bint _traced_rule(object op):
    """`imp.apply(op, ...)` of a rule op inside a traced call on this thread: the trace
    must record the ops its rule issues, which a replay can run, not the op itself, whose
    kernel only hands out what its dispatch computed (`_apply_traced` does that)."""
    return (_tracing and _rule_op_type is not None and isinstance(op, _rule_op_type)
            and _traced_here())


cdef inline bint _traced_here():
    return _tracing and _tracing_thread == PyThread_get_thread_ident()


cdef void _trace_op(OpDef op, list inputs, list outputs) except *:
    if _traced_here():
        if _log is not None:
            _log.record_op(op, inputs, outputs)
        else:
            _tracer.op(op, inputs, outputs)


cdef void _trace_put(TensorInfo info) except *:
    if _traced_here():
        if _log is not None:
            _log.record_put(info)
        else:
            _tracer.put(info)


cdef void _trace_rebind(TensorBase tensor, TensorInfo old) except *:
    if _traced_here():
        _tracer.rebind(tensor, old)


cdef void _trace_inputs(tuple operands) except *:
    """The Tensor objects an op is about to read (before dispatch, which sees only their
    records): the trace binds a tensor made outside the call, such as a Parameter, to the
    object that holds it, whose value a later call reads afresh."""
    if _traced_here():
        if _log is not None:
            _log.record_inputs(operands)
        else:
            _tracer.inputs(operands)


def report_grad_write(tensor, old):
    """Tensor.grad was set (old: the Tensor or None it held): an effect of the traced call."""
    if _traced_here():
        _tracer.grad_write(tensor, old)


cdef void _trace_read(TensorInfo info, int kind) except *:
    if _traced_here():
        if _log is not None:
            _log.record_read(info, kind)
        else:
            _tracer.read(info, kind)


def issue_site():
    """`file:line` of the user's code issuing the op being dispatched now."""
    cdef int lasti = 0
    code = _user_code(&lasti)
    return _where(code, lasti)


def issue_code():
    """(code object, instruction offset) of that code: `site_text` makes it `file:line`
    later (a recording formats its sites once, at its end)."""
    cdef int lasti = 0
    code = _user_code(&lasti)
    return code, lasti


def site_text(code, int lasti):
    return _where(code, lasti)
