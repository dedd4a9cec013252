# Included by _core.pyx: the per-op half of recording a traced call (imperative/jit/
# recorder.py:Recorder derives from RecordLog). While a first call records, the hooks of
# _tracing.pxi call these methods in C, not through Python attribute lookups: recording a
# call must cost about what running it eagerly does (issue 15: <= 2x an eager call).
#
# The log keeps descriptors only: per value its (shape, dtype, device), kind, read flags and,
# where it has one, a name and data; per op a tuple (op, input ids, output ids, code, offset,
# scope). The Program of Value and Step objects (imperative/jit/program.py) is built from it
# when first needed (the first replay, a check, an export): a function called once per
# signature never pays for it.

cdef class TensorBase          # (imperative/_tensor_base.pxi)

# how a value entered the program (API.md section 9; imperative/jit/program.py reads these)
ARGUMENT = "argument"   # a tensor passed in as an argument (any depth of args/kwargs)
EXTERNAL = "external"   # a tensor made outside and reached otherwise (a Parameter, a global)
CONSTANT = "constant"   # a Python scalar or array literal, compared by value on later calls
INTERNAL = "internal"   # made by a step of this program

# kinds of read (TensorBase's read sites); a value's `reads` holds 1 << kind for each
READ_SHAPE, READ_VALUE, READ_DATA = 0, 1, 2


cdef class RecordLog:
    """What a recording call has seen so far, value by value and op by op."""
    cdef public dict vid            # TensorInfo -> value id (while the call runs)
    cdef public dict holders        # a record made outside the call -> the Tensor holding it
    cdef public list descs          # per value id: (shape, dtype, device)
    cdef public list kinds          # per value id: ARGUMENT, EXTERNAL, CONSTANT or INTERNAL
    cdef public list reads          # per value id: its read flags
    cdef public dict names          # value id -> a readable name (arguments, Parameters)
    cdef public dict data           # value id -> its array (constants; captured externals)
    cdef public list steps          # per op: (op, input ids, output ids, code, offset, scope)
    cdef public int excluded_depth  # > 0 inside exclude_from_trace()
    cdef public set excluded_records
    cdef public bint symbolic
    cdef public object value_read_at  # where a symbolic record first read a computed value
    cdef public set read_by_excluded  # ids of recorded values an excluded op read

    def __cinit__(self, *args, **kwargs):
        self.vid, self.holders, self.names, self.data = {}, {}, {}, {}
        self.descs, self.kinds, self.reads, self.steps = [], [], [], []
        self.excluded_records = set()
        self.read_by_excluded = set()

    def new_value(self, TensorInfo info, str kind, object name, object data):
        """A new value for `info`; returns its id."""
        return self._new(info, kind, name, data)

    def value_of(self, TensorInfo info):
        """The id of the value `info` is (made outside the call when unseen)."""
        return self._value_of(info)

    # (cdef, not cpdef: a cpdef method looks for a Python override on every call)
    cdef Py_ssize_t _new(self, TensorInfo info, str kind, object name, object data) except -1:
        cdef Py_ssize_t vid = len(self.kinds)
        self.descs.append((info.shape, info.dtype, info.device))
        self.kinds.append(kind)
        self.reads.append(0)
        if name:
            self.names[vid] = name
        if data is not None:
            self.data[vid] = data
        self.vid[info] = vid
        return vid

    cdef Py_ssize_t _value_of(self, TensorInfo info) except -1:
        """An op input's id: seen before, a Python scalar's 0-d constant, or made outside
        the call (the Python side binds it: `_external`)."""
        found = self.vid.get(info)
        if found is not None:
            return <Py_ssize_t>found
        if info.handle < 0:
            return self._new(info, CONSTANT, None, info.value)
        return self._external(info, None)

    cdef int record_op(self, OpDef op, list inputs, list outputs) except -1:
        cdef TensorInfo info
        cdef int lasti = 0
        cdef Py_ssize_t n = len(inputs)
        if self.excluded_depth:
            self.excluded_records.update(outputs)
            for info in inputs:
                found = self.vid.get(info)
                if found is not None:
                    self.read_by_excluded.add(found)
            return 0
        if n == 1:
            ins = (self._value_of(inputs[0]),)
        elif n == 2:
            ins = (self._value_of(inputs[0]), self._value_of(inputs[1]))
        else:
            ins = tuple([self._value_of(info) for info in inputs])
        if len(outputs) == 1:
            outs = (self._new(outputs[0], INTERNAL, None, None),)
        else:
            outs = tuple([self._new(info, INTERNAL, None, None) for info in outputs])
        code = _user_code(&lasti)     # (formatted as file:line only when the Program is built)
        self.steps.append((op, ins, outs, code, lasti,
                           (<TensorInfo>outputs[0]).scope if outputs else None))
        return 0

    cdef int record_put(self, TensorInfo info) except -1:
        if self.excluded_depth:
            self.excluded_records.add(info)
        else:
            self._new(info, CONSTANT, None, info.value)
        return 0

    cdef int record_inputs(self, tuple operands) except -1:
        cdef TensorInfo info
        for t in operands:
            if isinstance(t, TensorBase):
                info = (<TensorBase>t)._info
                if info not in self.vid and info not in self.holders:
                    self.holders[info] = t
        return 0

    cdef int record_read(self, TensorInfo info, int kind) except -1:
        cdef int lasti = 0
        found = self.vid.get(info)
        if found is None or self.excluded_depth:
            return 0
        cdef Py_ssize_t vid = <Py_ssize_t>found
        self.reads[vid] = <int>self.reads[vid] | (1 << kind)
        if (self.symbolic and kind != READ_SHAPE and self.kinds[vid] is INTERNAL
                and self.value_read_at is None):
            self.value_read_at = _where(_user_code(&lasti), lasti)
        return 0

    def outliving(self):
        """Ids of the internal values a Tensor still holds (at the end of the call: the
        results, new values of Parameters and `.grad`s, anything stashed away)."""
        cdef TensorInfo info
        return {vid for info, vid in self.vid.items()
                if info.tensor_refs > 0 and self.kinds[vid] is INTERNAL}

    def forget_records(self):
        """The end of the call: drop what ties the log to the call's tensors."""
        self.vid = None
        self.holders = None
        self.excluded_records = None
