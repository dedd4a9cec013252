# Included by _core.pyx: values that lie in one storage (views that aliasing ops cut from
# one another: a split's parts, a reshape and its transpose) are evicted together or not
# at all. Evicting one alone frees nothing while another holds the storage, so none of
# them was ever evictable: a SwiGLU's two halves, a split of one product that its backward
# keeps, held 8 layers' 2 MiB products in the floor (at 0.5 P the floor was 1.09x the
# budget; with the halves from two products, 0.50x). Module functions that take the
# manager as `self`.


# At most this many values evicted together: a storage more views hold (a GRU's input
# projection for the whole sequence, a slice of it read at each time step) would come back
# whole at the first read for all of them, and the walks grew with their number: with no
# bound the zoo's GRU at 0.5 P recomputed 408 values a step, not 221, and spent 5.2 ms a
# step choosing, not 2.1.
cdef int _MAX_SHARERS = 8


cdef list _evictable_together(MemoryManager self, TensorInfo info, Device device):
    """`info` and the resident values sharing its storage, when each of them could be
    dropped but for the others: a candidate with a recipe, unpinned, on `device`, not read
    by the next op. They are found through the recipes that read and make them (see
    _walk_storage). None as soon as one of them could not be dropped (a batch split in
    time steps, its base a leaf, is refused at its first step: walking all 48 views of it,
    for each of them, each round, tripled an LSTM's bookkeeping), or when some holder of
    the storage is not found that way."""
    cdef Storage st = info.storage
    if info.status != PRODUCED or st is None or st.refs <= 1 or st.refs > _MAX_SHARERS:
        return None
    cdef list found = _walk_storage(self, info, device, None)
    if found is None or len(found) != st.refs:
        return None
    # (one order whichever member asks: their scores summed in another order would round
    # differently, and a tie between two members be broken by the last bit)
    found.sort(key=id)             # (id: the record's address, _key)
    return found


cdef list _evicted_views_beside(TensorInfo info):
    """The evicted values that are views of the storage `info` (resident) lies in, cut
    from it through the same recipes: what an eviction of the storage took with `info`
    and a restore of `info` alone left out."""
    cdef list evicted = []
    if (info.status == PRODUCED and info.storage is not None
            and 1 <= info.storage.refs <= _MAX_SHARERS):
        _walk_storage(None, info, None, evicted)
    return evicted


cdef list _walk_storage(MemoryManager self, TensorInfo info, Device device, list evicted):
    """The resident values in the storage of `info`, found from it through the recipes
    that read and make them, passing through dropped records that lie in the storage too
    (_walk_into). With a `device`, None as soon as one of them could not be dropped now;
    `evicted`, where given, collects the evicted views met on the way."""
    cdef Storage st = info.storage
    cdef list walked = [info], found = [info]
    cdef Py_ssize_t k = 0
    cdef size_t j
    cdef TensorInfo t, out
    cdef vector[PyObject*] outs
    while k < len(walked):
        if k >= 4 * _MAX_SHARERS:        # (dead views too: a walk of its own per round)
            return None
        t = walked[k]
        k += 1
        if device is not None and t.status == PRODUCED and not _droppable_now(self, t, device):
            return None
        if t.producer is not None:
            for n in (<Producer>t.producer).inputs:
                _walk_into(<TensorInfo>n, st, walked, found, _cut_by_view(t), evicted)
        _consumer_outputs(t, outs)
        for j in range(outs.size()):
            out = <TensorInfo>outs[j]
            _walk_into(out, st, walked, found, _cut_by_view(out), evicted)
    return found


cdef inline bint _droppable_now(MemoryManager self, TensorInfo m, Device device):
    # (a value a recomputation waiting on the restore's stack reads stays: dropped, the
    # storage's other values went with it, and the attention block whose query, key and
    # value lay in it recomputed their projection once for each of them, 4-5 times a
    # step at 0.5 P)
    return (not m.pins and m.producer is not None and m.device is device
            and _key(m) in self.candidates and not self.read_next(m)
            and not (self.restoring and _read_on_the_stack(m, self.restoring)))


cdef inline bint _cut_by_view(TensorInfo t):
    """`t`'s value is a view of its producer's input (reshape, transpose, split, ...)."""
    return t.producer is not None and (<OpDef>(<Producer>t.producer).op).aliases_input


