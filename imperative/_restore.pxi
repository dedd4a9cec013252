# Included by _core.pyx: bringing evicted values back, for the memory manager
# (imperative/_memory.pxi): swap in, take back from views that kept the memory, or recompute,
# inputs first. Module functions that take the manager as `self` (an include cannot go in a
# class body).


@cython.final
cdef class _Ghost:
    """Where a dropped value still lies: views of its storage keep the memory."""
    cdef Storage storage
    cdef object root                   # weak reference to the array owning the memory
    cdef Py_ssize_t offset             # bytes from the root's start to element [0, ..., 0]
    cdef tuple shape
    cdef tuple strides
    cdef object dtype
    cdef bint writeable


cdef bint _revivable(TensorInfo info):
    """A dropped value the views of its storage still hold: taking it back costs nothing."""
    cdef _Ghost g = info.ghost
    return g is not None and g.storage.refs > 0 and g.root() is not None


cdef _Ghost _ghost_of(TensorInfo info):
    """For a value about to be dropped whose storage other records (views) still hold:
    how to take it back from there. That storage is no longer written in place (marked
    exported), so the bits stay the value's. None otherwise."""
    cdef Storage st = info.storage
    value = info.value
    if (st is None or st.refs <= 1 or value is None or type(value) is not _ndarray
            or _view_of_resident_input(info, st)):
        return None
    root = value
    while isinstance(root.base, _ndarray):
        root = root.base
    cdef _Ghost g = _Ghost.__new__(_Ghost)
    try:
        g.root = _weakref.ref(root)
    except TypeError:
        return None
    g.storage = st
    g.offset = (<char*>cnp.PyArray_DATA(<cnp.ndarray>value)
                - <char*>cnp.PyArray_DATA(<cnp.ndarray>root))   # (__array_interface__ makes dicts)
    g.shape = value.shape
    g.strides = value.strides
    g.dtype = value.dtype
    g.writeable = value.flags.writeable
    st.exported = True
    other = st.ghost_ref() if st.ghost_ref is not None else None
    if other is None or (<TensorInfo>other).ghost is None or (<TensorInfo>other).size <= info.size:
        st.ghost_ref = _weakref.ref(info)      # (the largest such record: _keep_ghost_base)
    return g


cdef bint _view_of_resident_input(TensorInfo info, Storage st):
    """`info` is dead, a view an aliasing op cut from an input still resident in the same
    storage: recomputing it views that storage again, as a ghost would, so it needs none.
    (A ghost marks the storage exported, and so barred every later in-place write into
    the input: a max-pool backward's `g[tap] = g[tap] + c` chain, whose slices die
    before each write, copied the whole gradient four times a pooling under DTR. A live
    view keeps its ghost: a user reads it again, and takes it back without an op.)"""
    cdef Producer p = info.producer
    cdef TensorInfo i
    if p is None or _alive(info) or not (<OpDef>p.op).aliases_input:
        return False
    for i in p.inputs:
        if i.storage is st and i.status == PRODUCED:
            return True
    return False


