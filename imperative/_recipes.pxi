# Included by _core.pyx: the memory manager's recipes. A Producer says how to recompute some
# records; each record lists the Producers that read it (`users`), and the walks below follow
# those links: which recorded ops read a record, which records a dying leaf still matters to.
#
# The links that must not keep a record alive (a Producer's outputs, a record's readers) are
# borrowed C pointers that each side clears as it dies, not weak references: recording made
# four or five objects per op for the garbage collector (the Producer, two lists, a weak
# reference per output and one to the Producer), which doubled its collections on models
# of many small ops (a GRU: 20 -> 39 a step) and ran them in the middle of evictions.


# Estimated costs, in seconds, so that decisions do not depend on timing noise.
cdef double _MEMORY_BYTES_PER_S = 5e9       # bytes an elementwise kernel moves per second
cdef double _FLOPS_PER_S = 1e11             # one-thread sgemm here (PERF_NOTES: 134 GFLOP/s)


# A recipe is no garbage collector object: one made per op and held to the step's end,
# each made object counted towards the next collection (they set off most of a small LSTM's,
# 2% of its step under a budget), and each collection walked them all. It can be in no
# cycle: its inputs existed before its op ran, so they cannot lead to its outputs, and an
# op holds only values fixed when it was made (an index tensor too existed before).
@cython.final
@cython.freelist(512)
@cython.no_gc
cdef class Producer:
    """How to recompute some tensors: an op, its input records (kept alive) and its output
    records (borrowed: an output nobody holds need not be recomputed, and clears its slot
    as it dies, _unlink_output)."""
    cdef readonly object op
    cdef readonly list inputs
    cdef vector[PyObject*] outs      # NULL where the output record died
    cdef readonly double cost
    cdef long long walk_mark         # the walk that last read its inputs (_kept_leaves_read)
    cdef object memo                 # what the op's recorded run kept to recompute with less
                                     #     work (OpDef.keeps_memo: a normalisation's
                                     #     statistics)

    def __dealloc__(self):
        cdef TensorInfo info
        if self.inputs is not None:
            for info in self.inputs:
                _remove_user(info, self)

    cdef inline Py_ssize_t n_outputs(self):
        return <Py_ssize_t>self.outs.size()

    cdef inline TensorInfo output(self, Py_ssize_t k):
        """Output `k`, or None once its record died."""
        return None if self.outs[k] == NULL else <TensorInfo>self.outs[k]

    def alive_outputs(self):
        return [self.output(k) for k in range(self.n_outputs())]


cdef Producer _new_producer(OpDef op, list inputs, list outputs, double cost):
    """A recipe for `outputs`: each input lists it among its readers, each output points to
    it (letting go of any producer it had)."""
    cdef TensorInfo info
    cdef Producer p = Producer.__new__(Producer)
    p.op = op
    # The list dispatch was given, not a copy (the copy was 1% of a small LSTM's step):
    # dispatch owns it, as its queued Command, which holds it too, already needs (no
    # caller changes it afterwards); its outputs are new records, so the list can reach
    # no record that leads back to `p`. Nor is it the collector's to watch: dispatch took
    # it out of sight for a queued Command, and an op run at once has none.
    p.inputs = inputs
    PyObject_GC_UnTrack(<void*>inputs)
    p.cost = cost
    for info in inputs:
        info.users.push_back(<PyObject*>p)
    for info in outputs:
        p.outs.push_back(<PyObject*>info)
        _let_go_of_producer(info)
        info.producer = p
        info.cost = cost
    return p


cdef object _run_keeping_memo(OpDef op, list arrays, list outputs):
    """Run `op`, keeping with the recipe of its outputs the memo that lets a
    recomputation do less (a batch or layer norm's statistics: recomputing its output is
    then one pass over x instead of three)."""
    cdef Producer p = (<TensorInfo>outputs[0]).producer if outputs else None
    if p is None:
        return op.kernel(*arrays)
    result, p.memo = op.kernel_keeping(*arrays)
    return result


cdef void _remove_user(TensorInfo info, Producer p):
    """`p` no longer reads `info` (it died): the first entry for it leaves `users`, in
    order (an op reading a value twice is listed twice, and leaves twice)."""
    cdef size_t k
    for k in range(info.users.size()):
        if info.users[k] == <PyObject*>p:
            info.users.erase(info.users.begin() + k)
            return


