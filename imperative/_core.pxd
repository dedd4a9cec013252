# The interpreter core's declarations: every cdef class the Channel and the memory manager
# are made of or name, with all its fields and all its cdef/cpdef method signatures. Each
# section below says which .pxi implements the class (method bodies only: no field is
# declared there). Cython requires a class declared here to declare every cdef method here
# too, and every class its fields and signatures name; its `cdef inline` methods (a few
# hot-path lines each) are defined here, with the body. The sections:
#   enums                the record statuses, the command kinds, the option indices
#   devices              DeviceStats, Device                       (_device.pxi)
#   records              Storage, ErrorRecord, TensorInfo, Command, OpDef   (_records.pxi)
#   the channel          Channel                   (_channel.pxi; its worker and executor
#                        are module functions taking it as `self`: _worker.pxi, _execute.pxi)
#   the manager's parts  MemoryOptions (_memory_options.pxi), EvictionPolicy (_policies.pxi),
#                        SwapRate, SwapSpace (_swap.pxi)
#   the memory manager   MemoryManager                             (_memory.pxi)
# (docs/design.md, "Threads and what they own", "The memory manager's hooks".)
#
# Thread ownership (who may write a field; everyone reads under the GIL):
#   [C] caller threads (Python code issuing ops), [W] the worker thread,
#   [C/W] either, always while holding the GIL and without releasing it in between.
#   "set once": written while the object is made (or first used), never after.
# Every field below is touched only with the GIL held, except the pthread
# primitives and the flags named "nogil" which are read and written under `_mutex`.

cdef extern from "sched.h" nogil:
    int sched_yield()

cdef extern from "pthread.h" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, void*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_broadcast(pthread_cond_t*)
    int pthread_cond_signal(pthread_cond_t*)


# --------------------------------------------------------------------------- enums

# TensorInfo.status
cpdef enum Status:
    ALLOCATED = 0   # handle exists, value not computed yet
    PRODUCED = 1    # value resident
    DROPPED = 2     # value freed, producer kept: recomputed on use
    SWAPPED = 3     # value written out, read back on use
    DELETED = 4     # no Tensor refers to it any more; value freed
    INVALID = 5     # its producer failed; `error` says why

# Command.kind
cpdef enum CommandKind:
    CMD_APPLY = 0
    CMD_DEL = 1

# Option indices into Channel._opts: the rows of _OPTIONS in imperative/_options.pxi, in this
# order (checked at import). Adding an option: one constant here and one row there.
cdef enum:
    OPT_ASYNC_LEVEL
    OPT_BUFFER_LENGTH
    OPT_HOST_COMPUTE
    OPT_CATCH
    OPT_ENABLE_DROP
    OPT_ENABLE_SWAP
    OPT_DTR_AUTO
    OPT_SQRT_SAMPLING
    OPT_DTR_THRESHOLD
    OPT_MIN_EVICTEE
    OPT_RECORD_PATH
    OPT_QUEUE_SIZE
    N_OPTIONS


cimport cython
from cpython.ref cimport PyObject
from libcpp.deque cimport deque
from libcpp.vector cimport vector


# --------------------------------------------------------------------------- devices
# implemented in imperative/_device.pxi

cdef class DeviceStats:
    # memory counters of one device, kept by the channel
    cdef public long long allocated, peak_allocated, swapped   # [C/W]
    cdef public long long evictions, recomputes, swap_outs, swap_ins, inplace_reuses  # [C/W]
    cdef public long long recomputes_repeated  # [C/W] of a value its restore brought back already
    cdef public double recompute_seconds                       # [C/W]

    cdef inline void add(self, long long nbytes):
        self.allocated += nbytes
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated


cdef class Device:
    # one object per name, so identity compares
    cdef readonly str name             # the four: set once, when the name is first used
    cdef readonly str kind             #     (as_device)
    cdef readonly int index
    cdef readonly DeviceStats stats


# --------------------------------------------------------------------------- records
# implemented in imperative/_records.pxi