cdef int _restore(MemoryManager self, TensorInfo target) except -1:
    """Bring `target` back: swap it in, or recompute it, first bringing back (one at a
    time, iteratively) the inputs of its producer that are gone too. A tensor waiting
    for its inputs does not pin those it has: in a DenseNet every concatenation reads
    all earlier features, and pinning them on each level of a deep recomputation made
    the floor the whole block (29 MiB of 81 at 0.3 P), so that every op overshot. What
    was just brought back is safe enough without pins: `choose` takes a value nobody
    has read yet only when nothing else is left. Once an input some tensor waited for
    is evicted again before its turn, every waiting tensor pins what it has, from then
    to the end of the restore (the DTR paper's locking), so that no value comes back
    twice for one waiting tensor. Pinning only the tensor that waited twice let each
    level of a deep recomputation start over once: twice the work per level, so that a
    small LSTM's recurrence, 16 steps deep under 0.4 P, brought back 1.6 million values
    for one op. Recompute itself pins an op's inputs while it runs."""
    cdef list stack = [target]
    cdef dict held = {}              # tensor on the stack -> its inputs pinned for it
    cdef dict asked = {}             # tensor on the stack -> inputs it waited for
    cdef list kept = []              # dead values brought back and kept so far
    cdef dict witnesses = {}         # ... the evicted tensors they were kept for (_worth_keeping)
    cdef list pinned_views = []      # views whose evicted siblings came back: pinned to the end
    cdef list pushed = []            # those siblings (_push_views_beside: once a restore)
    cdef set recomputed = set()      # values this restore recomputed (a second time: a storm)
    cdef bint locking = False        # every waiting tensor pins what it has
    cdef TensorInfo t, i
    cdef Producer p
    cdef list outer = self.restoring
    cdef dict outer_reads = self.restore_reads
    cdef _ReadsToCome reads = _ReadsToCome()
    self.restoring = stack           # (for _droppable_now: what the stack's recipes read)
    if _decision_hook is not None:
        _decision_hook("restore", target, self.clock)
    reads.walk_from(target)
    self.restore_reads = reads.counts   # (for gap; another thread's restore may replace it)
    try:
        while stack:
            t = stack[len(stack) - 1]    # (wraparound is off in this module)
            if t.status == PRODUCED:
                stack.pop()
            elif t.status == SWAPPED:
                # Reading it back is an allocation too, of the bytes its strides span
                # (SwapLayout): a strided view read back with its gaps, as it left, so
                # that later reductions of it keep their bits. Room for its own bytes
                # alone let a view of every other column of a 0.5 MiB value, 3 KiB,
                # bring back 0.35 MiB above the budget (tools/fuzz_memory.py --seed
                # 907621).
                spanned = _swapped_bytes(t)
                self.reserve(spanned, t.device)
                try:
                    _swap_in(self, t)
                finally:
                    self.release(spanned)
                stack.pop()
            elif t.status == DROPPED:
                if _revive(self, t):
                    stack.pop()
                    continue
                if t.producer is None:
                    raise RuntimeError(f"cannot recompute a dropped tensor {t.shape} {t.dtype}: "
                                       "its recipe is gone")
                if not reads.walked_to(t):
                    reads.walk_from(t)       # (resident when the walk passed, evicted since)
                elif t in recomputed:
                    reads.walk_again_from(t)     # (brought back, evicted since)
                p = t.producer
                missing = _first_missing_input(p, t)
                if missing is not None:
                    waited = asked.setdefault(t, [])
                    if not locking and _contains(waited, missing):
                        locking = True
                        for w in asked:          # (t among them)
                            _pin_resident_inputs(self, (<TensorInfo>w).producer,
                                                 held.setdefault(w, []))
                    elif locking:
                        _pin_resident_inputs(self, p, held.setdefault(t, []))
                    waited.append(missing)
                    stack.append(missing)
                    continue
                _recompute(self, p, t, stack)
                reads.read_by(p)
                if _count_repeat(t, recomputed):
                    # (measured at every repeat, pinning or not: each is one more moment
                    # for live_high; measured once a restore, the storm sweep's repeats
                    # were 10,151 against 9,127-9,398)
                    reads.pin_all(_room_for_dead_pins(self, t.device))
                reads.pin_outputs(p)
                stack.pop()
                asked.pop(t, None)
                for i in held.pop(t, ()):
                    i.pins -= 1
                if _cut_by_view(t) and not _contains(pushed, t):
                    _push_views_beside(t, stack, pinned_views, pushed)
                # Intermediates no tensor and no queued op holds, brought back only on
                # the way: free them again as their first run did. One kept because an
                # evicted tensor needed it is looked at again after every later step:
                # the tensor may be the one just brought back (a ReLU MLP kept each
                # layer's matmul output for the ReLU being restored, and then kept it).
                for i in p.inputs:
                    if not _contains(kept, i):
                        kept.append(i)
                kept = _drop_the_unneeded(self, kept, stack, reads, witnesses)
            else:
                raise RuntimeError(f"cannot restore a tensor in state {Status(t.status).name}")
        reads.unpin_all()        # (here, for the loop below to see no pins of its own; the
                                 # one in `finally` lets them go after an error)
        # A read the walk counted may not come (its recipe's output came back another way):
        # a small value kept only for it, no candidate, would stay for good (a candidate
        # stays, evictable: dropping those too recomputed a Tree-LSTM's 0.3 P steps
        # 20-60% more often, for 3.6 MiB less at its peak, under its floor).
        for i in kept:
            if (not _alive(i) and i.status == PRODUCED and i.producer is not None
                    and not i.pins and _key(i) not in self.candidates):
                self.drop_dead(i, "kept for a read that did not come")
    finally:
        if _decision_hook is not None:
            _decision_hook("restored", target, self.clock)
        self.restoring = outer
        self.restore_reads = outer_reads
        for pinned in held.values():
            for i in pinned:
                i.pins -= 1
        for i in pinned_views:
            i.pins -= 1
        reads.unpin_all()
    return 0


