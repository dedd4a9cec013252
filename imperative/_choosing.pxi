# Included by _core.pyx: MemoryManager.choose's search for the evictable candidate with the
# lowest score. Module functions that take the manager as `self`.
from libcpp.algorithm cimport (make_heap as _make_heap, pop_heap as _pop_heap,
                               push_heap as _push_heap)
from libcpp.pair cimport pair

ctypedef pair[double, Py_ssize_t] _Bound      # (a score's lower bound, position in pool),
                                              # negated both in a heap: the lowest on top,
                                              # and among equal ones the first in the pool


@cython.final
cdef class Ranking:
    """One round of evictions' candidates (make_room's snapshot, `pool`), each in a heap by
    a lower bound of its score, made once for the round: a round that evicts four values
    (an LSTM's, most of its rounds) looked at every candidate four times. A candidate's
    cost, size and gap do not change while a round evicts, except the gap of a value only
    recipes read (_gap_of_evicted_readers: a base kept for its evicted readers, a dead
    value kept), which only shrinks as more are evicted, so that its bound only grows;
    that gap is taken afresh for its score. Nor,
    as a rule, do the policy's dearer bound (score_bound) and its full score fall while a
    round only evicts (h_DTR^eq's: the evicted classes around a candidate grow), so that
    the dearest found stays the candidate's key for the round. (Not quite always: where
    the walk of the evicted ancestors stops at _ANCESTOR_WALK, a victim it meets first
    leaves a later ancestor to be counted by its class, which may be counted already, and
    a recurrence's full score fell so by 0.6-1% while a round evicted; an unbounded walk
    made every choice the brute-force one. Then a near tie may go to the higher score.)

    A choice takes the top of the heap and makes its key dearer (the cheap bound, then
    score_bound, then the full score) until a full score still comes first: the lowest,
    in a few walks (_best_of). Each choice walked the candidates in the order of their
    cheap bounds instead, scoring in full each whose bound had not passed the best score
    found so far: an LSTM at 0.3 P took 12 full scores a choice, now 7."""
    cdef list pool
    cdef vector[long long] gaps
    cdef vector[char] bounded            # its key is score_bound's, or a full score's
    cdef vector[char] out                # chosen this round, pinned, read next, or gone
    cdef vector[_Bound] read_heap, unread_heap   # (key, position) of the candidates in play
    cdef Py_ssize_t evictable_bytes      # of those evictable when ranked (make_room's floor)
    cdef Py_ssize_t read_evictable_bytes  # of those some op has read since they were made
    cdef bint tiers_merged               # read and unread ones compete by score (see choose)
    cdef dict groups                     # storage -> its _Group (_sharing.pxi), for the round


cdef object _round_ranking(MemoryManager self, Device device, list pool,
                           Py_ssize_t to_free):
    """The ranking of a round of evictions that frees at most `to_free` bytes, or None
    where each choice samples the pool instead (the DTR paper's sqrt sampling,
    enable_dtr_sqrt_sampling)."""
    if self.opts.sqrt_sampling and len(pool) > 16:
        return None
    cdef Ranking r = _rank(self, device, pool)
    _merge_tiers_if_short(r, to_free)
    return r


cdef Ranking _rank(MemoryManager self, Device device, list pool):
    """The candidates of `pool` resident on `device`, by their scores' cheap lower bounds,
    values some op has read apart from those none has (see choose). Whether each is
    evictable is asked as it is considered (a victim dropped may leave a view evictable);
    the bytes evictable now are summed on the way (a pass of its own was a twentieth of
    an LSTM's choosing). One that no eviction in the round can make evictable (pinned,
    read by the next op, or a view of a storage more views share than go together) is
    left out: an LSTM's time steps cut from its input, 37 of its 79 candidates a round,
    were each ranked, popped and asked again in every round."""
    cdef Ranking r = Ranking.__new__(Ranking)
    cdef TensorInfo info
    cdef Py_ssize_t k
    cdef double bound
    cdef Py_ssize_t nbytes
    r.pool = pool
    r.gaps.resize(len(pool))
    r.bounded.resize(len(pool), 0)
    r.out.resize(len(pool), 0)
    cdef list counted = []           # (storages evicted with their views: once each)
    r.groups = {}
    for k in range(len(pool)):
        info = <TensorInfo>pool[k]
        if info.status != PRODUCED or info.device is not device:
            continue
        nbytes = _bytes_evictable(self, info, device, counted, r.groups)
        if nbytes == 0 and not _shares_storage(info):
            continue        # (pinned, read next, or one of too many views: so all round)
        r.evictable_bytes += nbytes
        r.gaps[k] = self.gap(info)
        bound = self.policy.score_at_least(info, r.gaps[k])
        if info.read_since_produced:
            r.read_evictable_bytes += nbytes
            r.read_heap.push_back(_Bound(-bound, -k))
        else:
            r.unread_heap.push_back(_Bound(-bound, -k))
    _make_heap(r.read_heap.begin(), r.read_heap.end())
    _make_heap(r.unread_heap.begin(), r.unread_heap.end())
    return r


cdef void _merge_tiers_if_short(Ranking r, Py_ssize_t to_free):
    """Where the values some op has read cannot free `to_free` bytes by themselves, values
    none has read will be evicted in this round anyway: the two compete by score from the
    first choice. Kept apart, the round took every read value first, however dear to
    bring back, and then the unread ones all the same: an RNN writing its states into a
    buffer evicted its 22 states (each brought back through the recurrence before it,
    231 recomputations a step) and then the 2 MiB buffer, recomputed just before and
    cheap to recompute again, which alone made the room."""
    r.tiers_merged = r.read_evictable_bytes < to_free