cdef inline void _walk_into(TensorInfo n, Storage st, list walked, list found,
                            bint view_link, list evicted):
    """Walk on into `n`, reached from a record of the storage `st`, where `n` lies in it
    too: resident there, a dropped value whose ghost lies there, or (`view_link`: one of
    the two is a view of the other) a dead view dropped without a ghost. Such a view died
    while the value it was cut from was still resident in the storage, so it needed none
    (_view_of_resident_input); passing through it, a split's parts find each other: an
    attention block's query, key and value, views of one projection through a reshape, a
    transpose and a split whose dead links had no ghosts, were never evictable, and held
    a vision transformer's floor at 1.5 of the 6.4 MiB budget at 0.5 P. An evicted view
    met that way goes to `evicted` (where given)."""
    if _contains(walked, n):
        return
    if n.status == PRODUCED and n.storage is st:
        walked.append(n)
        found.append(n)
    elif n.status == DROPPED and (
            (n.ghost is not None and (<_Ghost>n.ghost).storage is st)
            or (view_link and n.ghost is None and not _alive(n))):
        walked.append(n)
    elif (evicted is not None and view_link and n.status == DROPPED and _alive(n)
            and not _contains(evicted, n)):
        evicted.append(n)


@cython.final
cdef class _Group:
    """A storage's values evictable together, found once for a round of evictions, and
    their score together, until the round evicts again (which may raise it)."""
    cdef list members                # or None: not evictable together
    cdef double score
    cdef long long scored_at         # the device's eviction count when scored, or -1


cdef _Group _group_of(MemoryManager self, TensorInfo info, Device device, dict groups):
    """The group of `info`'s storage (_evictable_together), from `groups` (storage ->
    _Group, a round's) where it was found already: within a round no pin, queued read or
    candidate changes but by the evictions themselves, and a group goes whole."""
    cdef _Group g = groups.get(info.storage) if groups is not None else None
    if g is None:
        g = _Group.__new__(_Group)
        g.members = _evictable_together(self, info, device)
        g.scored_at = -1
        if groups is not None:
            groups[info.storage] = g
    return g


cdef inline bint _shares_storage(TensorInfo info):
    """`info` is resident in a storage that 2 to _MAX_SHARERS values hold."""
    return (info.status == PRODUCED and info.storage is not None
            and 1 < info.storage.refs <= _MAX_SHARERS)


cdef bint _may_evict(MemoryManager self, TensorInfo info, Device device,
                     dict groups) except -1:
    """`info` can be evicted now, alone or with the values sharing its storage."""
    if self.evictable(info, device):
        return True
    return _shares_storage(info) and _group_of(self, info, device, groups).members is not None


cdef double _eviction_score(MemoryManager self, TensorInfo info, long long gap,
                            Device device, dict groups) except? -1:
    """The policy's score of evicting `info` (read `gap` ops from now): its own, or where
    the values sharing its storage go with it, theirs together (score_together) if dearer:
    never below its own, which the ranking's bounds bound. A view's own score counts
    none of the product it was cut from, which goes with it; h_DTR^eq's together counts
    all of them, for the storage's bytes, until the first is read. (With the dearest
    member's score instead, an LSTM at 0.5 P, async level 0, evicted 173-180 values a
    step and recomputed 312-334; with h_DTR^eq's, 134-141 and 289-304.)"""
    cdef double score = self.policy.score(info, gap)
    if not _shares_storage(info):
        return score
    cdef _Group g = _group_of(self, info, device, groups)
    if g.members is None:
        return score
    cdef TensorInfo m
    if g.scored_at != device.stats.evictions:       # (each member a choice looks at asks)
        g.score = self.policy.score_together(g.members, [self.gap(m) for m in g.members],
                                             info.storage.nbytes)
        g.scored_at = device.stats.evictions if groups is not None else -1
    return max(score, g.score)


cdef Py_ssize_t _bytes_evictable(MemoryManager self, TensorInfo info, Device device,
                                 list counted, dict groups) except -1:
    """What evicting `info` now would free: its own bytes, or its storage's when it goes
    with the values sharing it, counted for the first of them only (`counted`: the
    storages counted so far in this sum)."""
    if self.evictable(info, device):
        return info.size
    if (not _shares_storage(info) or _contains(counted, info.storage)
            or _group_of(self, info, device, groups).members is None):
        return 0
    counted.append(info.storage)
    return info.storage.nbytes


cdef int _evict_together(MemoryManager self, TensorInfo victim) except -1:
    """Drop the victim and every value sharing its storage (never swapped: a file per view
    would free the storage only once all were written)."""
    cdef list group = _evictable_together(self, victim, victim.device)
    if group is None:
        return 0
    cdef TensorInfo m
    for m in group:
        if m is not victim and _decision_hook is not None:
            _decision_hook("evict_sharer", m, self.clock)
        self.drop(m, "evicted (with the views of its storage)")
        _counted_eviction(self, m, False)
    return 0


cdef int _counted_eviction(MemoryManager self, TensorInfo victim, bint swapped) except -1:
    """The statistics and the policy's bookkeeping of an eviction done."""
    victim.device.stats.evictions += 1
    self.victim_density = _moving_average(self.victim_density,
                                          victim.cost / max(victim.size, 1))
    self.policy.on_evict(victim)
    if not swapped and not _alive(victim):     # (kept dead: now gone, as drop_dead's)
        _lengthen_chains(self, victim)
    return 0
