# Commands whose output is produced by a command issued later, on first need
# (imperative.distributed): a collective is a start command, issued at the call, and a wait
# command, issued only when something first reads the result (an op taking it as input, a
# read of its value, sync()), so that the worker keeps computing while MPI moves the bytes.
#
# deferred_result() makes a record with no command yet and registers a placer (a Python
# callable); the first use of the record calls it, and the placer issues the command that
# produces the record with issue_into(). Included from _core.pyx.

cdef dict _deferred = {}     # TensorInfo (ALLOCATED, no command yet) -> placer()


cdef int _place_waits(list infos) except -1:
    """Issue the commands that produce those of `infos` still waiting for theirs."""
    cdef TensorInfo info
    for info in infos:
        placer = _deferred.pop(info, None)
        if placer is not None:
            placer()
    return 0


cdef int _place_all_waits() except -1:
    """sync(): every pending command is issued, so that waiting for the last one covers it."""
    while _deferred:
        info = next(iter(_deferred))
        placer = _deferred.pop(info)
        if (<TensorInfo>info).status != DELETED:
            placer()
    return 0


def deferred_result(tuple shape, dtype, device, placer):
    """(Tensor, record): a Tensor of `shape`/`dtype` on `device` whose producing command is
    issued by `placer()` (through issue_into, given the record) when something first needs
    it. Keep the record weakly: a dead record, or one whose status is DELETED, needs none."""
    _channel.check_usable()
    cdef TensorInfo info = _channel.new_info(shape, np.dtype(dtype), as_device(device))
    _deferred[info] = placer
    return _wrap(info), info


def issue_into(OpDef op, inputs, outputs):
    """Queue `op` reading the Tensors `inputs` and producing `outputs`, records of deferred
    results: one command on the worker, in issue order, like any op's. Records already
    deleted must be left out by the caller."""
    cdef TensorInfo info
    cdef long long t0 = _now_ns() if _profiling else 0
    _channel.check_usable()
    cdef list ins = [(<TensorBase>t)._info for t in inputs]
    cdef list outs = [<TensorInfo?>r for r in outputs]
    for info in ins:
        if info.status >= DELETED:
            _channel._raise_unusable_input(op, info)
    cdef Command cmd = Command.__new__(Command)
    cmd.kind = CMD_APPLY
    cmd.op = op
    cmd.inputs = ins
    cmd.outputs = outs
    cmd.fast = False
    cmd.scope = _current_scope
    cmd.blame = None
    for i in range(len(outs)):
        info = outs[i]
        _deferred.pop(info, None)
        if info.status != ALLOCATED or info.ready_seq != 0:
            raise RuntimeError(f"issue_into: output {i} of {op!r} is not a pending result")
        info.op = op
        info.scope = _current_scope
        info.out_index = i
    _capture_site(cmd)
    _channel._submit(cmd)
    if _profiling and t0:
        _record_dispatch(t0, cmd)


def record_comm_slice(long long t0, str what):
    """A slice `wait <what>` from t0 (now_ns()) to now on the calling thread's track (the
    MPI thread of imperative.distributed)."""
    if _profiling:
        _record_wait(t0, what)


def tensor_status_of(TensorInfo info):
    """A record's status name (PRODUCED, DELETED, ...)."""
    return Status(info.status).name
