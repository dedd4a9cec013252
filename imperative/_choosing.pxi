# Included by _core.pyx: MemoryManager.choose's search for the evictable candidate with the
# lowest score. Module functions that take the manager as `self`.
from libcpp.algorithm cimport make_heap as _make_heap, pop_heap as _pop_heap
from libcpp.pair cimport pair

ctypedef pair[double, Py_ssize_t] _Bound      # (a lower bound of a score, position in pool)


cdef TensorInfo _lowest_score(MemoryManager self, Device device, list pool):
    """The evictable candidate of `pool` with the lowest score (the first in `pool` among
    equal ones); one no op has read yet only where no read one is evictable (see choose).
    The policy's cheap lower bound of every candidate's score comes first, then the full
    scores (h_DTR^eq's walks of the evicted neighbourhood) in increasing order of the
    bounds, until a bound passes the best score found: the choice of scoring them all, in
    a fraction of the walks (a GRU's 340 candidates, scored in the pool's order, took 60 us
    a choice, 6.5 ms of a 250 ms step at 0.5 P)."""
    cdef vector[_Bound] read, unread
    cdef vector[long long] gaps
    cdef TensorInfo info
    cdef Py_ssize_t k
    cdef double bound
    gaps.resize(len(pool))
    for k in range(len(pool)):
        info = <TensorInfo>pool[k]
        if not self.evictable(info, device):
            continue
        gaps[k] = self.gap(info)
        bound = self.policy.score_at_least(info, gaps[k])
        if info.read_since_produced:
            read.push_back(_Bound(bound, k))
        else:
            unread.push_back(_Bound(bound, k))
    return _best_of(self, pool, gaps, read if read.size() else unread)


cdef TensorInfo _best_of(MemoryManager self, list pool, vector[long long]& gaps,
                         vector[_Bound] bounds):
    """The lowest-scoring of the candidates `bounds` names (see _lowest_score)."""
    cdef TensorInfo best = None
    cdef double score, best_score = 0, bound
    cdef Py_ssize_t k, best_k = 0, j
    # taken by bound, then by position in the pool: a heap of the negated pairs, popped
    # until a bound loses (the few taken cost less than sorting them all: a GRU's 340)
    for j in range(<Py_ssize_t>bounds.size()):
        bounds[j] = _Bound(-bounds[j].first, -bounds[j].second)
    _make_heap(bounds.begin(), bounds.end())
    while not bounds.empty():
        _pop_heap(bounds.begin(), bounds.end())
        bound, k = -bounds.back().first, -bounds.back().second
        bounds.pop_back()
        if best is not None and bound > best_score:
            break
        if best is not None and self.policy.score_bound(<TensorInfo>pool[k],
                                                        gaps[k]) > best_score:
            continue        # (its score is at least that bound: it cannot win, nor tie)
        score = self.policy.score(<TensorInfo>pool[k], gaps[k])
        if best is None or score < best_score or (score == best_score and k < best_k):
            best, best_score, best_k = <TensorInfo>pool[k], score, k
    return best
