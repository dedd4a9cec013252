# Included by _policies.pxi: h_DTR^eq, the DTR paper's equivalence-class approximation of a
# tensor's evicted neighbourhood, kept as a union-find over the evicted tensors.


@cython.final
@cython.no_gc        # (a class points only to its parent class: no cycle to collect)
cdef class EvictedClass:
    """A union-find class of evicted tensors that touch each other. Classes point only to
    classes (never to tensor records), so they cannot tie records into reference cycles.
    Each evicted tensor has its own node; the root keeps the class's cost and how many of
    its members some tensor still holds (`alive`)."""
    cdef EvictedClass parent
    cdef double cost
    cdef int alive
    cdef bint member_alive        # this node's own tensor is counted in its root's `alive`


cdef EvictedClass _class_root(EvictedClass c):
    cdef EvictedClass root = c
    while root.parent is not None:
        root = root.parent
    while c.parent is not None and c.parent is not root:   # path compression
        nxt = c.parent
        c.parent = root
        c = nxt
    return root


cdef void _member_dies(EvictedClass member):
    """The last tensor holding this evicted member is gone: its class has one fewer member
    that anyone will ask for."""
    cdef EvictedClass root
    if member.member_alive:
        member.member_alive = False
        root = _class_root(member)
        root.alive -= 1


cdef void _leave_evicted_class(EvictedClass member, double cost):
    """A member leaves (restored, or its record died): the eq approximation never splits
    a class, it only stops counting the member's cost. Without this, classes would keep
    the cost of long-dead tensors and make every old neighbour look precious."""
    _member_dies(member)
    cdef EvictedClass root = _class_root(member)
    root.cost = max(root.cost - cost, 0.0)


# The walks' working vectors, cleared for each walk and kept (a walk's own vectors grew by
# reallocation, call after call: a twentieth of an LSTM's choosing). One walk at a time:
# they hold the GIL throughout and run no Python code.
cdef vector[PyObject*] _seen, _stack, _neighbours