@cython.final
@cython.freelist(512)
@cython.no_gc            # (its objects, a Device and a weak reference, make no cycle)
cdef class Storage:
    """One allocation. Views (reshape, transpose, slices) share their base's Storage,
    so memory is counted once per storage, not once per tensor."""
    cdef readonly Py_ssize_t nbytes
    cdef readonly object device
    cdef public int refs          # [C/W] live TensorInfos whose value lies in it
    cdef public bint exported     # [C/W] a zero-copy numpy view was handed out: never write in place
    cdef public object ghost_ref  # [C/W] weak reference to the largest dropped record whose
                                  #     value still lies here (its _Ghost), or None
    cdef public long long ahead_epoch  # [C/W] made by an op run beside a busy worker in
                                  #     that stretch of its work (Channel._ahead_epoch)


cdef class ErrorRecord:
    """Why an op's outputs are unusable: the original exception and where the op came from."""
    cdef readonly object exc
    cdef readonly str message
    cdef public bint raised       # [C] already surfaced as AsyncError


@cython.final
@cython.freelist(512)
@cython.no_gc_clear      # __dealloc__ must still see `storage` to release its accounting
cdef class TensorInfo:
    """A handle's record in the table."""
    cdef readonly long long handle     # id | generation << 32; -1 for internal constants
    cdef readonly object shape         # tuple, or None while a value-dependent shape is unknown
    cdef readonly object dtype         # numpy.dtype
    cdef readonly object device        # Device
    cdef readonly bint quantized       # dtype carries quantization metadata
    cdef readonly bint packed          # 4-bit dtype: `value` holds two values per byte
    cdef readonly int status           # [C/W] Status
    cdef public object value           # [W] numpy array while PRODUCED ([C] for host-computed ops)
    cdef public Storage storage        # [W] allocation holding `value`
    cdef public object producer        # [C] Producer that recomputes it (while recording paths)
    cdef vector[PyObject*] users       # [C/W] the Producers reading it, borrowed: each leaves
                                       #     as it dies (_recipes.pxi)
    cdef public int dead_chain         # [C/W] dead evicted records its recomputation would
                                       #     have to recompute first (approximate; counted
                                       #     to one past _MAX_DEAD_CHAIN: _one_longer)
    cdef public bint recipe_cut        # [C/W] the manager let go of its recipe
                                       #     (MemoryManager.cut): a leaf made so
    cdef public Py_ssize_t numel       # number of elements (from shape)
    cdef public Py_ssize_t size        # bytes the value occupies (from shape and dtype)
    cdef public double cost            # [W] seconds its producer took
    cdef public long long last_use     # [C/W] logical clock of its last access
    cdef long long birth               # [C] when it was made (_births): a reader's record is
                                       #     always born after its inputs' (_lengthen_chains)
    cdef long long walk_mark           # [C/W] the walk over recipes that last reached it
                                       #     (_needed_by_evicted)
    cdef public int pins               # [C/W] > 0 while an op is reading it: never evict
    cdef vector[long long] queued_reads  # [C/W] under a DTR budget: the sequence numbers of
                                       #     the queued ops that read it, first first, from
    cdef size_t queued_reads_from      #     this index on (a C array: no object for the
                                       #     garbage collector to walk, one per op's input)
    cdef public bint read_since_produced  # [C/W] an op has read the value it holds now
    cdef public int tensor_refs        # [C] live Tensor objects sharing this value
    cdef public int pending_uses       # [C/W] queued commands that read or produce it
    cdef public long long ready_seq    # [C] sequence number of the command producing it
    cdef public ErrorRecord error      # [W] set when INVALID
    cdef public bint persistent        # [C] rebound value (parameter update, in-place op):
                                       #     never evicted; its producer is cut once it exists
    cdef public bint ghost_kept        # [W] DTR: a dead base taken back from the views'
                                       #     storage for evicted tensors (_keeping.pxi)
    cdef public object uf_class        # [C/W] DTR: the union-find class of evicted
                                       #     neighbourhoods it joined (an EvictedClass)
    cdef public str swap_path          # [C/W] the file holding the value while SWAPPED
    cdef public object swap_layout     # [C/W] its SwapLayout (shape, strides, dtype, span)
    cdef public object ghost           # [C/W] while DROPPED: where its value still lies in a
                                       #     storage views keep (a _Ghost), to take back
    cdef public object scope           # [C] imperative.scope.ScopeNode it was made under
    cdef public object op              # [C] the op that produced it (None for data)
    cdef public int out_index          # [C] which output of `op`
    cdef public object user_name       # [C] the `.name` last given a Tensor of it (None:
                                       #     none), for the profile's memory events
    cdef object __weakref__


