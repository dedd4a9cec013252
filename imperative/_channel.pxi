# Included by _core.pyx: the Channel, caller side: options, the handle table, host values,
# dispatch, host compute, the Del-folding buffer, release and delete, waits, sync and close.
#
# The worker thread (imperative/_worker.pxi) and the executor (imperative/_execute.pxi) are
# the Channel's methods too, written as module functions that take it as `self`: Cython
# allows no `include` in a class body. The Channel's fields and cdef method signatures are
# declared in imperative/_core.pxd, each field with its owning thread, and so are its two
# inline methods, check_usable and _add_handle, with their bodies.

# Small ops whose inputs are resident run on the caller's thread: handing one to the
# worker costs more than running it (PERF_NOTES: a wake-up is 10-100 us, a tiny add 0.5 us,
# and ops under ~1 ms never overlap with the caller because of the GIL). The limit counts
# the elements of the inputs and outputs together: 64K, some 20-60 us of numpy work for an
# elementwise op (4K sent a 64-wide layer's optimizer updates to the worker, to be waited for).
HOST_COMPUTE_MAX_ELEMENTS = 65536
cdef Py_ssize_t _host_max_elements = HOST_COMPUTE_MAX_ELEMENTS
# Up to 256K elements an op runs there too unless it is a product or a convolution of
# _HOST_MAX_FLOPS or more: those release the GIL in the native sgemm, so on the worker they
# overlap the caller's issuing of the next ops (a small CNN's step was 2% slower when its
# 3.5-MFLOP first convolution ran on the caller's thread). A fused optimizer step over a
# small model's parameters (Adam over 13K values: 92K elements) went to the worker and was
# waited for at the step's end: 0.42 -> 0.33 ms a step when it ran here.
HOST_COMPUTE_MEDIUM_ELEMENTS = 262144
cdef Py_ssize_t _host_medium_elements = HOST_COMPUTE_MEDIUM_ELEMENTS
cdef double _HOST_MAX_FLOPS = 1e6


# Called as hook(op, input_infos, output_infos) after every op is issued, while any
# gradient recording is active (imperative.autodiff); None costs one pointer check per op.
cdef object _grad_hook = None


def set_grad_hook(hook):
    global _grad_hook
    _grad_hook = hook


def get_grad_hook():
    return _grad_hook


# --------------------------------------------------------------------------- the channel

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)