cdef long long _room_for_dead_pins(MemoryManager self, Device device):
    """The bytes of dead values a restore may pin on `device` for its reads to come without
    lifting the peak above the same program's without the manager: what tensors hold now,
    resident or evicted (all resident there), is a moment of that program, and the most
    such moment measured so far (`live_high`) a peak it reaches. So the room is that, less
    what tensors hold resident. (A view's evicted bytes are its base's: not counted.)
    While ops wait in the queue behind the running one, the caller may have let go of
    values only they hold, which the handle table no longer shows: no moment can be
    measured then, and the room is not bounded. (Bounded by what the table showed, the
    room at async level 2 was so small that a highway MLP's and a spiking network's
    restores repeated 9 times as often.)"""
    cdef long long evicted = 0, resident = 0
    cdef set storages = set()
    cdef TensorInfo info
    if self.queued_to > self.running:
        return LLONG_MAX
    for entry in self.ch._table:
        if entry is None:
            continue
        info = <TensorInfo>entry
        if info.tensor_refs <= 0 or info.device is not device:
            continue
        if info.status == DROPPED or info.status == SWAPPED:
            if info.producer is None or not (<OpDef>(<Producer>info.producer).op).aliases_input:
                evicted += info.size
        elif (info.status == PRODUCED and info.storage is not None
              and _pointer(info.storage) not in storages):
            storages.add(_pointer(info.storage))
            resident += info.storage.nbytes
    self.live_high = max(self.live_high, resident + evicted)
    return self.live_high - resident


cdef inline bint _count_repeat(TensorInfo value, set recomputed):
    """`value` was just recomputed: a second time in one restore counts as a repeat, the
    sign of a storm (memory_stats()'s recomputes_repeated). A restore whose working set
    does not fit evicts what it will need again: the first step of a multi-task CNN under
    0.5 P recomputed 416 values to bring back one gradient, 299 of them repeats."""
    if value in recomputed:
        value.device.stats.recomputes_repeated += 1
        return True
    recomputed.add(value)
    return False


cdef void _push_views_beside(TensorInfo view, list stack, list pinned, list pushed):
    """The evicted views beside `view`, just recomputed, come back next (from its storage,
    without new memory: _evicted_views_beside). A storage's values are evicted together;
    brought back one at a time, each later one recomputed the storage's whole history
    again once the dead values between had gone (a long-sequence attention block's key
    and value after its query: the projection they are split from, 4-5 times a step at
    0.5 P). Each comes back so once a restore (`pushed`), and `view` stays pinned to the
    end of the restore (`pinned`), so that the group cannot go while they come back into
    its storage: under a budget below the floor, the storage and another value the
    restore needed evicted each other in turn, for ever."""
    cdef TensorInfo other
    cdef list others = [other for other in _evicted_views_beside(view)
                        if other.status == DROPPED and not _contains(pushed, other)]
    if not others:
        return
    view.pins += 1
    pinned.append(view)
    for other in others:
        pushed.append(other)
        if not _contains(stack, other):
            stack.append(other)


cdef list _drop_the_unneeded(MemoryManager self, list dead, list stack, _ReadsToCome reads,
                             dict witnesses):
    """Drop the dead values brought back by a restore that no tensor still waiting on
    `stack` reads, no recipe of the restore will still read and no evicted tensor needs;
    the rest, still dead and resident, is returned to be looked at again. Last brought
    back first, so that a view goes before its base, which is then its storage's one
    record again and may stay (_worth_keeping); a base whose view a tensor on the stack
    will read waits for that view."""
    cdef TensorInfo i
    cdef list still = []
    cdef _StackReaders waiting = _StackReaders(stack)
    for i in reversed(dead):
        if _alive(i) or i.status != PRODUCED or i.producer is None:
            continue
        if (i.pins or waiting.read(i) or _viewed_on_the_way(i, waiting)
                or _read_again(self, i, reads) or _worth_keeping(self, i, witnesses)):
            still.append(i)
        else:
            self.drop_dead(i, "recomputed, dead again")
    still.reverse()
    return still


