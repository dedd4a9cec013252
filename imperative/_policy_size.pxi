# Included by _policies.pxi: largest first.


cdef class SizePolicy(EvictionPolicy):
    """Largest first."""
    name = "size"

    cpdef double score(self, TensorInfo info, long long gap):
        return -<double>info.size

    cpdef double score_together(self, list members, list gaps, Py_ssize_t nbytes):
        return -<double>nbytes


_register_policy(SizePolicy)
