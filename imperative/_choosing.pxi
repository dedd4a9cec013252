# Included by _core.pyx: MemoryManager.choose's search for the evictable candidate with the
# lowest score. Module functions that take the manager as `self`.
from libcpp.algorithm cimport make_heap as _make_heap, pop_heap as _pop_heap, push_heap as _push_heap
from libcpp.pair cimport pair

ctypedef pair[double, Py_ssize_t] _Bound      # (-(a score's lower bound), -(position in pool))


@cython.final
cdef class Ranking:
    """One round of evictions' candidates (make_room's snapshot, `pool`), ordered by the
    policy's cheap lower bound of their scores, made once for the round: a round that
    evicts four values (an LSTM's, most of its rounds) looked at every candidate four
    times. The bounds hold for the whole round: a candidate's cost, size and gap do not
    change while a round evicts, except the gap of a base kept for its evicted readers
    (_gap_of_evicted_readers), which only shrinks as more are evicted, so that its bound
    only grows; that gap is taken afresh for its score. Nor does the policy's dearer
    bound (score_bound) fall while a round only evicts (h_DTR^eq's: the evicted classes
    around a candidate only grow), nor its full score: the higher found is the candidate's
    key from then on (an LSTM at 0.5 P scored 10 candidates in full a choice, now 6)."""
    cdef list pool
    cdef vector[long long] gaps
    cdef vector[double] dear_bounds      # score_bound or score once found this round, else -inf
    cdef vector[_Bound] read, unread     # heaps of (-bound, -position): the lowest on top


cdef object _round_ranking(MemoryManager self, Device device, list pool):
    """The ranking of a round of evictions, or None where each choice samples the pool
    instead (the DTR paper's sqrt sampling, enable_dtr_sqrt_sampling)."""
    if self.opts.sqrt_sampling and len(pool) > 16:
        return None
    return _rank(self, device, pool)


cdef Ranking _rank(MemoryManager self, Device device, list pool):
    """The candidates of `pool` resident on `device`, by their scores' cheap lower bounds,
    values some op has read apart from those none has (see choose). Whether each is
    evictable is asked as it is considered (a victim dropped may leave a view evictable)."""
    cdef Ranking r = Ranking.__new__(Ranking)
    cdef TensorInfo info
    cdef Py_ssize_t k
    cdef double bound
    r.pool = pool
    r.gaps.resize(len(pool))
    r.dear_bounds.resize(len(pool), -INFINITY)      # (-inf: no bound known)
    for k in range(len(pool)):
        info = <TensorInfo>pool[k]
        if info.status != PRODUCED or info.device is not device:
            continue
        r.gaps[k] = self.gap(info)
        bound = self.policy.score_at_least(info, r.gaps[k])
        if info.read_since_produced:
            r.read.push_back(_Bound(-bound, -k))
        else:
            r.unread.push_back(_Bound(-bound, -k))
    _make_heap(r.read.begin(), r.read.end())
    _make_heap(r.unread.begin(), r.unread.end())
    return r


cdef TensorInfo _lowest_score(MemoryManager self, Device device, Ranking r):
    """The evictable candidate of the ranking with the lowest score (the first in its pool
    among equal ones); one no op has read yet only where no read one is evictable (see
    choose). The full scores (h_DTR^eq's walks of the evicted neighbourhood) are taken in
    increasing order of the bounds, until a bound passes the best score found: the choice
    of scoring them all, in a fraction of the walks (a GRU's 340 candidates, scored in the
    pool's order, took 60 us a choice, 6.5 ms of a 250 ms step at 0.5 P)."""
    cdef TensorInfo best = _best_of(self, device, r, r.read)
    if best is None:
        best = _best_of(self, device, r, r.unread)
    return best


cdef TensorInfo _best_of(MemoryManager self, Device device, Ranking r,
                         vector[_Bound]& heap):
    """The lowest-scoring evictable candidate of `heap` (see _lowest_score). The entries
    popped and not chosen go back for the round's next choice; the chosen one does not
    (evicted, or staying because evict could not take it: not again in this round), nor
    one evicted already."""
    cdef TensorInfo best = None, info
    cdef double score, best_score = 0, bound
    cdef Py_ssize_t k, best_k = 0
    cdef long long gap
    cdef vector[_Bound] popped
    cdef size_t j
    while not heap.empty():
        _pop_heap(heap.begin(), heap.end())
        bound, k = -heap.back().first, -heap.back().second
        info = <TensorInfo>r.pool[k]
        if info.status != PRODUCED:
            heap.pop_back()             # (evicted in this round)
            continue
        popped.push_back(heap.back())
        heap.pop_back()
        if best is not None and bound > best_score:
            break
        if not self.evictable(info, device):
            continue
        gap = self.gap(info) if info.ghost_kept else r.gaps[k]
        if best is not None:
            if r.dear_bounds[k] == -INFINITY:
                r.dear_bounds[k] = self.policy.score_bound(info, gap)
            if r.dear_bounds[k] > best_score:
                continue    # (its score is at least that bound: it cannot win, nor tie)
        score = self.policy.score(info, gap)
        r.dear_bounds[k] = max(r.dear_bounds[k], score)
        if best is None or score < best_score or (score == best_score and k < best_k):
            best, best_score, best_k = info, score, k
    for j in range(popped.size()):          # (back with the dearer bound where found)
        k = -popped[j].second
        if k != best_k or best is None:
            heap.push_back(_Bound(min(popped[j].first, -r.dear_bounds[k]), -k))
            _push_heap(heap.begin(), heap.end())
    return best


def candidate_scores():
    """Debugging and tests: [(record, score, read)] of the candidates evictable now, in the
    order a round of evictions ranks them from, each scored in full as a choice would (the
    victim is the lowest score among the read ones, or among the others if none is read;
    the first such in this order)."""
    cdef MemoryManager m = _channel.mm
    cdef TensorInfo info
    cdef long long gap
    out = []
    for info in m.live_candidates():
        if info.status == PRODUCED and m.evictable(info, info.device):
            gap = m.gap(info)
            out.append((info, m.policy.score(info, gap), bool(info.read_since_produced)))
    return out