@cython.final
@cython.freelist(256)
cdef class Command:                     # (not tracked by the garbage collector: _records.pxi)
    cdef public int kind
    cdef public long long seq          # [C] position in the worker stream, set when queued
    cdef public long long prof_id      # [C] joins its dispatch and execution in a profile
    cdef public object op              # OpDef (CMD_APPLY)
    cdef public list inputs            # TensorInfo
    cdef public list outputs           # TensorInfo
    cdef public list dels              # inputs whose last reader this is: freed after it runs
    cdef public bint fast              # elementwise ufunc on equal dtypes and shapes
    cdef public object scope           # ScopeNode the op was issued under
    cdef public object site_code       # code object that issued the op (for error messages)
    cdef public int site_line          # instruction offset in site_code
    cdef public object blame           # OpSite of the forward op a backward op is for, or None
    cdef public TensorInfo target      # CMD_DEL
    cdef public Command epilogue       # [W] the next command, run in this one's kernel
    cdef public bint prefused          # [W] its result is already in its input's buffer


cdef class OpDef:
    """Base of every op. Python subclasses provide `infer(inputs)` and `kernel(*arrays)`."""
    cdef readonly bint recomputable    # False for RNG ops: never dropped
    cdef readonly bint inplace_capable # may write its output into a dying input's storage
    cdef readonly bint aliases_input   # outputs may be views of inputs (share their Storage)
    cdef readonly bint value_dependent # output shape known only after it runs
    cdef readonly bint cost_by_output  # its work grows with its outputs, not its first input
                                       #     (a view, a gather): that input's size is free
    cdef readonly bint epilogue_capable # kernel(..., epilogue=) can do the next op's work
    cdef readonly bint keeps_memo      # kernel_keeping returns a small memo with which
                                       #     kernel_from recomputes the same bits cheaper
    cdef public object epilogue_kind   # the epilogue (backend/epilogue.py) that does this
                                       #     op's work on a product it reads, or None
    cdef public object ufunc           # numpy ufunc for the elementwise fast path, or None
    cdef public bint ufunc_floats_only # the ufunc is exact on float inputs only (exp, tanh)
    cdef public object host_fn         # a one-argument elementwise op that is no ufunc (relu,
                                       #     sigmoid, gelu): its kernel's result on one array,
                                       #     for the host fast path, or None (ufunc_floats_only
                                       #     holds)
    cdef dict _same_dtype_out          # input dtype -> output dtype, for the fast path
    cdef object _last_inferred         # the Inferred last found (its key checked by identity
                                       #     first: an op is mostly called on like inputs)
    cdef dict _infer_cache             # input descriptions -> Inferred (infer's result, the
                                       #     direct kernel; _records.pxi)
    cdef dict _fastest                 # [W] input descriptions -> the fastest run seen, seconds
    cdef tuple _fastest_key            # [W] ... the descriptions last asked for (_fastest_run),
    cdef double _fastest_s             #     and their fastest run


# --------------------------------------------------------------------------- the channel
# implemented in imperative/_channel.pxi; its worker thread and executor are module functions
# that take it as `self` (_worker.pxi, _execute.pxi, _tiny.pxi): Cython allows no `include`
# in a class body

cdef class MemoryManager


