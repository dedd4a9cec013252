# Included by _core.pyx: the compiled plan of imp.jit (imperative/jit/compiler.py builds it).
#
# A plan is a list of steps over a table of value slots (numpy arrays): KernelStep calls an
# op's kernel, as the executor does (imperative/_execute.pxi: _run_kernel); FusedGroup runs
# a chain of elementwise ops in one pass over blocks of BLOCK elements, calling numpy's own
# inner loop of each op's ufunc (the entry of the ufunc's loop table for exactly the
# operands' dtypes, chosen once when the plan is compiled) on each block in the recorded
# order. Every element goes through the same loops as in the eager run, so the results are
# bit-identical; values that live only inside the chain stay in block buffers that are
# reused as soon as they die (in place, when an op's input dies at it). Calling the loops
# directly skips numpy's per-call dispatch: numpy's floating-point warnings are then raised
# here, as numpy would (np.geterr()).

cdef extern from "numpy/arrayobject.h":
    ctypedef Py_ssize_t npy_intp
    ctypedef struct PyArrayObject:
        pass
    void* PyArray_DATA(PyArrayObject*) nogil
    bint PyArray_IS_C_CONTIGUOUS(PyArrayObject*)
    object PyArray_SimpleNew(int nd, npy_intp* dims, int typenum)
    int _import_array() except -1

_import_array()      # (PyArray_SimpleNew: the plan's output arrays, without np.empty's call)

cdef extern from "numpy/ufuncobject.h":
    ctypedef void (*PyUFuncGenericFunction)(char**, const npy_intp*, const npy_intp*, void*) noexcept nogil
    ctypedef struct PyUFuncObject:
        int nin
        int nout
        int nargs
        int ntypes
        PyUFuncGenericFunction* functions
        void** data
        char* types

cdef extern from "fenv.h" nogil:
    int feclearexcept(int)
    int fetestexcept(int)
    int FE_DIVBYZERO
    int FE_OVERFLOW
    int FE_INVALID
    int FE_UNDERFLOW

cdef extern from "pthread.h" nogil:
    ctypedef unsigned long pthread_t
    int pthread_create(pthread_t*, const void*, void* (*)(void*) noexcept nogil, void*)
    int pthread_join(pthread_t, void**)

from cpython.exc cimport PyErr_Occurred
from libc.stdlib cimport calloc, malloc, free

cdef enum:
    BLOCK = 4096            # elements per pass: a few block buffers stay in L1/L2
    MAX_GROUP_OPS = 40      # (the compiler splits longer chains)
    MAX_OPERANDS = 128      # (at most 3 per op: 40 ops never need more)
    OPND_FULL_IN = 0        # an array of the chain's shape, read
    OPND_SCALAR = 1         # a 0-d array, read with stride 0
    OPND_FULL_OUT = 2       # an array of the chain's shape, written (needed after the chain)
    OPND_TEMP = 3           # a block buffer
    MAX_THREADS = 16        # threads sharing one chain's blocks
    # a block buffer's bytes: BLOCK elements of 8 bytes and 320 more, so that the same
    # element of two buffers is not a multiple of 4 KiB apart (a load from one waits for a
    # store to the other: the CPU matches addresses by their low 12 bits first)
    SLOT_BYTES = BLOCK * 8 + 320

FUSED_MAX_OPS = MAX_GROUP_OPS
cdef int _FP_FLAGS = FE_DIVBYZERO | FE_OVERFLOW | FE_INVALID
cdef Py_ssize_t _NOGIL_MIN = 16384      # chains this long release the GIL while they run
# A long chain's blocks are shared among as many threads as numpy's BLAS runs (one knob for
# a process' threads: threadpoolctl or OPENBLAS_NUM_THREADS), each thread's part at least
# this many elements (a thread costs tens of microseconds to start; such a part takes
# hundreds). Every element still goes through the same loops: the same bits.
cdef Py_ssize_t _PARALLEL_MIN = 1 << 16
cdef object _native = None              # imperative.backend.native (imported when used)


