# Included by _core.pyx: the per-call path of a symbolic imp.jit trace, in C. `TraceBase` is
# the base of imperative/jit/trace.py:trace; its __call__ first offers the call to the most
# recently used recording's `FastReplay`, which checks the signature argument by argument
# (positional arguments only: Tensors by shape, dtype and device; other values by type and
# ==, floats by their bits), binds the plan's inputs (arguments by position, Parameters and
# other held tensors through their holder, fixed values), runs the plan (run_plan), applies
# the effects (rebinding, .grad) and returns the results. Anything else it declines
# (FAST_MISS) and the Python side takes the call: other signatures, keyword arguments,
# nested structures, a replay the memory manager, the profiler or a gradient recording must
# see op by op.

cdef object FAST_MISS = object()

cdef enum:
    BIND_ARG = 0        # the call's positional argument
    BIND_HELD = 1       # the value a Tensor object holds now (a weak reference to it)
    BIND_FIXED = 2      # a record that never changes
    BIND_GRAD = 3       # the .grad a Tensor object holds now


cdef inline object _bound_holder(int kind, object ref, tuple args):
    if kind == BIND_ARG:
        return args[<Py_ssize_t>ref]
    return ref()


cdef inline TensorInfo _bound_record(int kind, object ref, tuple args):
    """The record a binding names in this call, or None (a holder gone, a .grad empty)."""
    if kind == BIND_FIXED:
        return ref
    holder = _bound_holder(kind, ref, args)
    if kind == BIND_GRAD:
        holder = None if holder is None else (<TensorBase>holder)._grad_slot
    return None if holder is None else (<TensorBase>holder)._info


cdef bint _shares_as_recorded(tuple args, Py_ssize_t i, Py_ssize_t first, TensorInfo info):
    """Argument i holds the record of argument `first` (itself when it was given once at
    record time) and of no argument before it otherwise."""
    cdef Py_ssize_t k
    if first != i:
        return (<TensorBase>args[first])._info is info
    for k in range(i):
        a = args[k]
        if isinstance(a, TensorBase) and (<TensorBase>a)._info is info:
            return False
    return True


@cython.final
cdef class FastReplay:
    """One recording's call in C (see the top of this file)."""
    cdef OpDef op
    cdef CompiledPlan plan
    cdef Py_ssize_t largest
    cdef list arg_kinds, arg_a, arg_b, arg_c   # per argument: (True, shape, dtype, device)
                                               # or (False, type, value, None)
    cdef list in_kinds, in_refs                # per plan input
    cdef list results                          # plan output index per result
    cdef bint as_tuple                         # several results, returned as a tuple
    cdef list effects                          # (kind, ref, output index): rebind the holder
    cdef list grads                            # (kind, ref, output index or -1, was empty)
    cdef list same_as                          # per argument: the first argument holding
                                               # the same record (tree.py: sharing)

    def __cinit__(self, OpDef op, CompiledPlan plan, Py_ssize_t largest, list args,
                  list inputs, list results, bint as_tuple, list effects, list grads,
                  list same_as):
        self.op, self.plan, self.largest = op, plan, largest
        self.arg_kinds = [a[0] for a in args]
        self.arg_a = [a[1] for a in args]
        self.arg_b = [a[2] for a in args]
        self.arg_c = [a[3] for a in args]
        self.in_kinds = [k for k, _ in inputs]
        self.in_refs = [r for _, r in inputs]
        self.results, self.as_tuple = results, as_tuple
        self.effects, self.grads = effects, grads
        self.same_as = [None] * len(args)
        for i, k in zip([i for i, a in enumerate(args) if a[0]], same_as):
            self.same_as[i] = k

    cdef list bound(self, tuple args):
        """The signature check of a call and its plan's input records; None when the call
        is not this recording's (a cached signature's lookup: bench_jit times it)."""
        cdef Py_ssize_t i, n = len(args)
        cdef TensorInfo info
        if n != len(self.arg_kinds) or not plan_may_run():
            return None
        for i in range(n):
            a = args[i]
            if self.arg_kinds[i]:
                if not isinstance(a, TensorBase):
                    return None
                info = (<TensorBase>a)._info
                if (info.dtype is not self.arg_b[i] or info.device is not self.arg_c[i]
                        or (info.shape is not self.arg_a[i] and info.shape != self.arg_a[i])):
                    return None
                if not _shares_as_recorded(args, i, <Py_ssize_t>self.same_as[i], info):
                    return None
            elif type(a) is not self.arg_a[i] or not _same_leaf(a, self.arg_b[i]):
                return None
        for kind, ref, _, empty in self.grads:
            holder = _bound_holder(kind, ref, args)
            if holder is None or ((<TensorBase>holder)._grad_slot is None) != empty:
                return None
        cdef list infos = []
        for i in range(len(self.in_kinds)):
            info = _bound_record(self.in_kinds[i], self.in_refs[i], args)
            if info is None:
                return None
            infos.append(info)
        return infos

    def lookup(self, *args):
        """True when a call with these positional arguments is this recording's (the check
        alone, for measuring it)."""
        return self.bound(args) is not None

    cdef object call(self, tuple args):
        cdef list infos = self.bound(args)
        if infos is None:
            return FAST_MISS
        cdef list outs = run_plan(self.op, self.plan, infos, self.largest)
        for kind, ref, k in self.effects:
            holder = _bound_holder(kind, ref, args)
            if holder is not None:
                _rebind(<TensorBase?>holder, <TensorInfo>outs[k])
        for kind, ref, k, _ in self.grads:
            holder = _bound_holder(kind, ref, args)
            (<TensorBase>holder)._grad_slot = None if k < 0 else _wrap(outs[k])
        if not self.as_tuple:
            return _wrap(outs[self.results[0]])
        return tuple([_wrap(outs[k]) for k in self.results])