@cython.final
cdef class Channel:
    cdef long long _opts[N_OPTIONS]  # [C] the options' values (set_option)
    cdef MemoryManager mm            # set once: drop, swap, DTR (_memory.pxi)
    cdef bint _memory_on             # [C] any of enable_drop/swap, record_computing_path, DTR
    # handle table [C]
    cdef list _table
    cdef vector[long long] _free_handles   # whole handles: a free slot's id and next generation
    cdef Py_ssize_t _live
    # command flow: [C] appends to _buffer and _pending; [W] takes _pending whole
    cdef list _buffer
    cdef list _pending
    cdef long long _seq            # [C] last sequence number queued
    cdef long long _processed      # [W] commands run by the worker (read by waiters under _mutex)
    # worker thread and its wake-up; the "nogil" fields live under _mutex
    cdef object _thread            # [C] started with the first queued command
    cdef pthread_mutex_t _mutex
    cdef pthread_cond_t _wake_cond
    cdef pthread_cond_t _done_cond
    cdef int _wake                 # nogil
    cdef long long _notify_at      # nogil: smallest sequence number a waiter waits for
    cdef int _worker_sleeping      # [C/W]
    cdef int _worker_awake         # nogil: set by the worker once it holds the GIL again
    cdef int _n_waiters            # [C]
    cdef int _caller_running       # [C] a caller runs the queue's commands (_run_queue_here)
    cdef long long _run_by_caller  # [C] commands a waiting caller ran itself (a debug counter)
    cdef Py_ssize_t _ahead_bytes   # [C/W] bytes of the storages ops run beside the busy
    cdef long long _ahead_epoch    #     worker made and still hold, counted since it was
                                   #     last idle (the epoch); _tiny.pxi: _ahead_fits
    cdef int _stopping             # [C]
    cdef int _discarding           # [C] at exit: the worker drops the commands left
    cdef str _closed_by            # [C] who called close(), for the errors after it
    cdef int _worker_dead          # [W]
    # errors
    cdef list _errors              # [C/W] ErrorRecords not yet raised
    # lifecycle: 0 usable, 1 closed, 2 forked child
    cdef int _state                # [C] (close, and the fork hook in the child)
    cdef public Device default_device  # [C]
    cdef object _pid               # set once: the process that made it

    # ---- options
    cdef void attach_memory_manager(self, MemoryManager mm)
    cdef void _update_memory_flag(self)

    # ---- lifecycle checks
    cdef int _raise_unusable(self) except -1

    cdef inline int check_usable(self) except -1:
        if self._state != 0:
            self._raise_unusable()
        return 0

    # ---- handle table
    cdef TensorInfo new_info(self, tuple shape, object dtype, Device device,
                             bint maybe_packed=*)
    cdef void _retire_handle(self, TensorInfo info)
    cpdef TensorInfo lookup(self, long long handle)

    cdef inline void _add_handle(self, TensorInfo info):
        # The free list holds whole handles: a slot's id with its next generation.
        if self._free_handles.size():
            info.handle = self._free_handles.back()
            self._free_handles.pop_back()
            self._table[info.handle & 0xFFFFFFFFLL] = info
        else:
            info.handle = len(self._table)
            self._table.append(info)
        self._live += 1

    # ---- values that arrive from the host
    cdef TensorInfo put(self, object array, tuple shape, object dtype, Device device)
    cdef int _set_value(self, TensorInfo info, object array, Storage shared) except -1
    cdef int _adopt(self, TensorInfo info, object array, Storage shared) except -1
    cdef void _free_value(self, TensorInfo info)

    # ---- dispatch
    cdef list dispatch(self, OpDef op, list inputs)
    cdef int _raise_unusable_input(self, op, TensorInfo info) except -1
    cdef int _submit(self, Command cmd) except -1
    cdef int _run_inline(self, Command cmd, bint raise_original,
                         Py_ssize_t elements) except -1
    cdef int _raise_error_of(self, Command cmd, bint raise_original) except -1

    # ---- the buffer that folds Del into the last reader
    cdef void _push(self, Command cmd)
    cdef void _flush_buffer(self, long long keep)
    cdef void release(self, TensorInfo info)
    cdef void _delete(self, TensorInfo info)
    cdef void _finish_delete(self, TensorInfo info)

    # ---- waiting for values
    cdef int wait_produced(self, TensorInfo info, str why=*) except -1
    cpdef object get_value(self, TensorInfo info)
    cpdef object get_readonly_view(self, TensorInfo info)
    cpdef int sync(self) except -1
    cpdef int raise_pending_errors(self) except -1


# --------------------------------------------------------------------------- the manager's parts

# implemented in imperative/_memory_options.pxi
@cython.final
cdef class MemoryOptions:
    # a copy of the Channel's options, refreshed by on_options whenever one is set. [C]: every
    # field is written by `read`, from on_options
    cdef readonly bint on            # any of the four switches below
    cdef readonly bint drop          # enable_drop: Tensor._drop()
    cdef readonly bint swap          # enable_swap: swapping out, by hand or as an eviction
    cdef readonly bint record_path   # record_computing_path
    cdef readonly bint dtr           # enable_dtr_auto_drop: eviction under the threshold
    cdef readonly bint sqrt_sampling # enable_dtr_sqrt_sampling
    cdef readonly long long threshold      # dtr_eviction_threshold (bytes)
    cdef readonly long long min_evictee    # dtr_evictee_minimum_size (bytes)
    cdef readonly long long budget         # the threshold DTR evicts under; 0: no eviction

    cdef void read(self, long long* opts)


