# Included by _core.pyx: the options the memory manager decides by, as one snapshot
# (imperative/_core.pxd declares its fields), and its debugging hooks.


cdef class MemoryOptions:
    """The options the manager decides by: a copy of the Channel's, refreshed by on_options
    whenever one is set (so that the manager never reads the Channel's table)."""

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


cdef object _overshoot_hook = None    # debugging: called as hook(allocated, needed, threshold)


def set_overshoot_hook(hook):
    global _overshoot_hook
    _overshoot_hook = hook


cdef object _decision_hook = None     # debugging: called as hook(action, info, clock)


def set_decision_hook(hook):
    """Debugging: `hook(action, record, clock)` on every eviction ("evict"; a value evicted
    with the victim, sharing its storage: "evict_sharer"), drop of a dead value ("drop_dead")
    or its keeping ("keep"), recomputation ("recompute"), value taken back from the views
    that kept it ("revive"), and a restore's start and end ("restore", "restored", with
    the value it brings back); None to stop."""
    global _decision_hook
    _decision_hook = hook
