# Included by _core.pyx: what the recipes of one restore will still read, for the restore
# (imperative/_restore.pxi) to keep those values until then.


# Dropped records a walk counts the reads of, at most. The walk passes what its restore will
# recompute, so it costs a fraction of that restore; the bound only stops a pathological
# one. At 1,024 it cut short a restore of an mLSTM's gradient that replayed 1,119 records
# (the block's recurrence, forward and backward, 32 steps): the reads past it went
# uncounted, their values were dropped after their first read and recomputed for each
# later one, 28 times for the stabiliser's chain (3,238 recomputations in the step at
# 0.5 P, 1,739 of them repeats; now 1,666 and 188).
cdef int _READS_WALK = 65536


@cython.final
cdef class _ReadsToCome:
    """How many times each value will be read by the recipes one restore runs: those of
    the dropped records behind its target, behind any record the restore finds evicted
    on its way (resident when the walk passed, it stopped there), and again behind a
    value it brought back and then evicted (walk_again_from). A value one of
    them will still read is taken as read next (MemoryManager.gap) and, brought back on
    the way, stays until its last such read (_drop_the_unneeded). Kept only while a
    recipe waiting on the stack read it, a value two recipes of the restore read, the
    first on the stack, the other pushed later, was dropped in between and recomputed for
    the second, and so at every level of a chain: two coupled leaky recurrences (a
    spiking network whose potentials no backward rule keeps) recomputed their history
    2^depth times, 6.8 million recomputations for one step at 0.3 P (now 3,400).

    Once the restore has brought one value back twice, its working set does not fit: what
    it evicts is what it brought back and will read again. From then on each value still
    to be read is pinned until its last read (`pin_all`): a spiking network of 4 KiB
    values under 0.5 P, under its floor, evicted 2,000 of them inside one restore and
    recomputed 4,300 values, 200 distinct, for it (80 recomputations an op, 78 of them
    repeats). Pinned from a restore's start, the inputs of its waiting tensors made a
    DenseNet's floor its whole block (see _restore), hence only after a repeat.

    Dead values are pinned only within a room (_room_for_dead_pins): the bytes that keep
    the peak under one the same program reaches without the manager. Read soonest first:
    walked last, and what a recomputation just brought back displaces the oldest pins.
    Pinned without that bound, a highway MLP's backward under 0.2-0.4 P held the forward
    activations of four layers (20 dead values, 1.3 MiB) for a gradient's restore and
    peaked 0.4 MiB above the unmanaged run (about one run in ten with its measured costs
    jittered, and in the test suite now and then). Bounded by the evicted values' bytes
    alone, the room was too small under a floor: the spiking network above passed 3
    repeats an op (up to 3.6) in 2 of 10 jittered runs, 1 in 40 with this room."""
    cdef dict counts         # key -> reads to come (MemoryManager.restore_reads, for gap)
    cdef dict values         # key -> the record counted
    cdef set walked          # keys of the dropped records walked
    cdef set ran             # producers counted once for all the outputs a tensor holds
    cdef dict pending        # producer's id -> its runs counted and not run yet
    cdef set again           # keys of the values walked again since they were evicted
    cdef set pinned          # records pinned until their last read
    cdef dict pinned_dead    # ... those no tensor holds, oldest pin first
    cdef long long dead_room     # the bytes of dead values it may pin (pin_all)
    cdef long long dead_held     # the bytes of those pinned now
    cdef bint pinning

    def __cinit__(self):
        self.counts, self.values, self.pending = {}, {}, {}
        self.walked, self.ran, self.again, self.pinned = set(), set(), set(), set()
        self.pinned_dead = {}

    cdef inline bint will_read(self, TensorInfo value):
        return self.counts.get(_key(value), 0) > 0

    cdef inline bint walked_to(self, TensorInfo dropped):
        return _key(dropped) in self.walked

    cdef int walk_from(self, TensorInfo start) except -1:
        """Count the reads of the recipes that bringing `start` back runs."""
        self._walk(start, self.walked, self.ran, None)
        return 0

    cdef int walk_again_from(self, TensorInfo start) except -1:
        """`start` came back once in this restore and was evicted since: the recipes behind
        it run again, and their reads, counted down as they ran, come again. Uncounted, the
        values they read were dropped after their first read and recomputed, with their
        history, for each later one: the first step of a Show-Attend-Tell decoder under
        0.7 P (values under a 4 KiB evictee minimum) evicted a weight's gradient it had
        just brought back, and bringing it back again recomputed 4,879 values, 97
        distinct (now 400 and 90). A run counted and still to come is not counted twice,
        and what this walk reaches counts as walked: counted again when the restore
        got there (walk_from), reads that never came kept their values to the restore's
        end (a ResNeXt at 0.5 P peaked 44% higher, above the unconstrained peak)."""
        if _key(start) in self.again:
            return 0                 # (walked already since its eviction)
        self.again.add(_key(start))
        self._walk(start, set(), set(), dict(self.pending))
        return 0

    cdef int _walk(self, TensorInfo start, set walked, set ran, dict counted) except -1:
        """Count the reads of the recipes behind `start`, each dropped record once
        (`walked`), except a run `counted` already (to come, from an earlier walk)."""
        cdef list todo = [start]
        cdef TensorInfo t, i
        walked.add(_key(start))
        while todo and len(walked) < _READS_WALK:
            t = todo.pop()
            # (a swapped-out value is read back, a revivable one taken back: no recipe runs)
            if t.status != DROPPED or t.producer is None or _revivable(t):
                continue
            # One run brings back the outputs a tensor holds; a dead one comes back alone
            # (_recompute), its recipe run again for it: the four gates an LSTM splits from
            # one pre-activation read it four times. Counted once, the pre-activation was
            # dropped after the first gate and recomputed, with the recurrence behind it,
            # for each of the others (a pointer network whose gates are under the evictee
            # minimum: 5.4-9.4 recomputations an op, 4.8-8.7 of them repeats; now 1.3-1.6).
            if _alive(t) and _pointer(t.producer) in ran:
                continue
            ran.add(_pointer(t.producer))
            if counted is not None and counted.get(_pointer(t.producer), 0) > 0:
                counted[_pointer(t.producer)] -= 1
            else:
                self.count_reads(<Producer>t.producer)
            for i in (<Producer>t.producer).inputs:
                if (i.status == DROPPED or i.status == SWAPPED) and _key(i) not in walked:
                    walked.add(_key(i))
                    todo.append(i)
        for t in todo:               # (cut short: walked again if the restore gets there)
            walked.discard(_key(t))
        if walked is not self.walked:    # (what a walk again counted, no first walk counts)
            self.walked |= walked
        return 0

    cdef void count_reads(self, Producer p):
        """One run of `p` to come: each of its inputs has one read more to come."""
        cdef TensorInfo i
        self.pending[_pointer(p)] = self.pending.get(_pointer(p), 0) + 1
        for i in p.inputs:
            self.counts[_key(i)] = self.counts.get(_key(i), 0) + 1
            self.values[_key(i)] = i
            self.pin(i)

    cdef void read_by(self, Producer p):
        """`p` ran: each of its inputs has one read to come fewer, and a value pinned
        until its last read is let go after it."""
        cdef TensorInfo i
        cdef Py_ssize_t k
        if self.pending.get(_pointer(p), 0) > 0:
            self.pending[_pointer(p)] -= 1
        for k in range(p.n_outputs()):
            if p.output(k) is not None:
                self.again.discard(_key(p.output(k)))    # (back: walked again if evicted)
        for i in p.inputs:
            if self.counts.get(_key(i), 0) > 0:
                self.counts[_key(i)] -= 1
                if self.counts[_key(i)] == 0 and i in self.pinned:
                    self.unpin(i)

    cdef void pin_all(self, long long dead_room):
        """From now on, pin each resident value still to be read until its last read; the
        dead ones only within `dead_room` bytes, read soonest first (walked last)."""
        if self.pinning:
            return
        self.pinning = True
        self.dead_room = dead_room
        for value in reversed(list(self.values.values())):
            self.pin(<TensorInfo>value)

    cdef void pin_outputs(self, Producer p):
        """Pin what a recomputation just brought back: the tensor waiting under it on the
        stack reads it next, before the dead values pinned earlier, whose pins go first
        where the room is short."""
        cdef Py_ssize_t k
        for k in range(p.n_outputs()):
            if p.output(k) is not None:
                self.pin(p.output(k), True)

    cdef void pin(self, TensorInfo value, bint displace=False):
        if (not self.pinning or value.status != PRODUCED or not self.will_read(value)
                or value in self.pinned):
            return
        if not _alive(value):
            while (displace and self.pinned_dead
                   and self.dead_held + value.size > self.dead_room):
                self.unpin(<TensorInfo>next(iter(self.pinned_dead)))
            if self.dead_held + value.size > self.dead_room:
                return
            self.dead_held += value.size
            self.pinned_dead[value] = None
        value.pins += 1
        self.pinned.add(value)

    cdef void unpin(self, TensorInfo value):
        self.pinned.discard(value)
        value.pins -= 1
        if value in self.pinned_dead:
            del self.pinned_dead[value]
            self.dead_held -= value.size

    cdef void unpin_all(self):
        cdef TensorInfo value
        for value in self.pinned:
            value.pins -= 1
        self.pinned.clear()
        self.pinned_dead.clear()
        self.dead_held = 0
