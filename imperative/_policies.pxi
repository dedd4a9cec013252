# Included by _core.pyx: the eviction policies and their table. A policy is one class in one
# file, registered at its end; adding one is that file and its include line below
# (docs/design.md, "Eviction policies"). The base class's cpdef methods are declared in
# imperative/_core.pxd (the memory manager names it); its subclasses only here.


cdef class EvictionPolicy:
    """Chooses what to evict. `score(info, gap)`: lower is evicted first, where `gap` is
    how many ops from now the value will be read again as far as the manager can tell
    (MemoryManager.gap); `score_at_least` may bound it from below; `on_evict` and
    `on_restore` keep any bookkeeping (h_DTR^eq's union-find) current."""
    name = "base"

    cpdef double score(self, TensorInfo info, long long gap):
        raise NotImplementedError

    cpdef double score_at_least(self, TensorInfo info, long long gap):
        """A lower bound of score(info, gap), cheaper to compute: a candidate whose bound
        already loses to the best so far is not scored in full. -inf: no bound known. Taken
        once for a round of evictions (_choosing.pxi): it must not fall while one only
        evicts, nor must score_bound."""
        return -INFINITY

    cpdef double score_bound(self, TensorInfo info, long long gap):
        """A lower bound of score(info, gap) at least as tight as score_at_least and dearer
        to compute, looked at before the full score of a candidate whose cheap bound did
        not lose already."""
        return self.score_at_least(info, gap)

    cpdef double score_together(self, list members, list gaps, Py_ssize_t nbytes):
        """The score of evicting `members` (read `gaps` ops from now) at once, to free the
        `nbytes` of the storage they share (_sharing.pxi). Here: the dearest member's."""
        return max([self.score(m, g) for m, g in zip(members, gaps)])

    cpdef on_evict(self, TensorInfo info):
        pass

    cpdef on_restore(self, TensorInfo info):
        pass


POLICIES = {}                         # name -> policy class (imp.dtr.set_policy)


cdef void _register_policy(type cls):
    POLICIES[cls.name] = cls


include "_policy_dtr_eq.pxi"
include "_policy_lru.pxi"
include "_policy_size.pxi"
