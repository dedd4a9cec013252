# Included by _core.pyx: the per-op half of a checked call of a symbolic=False trace
# (imperative/jit/recorder.py:Checker derives from CheckLog). While the compiled plan serves
# the call's ops (_tracing.pxi: serve_ops), dispatch asks `serve` for each op's outputs
# before running it: the common case, the recorded op object reading the values the record
# says, is checked here in C; anything else (the first sight of a constant or an external
# value, or a mismatch to report) goes to the Python side's `_check`.


cdef class CheckLog:
    """A checked call's position in the record and the records it has seen."""
    cdef public dict vid            # TensorInfo -> value id, for the values of this call
    cdef public Py_ssize_t index    # the next recorded op
    cdef public int excluded_depth  # > 0 inside exclude_from_trace()
    cdef public set excluded_records
    cdef public object served       # value id -> array (the plan's), or None: ops run
    cdef list ops, ins, outs        # per recorded op: the op, input ids, output ids
    cdef list descs                 # per value id: (shape, dtype, device)
    cdef dict scalars               # value id -> (dtype, bytes) of a 0-d constant

    def __cinit__(self, *args, **kwargs):
        self.vid = {}
        self.excluded_records = set()

    def set_record(self, list ops, list ins, list outs, list descs, dict scalars):
        """The recorded steps (`check_tables` of the recording: made once)."""
        self.ops, self.ins, self.outs, self.descs = ops, ins, outs, descs
        self.scalars = scalars

    cdef bint _known(self, TensorInfo info, object vid):
        """`info` is the value `vid` of the record: seen as such already, or a Python
        scalar's 0-d constant with the recorded bits (then noted)."""
        if self.vid.get(info) == vid:
            return True
        if info.handle >= 0 or info.value is None:
            return False
        recorded = self.scalars.get(vid)
        if recorded is None or recorded[0] is not info.dtype \
                or recorded[1] != info.value.tobytes():
            return False
        self.vid[info] = vid
        return True

    cdef list serve(self, OpDef op, list inputs):
        cdef Py_ssize_t k = self.index, i, index
        cdef tuple ins = None
        cdef TensorInfo info
        if self.served is None or self.excluded_depth:
            return None
        if k < len(self.ops) and self.ops[k] is op:
            ins = <tuple>self.ins[k]
            if len(ins) == len(inputs):
                for i in range(len(inputs)):
                    if not self._known(inputs[i], ins[i]):
                        ins = None
                        break
            else:
                ins = None
        if ins is None:
            self._check(op, inputs)         # raises TraceMismatchError, or moves on
        else:
            self.index = k + 1
        cdef list result = []
        cdef dict served = self.served
        index = 0
        for vid in <tuple>self.outs[k]:
            shape, dtype, device = self.descs[vid]
            info = _served_info(op, index, shape, dtype, device, served.get(vid), inputs)
            self.vid[info] = vid
            result.append(info)
            index += 1
        return result