cdef bint _viewed_on_the_way(TensorInfo base, _StackReaders waiting):
    """A view of `base` (a resident output of an op reading it, in its storage) is read by
    a tensor on the stack: dropping `base` now frees nothing, and once that view is read
    and gone, `base` may be worth keeping. An LSTM's gate pre-activations, which its four
    gates are views of, were dropped while the first gate's view was on the way, so that
    each gate recomputed them and the two products before them: 17 times a time step at
    0.3 P."""
    cdef TensorInfo o
    cdef vector[PyObject*] outs
    cdef size_t k
    _consumer_outputs(base, outs)
    for k in range(outs.size()):
        o = <TensorInfo>outs[k]
        if (o.status == PRODUCED and o.storage is base.storage
                and waiting.read(o)):
            return True
    return False


cdef void _pin_resident_inputs(MemoryManager self, Producer p, list pinned):
    cdef TensorInfo i
    for i in p.inputs:
        if i.status == PRODUCED and not _contains(pinned, i) and not _made_from_nothing(i):
            i.pins += 1
            pinned.append(i)


cdef inline bint _made_from_nothing(TensorInfo info):
    """A dead value whose recipe reads no tensor (zeros, a constant): evicted again, it
    comes back by itself, without a chain behind it."""
    return (not _alive(info) and info.producer is not None
            and not (<Producer>info.producer).inputs)


cdef bint _revive(MemoryManager self, TensorInfo info) except -1:
    """Take a dropped value back from where it still lies, when views of the same
    storage kept it (nothing wrote over it since: see _ghost_of). Recomputing it would
    put it in another storage: it would cost memory the views still hold, and an op
    reading it together with one of those views (x.T @ x, which numpy runs as one
    symmetric product) would round differently."""
    cdef _Ghost g = info.ghost
    if g is None:
        return False
    info.ghost = None
    root = g.root()
    if root is None or g.storage.refs <= 0:
        return False
    try:
        value = _ndarray(g.shape, g.dtype, buffer=root, offset=g.offset, strides=g.strides)
    except (TypeError, ValueError, BufferError):
        return False                 # (a root numpy cannot view again: recompute)
    if not g.writeable:
        value.flags.writeable = False
    self.ch._adopt(info, value, g.storage)
    self.policy.on_restore(info)
    if _decision_hook is not None:
        _decision_hook("revive", info, self.clock)
    return True


cdef bint _read_again(MemoryManager self, TensorInfo dead, _ReadsToCome reads) except -1:
    """A recipe of this restore will read `dead` again (`reads`: _ReadsToCome), and it is
    a candidate, or smaller than the evictee minimum (never one). A larger value that is no
    candidate could not be evicted until then, raising the floor; a small one holds its few
    bytes until its last read here. Dropped, it was recomputed, with what it reads, for
    each later reader: a pointer network's LSTM states (32 KiB) at every decoder step of
    a restore, 2,200 recomputations in its first step at 0.5 P, 1,364 of them repeats
    (now about 700, 28), and 461 in each later step, 100 repeats (now about 330, none)."""
    return reads.will_read(dead) and (_key(dead) in self.candidates
                                      or dead.size < self.opts.min_evictee)


cdef bint _worth_keeping(MemoryManager self, TensorInfo dead, dict witnesses) except -1:
    """Keep a dead intermediate brought back on the way, evictable like any value, when
    another evicted tensor would need it to come back too: a whole sequence's input
    projection that each time step's slice is cut from (dropping it after each step
    recomputes it once per step). Otherwise it goes at once: keeping every such value
    recomputed 1.1-2.3x more on the zoo at 0.5 P (it takes the room of values sure to
    be read). Only a candidate stays: one below evictee_minimum_size could never be
    evicted again and would stay for as long as the recipes that read it. (Not
    counting the tensors being restored, which would then drop it once back, halved
    a ReLU MLP's recomputations at 0.5 P and doubled a U-Net's: not taken.)

    The restore asks again after each recomputation; a value kept for one evicted tensor
    (`witnesses`: key -> _witnessed) is walked from again only once that tensor would not
    keep it (_standing_witness, and still evicted). Each walk went ~50 records deep: in an
    xLSTM's storm at 0.5 P, 24,000 walks a step, all but 1% keeping their value, took
    8.4% of the step."""
    if not (_key(dead) in self.candidates and self.evictable(dead, dead.device)):
        return False
    cdef TensorInfo w
    entry = witnesses.get(_key(dead))
    if entry is not None:
        w = _standing_witness(<tuple>entry, dead)
        if w is not None and (w.status == DROPPED or w.status == SWAPPED):
            return True
    if not _needed_by_evicted(dead, []):
        return False
    witnesses[_key(dead)] = _witnessed(dead)
    return True