cdef void _unlink_output(TensorInfo info):
    """`info`'s producer forgets it (as the record dies or stops being recomputable)."""
    cdef Producer p = info.producer
    cdef size_t k
    if p is None:
        return
    for k in range(p.outs.size()):
        if p.outs[k] == <PyObject*>info:
            p.outs[k] = NULL
            return                  # (an output is listed once)


# Recipes let go of so far: a path of recipes between two records that stand now stays
# while this count does (their records are held by the recipes that read them)
cdef long long _recipes_let_go = 0


cdef inline void _let_go_of_producer(TensorInfo info):
    """`info` stops being recomputable: its producer forgets it, and it the producer."""
    global _recipes_let_go
    _unlink_output(info)
    info.producer = None
    _recipes_let_go += 1


# Within one _store_results of an op's outputs (_chain_memo_on): the producer whose dead
# chain (_dead_chain_behind) was last worked out, borrowed, and that chain
cdef bint _chain_memo_on = False
cdef PyObject* _chain_memo_of = NULL
cdef int _chain_memo = 0


cdef void _chain_memo_begin():
    """[_store_results, several outputs] Their inputs stay pinned until all are stored."""
    global _chain_memo_on, _chain_memo_of
    _chain_memo_on = True
    _chain_memo_of = NULL


cdef void _chain_memo_end():
    global _chain_memo_on, _chain_memo_of
    _chain_memo_on = False
    _chain_memo_of = NULL


cdef inline int _one_longer(int chain):
    """A dead path one record longer than `chain`, counted only to one past
    _MAX_DEAD_CHAIN: every rule that reads a path compares it with that cap."""
    return min(chain + 1, _MAX_DEAD_CHAIN + 1)


cdef int _dead_chain_behind(Producer p):
    """The dead chain of each output `p` makes: one more than the longest of its inputs'
    that are dead and dropped or swapped out (0 where none is). Worked out once for all the
    outputs one _store_results stores: an AdamStep over a model's parameters reads four
    tensors a parameter and makes four, and each output read all the inputs, a quadratic
    number a step (1,000 Linear layers with enable_drop at async level 0: two fifths of
    the step in MemoryManager.on_produced)."""
    global _chain_memo_of, _chain_memo
    cdef TensorInfo i
    cdef int chain = 0
    if _chain_memo_on and _chain_memo_of == <PyObject*>p:
        return _chain_memo
    for i in p.inputs:
        if not _alive(i) and (i.status == DROPPED or i.status == SWAPPED):
            chain = max(chain, _one_longer(i.dead_chain))
    if _chain_memo_on:
        _chain_memo_of = <PyObject*>p
        _chain_memo = chain
    return chain


cdef inline void _out_of_collectors_sight(TensorInfo dead):
    """A record dropped for good (no tensor holds it, its value gone) stays to the step's
    end for the recipes that read it: untracked, the garbage collector's collections walk
    it no more, nor move it to the oldest generation, whose growth sets off full
    collections (up to half of what recording cost a GRU; a small LSTM's collections now
    take as long as with recording off). It can be in no cycle: it leads only to its
    recipe and the records before it, never back to itself."""
    if dead.error is None:
        PyObject_GC_UnTrack(<void*>dead)


cdef double _estimate_cost(OpDef op, list inputs, list outputs):
    """Seconds the op would take: from its flop count where it declares one (host
    compute's _op_flops), and at least from the bytes it reads and writes."""
    cdef TensorInfo info
    cdef double nbytes = 0
    for info in inputs:
        nbytes += info.size
    for info in outputs:
        nbytes += info.size
    return max(_op_flops(op, inputs, outputs) / _FLOPS_PER_S, nbytes / _MEMORY_BYTES_PER_S)


cdef inline Py_ssize_t _pointer(object o):
    """id(o) without its call (which raises an audit event: a hot walk spent as long in
    the audit as in its sets)."""
    return <Py_ssize_t><void*>o


cdef inline Py_ssize_t _key(TensorInfo info):
    return _pointer(info)


cdef inline bint _alive(TensorInfo info):
    """A tensor or a queued op still holds it. (Pins alone do not count: a dead record
    pinned while a recomputation passes through it is only on the way.)"""
    return info.tensor_refs > 0 or info.pending_uses > 0


