# Included by _core.pyx: the recording side of scopes and the profiler (was _record.pxi).
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

# Record kinds (the first field of every record tuple). Records hold only ints, strings,
# shapes and dtypes, none of which the garbage collector tracks: ops and scope nodes are
# referred to by their index in `_objects`. (Records that held TensorInfos or ops stayed
# tracked and made a 200k-op profile 3-5x slower through GC passes.)
cdef enum:
    _EV_DISPATCH = 0    # (kind, t0, t1, id, op, in_descs, out_descs, scope, device, allocated, swapped)
    _EV_HOST_OP = 1     # (kind, t0, t1, op, in_descs, out_descs, scope, device, allocated, swapped)
    _EV_EXEC = 2        # (kind, t0, t1, id, op, in_descs, out_descs, scope, device, allocated, swapped)
    _EV_WAIT = 3        # (kind, t0, t1, what)
    _EV_SCOPE_PUSH = 4  # (kind, t, scope)
    _EV_SCOPE_POP = 5   # (kind, t, scope)
    _EV_INSTANT = 6     # (kind, t, name, args)
    _EV_MEMORY = 7      # (kind, t0, t1, action, desc, reason, (scope, op, out_index),
    #                      user name): drop, swap, evict, recompute
# descs are flat tuples: (shape0, dtype0, shape1, dtype1, ...); op and scope are indices
# into the list returned with the records (scope -1: the root)

EV_DISPATCH, EV_HOST_OP, EV_EXEC, EV_WAIT = _EV_DISPATCH, _EV_HOST_OP, _EV_EXEC, _EV_WAIT
EV_SCOPE_PUSH, EV_SCOPE_POP, EV_INSTANT, EV_MEMORY = _EV_SCOPE_PUSH, _EV_SCOPE_POP, _EV_INSTANT, _EV_MEMORY

cdef int _profiling = 0
cdef dict _buffers = {}            # thread ident -> RecordBuffer
cdef object _current_scope = None  # imperative.scope.ScopeNode, None at the root
cdef list _objects = []            # ops and scope nodes named by records, by index
cdef dict _object_index = {}       # id(object) -> index in _objects (they stay alive there)
cdef long long _prof_serial = 0    # ids joining a command's dispatch and execution records


cdef Py_ssize_t _index_of(object obj):
    if obj is None:
        return -1
    key = <Py_ssize_t><void*>obj
    found = _object_index.get(key)
    if found is not None:
        return found
    _objects.append(obj)
    _object_index[key] = len(_objects) - 1
    return len(_objects) - 1


cdef inline long long _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000LL + ts.tv_nsec


@cython.final
cdef class RecordBuffer:
    """One thread's records, in two flat streams: integers (kind, times, ids, counts) in a
    C vector, and the objects (device names, shapes, dtypes, strings) in a list. Nothing
    here is a container the garbage collector would have to scan per record."""
    cdef vector[long long] nums
    cdef list objs
    cdef readonly str thread_name

    def __cinit__(self, str thread_name):
        self.objs = []
        self.thread_name = thread_name

    cdef inline void num(self, long long v):
        self.nums.push_back(v)

    cdef inline void descs(self, list infos):
        cdef TensorInfo info
        self.nums.push_back(len(infos))
        for info in infos:
            self.objs.append(info.shape)
            self.objs.append(info.dtype)

    def records(self):
        """The records as tuples (layouts above)."""
        cdef Py_ssize_t i = 0, j = 0, n = self.nums.size()
        cdef list out = []
        objs = self.objs
        while i < n:
            kind = self.nums[i]
            if kind == _EV_DISPATCH or kind == _EV_EXEC:
                t0, t1, cid, op = self.nums[i + 1], self.nums[i + 2], self.nums[i + 3], self.nums[i + 4]
                scope = self.nums[i + 5]
                alloc, swapped, n_in = self.nums[i + 6], self.nums[i + 7], self.nums[i + 8]
                device = objs[j]
                ins = tuple(objs[j + 1:j + 1 + 2 * n_in])
                j += 1 + 2 * n_in
                n_out = self.nums[i + 9]
                outs = tuple(objs[j:j + 2 * n_out])
                j += 2 * n_out
                i += 10
                out.append((kind, t0, t1, cid, op, ins, outs, scope, device, alloc, swapped))
            elif kind == _EV_HOST_OP:
                t0, t1, op, scope, alloc, swapped, n_in = [self.nums[i + k] for k in range(1, 8)]
                device = objs[j]
                ins = tuple(objs[j + 1:j + 1 + 2 * n_in])
                outs = tuple(objs[j + 1 + 2 * n_in:j + 3 + 2 * n_in])
                j += 3 + 2 * n_in
                i += 8
                out.append((kind, t0, t1, op, ins, outs, scope, device, alloc, swapped))
            elif kind == _EV_WAIT:
                out.append((kind, self.nums[i + 1], self.nums[i + 2], objs[j]))
                i += 3
                j += 1
            elif kind == _EV_SCOPE_PUSH or kind == _EV_SCOPE_POP:
                out.append((kind, self.nums[i + 1], self.nums[i + 2]))
                i += 3
            elif kind == _EV_INSTANT:
                out.append((kind, self.nums[i + 1], objs[j], objs[j + 1]))
                i += 2
                j += 2
            elif kind == _EV_MEMORY:
                out.append((kind, self.nums[i + 1], self.nums[i + 2], objs[j],
                            (objs[j + 1], objs[j + 2]), objs[j + 3],
                            (objs[j + 4], objs[j + 5], objs[j + 6]), objs[j + 7]))
                i += 3
                j += 8
            else:
                raise RuntimeError(f"corrupt profile record kind {kind}")
        return out