# implemented in imperative/_policies.pxi (its subclasses, one a file, are declared there)
cdef class EvictionPolicy:
    cpdef double score(self, TensorInfo info, long long gap)
    cpdef double score_at_least(self, TensorInfo info, long long gap)
    cpdef double score_bound(self, TensorInfo info, long long gap)
    cpdef double score_together(self, list members, list gaps, Py_ssize_t nbytes)
    cpdef on_evict(self, TensorInfo info)
    cpdef on_restore(self, TensorInfo info)


# implemented in imperative/_swap.pxi
@cython.final
cdef class SwapRate:
    # one direction's cost: a fixed cost per file plus bytes at a running bandwidth
    cdef readonly double overhead       # [C/W] seconds per file (calibrate_now)
    cdef double nbytes, seconds         # [C/W] (add: a swap's time)

    cdef void add(self, double nbytes, double seconds)
    cdef double per_s(self)
    cdef double seconds_for(self, double nbytes)


@cython.final
cdef class SwapSpace:
    # where swap files go (private folders) and the measured bandwidth to them
    cdef readonly object chosen        # [C] the user's swap folder, or None
    cdef dict folders                  # [C/W] parent folder (None: the temporary one) ->
                                       #     private folder; added to under `lock`
    cdef object lock                   # set once: making a private folder
    cdef object calibration_lock       # set once
    cdef readonly long long serial     # [C/W] the last file's number
    cdef object pid                    # set once: whose folders (a forked child must not
                                       #     remove them)
    cdef readonly SwapRate write_rate, read_rate   # set once (their fields: [C/W])
    cdef bint calibrated               # [C/W] under `calibration_lock`
    cdef object calibration_error      # [C/W] why calibration failed, until the folder is
                                       #     chosen again

    cdef int calibrate(self) except -1
    cdef int calibrate_now(self) except -1
    cdef double seconds_to_swap(self, Py_ssize_t nbytes)


# --------------------------------------------------------------------------- the memory manager
# implemented in imperative/_memory.pxi. Kernels and swap files let other threads run midway:
# see "Several threads" in docs/design.md for what pins protect.