cdef class DTREqPolicy(EvictionPolicy):
    """h_DTR^eq: (cost of the tensor and of the evicted tensors around it) / (size x
    the gap to its next read: staleness where nothing queued reads it). Around it: the
    evicted ancestors its recomputation would bring back first, costed one by one, and
    the evicted tensors that would need it. Evicted tensors that touch each other form a
    union-find class whose cost is kept at its root, so that the second part is a few
    root look-ups."""
    name = "dtr_eq"

    cpdef double score(self, TensorInfo info, long long gap):
        # Its consumers' outputs' classes count when they hold a tensor someone still
        # holds (which would need it): a class of dead intermediates alone, such as the
        # matmul output between a ReLU and the next bias add, is recomputed only on the
        # way to a live tensor, and that tensor's own score counts it.
        # (called for every candidate before every eviction: the classes counted go in a
        # C vector of borrowed pointers, where a list was made for each call)
        # Its storage goes with it: an evicted ancestor whose value lies there (the dead
        # base a view was cut from) is not free to take back, and the bytes freed are
        # the storage's (_bytes_going). Counted free, the last section of an Inception
        # block's gradient split looked as cheap as the split (5 us) where bringing it
        # back replayed the forward and backward passes to it (77 ops, 14 ms), every
        # step; a ConvNeXt block's channels-last transpose of a layer norm's gradient
        # as cheap as the transpose, where its restore replayed 81 ops (1.70x the step
        # at 0.5 P; 1.11x costed). Costed so but for its own bytes, a GRU's last
        # hidden-gate section, a third of the product it was cut from, looked dearer per
        # byte than the 24 MiB input projection of the whole sequence, which went
        # instead and came back every few time steps (1,045 recomputations a step at
        # 0.5 P against 126).
        _seen.clear()
        return _cost_around(info, info.storage) / (_bytes_going(info) * <double>gap)

    cpdef double score_together(self, list members, list gaps, Py_ssize_t nbytes):
        # all of them recomputed, their evicted neighbourhoods counted once, for the
        # storage's bytes, until the first of them is read
        # (an evicted ancestor whose value still lies in their storage, a split's dead
        # base, comes back free only while they hold it: evicted with them, it costs its
        # recomputation, which a GRU's gate triplets, cut from a copy of a time step's
        # slice, showed: scored as free, they were evicted while their readers were queued
        # and brought back from the sequence-wide projection, 816-1006 recomputations a
        # step at 0.5 P)
        cdef double cost = 0.0
        cdef TensorInfo m
        cdef Storage going = (<TensorInfo>members[0]).storage
        _seen.clear()
        for m in members:
            cost += _cost_around(m, going)
        return cost / (<double>max(nbytes, 1) * <double>min(gaps))

    cpdef double score_at_least(self, TensorInfo info, long long gap):
        # the tensor's own cost: its evicted neighbourhood can only add to it
        return info.cost / (_bytes_going(info) * <double>gap)

    cpdef double score_bound(self, TensorInfo info, long long gap):
        # the score without the walk of the evicted ancestors: a class the walk counts
        # adds its whole cost there, so the full score loses nothing it counts here (an
        # LSTM's candidates, whose walks go back through the recurrence, were scored in
        # full 48 times a choice of 110: 9% of its step at 0.5 P)
        _seen.clear()
        return (info.cost + _consumers_cost(info, _seen)) / (_bytes_going(info)
                                                           * <double>gap)

    cpdef on_evict(self, TensorInfo info):
        cdef EvictedClass mine = EvictedClass.__new__(EvictedClass)
        cdef size_t k
        mine.cost = info.cost
        # (alive as the worker sees it: a tensor the caller let go of while queued ops and
        # its own queued deletion still wait is needed until those have run; the caller's
        # count alone made, at async levels 1-2, every evicted tensor look unwanted)
        mine.member_alive = _alive(info)
        mine.alive = mine.member_alive
        info.uf_class = mine
        cdef Producer p = info.producer
        _consumer_outputs(info, _neighbours)
        if p is not None:
            _push_all(_neighbours, p.inputs)
        for k in range(_neighbours.size()):
            _join_class(mine, <TensorInfo>_neighbours[k])

    cpdef on_restore(self, TensorInfo info):
        # the eq approximation: a class is never split, its cost just loses this member's
        if info.uf_class is not None:
            _leave_evicted_class(info.uf_class, info.cost)
            info.uf_class = None


cdef inline double _bytes_going(TensorInfo info):
    """The bytes evicting `info` alone frees: its storage's, where it is the storage's
    only record (a view of a dead base takes the base's memory with it)."""
    cdef Storage st = info.storage
    if st is not None and st.refs == 1:
        return <double>max(info.size, st.nbytes, 1)
    return <double>max(info.size, 1)


cdef double _cost_around(TensorInfo info, Storage going):
    """The cost of `info` and of the evicted neighbourhood around it (score's numerator),
    the classes in `_seen` not counted again; `going`: the storage evicted with it."""
    cdef double cost = info.cost
    cdef Producer p = info.producer
    if p is not None and _any_evicted(p.inputs):
        cost += _ancestors_cost(info, _seen, going)
    return cost + _consumers_cost(info, _seen)


cdef inline void _join_class(EvictedClass mine, TensorInfo n):
    """An evicted neighbour's class joins `mine` (a root)."""
    cdef EvictedClass other
    if n.status == DROPPED and n.uf_class is not None:
        other = _class_root(n.uf_class)
        if other is not mine:
            other.parent = mine
            mine.cost += other.cost
            mine.alive += other.alive