cdef int _recompute(MemoryManager self, Producer p, TensorInfo wanted, list stack) except -1:
    """Run `p` again for `wanted` (the top of the restore's `stack`). Its other dropped
    outputs come back only when some tensor or queued op holds them: a split's dead
    siblings would otherwise stay resident with nobody to drop them again, each a view
    holding the base's memory."""
    cdef long long t0 = _now_ns(), t_run
    cdef Py_ssize_t k
    cdef TensorInfo i, out
    cdef OpDef op = p.op
    cdef list outs = []
    for k in range(p.n_outputs()):
        out = p.output(k)
        outs.append(out if out is not None and out.status == DROPPED
                    and (out is wanted or _alive(out) or out.pins) else None)
    self.pin(p.inputs)
    cdef TensorInfo reuse = None
    cdef Py_ssize_t reserved = 0
    try:
        try:
            reuse = _consumable_input(self, p, wanted, stack)
            reserved = self.reserve(
                sum((<TensorInfo>o).size for o in outs if o is not None)
                - (reuse.size if reuse is not None else 0),
                (<TensorInfo>p.inputs[0]).device if p.inputs else self.ch.default_device)
            _check_held(p.inputs, op)
            t_run = _now_ns()
            values = [_unpacked_value(i) for i in p.inputs]
            if reuse is not None:
                result = op.kernel(*values, out=reuse.value)
            elif p.memo is not None:
                result = op.kernel_from(p.memo, *values)
            else:
                result = op.kernel(*values)
            p.cost = _fastest_run(op, p.inputs, (_now_ns() - t_run) * 1e-9) / max(p.n_outputs(), 1)
        finally:
            self.ran(p.inputs)
        _store_recomputed(self, p, wanted, outs, reuse, result)
    finally:
        self.release(reserved)
    for out in outs:
        if out is not None:
            out.cost = p.cost
            self.policy.on_restore(out)
    cdef Device dev = wanted.device
    if _decision_hook is not None:
        _decision_hook("recompute", wanted, self.clock)
    dev.stats.recomputes += 1
    dev.stats.recompute_seconds += (_now_ns() - t0) * 1e-9
    if _profiling:
        record_memory_event(t0, "recompute", wanted, repr(op))
    return 0


cdef int _store_recomputed(MemoryManager self, Producer p, TensorInfo wanted, list outs,
                           TensorInfo reuse, object result) except -1:
    """_recompute's values stored: `wanted` written over `reuse` (a dead input) where the
    kernel did, otherwise `outs` (None where an output is not to come back)."""
    cdef Py_ssize_t k
    cdef TensorInfo out
    if reuse is not None and result is not reuse.value:
        # The kernel made a new array instead of writing over the dead input (an op that
        # takes `out=` for some modes or dtypes only, such as Elemwise's own sigmoid): the
        # input goes before the result is stored, so that the two take the room made for
        # one above. Stored first, they passed the budget by the input's size.
        self.drop_dead(reuse, "recomputed, not overwritten")
        reuse = None
    for k in range(len(outs)):         # (only those still dropped)
        out = outs[k]
        if out is not None and out.status != DROPPED:
            outs[k] = None
    if reuse is not None and result is reuse.value and outs[0] is wanted:
        _take_over(self.ch, reuse, wanted, result)
        _dropped_again(self, reuse)
    else:
        _store_results(self.ch, p.op, p.inputs, outs, result, True)
    return 0


cdef TensorInfo _consumable_input(MemoryManager self, Producer p, TensorInfo out, list stack):
    """A dead input that only `p` reads, brought back for this recomputation alone, for
    `out` to be written over, as the first run's in-place reuse did; or None. Recomputing
    a large dead intermediate and the elementwise op after it (a GRU's sequence-wide
    input projection and its bias) then needs room for one of them, not both."""
    cdef TensorInfo i
    if not (<OpDef>p.op).inplace_capable or p.n_outputs() != 1:
        return None
    for i in p.inputs:
        if (i.status == PRODUCED and i.producer is not None and i.pins == 1 and not _alive(i)
                and not _read_by_a_recipe(i, p)
                and not _read_on_the_stack(i, stack[:len(stack) - 1])
                and _overwritable(self.ch, i, out)):
            return i
    return None


cdef void _dropped_again(MemoryManager self, TensorInfo dead):
    """`dead`'s value became its reader's (_take_over): it is dropped again, as its first
    run left it, and joins its evicted neighbourhood."""
    dead.status = DROPPED
    dead.ghost = None                # (its storage holds the reader's value now)
    self.policy.on_evict(dead)
    _lengthen_chains(self, dead)