@cython.final
cdef class MemoryManager:
    cdef Channel ch                  # set once: the Channel whose values it manages
    cdef readonly MemoryOptions opts # [C] the options' snapshot (on_options)
    cdef public EvictionPolicy policy  # [C] imp.dtr.set_policy
    # [C/W] Resident, recomputable, big enough: {address: weak reference}. Held weakly: a
    # recomputed record that no tensor and no recipe refers to any more must die (and free
    # its value), not be kept alive here together with the whole history its recipe
    # reaches. A dict, not a WeakSet: every read and write is one C call under the GIL, so
    # threads issuing ops at once never see it change in the middle of an iteration.
    cdef public dict candidates
    # [C/W] Leaves (no producer) whose tensors are gone but whose value an evicted tensor
    # needs to come back: {address: weak reference}; freed as soon as none does (sweep_kept)
    cdef public dict kept
    # [C/W] Leaves that died under a budget and were kept: {address: weak reference}, for
    # the next op to see whether the evicted tensors that need them are small enough to
    # bring back instead (_free_leaves_of_small_readers)
    cdef dict kept_since_op
    cdef long long deaths_since_sweep  # [C/W]
    cdef long long sweep_after       # [C/W] deaths between sweeps: grows with a sweep's work
    cdef public long long clock      # [C/W] logical: one tick per op run
    cdef long long queued_to         # [C] the sequence number of the last op queued
    cdef long long running           # [W, or C] ... of the op running (or run last)
    cdef deque[long long] queued_ops # [C/W] under a budget: the sequence numbers of the
                                     #     queued ops from the one running on (next_op)
    cdef public SwapSpace swap       # [C/W] swap files: private folders, measured bandwidth
    cdef object _rng                 # [C/W] for sqrt(N) sampling, seeded: reproducible
    cdef list restoring              # [W, or C] the stack of the restore under way, or None
    cdef dict restore_reads          # [W, or C] its recipes' reads still to come, by key
    cdef public double eviction_seconds  # [C/W]
    cdef public long long overshoots     # [C/W]
    cdef public long long cuts       # [C/W] records whose recipe was let go (release_leaf, chains)
    cdef public long long peak_floor # [C/W] the most memory that could not be evicted when the
                                     #     budget was reached (pinned, leaves, unrecomputable)
    cdef long long pool_sized_for    # [C/W] the budget the worker's block cache was sized for
    cdef public long long highest_floor  # [C/W] the highest floor seen above the budget, since
                                         #     the budget was set (make_room)
    cdef long long live_high         # [C/W] the most bytes tensors held, resident or evicted,
                                     #     as restores measured it since the budget was set: a
                                     #     peak the program reaches without the manager
    cdef public long long high_water     # [C/W] the most an op has run with over the budget,
                                         #     since the budget was set (make_room)
    cdef public long long reserved   # [C/W] bytes room was made for whose values are not
                                     #     stored yet (a kernel running: reserve, release)
    cdef public long long reserved_beside  # [C/W] those of the caller's ops beside the worker
    cdef long long budget_from       # [C/W] the last command issued before the budget was set
    cdef public double victim_density  # [C/W] the evicted values' recompute cost per byte,
                                       #     a moving average (_keep_dense_dead); 0: none yet

    # ---- the hooks the Channel calls
    cdef void on_options(self, long long* opts)
    cdef void on_dispatch(self, OpDef op, list inputs, list outputs)
    cdef void on_queued(self, Command cmd)
    cdef void on_freed(self, TensorInfo info)
    cdef bint on_dead(self, TensorInfo info) except -1
    cdef int run_managed(self, Command cmd) except -1
    cdef Py_ssize_t will_run_here(self, list inputs, Py_ssize_t needed,
                                  Device device) except -1
    cdef void ran_here(self, OpDef op, list inputs, list outputs, Py_ssize_t reserved,
                       long long nanoseconds)
    cdef int ensure_resident(self, TensorInfo info) except -1
    cdef bint may_overwrite(self, TensorInfo info) except -1

    # ---- running an op (run_managed, and a recomputation)
    cdef void ran(self, list inputs)

    cdef inline void pin(self, list inputs):
        """An op is about to read `inputs`: none may be evicted until it ran."""
        cdef TensorInfo info
        for info in inputs:
            info.pins += 1

    # ---- recording producers
    cdef void record(self, OpDef op, list inputs, list outputs)
    cdef void measured(self, OpDef op, list inputs, list outputs, long long nanoseconds)
    cdef void on_produced(self, TensorInfo info)
    cdef int make_persistent(self, TensorInfo info) except -1
    cdef void consider_swapping(self, TensorInfo leaf)
    cdef void forget(self, TensorInfo info)
    cdef void cut(self, TensorInfo info)

    # ---- leaves that recipes read
    cdef bint release_leaf(self, TensorInfo leaf) except -1
    cdef void note_death(self)
    cdef void sweep_kept(self)

    # ---- dropping, swapping, restoring
    cdef int drop(self, TensorInfo info, str reason) except -1
    cdef int drop_dead(self, TensorInfo info, str reason) except -1

    # ---- the budget
    cdef void size_pool(self, long long threshold)
    cdef int make_room(self, Py_ssize_t needed, Device device) except -1
    cdef Py_ssize_t reserve(self, Py_ssize_t needed, Device device, bint beside=*) except -1
    cdef void release(self, Py_ssize_t reserved, bint beside=*)
    cdef bint fits(self, Py_ssize_t needed, Device device)
    cdef void floor_now(self, Device device, Py_ssize_t evictable, Py_ssize_t needed)
    cdef bint budget_in_force(self)
    cdef void new_window(self)
    cdef void overshoot(self, Device device, Py_ssize_t needed, long long threshold)
    cdef list live_candidates(self)
    cdef bint read_next(self, TensorInfo info)
    cdef long long next_op(self)
    cdef void pass_queued_ops(self)
    cdef TensorInfo choose(self, Device device, list pool, object ranking)
    cdef long long gap(self, TensorInfo info)
    cdef int evict(self, TensorInfo victim) except -1

    cdef inline bint evictable(self, TensorInfo info, Device device):
        return (info.status == PRODUCED and not info.pins and info.device is device
                and info.storage is not None and info.storage.refs == 1
                and not self.read_next(info))