cdef struct _Chain:
    # the ops of a fused group, readable without the GIL
    int n_ops
    PyUFuncGenericFunction fn[MAX_GROUP_OPS]
    void* fdata[MAX_GROUP_OPS]
    int nargs[MAX_GROUP_OPS]
    int args[MAX_GROUP_OPS][3]


cdef struct _Share:
    # one thread's part of a run: elements [begin, end) of every operand
    _Chain* chain
    char* base[MAX_OPERANDS]
    npy_intp adv[MAX_OPERANDS]
    npy_intp stride[MAX_OPERANDS]
    int errs[MAX_GROUP_OPS]     # the floating-point flags each op raised
    npy_intp begin, end
    char* temps                 # its block buffers (the first share's: the group's own,
                                #     unless another thread runs the plan now)


cdef int _threads_for(Py_ssize_t n) except -1:
    global _native
    if n < 2 * _PARALLEL_MIN:
        return 1
    if _native is None:
        from .backend import native
        _native = native
    cdef int wanted = _native.blas_threads()
    return max(1, min(wanted, MAX_THREADS, n // _PARALLEL_MIN))


@cython.final
cdef class UfuncLoop:
    """One entry of a ufunc's loop table."""
    cdef PyUFuncGenericFunction fn
    cdef void* data
    cdef readonly int nargs


def ufunc_loop(ufunc, dtypes):
    """The inner loop `ufunc` runs for exactly these dtypes (inputs, then the output), if
    it has one and it gives the ufunc's own bits on a probe (else None: the op keeps its
    kernel)."""
    if not isinstance(ufunc, np.ufunc) or ufunc.nout != 1 or len(dtypes) != ufunc.nin + 1:
        return None
    if ufunc.__name__ == "power" and dtypes[0].kind != "f":
        return None          # integer power raises for negative exponents from its loop
    cdef PyUFuncObject* u = <PyUFuncObject*>ufunc
    cdef int i, k
    cdef UfuncLoop loop
    nums = [np.dtype(d).num for d in dtypes]
    for i in range(u.ntypes):
        if all(u.types[i * u.nargs + k] == nums[k] for k in range(u.nargs)):
            if u.functions[i] == NULL:
                return None
            loop = UfuncLoop.__new__(UfuncLoop)
            loop.fn = u.functions[i]
            loop.data = u.data[i]
            loop.nargs = u.nargs
            return loop if _same_as_ufunc(loop, ufunc, dtypes) else None
    return None


cdef bint _same_as_ufunc(UfuncLoop loop, object ufunc, list dtypes):
    """The loop's results on a probe (ordinary and special values, a length with a tail)
    are the ufunc's own, bit for bit."""
    rng = np.random.default_rng(7)
    n = 67
    ins = []
    cdef Py_ssize_t nin = len(dtypes) - 1     # (no negative indices: wraparound is off)
    for d in dtypes[:nin]:
        d = np.dtype(d)
        if d.kind == "f":
            a = (rng.standard_normal(n) * 4).astype(d)
            a[:4] = [0.0, -0.0, np.inf, np.nan]
        elif d.kind == "b":
            a = rng.integers(0, 2, n).astype(d)
        else:
            a = rng.integers(1, 100, n).astype(d)
        ins.append(a)
    with np.errstate(all="ignore"):
        expected = ufunc(*ins)
    out = np.empty(n, dtypes[nin])
    cdef char* ptrs[4]
    cdef npy_intp steps[4]
    cdef npy_intp count = n
    cdef int k
    arrays = ins + [out]
    for k in range(len(arrays)):
        ptrs[k] = <char*>PyArray_DATA(<PyArrayObject*>arrays[k])
        steps[k] = arrays[k].itemsize
    loop.fn(ptrs, &count, steps, loop.data)
    feclearexcept(_FP_FLAGS)
    if PyErr_Occurred():
        raise RuntimeError("probing a ufunc loop raised")
    return expected.dtype == out.dtype and expected.tobytes() == out.tobytes()


cdef int _fp_report(str name, int flags) except -1:
    """numpy's floating-point error handling for a loop called directly (np.geterr())."""
    modes = np.geterr()
    for flag, kind in ((FE_DIVBYZERO, "divide by zero"), (FE_OVERFLOW, "overflow"),
                       (FE_INVALID, "invalid value")):
        if not flags & flag:
            continue
        mode = modes["divide" if flag == FE_DIVBYZERO else
                     "over" if flag == FE_OVERFLOW else "invalid"]
        if mode == "raise":
            raise FloatingPointError(f"{kind} encountered in {name}")
        if mode != "ignore":
            warnings.warn(f"{kind} encountered in {name}", RuntimeWarning, stacklevel=2)
    return 0


@cython.final
cdef class FusedGroup:
    """A chain of elementwise ops run block by block (see the top of this file)."""
    cdef Py_ssize_t n
    cdef tuple shape
    cdef int n_operands, n_slots
    cdef int kind[MAX_OPERANDS]
    cdef Py_ssize_t vid[MAX_OPERANDS]
    cdef npy_intp itemsize[MAX_OPERANDS]
    cdef int slot[MAX_OPERANDS]
    cdef _Chain chain
    cdef list names, dtypes, dies, loops
    cdef readonly list writes     # value ids of the full arrays it makes
    cdef int typenum[MAX_OPERANDS]
    cdef int ndim
    cdef npy_intp dims[32]
    cdef char* temps
    cdef bint busy

    def __cinit__(self, Py_ssize_t n, tuple shape, list layout, list ops, int n_slots,
                  list dtypes, list dies):
        cdef int i, j
        cdef UfuncLoop loop
        if len(layout) > MAX_OPERANDS or len(ops) > MAX_GROUP_OPS:
            raise ValueError("a fused group is too long (the compiler splits chains)")
        kinds = {"full_in": OPND_FULL_IN, "scalar": OPND_SCALAR, "full_out": OPND_FULL_OUT,
                 "temp": OPND_TEMP}
        self.n, self.shape, self.n_slots = n, shape, n_slots
        self.n_operands, self.chain.n_ops = len(layout), len(ops)
        for i, (kind, vid, itemsize, slot) in enumerate(layout):
            self.kind[i], self.vid[i] = kinds[kind], vid
            self.itemsize[i], self.slot[i] = itemsize, slot
        self.names, self.loops = [], []
        for j, (loop, args, name) in enumerate(ops):
            self.chain.fn[j], self.chain.fdata[j] = loop.fn, loop.data
            self.chain.nargs[j] = loop.nargs
            for i in range(loop.nargs):
                self.chain.args[j][i] = args[i]
            self.names.append(name)
            self.loops.append(loop)
        self.dtypes, self.dies = dtypes, dies
        self.writes = [vid for kind, vid, _, _ in layout if kind == "full_out"]
        for i in range(len(dtypes)):
            self.typenum[i] = dtypes[i].num
        if len(shape) > 32:
            raise ValueError("a fused group has more than 32 dimensions")
        self.ndim = len(shape)
        for i in range(self.ndim):
            self.dims[i] = shape[i]
        self.temps = <char*>malloc(max(n_slots, 1) * SLOT_BYTES)
        if self.temps == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.temps)

    cdef int run(self, list vals) except -1:
        cdef int threads = _threads_for(self.n)
        cdef _Share* shares = <_Share*>calloc(threads, sizeof(_Share))
        cdef int i, j, t, flags
        cdef bint own_temps = not self.busy    # else another thread runs this plan now
        if shares == NULL:
            raise MemoryError()
        self.busy = True
        try:
            for t in range(threads):
                shares[t].temps = self.temps if t == 0 and own_temps else <char*>malloc(
                    max(self.n_slots, 1) * SLOT_BYTES)
                if shares[t].temps == NULL:
                    raise MemoryError()
            keep = self._bind(vals, &shares[0])    # (keep: contiguous copies, alive)
            self._split(shares, threads)
            feclearexcept(_FP_FLAGS)
            if self.n >= _NOGIL_MIN:
                with nogil:
                    _run_shares(shares, threads)
            else:
                _run_blocks(&shares[0])
            for j in range(self.chain.n_ops):
                flags = 0
                for t in range(threads):
                    flags |= shares[t].errs[j]
                if flags:
                    _fp_report(self.names[j], flags)
        finally:
            for t in range(threads):
                if shares[t].temps != self.temps:
                    free(shares[t].temps)
            free(shares)
            if own_temps:
                self.busy = False
        for vid in self.dies:
            vals[vid] = None
        return 0

    cdef list _bind(self, list vals, _Share* share):
        """Point `share` at every operand (the outputs made here) for the whole range;
        returns the contiguous copies of non-contiguous inputs, to keep while it runs."""
        cdef int i, k
        keep = []
        share.chain = &self.chain
        share.begin, share.end = 0, self.n
        for i in range(self.n_operands):
            k = self.kind[i]
            if k == OPND_TEMP:
                share.base[i] = share.temps + <Py_ssize_t>self.slot[i] * SLOT_BYTES
                share.adv[i] = 0
                share.stride[i] = self.itemsize[i]
                continue
            if k == OPND_FULL_OUT:
                arr = PyArray_SimpleNew(self.ndim, self.dims, self.typenum[i])
                vals[self.vid[i]] = arr
            else:
                arr = vals[self.vid[i]]
                if k == OPND_FULL_IN and not PyArray_IS_C_CONTIGUOUS(<PyArrayObject*>arr):
                    arr = _np_ascontiguousarray(arr)     # (a view: same values)
                    keep.append(arr)
            share.base[i] = <char*>PyArray_DATA(<PyArrayObject*>arr)
            share.adv[i] = 0 if k == OPND_SCALAR else self.itemsize[i]
            share.stride[i] = share.adv[i]
        return keep

    cdef void _split(self, _Share* shares, int threads):
        """Copy shares[0]'s binding into the others, each with its own block buffers, and
        give each a run of whole blocks."""
        cdef int i, t
        cdef char* temps
        cdef npy_intp part = ((self.n + threads - 1) // threads + BLOCK - 1) // BLOCK * BLOCK
        for t in range(1, threads):
            temps = shares[t].temps
            memcpy(&shares[t], &shares[0], sizeof(_Share))
            shares[t].temps = temps
            for i in range(self.n_operands):
                if self.kind[i] == OPND_TEMP:
                    shares[t].base[i] = temps + <Py_ssize_t>self.slot[i] * SLOT_BYTES
        for t in range(threads):
            shares[t].begin = min(self.n, t * part)
            shares[t].end = min(self.n, (t + 1) * part)


cdef void _run_shares(_Share* shares, int threads) noexcept nogil:
    """shares[1:] on threads of their own (inline where a thread cannot start), shares[0]
    on this one."""
    cdef pthread_t ids[MAX_THREADS]
    cdef bint started[MAX_THREADS]
    cdef int t
    for t in range(1, threads):
        started[t] = pthread_create(&ids[t], NULL, _share_thread, &shares[t]) == 0
        if not started[t]:
            _run_blocks(&shares[t])
    _run_blocks(&shares[0])
    for t in range(1, threads):
        if started[t]:
            pthread_join(ids[t], NULL)


cdef void* _share_thread(void* share) noexcept nogil:
    feclearexcept(_FP_FLAGS)       # (a thread starts with its creator's flags)
    _run_blocks(<_Share*>share)
    return NULL


cdef void _run_blocks(_Share* share) noexcept nogil:
    """Every op of the chain on one block, block after block over the share's range; the
    flags each op raised."""
    cdef char* p[3]
    cdef npy_intp st[3]
    cdef npy_intp cnt, start = share.begin, end = share.end
    cdef _Chain* g = share.chain
    cdef int j, a, o, flags
    while start < end:
        cnt = end - start if end - start < BLOCK else BLOCK
        for j in range(g.n_ops):
            for a in range(g.nargs[j]):
                o = g.args[j][a]
                p[a] = share.base[o] + share.adv[o] * start
                st[a] = share.stride[o]
            g.fn[j](p, &cnt, st, g.fdata[j])
            flags = fetestexcept(_FP_FLAGS)
            if flags:
                share.errs[j] |= flags
                feclearexcept(_FP_FLAGS)
        start += BLOCK


@cython.final
cdef class KernelStep:
    """An op's kernel called on arrays, its results stored as the executor stores them;
    as the executor does (_execute.pxi: _run_kernel), into the buffer of an input that dies
    here (`reuse`: an input slot, or -1), or doing the next op's work (`epilogue`: that op,
    with the slots of its other inputs) when the compiler found the executor's conditions
    (or, `epilogue_kind` given, an update the schedule moved up: jit/schedule.py). An RNG
    op's step (`rng`: its place among the program's RNG ops, else -1) runs the op the call
    gives it, with the seed that call drew (CompiledPlan.run)."""
    cdef OpDef op
    cdef list ins, outs, dies
    cdef str where
    cdef Py_ssize_t reuse
    cdef object epilogue
    cdef list epilogue_ins
    cdef object epilogue_kind
    cdef object direct_fn
    cdef tuple direct_tail
    cdef Py_ssize_t rng

    def __cinit__(self, OpDef op, list ins, list outs, list dies, str where,
                  Py_ssize_t reuse=-1, epilogue=None, list epilogue_ins=None,
                  epilogue_kind=None, direct=None, Py_ssize_t rng=-1):
        self.op, self.ins, self.outs, self.dies, self.where = op, ins, outs, dies, where
        self.reuse, self.epilogue, self.epilogue_ins = reuse, epilogue, epilogue_ins
        self.epilogue_kind = epilogue_kind
        self.rng = rng
        # the op's direct kernel for the recorded inputs' shapes and dtypes (OpDef.
        # direct_kernel: the kernel's bits without its Python frames), for a plain call
        if direct is not None and reuse < 0 and epilogue is None:
            self.direct_fn, self.direct_tail = direct

    cdef int run(self, list vals, tuple rng_ops) except -1:
        cdef Py_ssize_t i
        arrays = [vals[i] for i in self.ins]
        try:
            if self.rng >= 0:          # (no rng_ops: the recorded op, the recorded numbers)
                op = self.op if rng_ops is None else rng_ops[self.rng]
                result = op.kernel(*arrays)
            elif self.direct_fn is not None:
                result = self.direct_fn(*arrays, *self.direct_tail)
            elif self.reuse >= 0:
                target = vals[self.reuse]
                result = self.op.kernel(*arrays, out=target)
            elif self.epilogue is not None:
                result = self.op.kernel(*arrays, epilogue=Epilogue(
                    self.epilogue, *[vals[i] for i in self.epilogue_ins],
                    kind=self.epilogue_kind))
            else:
                result = self.op.kernel(*arrays)
        except Exception as e:
            e.add_note(f"in the replay of {self.op!r}, recorded at {self.where}")
            raise
        if type(result) is not tuple:
            result = (result,)
        for i in range(len(self.outs)):
            r = result[i]
            if type(r) is not _ndarray:
                r = _np_asarray(r)
            if not (self.op.aliases_input and _views_one_of(r, arrays)):
                r = _c_ordered(r)
            vals[self.outs[i]] = r
        for i in self.dies:
            vals[i] = None
        return 0


cdef bint _views_one_of(object array, list arrays):
    """`array` is a view of one of `arrays` (the executor then keeps its layout)."""
    root = array
    while isinstance(root.base, _ndarray):
        root = root.base
    for a in arrays:
        base = a
        while isinstance(base.base, _ndarray):
            base = base.base
        if base is root:
            return True
    return False


@cython.final
cdef class CompiledPlan:
    """A recorded program's steps over value slots; `run(arrays)` takes the bound inputs in
    `inputs` order and returns the arrays of `outputs`."""
    cdef readonly list steps, inputs, outputs
    cdef list template
    cdef list devices       # each output's Device
    cdef list fresh         # each output is a new array (a fused chain's), never a view
    cdef readonly Py_ssize_t n_slots

    def __cinit__(self, list steps, Py_ssize_t n_slots, list inputs, list outputs,
                  dict constants, list devices, list fresh):
        self.steps, self.n_slots, self.inputs, self.outputs = steps, n_slots, inputs, outputs
        self.devices = [as_device(d) for d in devices]
        self.fresh = fresh
        self.template = [None] * n_slots
        for vid, array in constants.items():
            self.template[vid] = array

    cpdef tuple run(self, arrays, tuple rng_ops=None):
        """`rng_ops`: the program's RNG ops in recorded order, each with the seed this call
        drew (imperative.random.reseeded), as run_steps issues them."""
        cdef list vals = list(self.template)
        cdef Py_ssize_t i
        for i in range(len(self.inputs)):
            vals[<Py_ssize_t>self.inputs[i]] = arrays[i]
        for step in self.steps:
            if type(step) is FusedGroup:
                (<FusedGroup>step).run(vals)
            else:
                (<KernelStep>step).run(vals, rng_ops)
        return tuple([vals[<Py_ssize_t>i] for i in self.outputs])


cpdef bint plan_may_run():
    """A compiled plan may run as one op: no memory manager, profile or gradient recording
    needs to see each op (a replay then issues them one by one)."""
    return not _channel._memory_on and not _profiling and _grad_hook is None


cpdef list run_plan(OpDef op, CompiledPlan plan, list infos, Py_ssize_t largest,
                    tuple rng_ops=None):
    """Run a plan as one op on records; returns the output records. A plan whose values
    all fit the host-compute size (`largest` elements at most) and whose inputs are
    resident runs here at once, as a tiny op does (Channel._submit); any other, or one
    that raised (so that the error takes the usual way), goes through dispatch. `op` runs
    the plan with `rng_ops` (jit/compiler.py: PlanOp.drawing)."""
    cdef TensorInfo info
    cdef Channel ch = _channel
    cdef int level = ch._opts[OPT_ASYNC_LEVEL]
    cdef bint here = (ch._state == 0 and not ch._memory_on and not _profiling
                      and _grad_hook is None and not _tracing
                      and (level == 0 or (ch._opts[OPT_HOST_COMPUTE]
                                          and largest <= _host_max_elements)))
    if here:
        for info in infos:
            if info.status != PRODUCED:
                here = False
                break
    if not here:
        return ch.dispatch(op, infos)
    arrays = [info.value for info in infos]
    try:
        results = plan.run(arrays, rng_ops)
    except Exception:
        return ch.dispatch(op, infos)
    cdef list outs = []
    cdef list roots = []            # the inputs' root arrays, found once for every output
    cdef Py_ssize_t i
    for i in range(len(results)):
        r = results[i]
        info = ch.new_info(r.shape, r.dtype, plan.devices[i], False)
        info.op = op
        info.scope = _current_scope
        info.out_index = i
        ch._set_value(info, r, None if plan.fresh[i] else _shared_storage(r, infos, roots))
        outs.append(info)
    return outs