cdef TensorInfo _first_missing_input(Producer p, TensorInfo t):
    """The first input of `p` that is dropped or swapped out (None when all are resident)."""
    cdef TensorInfo i
    for i in p.inputs:
        if i.status == DROPPED or i.status == SWAPPED:
            return i
        if i.status != PRODUCED:
            raise RuntimeError(f"cannot recompute a dropped tensor {t.shape} {t.dtype}: an "
                               f"input of its producer {p.op!r} is {Status(i.status).name}")
    return None


cdef bint _read_on_the_stack(TensorInfo info, list stack):
    """A recomputation still waiting on `stack` reads `info`: it stays until that one has
    run. Dropped in between and recomputed again, it would come back in another storage,
    and an op that read two views of one value (x.T @ x, which numpy runs as one
    symmetric product) would now read two values and round differently."""
    cdef TensorInfo t
    for t in stack:
        if t.producer is not None and _contains((<Producer>t.producer).inputs, info):
            return True
    return False


@cython.final
cdef class _StackReaders:
    """_read_on_the_stack for many values against one stack: the recipes of the tensors
    waiting on it, sorted by address (borrowed: the tensors hold them), so that each value
    costs a lookup per recipe that reads it instead of a pass over the stack. Taken again
    once a recipe was let go (a tensor's recipe may have changed). A restore asks it of
    every dead value it keeps after each recomputation: in an xLSTM's storm at 0.5 P,
    1,600 recomputations a step, stacks hundreds deep, the passes took 4% of the step."""
    cdef list stack
    cdef vector[PyObject*] recipes
    cdef long long let_go            # _recipes_let_go when taken (-1: not yet, taken at the
                                     #     first question: a step whose kept values are all
                                     #     held or pinned asks none)

    def __cinit__(self, list stack):
        self.stack = stack
        self.let_go = -1

    cdef void take(self):
        cdef TensorInfo t
        self.recipes.clear()
        for t in self.stack:
            if t.producer is not None:
                self.recipes.push_back(<PyObject*>t.producer)
        _sort(self.recipes.begin(), self.recipes.end())
        self.let_go = _recipes_let_go

    cdef bint read(self, TensorInfo info):
        """_read_on_the_stack(info, stack): a recipe that reads `info` is in the stack's."""
        cdef size_t k
        if self.let_go != _recipes_let_go:
            self.take()
        for k in range(info.users.size()):
            if _binary_search(self.recipes.begin(), self.recipes.end(), info.users[k]):
                return True
        return False


cdef bint _only_on_the_way(Storage storage, list inputs):
    """`storage` is held only by inputs that are dead records brought back for a
    recomputation (not by a live leaf or another view: a copy would then save nothing)."""
    cdef TensorInfo i
    cdef int holders = 0
    for i in inputs:
        if i.storage is storage:
            if _alive(i):
                return False
            holders += 1
    return holders == storage.refs


cdef void _consumer_outputs(TensorInfo info, vector[PyObject*]& out):
    """Set `out` to the other outputs of the recorded ops that read `info`: borrowed
    pointers, valid while the caller frees no record (its loop lets no recipe go and makes
    no object the garbage collector tracks, so that no collection runs midway). A list
    each call made 1.5% of a GRU's step at 0.3 P, and a share of its collections."""
    cdef Producer user
    cdef PyObject* rec
    cdef size_t k
    cdef Py_ssize_t j
    out.clear()
    for k in range(info.users.size()):
        user = <Producer>info.users[k]
        for j in range(user.n_outputs()):
            rec = user.outs[j]
            if rec != NULL and rec != <PyObject*>info:
                out.push_back(rec)


cdef long long _walks = 0              # walks over records so far (each marks with its number)
cdef long long _walk_records_taken = 0  # records _needed_by_evicted's walks took (tests)
# _needed_by_evicted's working vectors, kept between walks: two made per walk were allocated
# at each one's first push, and a dying leaf walks at every op of an `x = f(x)` loop once
# its records are cut (_MAX_DEAD_CHAIN)
cdef vector[PyObject*] _walk_stack, _walk_outs
# The record that made _needed_by_evicted's last walk answer True (an evicted tensor that
# needs the leaf, or with `busy_for` an evictable one in its frontier), NULL where it had
# none: a borrowed pointer, to read at once
cdef PyObject* _walk_witness = NULL


def walk_records_taken():
    """Debugging and tests: how many records the walks forward over recipes that read a
    value (_needed_by_evicted) have taken since the module was loaded."""
    return _walk_records_taken


