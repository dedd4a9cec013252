# Included by _core.pyx: writing an evicted value to its swap file and reading it back, for
# the memory manager (imperative/_memory.pxi; the files themselves: _swap.pxi). Module
# functions that take the manager as `self`, as in _restore.pxi.


cdef bint _swap_is_cheaper(MemoryManager self, TensorInfo victim) except -1:
    """Writing the victim out and reading it back, at the bandwidth measured here, would
    take less than recomputing it and the evicted ancestors that would come back first
    (its own cost alone: the LayerNorm MLP at 0.5 P dropped bias sums whose product was
    gone, and swapped only its parameters and momenta, 1.14x drop-only's step; now
    1.01-1.02x, every zoo model within 1.03x at 0.5 P). False when swapping cannot work."""
    cdef vector[PyObject*] seen
    cdef double recompute = victim.cost + _ancestors_cost(victim, seen, None)
    return self.swap.calibrate() and self.swap.seconds_to_swap(victim.size) < recompute


cdef bint _swap_out(MemoryManager self, TensorInfo info, str reason) except -1:
    """Write the value, as laid out, to a file and free it; on any error nothing
    changes (OSError naming the file and the reason). False when another thread began
    to read the value (or let it go) while it was being written: it stays resident."""
    cdef long long t0 = _now_ns() if _profiling else 0
    cdef Device dev = info.device
    if info.storage is not None and info.storage.refs > 1:
        raise RuntimeError(f"cannot swap out a tensor {info.shape} {info.dtype} whose "
                           f"storage {info.storage.refs - 1} other tensor(s) view")
    value = info.value
    cdef SwapLayout layout = _layout_of(value)
    path = None
    # The write releases the GIL: pinned meanwhile, so that no other thread evicts it
    # too; one that pins it to read it (an op of its own, a recomputation) keeps it.
    info.pins += 1
    try:
        self.swap.calibrate()
        path = self.swap.new_path()
        seconds = _write_file(path, _span_of(value, layout))
    except OSError as e:
        raise _swap_error(e, f"swap out failed, the tensor stays in memory: could not "
                             f"write {layout.nbytes} bytes to "
                             f"{path or self.swap.chosen or 'a temporary folder'}") from e
    finally:
        info.pins -= 1
    if info.pins or info.status != PRODUCED or info.value is not value:
        _unlink_quietly(path)
        return False
    self.swap.write_rate.add(layout.nbytes, seconds)
    info.swap_path = path
    info.swap_layout = layout
    self.forget(info)
    self.ch._free_value(info)
    info.status = SWAPPED
    dev.stats.swapped += info.size
    dev.stats.swap_outs += 1
    if _profiling:
        record_memory_event(t0, "swap_out", info, reason)
    return True


cdef Py_ssize_t _swapped_bytes(TensorInfo info):
    """The bytes reading `info` back allocates: the span of its strides."""
    cdef SwapLayout layout = info.swap_layout
    return info.size if layout is None else max(layout.nbytes, info.size)


cdef int _swap_in(MemoryManager self, TensorInfo info) except -1:
    """Read the value back with the layout it left with; on any error it stays
    swapped out (OSError naming the file and the reason)."""
    cdef long long t0 = _now_ns() if _profiling else 0
    cdef Device dev = info.device
    cdef SwapLayout layout = info.swap_layout
    span = np.empty(layout.nbytes, np.uint8)
    path = info.swap_path
    try:
        seconds = _read_file(path, span)   # (releases the GIL)
    except OSError as e:
        if info.swap_path is not path:
            return 0                       # another thread brought it back first
        raise _swap_error(e, f"swap in failed, the tensor {info.shape} {info.dtype} stays "
                             f"swapped out: swap file {path}") from e
    if info.status != SWAPPED or info.swap_path is not path:
        return 0                           # another thread brought it back meanwhile
    self.swap.read_rate.add(layout.nbytes, seconds)
    _release_swap_file(info)
    info.swap_layout = None
    dev.stats.swap_ins += 1
    self.ch._adopt(info, _value_from_span(span, layout), None)   # (also a candidate again)
    self.policy.on_restore(info)
    if _profiling:
        record_memory_event(t0, "swap_in", info, "used")
    return 0