cdef class Channel:
    def __cinit__(self):
        pthread_mutex_init(&self._mutex, NULL)
        pthread_cond_init(&self._wake_cond, NULL)
        pthread_cond_init(&self._done_cond, NULL)
        self._table = []
        self._buffer = []
        self._pending = []
        self._errors = []
        self._notify_at = LLONG_MAX
        self._ahead_epoch = 1
        self.default_device = as_device("cpu0")
        self._pid = os.getpid()
        values = _options_from_environment()
        for i, name in enumerate(_OPTION_NAMES):
            self._opts[i] = values[name]
        self._update_memory_flag()

    # ---- options

    def set_option(self, str name, value):
        cdef long long v = _validate_option(name, value)
        self._opts[<int>_OPTION_INDEX[name]] = v
        if name == "buffer_length":
            self._flush_buffer(v)
        self._update_memory_flag()

    cdef void attach_memory_manager(self, MemoryManager mm):
        self.mm = mm
        self._update_memory_flag()

    cdef void _update_memory_flag(self):
        self._memory_on = (self._opts[OPT_ENABLE_DROP] or self._opts[OPT_ENABLE_SWAP]
                           or self._opts[OPT_RECORD_PATH] or self._opts[OPT_DTR_AUTO])
        if self.mm is not None:
            self.mm.on_options(self._opts)

    def get_option(self, str name):
        if name not in _OPTION_INDEX:
            _validate_option(name, 0)
        return self._opts[<int>_OPTION_INDEX[name]]

    def options(self):
        return {name: self._opts[i] for i, name in enumerate(_OPTION_NAMES)}

    # ---- lifecycle checks (check_usable, inline, is in _core.pxd)

    cdef int _raise_unusable(self) except -1:
        if self._state == 1:
            raise RuntimeError(f"interpreter closed by {self._closed_by}: no tensor can be "
                               "used or made after that")
        raise RuntimeError(
            f"this process (pid {os.getpid()}) was forked from pid {self._pid} after imperative "
            "started; the parent's interpreter cannot be used in a child: use the 'spawn' start "
            "method or import imperative only in the children")

    # ---- handle table (_add_handle, inline, is in _core.pxd)

    cdef TensorInfo new_info(self, tuple shape, object dtype, Device device,
                             bint maybe_packed=True):
        cdef TensorInfo info = TensorInfo.__new__(TensorInfo)
        info.birth = _next_birth()
        info.shape = shape
        info.dtype = dtype
        info.device = device
        info.status = ALLOCATED
        if maybe_packed and _has_metadata(dtype):
            # quantized dtypes: numpy ignores their metadata in == and hash, so every
            # dtype-keyed cache must step around them
            info.quantized = True
            info.packed = _dtype_is_packed(dtype)
        if shape is not None:
            info.numel = _num_elements(shape)
            info.size = _nbytes_of(info.numel, dtype, info.packed)
        self._add_handle(info)
        return info

    cdef void _retire_handle(self, TensorInfo info):
        cdef long long idx = info.handle & 0xFFFFFFFFLL
        cdef long long gen = (info.handle >> 32) + 1
        if info.handle < 0 or self._table[idx] is not info:
            return
        self._table[idx] = None
        self._free_handles.push_back(idx | ((gen & 0x7FFFFFFF) << 32))
        self._live -= 1

    cpdef TensorInfo lookup(self, long long handle):
        """The live record for a handle, or None if it was deleted (stale generation)."""
        cdef Py_ssize_t idx = handle & 0xFFFFFFFFLL
        if handle < 0 or idx >= len(self._table):
            return None
        info = self._table[idx]
        if info is None or (<TensorInfo>info).handle != handle:
            return None
        return info

    # ---- values that arrive from the host

    cdef TensorInfo put(self, object array, tuple shape, object dtype, Device device):
        """A tensor whose value the caller already has (the array is owned by the runtime)."""
        cdef TensorInfo info = self.new_info(shape, dtype, device)
        info.scope = _current_scope
        if self._memory_on:      # under a budget, data takes room as an op's output does,
            if (self._processed != self._seq and not self.mm.fits(info.size, device)
                    and threading.current_thread() is not self._thread):   # (not the worker)
                _wait_seq(self, self._seq, "room for data")   # made between the worker's ops
            self.mm.reserve(info.size, device, True)
            try:
                self._set_value(info, array, None)
            finally:
                self.mm.release(info.size, True)
        else:
            self._set_value(info, array, None)
        if _tracing: _trace_put(info)
        return info

    cdef int _set_value(self, TensorInfo info, object array, Storage shared) except -1:
        """Make `array` the value of `info`: in `shared` (a view of an input's storage), or
        in a storage of its own, C-ordered."""
        return self._adopt(info, array if shared is not None else _c_ordered(array), shared)

    cdef int _adopt(self, TensorInfo info, object array, Storage shared) except -1:
        """Make `array` the value of `info` as it is laid out (a swapped value coming back
        must keep the strides it left with, so that later ops round the same)."""
        cdef Storage storage = shared
        if storage is None:
            root = _root_array(array)
            storage = _new_storage(cnp.PyArray_NBYTES(<cnp.ndarray>root) if type(root) is _ndarray
                                   else root.nbytes, info.device)
        storage.refs += 1
        info.storage = storage
        info.value = array
        info.status = PRODUCED
        if self._memory_on:
            self.mm.on_produced(info)

    cdef void _free_value(self, TensorInfo info):
        cdef Storage storage = info.storage
        if self._memory_on:
            self.mm.on_freed(info)
        info.value = None
        info.storage = None
        if storage is not None:
            storage.refs -= 1
            if storage.refs == 0:
                (<Device>storage.device).stats.allocated -= storage.nbytes
                if storage.ahead_epoch == self._ahead_epoch:
                    self._ahead_bytes -= storage.nbytes

    # ---- dispatch

    cdef list dispatch(self, OpDef op, list inputs):
        """Infer outputs, allocate handles and run or queue the op. Returns the output infos."""
        cdef TensorInfo first, info
        cdef Py_ssize_t i, n = len(inputs)
        cdef bint fast = False
        cdef Inferred inferred = None
        cdef long long t0 = _now_ns() if _profiling else 0
        self.check_usable()
        if _serving:                 # a checked replay serves the op from its plan (its
            served = _served(op, inputs)     # inputs: served records, which may hold none)
            if served is not None:
                if _grad_hook is not None:
                    _grad_hook(op, inputs, served)
                return served
        if _deferred: _place_waits(inputs)     # collectives: their waits (_collective.pxi)
        for i in range(n):
            info = inputs[i]
            if info.status >= DELETED:
                self._raise_unusable_input(op, info)
            if info.shape is None:      # value-dependent shape: inference needs it
                self.wait_produced(info, "shape")
        if n:
            first = inputs[0]
            device = first.device
            for i in range(1, n):
                if (<TensorInfo>inputs[i]).device is not device:
                    raise ValueError(
                        f"op {op!r} got inputs on different devices: "
                        + ", ".join(str((<TensorInfo>x).device) for x in inputs)
                        + "; copy them to one device first (Tensor.to / functional.copy)")
        else:
            first = None
            device = self.default_device
        # Elementwise fast path: equal shapes and dtypes need no broadcasting or promotion.
        if op.ufunc is not None and n:
            fast = True
            for i in range(1, n):
                info = inputs[i]
                if info.dtype is not first.dtype or (info.shape is not first.shape
                                                     and info.shape != first.shape):
                    fast = False
                    break
            if fast and first.shape is not None and not first.quantized and not (
                    op.ufunc_floats_only and first.dtype.kind != "f"):
                out_dtype = op._same_dtype_out.get(first.dtype)
                if out_dtype is None:
                    descs = op.infer(tuple(inputs))
                    out_dtype = descs[0][1]
                    op._same_dtype_out[first.dtype] = out_dtype
                outputs = [self.new_info(first.shape, out_dtype, device)]
            else:
                fast = False
        if not fast:
            inferred = _infer_cached(op, inputs)
            outputs = []
            for desc in inferred.descs:
                outputs.append(self.new_info(
                    None if desc[0] is None else tuple(desc[0]), desc[1],
                    as_device(desc[2]) if len(desc) > 2 else device))
        if self._memory_on:
            self.mm.on_dispatch(op, inputs, outputs)
        for i in range(len(outputs)):
            info = outputs[i]
            info.op = op
            info.scope = _current_scope
            info.out_index = i
        if _run_tiny(self, op, inputs, outputs, fast, inferred):     # ran: no Command (_tiny.pxi)
            if _grad_hook is not None:
                _grad_hook(op, inputs, outputs)
            if _tracing: _trace_op(op, inputs, outputs)
            return outputs
        cdef Command cmd = Command.__new__(Command)
        # the queued op's lists leave the garbage collector's sight, as the Command does
        # (_records.pxi): in no cycle, as the inputs cannot lead to the new outputs, whose
        # recipe keeps `inputs` too (so no caller may change that list after dispatch)
        PyObject_GC_UnTrack(<void*>inputs)
        PyObject_GC_UnTrack(<void*>outputs)
        cmd.kind = CMD_APPLY
        cmd.op = op
        cmd.inputs = inputs
        cmd.outputs = outputs
        cmd.fast = fast
        cmd.scope = _current_scope
        cmd.blame = _blame
        _capture_site(cmd)
        self._submit(cmd)
        if _profiling and t0:
            _record_dispatch(t0, cmd)
        if _grad_hook is not None:
            _grad_hook(op, inputs, outputs)
        if _tracing: _trace_op(op, inputs, outputs)
        return outputs

    cdef int _raise_unusable_input(self, op, TensorInfo info) except -1:
        if info.status == DELETED:
            raise RuntimeError(f"op {op!r} got a deleted tensor")
        rec = info.error
        if not rec.raised:
            self._errors.remove(rec) if rec in self._errors else None
            rec.raised = True
            raise AsyncError(rec.message) from rec.exc
        raise RuntimeError(
            f"tensor {info.shape} {info.dtype} is unusable because of "
            f"an earlier error: {rec.message}") from rec.exc

    cdef int _submit(self, Command cmd) except -1:
        cdef TensorInfo info
        cdef bint ready = True, ahead
        cdef int level = self._opts[OPT_ASYNC_LEVEL]
        cdef Py_ssize_t n
        for info in cmd.inputs:
            if info.status != PRODUCED:
                ready = False
                break
        if ready:
            # (under the memory manager ops past the first limit go to the worker, where
            # a dying input's Del folds into its reader, which may write in place)
            n = _host_elements(cmd.inputs, cmd.outputs, cmd.op.cost_by_output)
            ahead = _ahead_of_worker(self)
            if level == 0 or (self._opts[OPT_HOST_COMPUTE]
                              and _small_enough(cmd.op, cmd.inputs, cmd.outputs, n,
                                                not self._memory_on)
                              and _may_run_beside(self, cmd.outputs, ahead)):
                self._run_inline(cmd, level == 0, n)
                if ahead:
                    _count_made_ahead(self, cmd.inputs, cmd.outputs)
                return 0
        for info in cmd.inputs:
            info.pending_uses += 1
        for info in cmd.outputs:
            info.pending_uses += 1
        self._push(cmd)
        if level == 0 or (level == 1 and (<OpDef>cmd.op).value_dependent):
            self._flush_buffer(0)
            _wait_seq(self, cmd.seq)
            self._raise_error_of(cmd, level == 0)
        return 0

    cdef int _run_inline(self, Command cmd, bint raise_original,
                         Py_ssize_t elements) except -1:
        """Host compute: run the op (of `elements`, as _host_elements counted them) on the
        caller's thread, now."""
        cdef TensorInfo info
        for info in cmd.inputs:
            info.pins += 1
        previous_allocator = _enter_pool(elements)
        try:
            _execute_apply(self, cmd)
        finally:
            _leave_pool(previous_allocator)
            for info in cmd.inputs:
                info.pins -= 1
        self._raise_error_of(cmd, raise_original)
        return 0

    cdef int _raise_error_of(self, Command cmd, bint raise_original) except -1:
        """At level 0 a failed op raises its original exception at the call."""
        cdef TensorInfo info
        if not raise_original or not cmd.outputs:
            return 0
        cdef TensorInfo out = cmd.outputs[0]
        if out.status != INVALID:
            return 0
        for info in cmd.outputs:      # no Tensor will ever hold them
            self._retire_handle(info)
        rec = out.error
        if rec in self._errors:
            self._errors.remove(rec)
        rec.raised = True
        exc = rec.exc
        if isinstance(exc, BaseException) and hasattr(exc, "add_note"):
            exc.add_note(rec.message)
        raise exc

    # ---- the buffer that folds Del into the last reader

    cdef void _push(self, Command cmd):
        self._buffer.append(cmd)
        if len(self._buffer) > self._opts[OPT_BUFFER_LENGTH]:
            _enqueue(self, self._buffer.pop(0))

    cdef void _flush_buffer(self, long long keep):
        while len(self._buffer) > keep:
            _enqueue(self, self._buffer.pop(0))

    cdef void release(self, TensorInfo info):
        """The last Tensor sharing `info` is gone."""
        cdef Command cmd
        cdef Py_ssize_t i
        if self._state != 0:
            return
        self._retire_handle(info)
        if info.pending_uses == 0:
            # Nothing queued touches it: free it here instead of queueing a Del.
            self._delete(info)
            return
        for i in range(len(self._buffer) - 1, -1, -1):
            cmd = self._buffer[i]
            if cmd.kind == CMD_APPLY:
                if _contains(cmd.inputs, info):
                    if cmd.dels is None:
                        cmd.dels = []
                    cmd.dels.append(info)
                    return
                if _contains(cmd.outputs, info):
                    break
        cmd = Command.__new__(Command)
        cmd.kind = CMD_DEL
        cmd.target = info
        info.pending_uses += 1
        self._push(cmd)

    cdef void _delete(self, TensorInfo info):
        """No Tensor refers to `info` any more. While producers are recorded, a tensor that
        can be recomputed is dropped (its record stays for whoever needs it again) and a
        leaf that a recorded producer reads keeps its value while an evicted tensor needs
        it (MemoryManager.on_dead)."""
        # (records made while recording keep these rules after it is turned off: what was
        # dropped then can still be recomputed)
        if ((self._memory_on or info.producer is not None or not info.users.empty())
                and info.status in (PRODUCED, DROPPED, SWAPPED)
                and not self.mm.on_dead(info)):
            return
        self._finish_delete(info)

    cdef void _finish_delete(self, TensorInfo info):
        """Free the value (and any swap file) of a record nothing needs any more."""
        self._free_value(info)
        _release_swap_file(info)
        info.status = DELETED

    # ---- waiting for values

    cdef int wait_produced(self, TensorInfo info, str why="value") except -1:
        """Wait until `info` has a value or has failed; raise pending async errors."""
        self.check_usable()
        if _deferred: _place_waits([info])
        if info.status == ALLOCATED:
            if info.ready_seq == 0:       # its producer still sits in the buffer
                self._flush_buffer(0)
            _wait_seq(self, info.ready_seq, why)
        self.raise_pending_errors()
        if info.status == INVALID:
            self._raise_unusable_input("read", info)
        if info.status == DELETED:
            raise RuntimeError("tensor was deleted")
        if info.status == DROPPED or info.status == SWAPPED:
            self.sync_quietly()           # the worker is idle now: restore on this thread
            self.mm.ensure_resident(info)
        return 0

    cpdef object get_value(self, TensorInfo info):
        """The value as users see it (4-bit unpacked); waits for the worker."""
        self.wait_produced(info)
        return _unpacked_value(info)

    cpdef object get_readonly_view(self, TensorInfo info):
        """A zero-copy read-only view of the value (a copy for packed 4-bit storage)."""
        self.wait_produced(info, "numpy()")
        if info.packed:
            return _unpacked_value(info)
        view = info.value.view()
        view.flags.writeable = False
        info.storage.exported = True   # never overwrite it in place from now on
        return view

    cpdef int sync(self) except -1:
        if self._state != 0:
            return 0
        if _deferred: _place_all_waits()
        self._flush_buffer(0)
        _wait_seq(self, self._seq)
        self.raise_pending_errors()
        return 0

    cpdef int raise_pending_errors(self) except -1:
        cdef ErrorRecord rec
        if not self._errors:
            return 0
        rec = self._errors.pop(0)
        rec.raised = True
        raise AsyncError(rec.message) from rec.exc

    def sync_quietly(self):
        """Wait for every issued command without raising pending errors."""
        if self._state == 0:
            self._flush_buffer(0)
            _wait_seq(self, self._seq)

    def close(self, bint quiet=False, bint discard=False):
        """Free every tensor and stop the worker. Idempotent. With `discard` (at exit, when
        nobody can read a result any more) queued commands are dropped, not run."""
        if self._state != 0:
            return
        thread = threading.current_thread()
        self._closed_by = ("the interpreter's exit" if discard else
                           f"imp.close() in thread {thread.name!r}"
                           + ("" if thread is threading.main_thread() else
                              ", not the main thread"))
        errors = None
        if discard:
            self._discarding = 1
            self._buffer = []
            self._pending = []
        else:
            try:
                self._flush_buffer(0)
                _wait_seq(self, self._seq)
            except RuntimeError:
                pass
        errors = self._errors
        self._errors = []
        _stop_worker(self)
        for info in self._table:
            if info is not None:
                self._free_value(info)
                (<TensorInfo>info).status = DELETED
        self._table = []
        self._free_handles.clear()
        self._live = 0
        self.mm.remove_swap_files()
        self._state = 1
        if errors and not quiet:
            rec = errors[0]
            raise AsyncError(rec.message) from rec.exc

    def mark_forked(self):
        self._state = 2
        self._thread = None

    def stats(self):
        """Debug counters: live handles, commands issued to the worker so far, queued
        commands, buffered commands, commands a waiting caller ran itself."""
        return {"live_handles": self._live, "issued": self._seq,
                "queued": self._seq - self._processed, "run_by_caller": self._run_by_caller,
                "buffered": len(self._buffer), "pending_errors": len(self._errors)}