cdef tuple _witnessed(TensorInfo value):
    """What _needed_by_evicted's last walk, from `value`, found (_walk_witness, not NULL):
    (weak references to `value` and to that record, _recipes_let_go then), for
    _standing_witness."""
    return (_weakref.ref(value), _weakref.ref(<object>_walk_witness), _recipes_let_go)


cdef TensorInfo _standing_witness(tuple witnessed, TensorInfo value):
    """The record of `witnessed` (_witnessed, from `value`) when the path of recipes
    between them still stands and something holds it; otherwise None. No recipe let go
    since keeps the path: its records are held by the recipes that read them, and stay
    dead (a walk passes dead records whatever their status)."""
    if witnessed[2] != _recipes_let_go or witnessed[0]() is not value:
        return None
    cdef TensorInfo w = witnessed[1]()
    return w if w is not None and _alive(w) else None


cdef list _consumer_output_list(TensorInfo info):
    """_consumer_outputs as a list that holds them, for a loop that may make objects (and
    so let a collection run). The list is made before the pointers are read."""
    cdef list held = []
    cdef vector[PyObject*] outs
    cdef size_t k
    _consumer_outputs(info, outs)
    for k in range(outs.size()):
        held.append(<object>outs[k])
    return held


cdef bint _needed_by_evicted(TensorInfo leaf, list frontier, list evicted=None,
                             Py_ssize_t* gone_bytes=NULL, bint past_resident=True,
                             Py_ssize_t most=-1, MemoryManager busy_for=None,
                             Device device=None) except -1:
    """Walk forward from `leaf` over the recipes that read it, through dead records (which
    would be recomputed on the way), to the records something still holds. True when one
    of those is evicted (dropped or swapped out): it needs `leaf` to come back. Otherwise
    `frontier` gets the held records, all resident or about to be. With `evicted`, the walk
    goes on past the first such record and collects them all there, and `gone_bytes` (if
    given) gets the bytes of every record it passed that is not resident: at most what
    bringing them all back would hold. Without `past_resident` the walk passes dropped
    dead records only (a resident one cuts it: what lies beyond needs that record, not
    `leaf`); with `most` >= 0 it looks at that many records at most. With `busy_for`,
    True as soon as the frontier holds more bytes than `leaf` or a record that manager
    could evict from `device` now. Where True came from one record, _walk_witness
    points to it. (The walk keeps borrowed pointers in a C vector, as _consumer_outputs
    allows, and marks the records it reached with its number: with a set of keys and a
    list, the walks from the bases a GRU keeps, through its unrolled sequence, were a
    third of its time choosing victims.)"""
    global _walks, _walk_witness, _walk_records_taken
    cdef TensorInfo r, out
    cdef size_t k
    cdef Py_ssize_t held_bytes = 0
    _walk_witness = NULL
    _walks += 1
    cdef long long walk = _walks     # (no walk starts inside another: nothing here calls one)
    _walk_stack.clear()
    _walk_stack.push_back(<PyObject*>leaf)
    leaf.walk_mark = walk
    while not _walk_stack.empty() and most != 0:
        most -= 1                    # (from -1 on: never 0)
        r = <TensorInfo>_walk_stack.back()
        _walk_stack.pop_back()
        _walk_records_taken += 1
        _consumer_outputs(r, _walk_outs)
        for k in range(_walk_outs.size()):
            out = <TensorInfo>_walk_outs[k]
            if out.walk_mark == walk:
                continue
            out.walk_mark = walk
            if out.status == DROPPED or out.status == SWAPPED:
                if gone_bytes != NULL:
                    gone_bytes[0] += out.size
                if _alive(out):
                    if evicted is None:
                        _walk_witness = <PyObject*>out
                        return True
                    evicted.append(out)
                else:
                    _walk_stack.push_back(<PyObject*>out)
            elif _alive(out):
                frontier.append(out)
                if busy_for is not None:
                    held_bytes += out.size
                    if busy_for.evictable(out, device):
                        _walk_witness = <PyObject*>out
                        return True
                    if held_bytes > leaf.size:
                        return True
            elif (past_resident and out.producer is not None and out.status != DELETED
                    and out.status != INVALID):
                _walk_stack.push_back(<PyObject*>out)
    return bool(evicted)


cdef bint _read_by_a_recipe(TensorInfo info, Producer besides=None):
    """Some recorded producer that is still alive, other than `besides`, reads this
    tensor."""
    cdef PyObject* reader
    for reader in info.users:
        if reader != <PyObject*>besides:
            return True
    return False