cdef double _consumers_cost(TensorInfo info, vector[PyObject*]& seen):
    """The costs of the evicted classes of the outputs of the ops reading `info` that hold
    a tensor someone still holds (those would need it), each class once (`seen`: the
    classes counted already)."""
    cdef double cost = 0.0
    cdef Producer user
    cdef PyObject* out
    cdef size_t k = 0, j
    while k < info.users.size():    # (re-read: a collection may free a reader midway)
        user = <Producer>info.users[k]
        k += 1
        for j in range(user.outs.size()):
            out = user.outs[j]
            if (out == NULL or out == <PyObject*>info
                    or (<TensorInfo>out).status != DROPPED):
                continue
            cost += _unseen_class_cost(<TensorInfo>out, seen, True)
    return cost


cdef inline bint _any_evicted(list infos):
    cdef TensorInfo i
    for i in infos:
        if i.status == DROPPED:
            return True
    return False


cdef int _ANCESTOR_WALK = 32        # evicted ancestors costed one by one, before the classes


cdef double _ancestors_cost(TensorInfo info, vector[PyObject*]& seen, Storage going):
    """What recomputing `info` would first recompute: its evicted ancestors, walked back
    through the recipes one by one (their costs summed exactly), beyond _ANCESTOR_WALK of
    them their classes. An ancestor whose value views still hold comes back free, unless
    it lies in `going`, the storage the eviction takes (None: none). Exact because a class joins everything evicted that touches: a
    GRU's dead gate slices and their sequence-wide input projection made one class of the
    whole unrolled sequence, so that every step's gates looked as dear as the sequence's
    and the ones that really need the 24 MiB projection back were evicted like any other
    (the zoo's GRU at 0.7 P: 1,744 recomputations a step, 0.78 s; costed so, 220, 0.03 s).
    The walk keeps borrowed pointers in C vectors (the records stay referenced by the
    recipes it walks; nothing here frees one): with two Python lists a walk, 8,000-18,000
    walks a step, the GRU at 0.5 P spent 14-27 ms a step choosing victims; now 7-16. The
    ancestors walked are marked with the walk's number, not searched for in a list of
    those walked (with that and the inputs pushed as borrowed pointers, an LSTM's full
    score at 0.3 P took 0.55 us instead of 0.79)."""
    global _walks
    cdef double cost = 0.0
    cdef Producer p = info.producer
    cdef TensorInfo n
    cdef int walked = 0
    if p is None:
        return 0.0
    _walks += 1
    cdef long long walk = _walks     # (marks reached records: _recipes.pxi's walks' numbers)
    _stack.clear()
    _push_all(_stack, p.inputs)
    while not _stack.empty():
        n = <TensorInfo>_stack.back()
        _stack.pop_back()
        if n.status != DROPPED or n.walk_mark == walk or (
                _revivable(n) and (<_Ghost>n.ghost).storage is not going):
            continue
        if walked >= _ANCESTOR_WALK:
            cost += _unseen_class_cost(n, seen, False)
            continue
        n.walk_mark = walk
        walked += 1
        cost += n.cost
        if n.producer is not None:
            _push_all(_stack, (<Producer>n.producer).inputs)
    return cost


cdef inline void _push_all(vector[PyObject*]& stack, list infos):
    # (borrowed pointers read straight from the list: a loop over it took and let go of a
    # reference to each, a fifth of a walk's time)
    cdef Py_ssize_t k
    for k in range(PyList_GET_SIZE(infos)):
        stack.push_back(PyList_GET_ITEM(infos, k))


cdef inline bint _among(vector[PyObject*]& walked, PyObject* n):
    cdef size_t k
    for k in range(walked.size()):
        if walked[k] == n:
            return True
    return False


cdef double _unseen_class_cost(TensorInfo n, vector[PyObject*]& seen, bint only_if_alive):
    """The cost of the evicted class of `n` (0 if `n` is resident or its class was counted
    already), optionally only when someone still holds a member of that class."""
    if n.status != DROPPED or n.uf_class is None:
        return 0.0
    cdef EvictedClass root = _class_root(n.uf_class)
    if _among(seen, <PyObject*>root) or (only_if_alive and root.alive <= 0):
        return 0.0
    seen.push_back(<PyObject*>root)
    return root.cost


_register_policy(DTREqPolicy)
