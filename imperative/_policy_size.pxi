# Included by _policies.pxi: largest first.


cdef class SizePolicy(EvictionPolicy):
    """Largest first."""
    name = "size"

    cpdef double score(self, TensorInfo info, long long gap):
        return -<double>info.size


_register_policy(SizePolicy)
