# Included by _core.pyx: the per-op half of recording a traced call (imperative/jit/
# recorder.py:Recorder derives from RecordLog). While a first call records, the hooks of
# _tracing.pxi call these methods in C, not through Python attribute lookups: recording a
# call must cost about what running it eagerly does (issue 15: <= 2x an eager call).
#
# The log keeps descriptors only, in flat lists that recording adds no container object to
# (every tuple a call leaves alive is work for the cycle collector, which the objects of a
# long-lived program make dear): per value its shape, dtype, device, kind, read flags and,
# where it has one, a name and data; per op the op, its code and offset, its scope, and in
# `wiring` the counts and ids of its inputs and outputs. The Program of Value and Step
# objects (imperative/jit/program.py) is built from it when first needed (the first
# replay, a check, an export): a function called once per signature never pays for it.

cdef class TensorBase          # (imperative/_tensor_base.pxi)

# how a value entered the program (API.md section 9; imperative/jit/program.py reads these)
ARGUMENT = "argument"   # a tensor passed in as an argument (any depth of args/kwargs)
EXTERNAL = "external"   # a tensor made outside and reached otherwise (a Parameter, a global)
CONSTANT = "constant"   # a Python scalar or array literal, compared by value on later calls
INTERNAL = "internal"   # made by a step of this program

# kinds of read (TensorBase's read sites); a value's `reads` holds 1 << kind for each
READ_SHAPE, READ_VALUE, READ_DATA = 0, 1, 2


cdef str _frozen_read(int kind, str value_kind, bint data_shaped):
    """What a symbolic record's read of a value freezes into its replays, which do not
    run the Python that read it (None: nothing a later call could change): the value of a
    tensor the call computed, of an argument or of a tensor from outside it (a later call
    gets others); the shape of one whose shape depended on its data (`x[x > 0]`). A
    constant's value is the same at every call, and an argument's shape is part of the
    signature."""
    if kind == READ_SHAPE:
        return "the shape of a tensor whose shape depends on data" if data_shaped else None
    if value_kind == INTERNAL:
        return "the value of a tensor it computed"
    if value_kind == ARGUMENT:
        return "the value of an argument"
    if value_kind == EXTERNAL:
        return "the value of a tensor from outside the call"
    return None


cdef class RecordLog:
    """What a recording call has seen so far, value by value and op by op."""
    cdef public dict vid            # TensorInfo -> value id (while the call runs)
    cdef public dict holders        # a record made outside the call -> the Tensor holding it
    cdef public list shapes, dtypes, devices   # per value id
    cdef public list kinds          # per value id: ARGUMENT, EXTERNAL, CONSTANT or INTERNAL
    cdef public list reads          # per value id: its read flags
    cdef public dict names          # value id -> a readable name (arguments, Parameters)
    cdef public dict data           # value id -> its array (constants; captured externals)
    cdef public list ops, codes, offsets, scopes   # per op
    cdef public list wiring         # per op: n inputs, their ids, n outputs, their ids
    cdef public int excluded_depth  # > 0 inside exclude_from_trace()
    cdef public set excluded_records
    cdef public bint symbolic
    cdef public object value_read_at  # where a symbolic record first read what its
    cdef public str value_read_what   #     replays freeze, and what (_frozen_read)
    cdef public set read_by_excluded  # ids of recorded values an excluded op read
    cdef public set data_shaped     # ids of values whose shape depends on data: a
                                    #     value-dependent op's outputs (x[x > 0]) and,
                                    #     but for 0-d ones, what is made from them

    def __cinit__(self, *args, **kwargs):
        self.vid, self.holders, self.names, self.data = {}, {}, {}, {}
        self.shapes, self.dtypes, self.devices, self.kinds, self.reads = [], [], [], [], []
        self.ops, self.codes, self.offsets, self.scopes, self.wiring = [], [], [], [], []
        self.excluded_records = set()
        self.read_by_excluded = set()
        self.data_shaped = set()

    def new_value(self, TensorInfo info, str kind, object name, object data):
        """A new value for `info`; returns its id."""
        return self._new(info, kind, name, data)

    def value_of(self, TensorInfo info):
        """The id of the value `info` is (made outside the call when unseen)."""
        return self._value_of(info)

    # (cdef, not cpdef: a cpdef method looks for a Python override on every call)
    cdef Py_ssize_t _new(self, TensorInfo info, str kind, object name, object data) except -1:
        cdef Py_ssize_t vid = len(self.kinds)
        self.shapes.append(info.shape)
        self.dtypes.append(info.dtype)
        self.devices.append(info.device)
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
        cdef list wiring = self.wiring
        cdef bint shaped = op.value_dependent
        cdef Py_ssize_t vid
        wiring.append(n)
        for info in inputs:
            vid = self._value_of(info)
            wiring.append(vid)
            shaped = shaped or vid in self.data_shaped
        wiring.append(len(outputs))
        for info in outputs:
            vid = self._new(info, INTERNAL, None, None)
            wiring.append(vid)
            if shaped and (op.value_dependent or info.shape != ()):
                self.data_shaped.add(vid)
        self.ops.append(op)
        self.codes.append(_user_code(&lasti))   # (file:line when the Program is built)
        self.offsets.append(lasti)
        self.scopes.append((<TensorInfo>outputs[0]).scope if outputs else None)
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
        if self.excluded_depth:
            return 0
        cdef Py_ssize_t vid = -1 if found is None else <Py_ssize_t>found
        if vid >= 0:
            self.reads[vid] = <int>self.reads[vid] | (1 << kind)
        if self.symbolic and self.value_read_at is None:
            # (unseen: a tensor from outside the call that no op of it has read yet)
            what = (_frozen_read(kind, EXTERNAL, False) if vid < 0 else
                    _frozen_read(kind, self.kinds[vid], vid in self.data_shaped))
            if what is not None:
                self.value_read_at = _where(_user_code(&lasti), lasti)
                self.value_read_what = what
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
