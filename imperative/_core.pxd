# The interpreter core's contract: the records and the commands (imperative/_records.pxi
# implements them). The Channel's fields are declared in imperative/_channel.pxi and the
# memory manager's in imperative/_memory.pxi, each with its owning thread: declaring either
# class here would make Cython require every cdef method of both, and every class their
# signatures name (devices, policies, swap space), here too (docs/design.md, "Threads and
# what they own", "The memory manager's hooks").
#
# Thread ownership (who may write a field; everyone reads under the GIL):
#   [C] caller threads (Python code issuing ops), [W] the worker thread,
#   [C/W] either, always while holding the GIL and without releasing it in between.
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


cimport cython
from libcpp.vector cimport vector


@cython.final
@cython.freelist(512)
cdef class Storage:
    """One allocation. Views (reshape, transpose, slices) share their base's Storage,
    so memory is counted once per storage, not once per tensor."""
    cdef readonly Py_ssize_t nbytes
    cdef readonly object device
    cdef public int refs          # [C/W] live TensorInfos whose value lies in it
    cdef public bint exported     # [C/W] a zero-copy numpy view was handed out: never write in place


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
    cdef public list users             # [C] weak references to the Producers reading it
    cdef public Py_ssize_t users_prune_at  # [C] prune dead references when `users` reaches this
    cdef public int dead_chain         # [C/W] dead evicted records its recomputation would
                                       #     have to recompute first (approximate)
    cdef public Py_ssize_t numel       # number of elements (from shape)
    cdef public Py_ssize_t size        # bytes the value occupies (from shape and dtype)
    cdef public double cost            # [W] seconds its producer took
    cdef public long long last_use     # [C/W] logical clock of its last access
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
    cdef public object uf_class        # [C/W] DTR: the union-find class of evicted
                                       #     neighbourhoods it joined (an EvictedClass)
    cdef public str swap_path          # [C/W] the file holding the value while SWAPPED
    cdef public object swap_layout     # [C/W] its SwapLayout (shape, strides, dtype, span)
    cdef public object ghost           # [C/W] while DROPPED: where its value still lies in a
                                       #     storage views keep (a _Ghost), to take back
    cdef public object scope           # [C] imperative.scope.ScopeNode it was made under
    cdef public object op              # [C] the op that produced it (None for data)
    cdef public int out_index          # [C] which output of `op`
    cdef object __weakref__


@cython.final
@cython.freelist(256)
cdef class Command:
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
    cdef public object epilogue_kind   # the epilogue (backend/epilogue.py) that does this
                                       #     op's work on a product it reads, or None
    cdef public object ufunc           # numpy ufunc for the elementwise fast path, or None
    cdef public bint ufunc_floats_only # the ufunc is exact on float inputs only (exp, tanh)
    cdef dict _same_dtype_out          # input dtype -> output dtype, for the fast path
    cdef dict _infer_cache             # input descriptions -> infer's result
    cdef dict _fastest                 # [W] input descriptions -> the fastest run seen, seconds
