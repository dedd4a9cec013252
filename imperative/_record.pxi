# Included by _core.pyx: the recording side of scopes and the profiler.
#
# Recording costs one flag check per op when off. When on, each thread appends small tuples
# to its own list; names, args and JSON are built only at dump (imperative/profiler.py).
# Records keep references to Commands and TensorInfos (not to values), so shapes, dtypes and
# op parameters are read at dump time.

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int, timespec*)
    enum: CLOCK_MONOTONIC

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()

# Record kinds (the first field of every record tuple)
cdef enum:
    _EV_DISPATCH = 0    # (kind, t0, t1, cmd, device, allocated, swapped): an op issued (maybe run inline)
    _EV_HOST_OP = 1     # (kind, t0, t1, op, inputs, output, scope, device, allocated, swapped)
    _EV_EXEC = 2        # (kind, t0, t1, cmd, device, allocated, swapped): an op run by the worker
    _EV_WAIT = 3        # (kind, t0, t1, what)
    _EV_SCOPE_PUSH = 4  # (kind, t, node)
    _EV_SCOPE_POP = 5   # (kind, t, node)
    _EV_INSTANT = 6     # (kind, t, name, args)
    _EV_MEMORY = 7      # (kind, t0, t1, action, info, reason): drop, swap, evict, recompute

EV_DISPATCH, EV_HOST_OP, EV_EXEC, EV_WAIT = _EV_DISPATCH, _EV_HOST_OP, _EV_EXEC, _EV_WAIT
EV_SCOPE_PUSH, EV_SCOPE_POP, EV_INSTANT, EV_MEMORY = _EV_SCOPE_PUSH, _EV_SCOPE_POP, _EV_INSTANT, _EV_MEMORY

cdef int _profiling = 0
cdef dict _buffers = {}            # thread ident -> list of records
cdef dict _thread_names = {}       # thread ident -> name at first record
cdef object _current_scope = None  # imperative.scope.ScopeNode, None at the root


cdef inline long long _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000LL + ts.tv_nsec


cdef list _thread_buffer():
    cdef unsigned long tid = PyThread_get_thread_ident()
    buf = _buffers.get(tid)
    if buf is None:
        buf = _buffers[tid] = []
        _thread_names[tid] = threading.current_thread().name
    return <list>buf


cdef inline void _record_dispatch(long long t0, Command cmd):
    cdef Device dev = (<TensorInfo>cmd.outputs[0]).device if cmd.outputs else _channel.default_device
    _thread_buffer().append((_EV_DISPATCH, t0, _now_ns(), cmd, dev.name,
                             dev.stats.allocated, dev.stats.swapped))


cdef inline void _record_exec(long long t0, Command cmd):
    cdef Device dev = (<TensorInfo>cmd.outputs[0]).device if cmd.outputs else _channel.default_device
    _thread_buffer().append((_EV_EXEC, t0, _now_ns(), cmd, dev.name,
                             dev.stats.allocated, dev.stats.swapped))


cdef inline void _record_host_op(long long t0, OpDef op, TensorInfo a, TensorInfo b, TensorInfo out):
    cdef Device dev = out.device
    _thread_buffer().append((_EV_HOST_OP, t0, _now_ns(), op, (a,) if b is None else (a, b), out,
                             _current_scope, dev.name, dev.stats.allocated, dev.stats.swapped))


cdef inline void _record_wait(long long t0, str what):
    _thread_buffer().append((_EV_WAIT, t0, _now_ns(), what))


def record_memory_event(long long t0, str action, info, str reason):
    """A drop, swap or recomputation (called by the memory manager)."""
    if _profiling:
        _thread_buffer().append((_EV_MEMORY, t0, _now_ns(), action, info, reason))


def now_ns():
    return _now_ns()


def is_profiling():
    return bool(_profiling)


def set_scope(node):
    """Make `node` the scope new ops and tensors are named under (imperative.scope)."""
    global _current_scope
    _current_scope = node


def record_scope(bint push, node):
    if _profiling:
        _thread_buffer().append((_EV_SCOPE_PUSH if push else _EV_SCOPE_POP, _now_ns(), node))


def record_instant(str name, args=None):
    if _profiling:
        _thread_buffer().append((_EV_INSTANT, _now_ns(), name, args))


def start_recording():
    global _profiling
    if _profiling:
        raise RuntimeError("a profile is already being recorded; stop it first")
    _buffers.clear()
    _thread_names.clear()
    _profiling = 1


def stop_recording():
    """Stop recording; returns ({thread ident: records}, {thread ident: name})."""
    global _profiling
    if not _profiling:
        raise RuntimeError("no profile is being recorded")
    _channel.sync_quietly()      # the worker's records of issued ops belong to this profile
    _profiling = 0
    buffers, names = dict(_buffers), dict(_thread_names)
    _buffers.clear()
    _thread_names.clear()
    return buffers, names
