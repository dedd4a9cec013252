# Included by _core.pyx: the options the memory manager decides by, as one snapshot.


@cython.final
cdef class MemoryOptions:
    """The options the manager decides by: a copy of the Channel's, refreshed by on_options
    whenever one is set (so that the manager never reads the Channel's table)."""
    cdef readonly bint on            # any of the four switches below
    cdef readonly bint drop          # enable_drop: Tensor._drop()
    cdef readonly bint swap          # enable_swap: swapping out, by hand or as an eviction
    cdef readonly bint record_path   # record_computing_path
    cdef readonly bint dtr           # enable_dtr_auto_drop: eviction under the threshold
    cdef readonly bint sqrt_sampling # enable_dtr_sqrt_sampling
    cdef readonly long long threshold      # dtr_eviction_threshold (bytes)
    cdef readonly long long min_evictee    # dtr_evictee_minimum_size (bytes)
    cdef readonly long long budget         # the threshold DTR evicts under; 0: no eviction

    cdef void read(self, long long* opts):
        self.drop = opts[OPT_ENABLE_DROP] != 0
        self.swap = opts[OPT_ENABLE_SWAP] != 0
        self.record_path = opts[OPT_RECORD_PATH] != 0
        self.dtr = opts[OPT_DTR_AUTO] != 0
        self.sqrt_sampling = opts[OPT_SQRT_SAMPLING] != 0
        self.threshold = opts[OPT_DTR_THRESHOLD]
        self.min_evictee = opts[OPT_MIN_EVICTEE]
        self.on = self.drop or self.swap or self.record_path or self.dtr
        self.budget = self.threshold if self.dtr and self.threshold > 0 else 0