cdef Py_ssize_t _evictable_bytes(MemoryManager self, Device device, list pool, ranking):
    """The bytes of `pool` evictable on `device` now: the ranking's sum, where there is one."""
    if ranking is not None:
        return (<Ranking>ranking).evictable_bytes
    cdef TensorInfo info
    cdef Py_ssize_t total = 0
    cdef list counted = []
    for info in pool:
        if info.status == PRODUCED and info.device is device:
            total += _bytes_evictable(self, info, device, counted, None)
    return total


cdef bint _last_choice_merged = False     # the last choice's tiers were merged (tests)


def last_choice_merged_tiers():
    """Debugging and tests: whether the last choice of a victim let the values no op has
    read compete by score with the others (_merge_tiers_if_short)."""
    return _last_choice_merged


cdef TensorInfo _lowest_score(MemoryManager self, Device device, Ranking r):
    """The evictable candidate of the ranking with the lowest score (the first in its pool
    among equal ones); one no op has read yet only where no read one is evictable, unless
    the round's tiers are merged (see choose). Full scores (h_DTR^eq's walks of the
    evicted neighbourhood) are taken lowest key first, until one comes first against every
    other key: the choice of scoring them all, in a fraction of the walks (a GRU's 340
    candidates, scored in the pool's order, took 60 us a choice, 6.5 ms of a 250 ms step
    at 0.5 P)."""
    global _last_choice_merged
    cdef double best_score = 0, unread_score = 0
    cdef Py_ssize_t best_k = -1, unread_k = -1
    _last_choice_merged = r.tiers_merged
    cdef TensorInfo best = _best_of(self, device, r, r.read_heap, &best_score, &best_k)
    cdef TensorInfo unread = None
    if best is None or r.tiers_merged:
        unread = _best_of(self, device, r, r.unread_heap, &unread_score, &unread_k)
    if unread is not None and (best is None or unread_score < best_score):
        best, best_k = unread, unread_k     # (a tie goes to the read one)
    if best is not None:
        r.out[best_k] = 1       # (evicted, or staying because evict could not take it)
    return best


cdef TensorInfo _best_of(MemoryManager self, Device device, Ranking r,
                         vector[_Bound]& heap, double* best_score_out,
                         Py_ssize_t* best_k_out):
    """The lowest-scoring evictable candidate of `heap` (see _lowest_score), with its score
    and position in the pool, or None. The top entry's key is made dearer, cheap bound to
    score_bound to full score, and it goes back with it, until a full score comes first
    against every other key (the one chosen goes back too: the caller leaves it out of the
    round by `r.out` if it is taken). A candidate not evictable now is out of the round
    when it is pinned or read next, which no eviction changes, and back after the choice
    when it shares its storage (evicting the views cut from it may free it)."""
    cdef TensorInfo info
    cdef double key, score
    cdef Py_ssize_t k
    cdef long long gap
    cdef vector[_Bound] passed
    cdef _Bound entry
    cdef TensorInfo best = None
    while not heap.empty():
        _pop_heap(heap.begin(), heap.end())
        entry = heap.back()
        heap.pop_back()
        key, k = -entry.first, -entry.second
        if r.out[k]:
            continue
        info = <TensorInfo>r.pool[k]
        if info.status != PRODUCED:         # (evicted in this round)
            r.out[k] = 1
            continue
        if not _may_evict(self, info, device, r.groups):
            if _shares_storage(info):
                passed.push_back(entry)
            else:
                r.out[k] = 1
            continue
        gap = self.gap(info) if _read_through_evicted(info) else r.gaps[k]
        if not r.bounded[k]:
            r.bounded[k] = 1
            score = max(key, self.policy.score_bound(info, gap))
            if not heap.empty() and not _comes_first(score, k, heap.front()):
                _push_key(heap, score, k)
                continue
        score = _eviction_score(self, info, gap, device, r.groups)     # (_sharing.pxi)
        _push_key(heap, max(key, score), k)
        if _comes_first(score, k, heap.front()):     # (true where it is the front itself)
            best = info
            best_score_out[0] = score
            best_k_out[0] = k
            break
    for entry in passed:
        heap.push_back(entry)
        _push_heap(heap.begin(), heap.end())
    return best


cdef inline bint _comes_first(double score, Py_ssize_t k, _Bound& entry):
    """(score, k) before a heap entry's (key, position): lower, or equal and earlier."""
    return score < -entry.first or (score == -entry.first and k <= -entry.second)


cdef inline void _push_key(vector[_Bound]& heap, double key, Py_ssize_t k):
    heap.push_back(_Bound(-key, -k))
    _push_heap(heap.begin(), heap.end())


def candidate_scores():
    """Debugging and tests: [(record, score, read, gap)] of the candidates evictable now, in
    the order a round of evictions ranks them from, each scored in full as a choice would (the
    victim is the lowest score among the read ones, or among the others if none is read;
    the first such in this order)."""
    cdef MemoryManager m = _channel.mm
    cdef TensorInfo info
    cdef long long gap
    out = []
    for info in m.live_candidates():
        if info.status == PRODUCED and _may_evict(m, info, info.device, None):
            gap = m.gap(info)
            out.append((info, _eviction_score(m, info, gap, info.device, None),
                        bool(info.read_since_produced), gap))
    return out
