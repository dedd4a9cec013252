# Included by _policies.pxi: least recently used first.


cdef class LRUPolicy(EvictionPolicy):
    """Least recently used first."""
    name = "lru"

    cpdef double score(self, TensorInfo info, long long gap):
        return <double>info.last_use          # (the baseline: the past only)


_register_policy(LRUPolicy)