cdef RecordBuffer _thread_buffer():
    cdef unsigned long tid = PyThread_get_thread_ident()
    buf = _buffers.get(tid)
    if buf is None:
        buf = _buffers[tid] = RecordBuffer(threading.current_thread().name)
    return <RecordBuffer>buf


cdef void _record_command(int kind, long long t0, Command cmd):
    """Dispatch (caller) or execution (worker) of a command."""
    global _prof_serial
    cdef Device dev = (<TensorInfo>cmd.outputs[0]).device if cmd.outputs else _channel.default_device
    cdef RecordBuffer buf = _thread_buffer()
    if kind == _EV_DISPATCH:
        _prof_serial += 1
        cmd.prof_id = _prof_serial
    buf.num(kind)
    buf.num(t0)
    buf.num(_now_ns())
    buf.num(cmd.prof_id)
    buf.num(_index_of(cmd.op))
    buf.num(_index_of(cmd.scope))
    buf.num(dev.stats.allocated)
    buf.num(dev.stats.swapped)
    buf.objs.append(dev.name)
    buf.descs(cmd.inputs)
    buf.descs(cmd.outputs)


cdef inline void _record_dispatch(long long t0, Command cmd):
    _record_command(_EV_DISPATCH, t0, cmd)


cdef inline void _record_exec(long long t0, Command cmd):
    _record_command(_EV_EXEC, t0, cmd)


cdef void _record_host_op(long long t0, OpDef op, TensorInfo a, TensorInfo b, TensorInfo out):
    cdef Device dev = out.device
    cdef RecordBuffer buf = _thread_buffer()
    buf.num(_EV_HOST_OP)
    buf.num(t0)
    buf.num(_now_ns())
    buf.num(_index_of(op))
    buf.num(_index_of(_current_scope))
    buf.num(dev.stats.allocated)
    buf.num(dev.stats.swapped)
    buf.num(1 if b is None else 2)
    buf.objs.append(dev.name)
    buf.objs.append(a.shape)
    buf.objs.append(a.dtype)
    if b is not None:
        buf.objs.append(b.shape)
        buf.objs.append(b.dtype)
    buf.objs.append(out.shape)
    buf.objs.append(out.dtype)


cdef void _record_wait(long long t0, str what):
    cdef RecordBuffer buf = _thread_buffer()
    buf.num(_EV_WAIT)
    buf.num(t0)
    buf.num(_now_ns())
    buf.objs.append(what)


def record_memory_event(long long t0, str action, TensorInfo info, str reason):
    """A drop, swap or recomputation of `info` (called by the memory manager)."""
    cdef RecordBuffer buf
    if _profiling:
        buf = _thread_buffer()
        buf.num(_EV_MEMORY)
        buf.num(t0)
        buf.num(_now_ns())
        # (what names the tensor: its automatic name's parts, and its user name)
        buf.objs.extend((action, info.shape, info.dtype, reason, info.scope, info.op,
                         info.out_index, info.user_name))


def now_ns():
    return _now_ns()


def is_profiling():
    return bool(_profiling)


def set_scope(node):
    """Make `node` the scope new ops and tensors are named under (imperative.scope)."""
    global _current_scope
    _current_scope = node


def record_scope(bint push, node):
    cdef RecordBuffer buf
    if _profiling:
        buf = _thread_buffer()
        buf.num(_EV_SCOPE_PUSH if push else _EV_SCOPE_POP)
        buf.num(_now_ns())
        buf.num(_index_of(node))


def record_instant(str name, args=None):
    cdef RecordBuffer buf
    if _profiling:
        buf = _thread_buffer()
        buf.num(_EV_INSTANT)
        buf.num(_now_ns())
        buf.objs.append(name)
        buf.objs.append(args)


def start_recording():
    global _profiling
    if _profiling:
        raise RuntimeError("a profile is already being recorded; stop it first")
    _buffers.clear()
    _objects.clear()
    _object_index.clear()
    _profiling = 1


def stop_recording():
    """Stop recording; returns ({thread ident: records}, {thread ident: name}, objects), where
    `objects` holds the ops and scope nodes that records name by index."""
    global _profiling
    if not _profiling:
        raise RuntimeError("no profile is being recorded")
    _channel.sync_quietly()      # the worker's records of issued ops belong to this profile
    _profiling = 0
    result = ({tid: buf.records() for tid, buf in _buffers.items()},
              {tid: (<RecordBuffer>buf).thread_name for tid, buf in _buffers.items()},
              list(_objects))
    _buffers.clear()
    _objects.clear()
    _object_index.clear()
    return result