cdef class TraceBase:
    """The C part of imp.jit.trace: the fast call of the most recent recording
    (`_fast`, a FastReplay or None), else the Python side's `_call(args, kwargs)`."""
    cdef public object _fast
    cdef public long long _fast_replays

    def __call__(self, *args, **kwargs):
        cdef FastReplay fast = self._fast
        # (inside another trace's call on this thread: the Python side refuses the nesting)
        if fast is not None and not kwargs and not _traced_here():
            result = fast.call(args)
            if result is not FAST_MISS:
                self._fast_replays += 1
                return result
        return self._call(args, kwargs)


# ---- a call's signature (imperative/jit/tree.py re-exports these): every recording and every
# call the fast replay declines computes one, so it is C too

TENSOR = "T"     # a Tensor leaf's tag in a structure


cpdef object flatten(object obj, list tensors):
    """The hashable structure of `obj` (tuples, lists and dicts walked at any depth, their
    subclasses too, namedtuples included, with their type; other values kept, a float by
    its bits: InexactLeaf); its Tensors are appended to `tensors`."""
    if isinstance(obj, TensorBase):
        tensors.append(obj)
        return TENSOR
    kind = type(obj)
    if kind is tuple:
        return ("tuple", tuple([flatten(x, tensors) for x in <tuple>obj]))
    if kind is list:
        return ("list", tuple([flatten(x, tensors) for x in <list>obj]))
    if kind is dict:
        return ("dict", _flatten_items(<dict>obj, tensors))
    if kind is float or kind is complex or isinstance(obj, _INEXACT):
        return ("~", InexactLeaf(obj))
    if isinstance(obj, (tuple, list)):
        # (a namedtuple or another subclass: rebuilt with its own type, tree.py: unflatten)
        return ("seq", kind, tuple([flatten(x, tensors) for x in obj]))
    if isinstance(obj, dict):
        # (a defaultdict's factory is part of what rebuilds it)
        return ("map", kind, _flatten_items(obj, tensors),
                getattr(obj, "default_factory", None))
    try:
        hash(obj)
    except TypeError:
        raise TypeError(f"imp.jit.trace: an argument or result of type {kind.__name__} is "
                        "neither a Tensor, a tuple, list or dict of them, nor hashable "
                        "(non-tensor arguments key the trace's cache)") from None
    return ("=", kind, obj)


cdef tuple _flatten_items(object obj, list tensors):
    return tuple([(k, flatten(v, tensors)) for k, v in obj.items()])


cdef tuple _INEXACT = (float, complex, np.inexact)


@cython.final
cdef class InexactLeaf:
    """A float (complex, numpy floating) in a structure: equal to another of the same type
    and bits only. By `==`, 0.0 and -0.0 would share a signature though `x * k` differs in
    the sign of its zeros, and a NaN would never find its own."""
    cdef readonly object value
    cdef bytes bits

    def __cinit__(self, object value):
        self.value = value
        self.bits = _bits(value)

    def __eq__(self, other):
        return (type(other) is InexactLeaf and type(self.value) is type(
            (<InexactLeaf>other).value) and self.bits == (<InexactLeaf>other).bits)

    def __hash__(self):
        return hash(self.bits)

    def __repr__(self):
        return f"InexactLeaf({self.value!r})"


cdef inline bytes _bits(object value):
    cdef double d
    if type(value) is float:
        d = value
        return (<char*>&d)[:sizeof(double)]
    return np.asarray(value).tobytes()


cdef inline bint _same_leaf(object a, object b):
    """A non-tensor argument `a` is the recorded `b` (of a's type): floats by their bits."""
    cdef double x, y
    cdef unsigned long long bits_x, bits_y
    if type(a) is float:
        x, y = a, b
        memcpy(&bits_x, &x, sizeof(double))
        memcpy(&bits_y, &y, sizeof(double))
        return bits_x == bits_y
    if isinstance(a, _INEXACT):
        return _bits(a) == _bits(b)
    return a == b


cpdef tuple sharing(list tensors):
    """For each Tensor, the position of the first one holding the same record: the program
    reads an argument given twice (f(x, x)) as one value, so that is part of a signature."""
    cdef dict first = {}
    cdef Py_ssize_t i
    return tuple([first.setdefault((<TensorBase>tensors[i])._info, i)
                  for i in range(len(tensors))])


def call_signature(tuple args, dict kwargs):
    """(signature, tensors) of a call: the arguments' structure with their non-tensor
    values, each Tensor's shape, dtype and device, and which Tensors share a record."""
    cdef list tensors = []
    cdef TensorInfo info
    structure = flatten((args, kwargs), tensors)
    descs = []
    for t in tensors:
        info = (<TensorBase>t)._info
        descs.append((info.shape, info.dtype, info.device))
    return (structure, tuple(descs), sharing(tensors)), tensors
