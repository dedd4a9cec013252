# Included by _core.pyx: the memory manager's recipes. A Producer says how to recompute some
# records; each record lists the Producers that read it (`users`), and the walks below follow
# those links: which recorded ops read a record, which records a dying leaf still matters to.


# Estimated costs, in seconds, so that decisions do not depend on timing noise.
cdef double _MEMORY_BYTES_PER_S = 5e9       # bytes an elementwise kernel moves per second
cdef double _FLOPS_PER_S = 1e11             # one-thread sgemm here (PERF_NOTES: 134 GFLOP/s)
cdef Py_ssize_t _MIN_USERS_PRUNE = 16        # a users list is first pruned at this length


@cython.final
cdef class Producer:
    """How to recompute some tensors: an op, its input records (kept alive) and its output
    records (weakly: an output nobody holds need not be recomputed)."""
    cdef readonly object op
    cdef readonly list inputs
    cdef readonly list outputs
    cdef readonly double cost
    cdef object __weakref__

    def alive_outputs(self):
        return [r() for r in self.outputs]


cdef double _estimate_cost(OpDef op, list inputs, list outputs):
    """Seconds the op would take: from its flop count when it declares one, else from the
    bytes it reads and writes."""
    cdef TensorInfo info
    cdef double nbytes = 0
    for info in inputs:
        nbytes += info.size
    for info in outputs:
        nbytes += info.size
    flops = getattr(op, "estimate_flops", None)
    if flops is not None:
        return max(flops([i.shape for i in inputs], [o.shape for o in outputs]) / _FLOPS_PER_S,
                   nbytes / _MEMORY_BYTES_PER_S)
    return nbytes / _MEMORY_BYTES_PER_S


cdef inline Py_ssize_t _key(TensorInfo info):
    return <Py_ssize_t><void*>info


cdef inline bint _alive(TensorInfo info):
    """A tensor or a queued op still holds it. (Pins alone do not count: a dead record
    pinned while a recomputation passes through it is only on the way.)"""
    return info.tensor_refs > 0 or info.pending_uses > 0


cdef void _add_user(TensorInfo info, object producer_ref):
    """Note that a recorded producer reads `info`. Dead references are pruned whenever the
    list has doubled since the last pruning: a long-lived tensor (a parameter) read by
    every op would otherwise collect one per op, forever."""
    cdef list users = info.users
    if users is None:
        users = info.users = []
        info.users_prune_at = _MIN_USERS_PRUNE
    users.append(producer_ref)
    if len(users) >= info.users_prune_at:
        users[:] = [r for r in users if r() is not None]
        info.users_prune_at = max(_MIN_USERS_PRUNE, 2 * len(users))


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


cdef list _consumer_outputs(TensorInfo info):
    """The other outputs of the recorded ops that read `info`."""
    cdef list out = []
    if info.users is not None:
        for ref in info.users:
            user = ref()
            if user is not None:
                for o in (<Producer>user).outputs:
                    rec = o()
                    if rec is not None and rec is not info:
                        out.append(rec)
    return out


cdef bint _needed_by_evicted(TensorInfo leaf, list frontier) except -1:
    """Walk forward from `leaf` over the recipes that read it, through dead records (which
    would be recomputed on the way), to the records something still holds. True when one
    of those is evicted (dropped or swapped out): it needs `leaf` to come back. Otherwise
    `frontier` gets the held records, all resident or about to be."""
    cdef list stack = [leaf]
    cdef set seen = {_key(leaf)}
    cdef TensorInfo r, out
    while stack:
        r = stack.pop()
        for out in _consumer_outputs(r):
            if _key(out) in seen:
                continue
            seen.add(_key(out))
            if out.status == DROPPED or out.status == SWAPPED:
                if _alive(out):
                    return True
                stack.append(out)
            elif _alive(out):
                frontier.append(out)
            elif out.producer is not None and out.status != DELETED and out.status != INVALID:
                stack.append(out)
    return False


cdef bint _read_by_a_recipe(TensorInfo info, Producer besides=None):
    """Some recorded producer that is still alive, other than `besides`, reads this
    tensor."""
    if info.users is not None:
        for ref in info.users:
            reader = ref()
            if reader is not None and reader is not besides:
                return True
    return False
