# Included by _core.pyx: the memory manager. Drop (free a value, keep how to recompute it),
# regeneration, swap to disk, and DTR eviction under a budget with pluggable policies.
#
# Who does what:
#   * dispatch records a Producer for every output of a recomputable op while any of
#     enable_drop / record_computing_path / enable_dtr_auto_drop is on;
#   * the op runner (worker, or caller for ops it runs itself) pins an op's inputs, brings
#     dropped or swapped inputs back (`restore`), makes room under the budget (`make_room`),
#     runs the kernel and unpins;
#   * the death of a tensor's last handle drops it when it has a producer (others may need
#     it again), keeps the value of a leaf that a recorded producer reads (it cannot be
#     recomputed), and frees it otherwise.
# All of it runs under the GIL; values are replaced, never written in place, while recording.

import weakref as _weakref
from libc.math cimport sqrt

include "_swap.pxi"

# Estimated costs, in seconds, so that decisions do not depend on timing noise.
cdef double _MEMORY_BYTES_PER_S = 5e9       # bytes an elementwise kernel moves per second
cdef double _FLOPS_PER_S = 1e11             # one-thread sgemm here (PERF_NOTES: 134 GFLOP/s)

# A resident tensor whose recomputation would first have to recompute a path of more dead
# records than this stops being recomputable (its recipe is cut, and with it the dead
# history behind it): in an `x = f(x)` loop the records, and the leaves they read, would
# otherwise grow without end, and no policy would pick a tensor that costs that many ops
# to bring back. (A training step's backward pass makes paths about two records a layer.)
cdef int _MAX_DEAD_CHAIN = 64
cdef Py_ssize_t _MIN_USERS_PRUNE = 16        # a users list is first pruned at this length
cdef long long _MIN_SWEEP_INTERVAL = 64      # record deaths between two sweeps of kept leaves


@cython.final
cdef class Producer:
    """How to recompute some tensors: an op, its input records (kept alive) and its output
    records (weakly: an output nobody holds need not be recomputed)."""
    cdef readonly object op
    cdef readonly list inputs
    cdef readonly list outputs
    cdef readonly double cost
    cdef object __weakref__

    def alive_outputs(self):
        return [r() for r in self.outputs]


cdef double _estimate_cost(OpDef op, list inputs, list outputs):
    """Seconds the op would take: from its flop count when it declares one, else from the
    bytes it reads and writes."""
    cdef TensorInfo info
    cdef double nbytes = 0
    for info in inputs:
        nbytes += info.size
    for info in outputs:
        nbytes += info.size
    flops = getattr(op, "estimate_flops", None)
    if flops is not None:
        return max(flops([i.shape for i in inputs], [o.shape for o in outputs]) / _FLOPS_PER_S,
                   nbytes / _MEMORY_BYTES_PER_S)
    return nbytes / _MEMORY_BYTES_PER_S


# ------------------------------------------------------------------ eviction policies


cdef class EvictionPolicy:
    """Chooses what to evict. `score(info, clock)`: lower is evicted first; `on_evict` and
    `on_restore` keep any bookkeeping (h_DTR^eq's union-find) current."""
    name = "base"

    cpdef double score(self, TensorInfo info, long long clock):
        raise NotImplementedError

    cpdef on_evict(self, TensorInfo info):
        pass

    cpdef on_restore(self, TensorInfo info):
        pass


cdef class LRUPolicy(EvictionPolicy):
    """Least recently used first."""
    name = "lru"

    cpdef double score(self, TensorInfo info, long long clock):
        return <double>info.last_use


cdef class SizePolicy(EvictionPolicy):
    """Largest first."""
    name = "size"

    cpdef double score(self, TensorInfo info, long long clock):
        return -<double>info.size


@cython.final
cdef class EvictedClass:
    """A union-find class of evicted tensors that touch each other. Classes point only to
    classes (never to tensor records), so they cannot tie records into reference cycles.
    Each evicted tensor has its own node; the root keeps the class's cost and how many of
    its members some tensor still holds (`alive`)."""
    cdef EvictedClass parent
    cdef double cost
    cdef int alive
    cdef bint member_alive        # this node's own tensor is counted in its root's `alive`


cdef EvictedClass _class_root(EvictedClass c):
    cdef EvictedClass root = c
    while root.parent is not None:
        root = root.parent
    while c.parent is not None and c.parent is not root:   # path compression
        nxt = c.parent
        c.parent = root
        c = nxt
    return root


cdef void _member_dies(EvictedClass member):
    """The last tensor holding this evicted member is gone: its class has one fewer member
    that anyone will ask for."""
    cdef EvictedClass root
    if member.member_alive:
        member.member_alive = False
        root = _class_root(member)
        root.alive -= 1


cdef void _leave_evicted_class(EvictedClass member, double cost):
    """A member leaves (restored, or its record died): the eq approximation never splits
    a class, it only stops counting the member's cost. Without this, classes would keep
    the cost of long-dead tensors and make every old neighbour look precious."""
    _member_dies(member)
    cdef EvictedClass root = _class_root(member)
    root.cost = max(root.cost - cost, 0.0)


cdef class DTREqPolicy(EvictionPolicy):
    """h_DTR^eq: (cost of the tensor and of the evicted tensors around it) / (size x
    staleness). Evicted tensors that touch each other form a union-find class whose cost
    is kept at its root, so a neighbourhood's cost is a few root look-ups."""
    name = "dtr_eq"

    cpdef double score(self, TensorInfo info, long long clock):
        # The evicted classes next to the tensor: those of its producer's inputs (needed to
        # recompute it), and those of its consumers' outputs that hold a tensor someone
        # still holds (which would need it). A class of dead intermediates alone, such as
        # the matmul output between a ReLU and the next bias add, is recomputed only on
        # the way to a live tensor, and that tensor's own score counts it.
        cdef double cost = info.cost
        cdef list seen = []
        cdef EvictedClass root
        cdef Producer p = info.producer
        if p is not None:
            for n in p.inputs:
                cost += _unseen_class_cost(<TensorInfo>n, seen, False)
        for n in _consumer_outputs(info):
            cost += _unseen_class_cost(<TensorInfo>n, seen, True)
        return cost / (<double>max(info.size, 1) * <double>max(clock - info.last_use, 1))

    cpdef on_evict(self, TensorInfo info):
        cdef EvictedClass mine = EvictedClass.__new__(EvictedClass)
        cdef EvictedClass other
        mine.cost = info.cost
        # (alive as the worker sees it: a tensor the caller let go of while queued ops and
        # its own queued deletion still wait is needed until those have run; the caller's
        # count alone made, at async levels 1-2, every evicted tensor look unwanted)
        mine.member_alive = _alive(info)
        mine.alive = mine.member_alive
        info.uf_class = mine
        cdef Producer p = info.producer
        for n in (p.inputs if p is not None else []) + _consumer_outputs(info):
            if (<TensorInfo>n).status == DROPPED and (<TensorInfo>n).uf_class is not None:
                other = _class_root((<TensorInfo>n).uf_class)
                if other is not mine:
                    other.parent = mine
                    mine.cost += other.cost
                    mine.alive += other.alive

    cpdef on_restore(self, TensorInfo info):
        # the eq approximation: a class is never split, its cost just loses this member's
        if info.uf_class is not None:
            _leave_evicted_class(info.uf_class, info.cost)
            info.uf_class = None


cdef double _unseen_class_cost(TensorInfo n, list seen, bint only_if_alive):
    """The cost of the evicted class of `n` (0 if `n` is resident or its class was counted
    already), optionally only when someone still holds a member of that class."""
    if n.status != DROPPED or n.uf_class is None:
        return 0.0
    cdef EvictedClass root = _class_root(n.uf_class)
    if _contains(seen, root) or (only_if_alive and root.alive <= 0):
        return 0.0
    seen.append(root)
    return root.cost


cdef list _consumer_outputs(TensorInfo info):
    """The other outputs of the recorded ops that read `info`."""
    cdef list out = []
    if info.users is not None:
        for ref in info.users:
            user = ref()
            if user is not None:
                for o in (<Producer>user).outputs:
                    rec = o()
                    if rec is not None and rec is not info:
                        out.append(rec)
    return out


POLICIES = {"dtr_eq": DTREqPolicy, "lru": LRUPolicy, "size": SizePolicy}

_POOL_LIMIT = 64 << 20               # the worker's block cache without a budget (_pool.c)

cdef object _overshoot_hook = None    # debugging: called as hook(allocated, needed, threshold)


def set_overshoot_hook(hook):
    global _overshoot_hook
    _overshoot_hook = hook


cdef object _decision_hook = None     # debugging: called as hook(action, info, clock)


def set_decision_hook(hook):
    """Debugging: `hook(action, record, clock)` on every eviction ("evict"), drop of a
    dead value ("drop_dead"), recomputation ("recompute") and value taken back from the
    views that kept it ("revive"); None to stop."""
    global _decision_hook
    _decision_hook = hook


# ------------------------------------------------------------------ the manager


@cython.final
cdef class MemoryManager:
    cdef Channel ch
    cdef public EvictionPolicy policy
    # Resident, recomputable, big enough: {address: weak reference}. Held weakly: a
    # recomputed record that no tensor and no recipe refers to any more must die (and free
    # its value), not be kept alive here together with the whole history its recipe
    # reaches. A dict, not a WeakSet: every read and write is one C call under the GIL, so
    # threads issuing ops at once never see it change in the middle of an iteration.
    cdef public dict candidates
    # Leaves (no producer) whose tensors are gone but whose value an evicted tensor needs
    # to come back: {address: weak reference}; freed as soon as none does (sweep_kept)
    cdef public dict kept
    cdef long long deaths_since_sweep
    cdef long long sweep_after        # deaths between sweeps: grows with a sweep's work
    cdef public long long clock   # logical: one tick per op run
    cdef public SwapSpace swap       # swap files: private folders, measured bandwidth
    cdef object _rng              # for sqrt(N) sampling, seeded: decisions are reproducible
    cdef public double eviction_seconds
    cdef public long long overshoots
    cdef public long long cuts          # records whose recipe was let go (release_leaf, chains)
    cdef public long long peak_floor    # the most memory that could not be evicted when the
                                        # budget was reached (pinned, leaves, unrecomputable)
    cdef long long pool_sized_for   # the budget the worker's block cache was last sized for
    cdef public long long highest_floor   # the highest floor seen above the threshold (make_room)
    cdef long long floor_measured_for   # the threshold highest_floor was measured under

    def __cinit__(self, Channel ch):
        self.ch = ch
        self.policy = DTREqPolicy()
        self.candidates = {}
        self.kept = {}
        self.sweep_after = _MIN_SWEEP_INTERVAL
        self.swap = SwapSpace()
        if ch._opts[OPT_ENABLE_SWAP]:      # (IMPERATIVE_ENABLE_SWAP=1, read at import)
            guard_signals(self.swap)
        import random as _random
        self._rng = _random.Random(0)

    # ---- recording producers

    cdef void record(self, OpDef op, list inputs, list outputs):
        cdef TensorInfo info
        cdef Producer p = Producer.__new__(Producer)
        p.op = op
        p.inputs = list(inputs)
        p.outputs = [_weakref.ref(o) for o in outputs]
        p.cost = _estimate_cost(op, inputs, outputs) / max(len(outputs), 1)
        pref = _weakref.ref(p)
        for info in inputs:
            _add_user(info, pref)
        for info in outputs:
            info.producer = p
            info.cost = p.cost

    cdef void measured(self, list outputs, long long nanoseconds):
        """The op that made `outputs` took this long: their recompute cost from now on
        (the estimate made at dispatch only stands in until the op has run). Measured, as
        the DTR prototype does, because estimates are off by up to 10x here (an im2col
        convolution against a ReLU). Results never depend on it, only which tensor is
        evicted."""
        cdef TensorInfo info
        cdef double cost = nanoseconds * 1e-9 / max(len(outputs), 1)
        for info in outputs:
            info.cost = cost
            if info.producer is not None:
                (<Producer>info.producer).cost = cost

    cdef void on_produced(self, TensorInfo info):
        """A value became resident: maybe an eviction candidate."""
        cdef TensorInfo i
        info.last_use = self.clock
        info.read_since_produced = False
        if info.producer is None or info.persistent:
            # Cutting the producer ends the history chain: without this, evicting a
            # parameter would mean recomputing every earlier training step.
            info.producer = None
            self.consider_swapping(info)
            return
        info.dead_chain = 0
        for i in (<Producer>info.producer).inputs:
            if not _alive(i) and (i.status == DROPPED or i.status == SWAPPED):
                info.dead_chain = max(info.dead_chain, i.dead_chain + 1)
        if info.dead_chain > _MAX_DEAD_CHAIN:
            self.cut(info)
        elif info.size >= self.ch._opts[OPT_MIN_EVICTEE] and (<OpDef>(<Producer>info.producer).op).recomputable:
            self.candidates[_key(info)] = _weakref.ref(info)
        # A tensor too small to evict keeps its recipe all the same: when it dies it is
        # dropped like any other, instead of becoming a leaf whose value the recipes of
        # its readers would have to keep (release_leaf lets old steps go).

    cdef int make_persistent(self, TensorInfo info) except -1:
        info.persistent = True
        self.forget(info)
        if info.status == DROPPED or info.status == SWAPPED:
            self.ch.wait_produced(info)
        if info.status == PRODUCED:
            info.producer = None
            self.consider_swapping(info)
        return 0

    cdef void consider_swapping(self, TensorInfo leaf):
        """With enable_swap on, a value nothing can recompute (data, a parameter, an
        optimizer's state) is a candidate too: swapping is its only way out, at the cost of
        writing and reading it at the measured bandwidth. Without it the floor held every
        parameter, gradient and momentum buffer (a parameter-heavy MLP's floor was its
        whole peak), so no budget below that could hold, while the momentum sits unread
        from one step's update to the next."""
        if (self.ch._opts[OPT_ENABLE_SWAP] and self.ch._opts[OPT_DTR_AUTO]
                and leaf.size >= self.ch._opts[OPT_MIN_EVICTEE] and self.swap.calibrate()):
            leaf.cost = self.swap.seconds_to_swap(leaf.size)
            self.candidates[_key(leaf)] = _weakref.ref(leaf)

    cdef void forget(self, TensorInfo info):
        self.candidates.pop(_key(info), None)

    cdef void cut(self, TensorInfo info):
        """`info` stops being recomputable: it keeps its value (resident, or still to be
        made by a queued op) and lets go of its recipe, and so of the history behind it."""
        self.forget(info)
        info.producer = None
        self.cuts += 1

    # ---- leaves that recipes read

    cdef bint release_leaf(self, TensorInfo leaf) except -1:
        """`leaf` (a value without producer: data, an RNG result, a parameter's old value)
        has no tensor left, but recorded recipes read it. Its value is the only copy. It
        stays while an evicted tensor needs it to come back, or while the tensors whose
        recipes reach it could be evicted and are together at least as large (keeping it
        is then the cheaper way to keep them evictable: a batch norm's old running mean,
        which its output's recipe reads). Otherwise those tensors, all resident or about
        to be, stop being recomputable and the value can go (a parameter's old value after
        the update, which only the step's loss still reaches). True when no recipe needs
        it any more."""
        cdef list frontier = []
        if (_needed_by_evicted(leaf, frontier)
                or self.evictable_frontier_bytes(frontier) >= max(leaf.size, 1)):
            self.kept[_key(leaf)] = _weakref.ref(leaf)
            return False
        for info in frontier:
            self.cut(<TensorInfo>info)
        self.kept.pop(_key(leaf), None)
        return not _read_by_a_recipe(leaf)

    cdef Py_ssize_t evictable_frontier_bytes(self, list frontier):
        """Bytes of the held records that could be evicted now: the candidates, and with
        enable_drop any resident one with a recipe (`_drop()` takes any size). (Not those
        still to be made: the output of the op that reads a dying leaf last had better
        take the leaf's memory in place, as it does with recording off.)"""
        cdef TensorInfo info
        cdef bint by_hand = self.ch._opts[OPT_ENABLE_DROP]
        cdef Py_ssize_t total = 0
        for info in frontier:
            if _key(info) in self.candidates or (
                    by_hand and info.status == PRODUCED and info.producer is not None):
                total += info.size
        return total

    cdef void note_death(self):
        """A record died: now and then, see whether a kept leaf is still needed."""
        self.deaths_since_sweep += 1
        if self.kept and self.deaths_since_sweep >= self.sweep_after:
            self.sweep_kept()

    cdef void sweep_kept(self):
        """Free the kept leaves no evicted tensor needs any more."""
        cdef TensorInfo leaf
        self.deaths_since_sweep = 0
        for key, ref in list(self.kept.items()):
            leaf = ref()
            if leaf is None or _alive(leaf) or leaf.status == DELETED:
                self.kept.pop(key, None)
            elif self.release_leaf(leaf):
                self.ch._finish_delete(leaf)
        # amortised: a sweep that walks many records waits for proportionally more deaths
        self.sweep_after = max(_MIN_SWEEP_INTERVAL, 4 * len(self.kept))

    # ---- dropping, swapping, restoring

    cdef int drop(self, TensorInfo info, str reason) except -1:
        cdef long long t0 = _now_ns() if _profiling else 0
        self.forget(info)
        info.ghost = _ghost_of(info)
        self.ch._free_value(info)
        info.status = DROPPED
        if _profiling:
            record_memory_event(t0, "drop", info, reason)
        return 0

    cdef int drop_dead(self, TensorInfo info, str reason) except -1:
        """Drop a value no tensor refers to (kept only as a recipe's input). It joins its
        evicted neighbourhood: recomputing a neighbour now costs this one too, and
        h_DTR^eq must see that."""
        if _decision_hook is not None:
            _decision_hook("drop_dead", info, self.clock)
        self.drop(info, reason)
        self.policy.on_evict(info)
        self.lengthen_chains(info)
        return 0

    cdef void lengthen_chains(self, TensorInfo dead):
        """`dead` was dropped for good: whoever reads it would recompute it (and what it
        needs) first. The longer path reaches its readers, and through those that are dead
        and dropped already (a temporary can die before its input does) the resident ones
        beyond; a resident reader whose path of dead records grows too long is cut."""
        cdef TensorInfo d, out
        cdef list stack = [dead]
        while stack:
            d = stack.pop()
            for out in _consumer_outputs(d):
                if out.dead_chain > d.dead_chain:
                    continue
                out.dead_chain = d.dead_chain + 1
                if out.status == DROPPED or out.status == SWAPPED:
                    if not _alive(out):
                        stack.append(out)
                elif out.dead_chain > _MAX_DEAD_CHAIN and out.producer is not None:
                    self.cut(out)

    cdef int swap_out(self, TensorInfo info, str reason) except -1:
        """Write the value, as laid out, to a file and free it; on any error nothing
        changes (OSError naming the file and the reason)."""
        cdef long long t0 = _now_ns() if _profiling else 0
        cdef Device dev = info.device
        if info.storage is not None and info.storage.refs > 1:
            raise RuntimeError(f"cannot swap out a tensor {info.shape} {info.dtype} whose "
                               f"storage {info.storage.refs - 1} other tensor(s) view")
        value = info.value
        cdef SwapLayout layout = _layout_of(value)
        path = None
        try:
            self.swap.calibrate()
            path = self.swap.new_path()
            seconds = _write_file(path, _span_of(value, layout))
        except OSError as e:
            raise _swap_error(e, f"swap out failed, the tensor stays in memory: could not "
                                 f"write {layout.nbytes} bytes to "
                                 f"{path or self.swap.chosen or 'a temporary folder'}") from e
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
        return 0

    cdef int swap_in(self, TensorInfo info) except -1:
        """Read the value back with the layout it left with; on any error it stays
        swapped out (OSError naming the file and the reason)."""
        cdef long long t0 = _now_ns() if _profiling else 0
        cdef Device dev = info.device
        cdef SwapLayout layout = info.swap_layout
        span = np.empty(layout.nbytes, np.uint8)
        try:
            seconds = _read_file(info.swap_path, span)
        except OSError as e:
            raise _swap_error(e, f"swap in failed, the tensor {info.shape} {info.dtype} stays "
                                 f"swapped out: swap file {info.swap_path}") from e
        self.swap.read_rate.add(layout.nbytes, seconds)
        _remove_swap_file(info)
        info.swap_layout = None
        dev.stats.swapped -= info.size
        dev.stats.swap_ins += 1
        self.ch._adopt(info, _value_from_span(span, layout), None)   # (also a candidate again)
        self.policy.on_restore(info)
        if _profiling:
            record_memory_event(t0, "swap_in", info, "used")
        return 0

    cdef int swap_is_cheaper(self, TensorInfo victim) except -1:
        """Writing the victim out and reading it back would take less than recomputing it,
        at the bandwidth measured on this machine (False when swapping cannot work here)."""
        return self.swap.calibrate() and self.swap.seconds_to_swap(victim.size) < victim.cost

    def remove_swap_files(self):
        """At close (and so at exit): remove the swap files and the private folders."""
        self.swap.remove_all()

    cdef int restore(self, TensorInfo target) except -1:
        """Bring `target` back: swap it in, or recompute it, first bringing back (one at a
        time, iteratively) the inputs of its producer that are gone too. A tensor waiting
        for its inputs does not pin those it has: in a DenseNet every concatenation reads
        all earlier features, and pinning them on each level of a deep recomputation made
        the floor the whole block (29 MiB of 81 at 0.3 P), so that every op overshot. What
        was just brought back is safe enough without pins: `choose` takes a value nobody
        has read yet only when nothing else is left. Only when an input it waited for is
        evicted again before its turn does the tensor pin what it has (the DTR paper's
        locking), so that the recomputation always ends. Recompute itself pins an op's
        inputs while it runs."""
        cdef list stack = [target]
        cdef dict held = {}              # tensor on the stack -> its inputs pinned for it
        cdef dict asked = {}             # tensor on the stack -> inputs it waited for
        cdef list kept = []              # dead values brought back and kept so far
        cdef TensorInfo t, i
        cdef Producer p
        try:
            while stack:
                t = stack[len(stack) - 1]    # (wraparound is off in this module)
                if t.status == PRODUCED:
                    stack.pop()
                elif t.status == SWAPPED:
                    self.make_room(t.size, t.device)   # reading it back is an allocation too
                    self.swap_in(t)
                    stack.pop()
                elif t.status == DROPPED:
                    if self.revive(t):
                        stack.pop()
                        continue
                    if t.producer is None:
                        raise RuntimeError(f"cannot recompute a dropped tensor {t.shape} {t.dtype}: "
                                           "its recipe is gone")
                    p = t.producer
                    missing = _first_missing_input(p, t)
                    if missing is not None:
                        waited = asked.setdefault(t, [])
                        if t in held or _contains(waited, missing):
                            self.pin_resident_inputs(p, held.setdefault(t, []))
                        waited.append(missing)
                        stack.append(missing)
                        continue
                    self.recompute(p, t)
                    stack.pop()
                    asked.pop(t, None)
                    for i in held.pop(t, ()):
                        i.pins -= 1
                    # Intermediates no tensor and no queued op holds, brought back only on
                    # the way: free them again as their first run did. One kept because an
                    # evicted tensor needed it is looked at again after every later step:
                    # the tensor may be the one just brought back (a ReLU MLP kept each
                    # layer's matmul output for the ReLU being restored, and then kept it).
                    for i in p.inputs:
                        if not _contains(kept, i):
                            kept.append(i)
                    kept = self.drop_the_unneeded(kept, stack)
                else:
                    raise RuntimeError(f"cannot restore a tensor in state {Status(t.status).name}")
        finally:
            for pinned in held.values():
                for i in pinned:
                    i.pins -= 1
        return 0

    cdef list drop_the_unneeded(self, list dead, list stack):
        """Drop the dead values brought back by a restore that no tensor still waiting on
        `stack` reads and that no evicted tensor needs; the rest, still dead and resident, is
        returned to be looked at again."""
        cdef TensorInfo i
        cdef list still = []
        for i in dead:
            if _alive(i) or i.status != PRODUCED or i.producer is None:
                continue
            if i.pins or _read_on_the_stack(i, stack) or self.worth_keeping(i):
                still.append(i)
            else:
                self.drop_dead(i, "recomputed, dead again")
        return still

    cdef void pin_resident_inputs(self, Producer p, list pinned):
        cdef TensorInfo i
        for i in p.inputs:
            if i.status == PRODUCED and not _contains(pinned, i):
                i.pins += 1
                pinned.append(i)

    cdef bint revive(self, TensorInfo info) except -1:
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

    cdef bint worth_keeping(self, TensorInfo dead) except -1:
        """Keep a dead intermediate brought back on the way, evictable like any value, when
        another evicted tensor would need it to come back too: a whole sequence's input
        projection that each time step's slice is cut from (dropping it after each step
        recomputes it once per step). Otherwise it goes at once: keeping every such value
        recomputed 1.1-2.3x more on the zoo at 0.5 P (it takes the room of values sure to
        be read). Only a candidate stays: one below evictee_minimum_size could never be
        evicted again and would stay for as long as the recipes that read it. (Not
        counting the tensors being restored, which would then drop it once back, halved
        a ReLU MLP's recomputations at 0.5 P and doubled a U-Net's: not taken.)"""
        return (_key(dead) in self.candidates and self.evictable(dead, dead.device)
                and _needed_by_evicted(dead, []))

    cdef int recompute(self, Producer p, TensorInfo wanted) except -1:
        """Run `p` again for `wanted`. Its other dropped outputs come back only when some
        tensor or queued op holds them: a split's dead siblings would otherwise stay
        resident with nobody to drop them again, each a view holding the base's memory."""
        cdef long long t0 = _now_ns(), t_run
        cdef TensorInfo i, out
        cdef OpDef op = p.op
        cdef list outs = []
        for r in p.outputs:
            out = r()
            outs.append(out if out is not None and out.status == DROPPED
                        and (out is wanted or _alive(out) or out.pins) else None)
        for i in p.inputs:
            i.pins += 1
        try:
            self.make_room(sum((<TensorInfo>o).size for o in outs if o is not None),
                           (<TensorInfo>p.inputs[0]).device if p.inputs else self.ch.default_device)
            t_run = _now_ns()
            result = op.kernel(*[_unpacked_value(i) for i in p.inputs])
            p.cost = (_now_ns() - t_run) * 1e-9 / max(len(p.outputs), 1)
        finally:
            # a recomputation is an access like any other: it ticks the clock, and its
            # inputs are as fresh as the op that asked for them
            self.clock += 1
            for i in p.inputs:
                i.pins -= 1
                i.last_use = self.clock
                i.read_since_produced = True
        if not isinstance(result, tuple):
            result = (result,)
        for k in range(len(outs)):
            out = outs[k]
            if out is None or out.status != DROPPED:
                continue
            r = result[k] if type(result[k]) is _ndarray else _np_asarray(result[k])
            if out.packed:
                r = _pack_4bit(r)
            shared = _shared_storage(r, p.inputs) if op.aliases_input else None
            if shared is not None and _only_on_the_way(shared, p.inputs):
                # a view of a base brought back only for it: it takes a copy when that
                # needs at most half the base, so that the base can go again instead of
                # staying behind every such view, one base each. The copy keeps the
                # view's strides exactly (it spans what they span, gaps included): a
                # compact copy would change how later sums and products round.
                layout = _layout_of(r)
                if 2 * layout.nbytes <= shared.nbytes:
                    r = _value_from_span(_span_of(r, layout).copy(), layout)
                    self.ch._adopt(out, r, None)
                else:
                    self.ch._set_value(out, r, shared)
            else:
                self.ch._set_value(out, r, shared)
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

    # ---- the budget

    cdef void size_pool(self, long long threshold):
        """The worker's block cache holds freed memory the budget does not count: under a
        budget (threshold > 0) keep it to half the budget, so that the process's memory still
        falls with the budget (an eighth re-faulted evicted blocks: 5% slower steps at 0.5 P)."""
        if threshold != self.pool_sized_for:
            self.pool_sized_for = threshold
            _kernels.pool_set_limit(_POOL_LIMIT if threshold == 0 else min(_POOL_LIMIT, threshold // 2))

    cdef int make_room(self, Py_ssize_t needed, Device device) except -1:
        """Best effort: evict, lowest score first, until tensor memory on `device` plus
        `needed` fits the threshold or nothing evictable is left; then the op runs anyway
        and the overshoot is counted. So the peak stays within max(threshold, floor) plus
        the op's outputs, where the floor is what cannot be evicted (pinned inputs, leaves,
        values no recipe can rebuild).

        Once even evicting everything would not fit, memory up to the highest floor seen
        (since the threshold was set or the peak statistics were reset) is left alone: the
        peak has reached it already, and evicting below it, before every op, evicted what
        the next ops read, so that each recomputed its inputs' whole history (a small U-Net
        20% under its floor: 10,000 recomputations in 2 steps, 60x the step time). Leaving
        it alone only at the moments that do not fit brought the storms back: what the
        moments in between evict, the next such moment recomputes."""
        cdef long long threshold = self.ch._opts[OPT_DTR_THRESHOLD]
        cdef long long t0, floor
        cdef TensorInfo victim
        if not self.ch._opts[OPT_DTR_AUTO] or threshold <= 0:
            threshold = 0
        self.size_pool(threshold)
        if threshold != self.floor_measured_for:
            self.floor_measured_for = threshold
            self.highest_floor = 0
        if threshold == 0:
            return 0
        if device.stats.allocated + needed <= threshold:
            return 0
        if device.stats.allocated <= self.highest_floor:
            self.overshoot(device, needed, threshold)
            return 0
        t0 = _now_ns()
        floor = device.stats.allocated - self.evictable_bytes(device)
        if floor > self.peak_floor:
            self.peak_floor = floor
        if floor + needed > threshold and floor > self.highest_floor:
            self.highest_floor = floor
        while (device.stats.allocated + needed > threshold
               and device.stats.allocated > self.highest_floor):
            victim = self.choose(device)
            if victim is None:
                break
            self.evict(victim)
        if device.stats.allocated + needed > threshold:
            self.overshoot(device, needed, threshold)
        self.eviction_seconds += (_now_ns() - t0) * 1e-9
        return 0

    cdef void overshoot(self, Device device, Py_ssize_t needed, long long threshold):
        self.overshoots += 1
        if _overshoot_hook is not None:
            _overshoot_hook(device.stats.allocated, needed, threshold)

    cdef list live_candidates(self):
        """The candidates still alive (a snapshot), pruning the dead ones."""
        cdef list out = []
        for key, ref in list(self.candidates.items()):
            info = ref()
            if info is None:
                if self.candidates.get(key) is ref:
                    del self.candidates[key]
            else:
                out.append(info)
        return out

    cdef Py_ssize_t evictable_bytes(self, Device device):
        cdef TensorInfo info
        cdef Py_ssize_t total = 0
        for info in self.live_candidates():
            if self.evictable(info, device):
                total += info.size
        return total

    cdef inline bint evictable(self, TensorInfo info, Device device):
        return (info.status == PRODUCED and not info.pins and info.device is device
                and info.storage is not None and info.storage.refs == 1)

    cdef TensorInfo choose(self, Device device):
        """The evictable candidate with the lowest score. A value no op has read yet is
        taken only when nothing else is left: it was made to be used next (a gradient
        flowing back, an output just recomputed), and evicting it makes its op wait on
        a recomputation whose inputs may be gone by then."""
        cdef TensorInfo info, best = None, best_unread = None
        cdef double s, best_score = 0, best_unread_score = 0
        cdef list pool = self.live_candidates()
        cdef Py_ssize_t k
        if self.ch._opts[OPT_SQRT_SAMPLING] and len(pool) > 16:
            k = <Py_ssize_t>sqrt(<double>len(pool)) + 1
            pool = self._rng.sample(pool, k)
        for info in pool:
            if not self.evictable(info, device):
                continue
            s = self.policy.score(info, self.clock)
            if info.read_since_produced:
                if best is None or s < best_score:
                    best, best_score = info, s
            elif best_unread is None or s < best_unread_score:
                best_unread, best_unread_score = info, s
        return best if best is not None else best_unread

    cdef int evict(self, TensorInfo victim) except -1:
        """Drop the victim, or swap it out when reading it back is estimated cheaper than
        recomputing it (and its evicted neighbourhood), or when it has no recipe (a leaf
        that consider_swapping made a candidate: swapping is its only way out)."""
        cdef bint leaf = victim.producer is None
        if _decision_hook is not None:
            _decision_hook("evict", victim, self.clock)
        victim.device.stats.evictions += 1
        if leaf or (self.ch._opts[OPT_ENABLE_SWAP] and self.swap_is_cheaper(victim)):
            try:
                self.swap_out(victim, "evicted (no recipe: swapped)" if leaf
                              else "evicted (swap cheaper than recompute)")
            except OSError:
                if leaf:                  # not again: the budget passes if need be
                    self.forget(victim)
                    return 0
                # else fall back to dropping it
            else:
                self.policy.on_evict(victim)
                return 0
        self.policy.on_evict(victim)
        self.drop(victim, "evicted")
        return 0


cdef inline Py_ssize_t _key(TensorInfo info):
    return <Py_ssize_t><void*>info


cdef inline bint _alive(TensorInfo info):
    """A tensor or a queued op still holds it. (Pins alone do not count: a dead record
    pinned while a recomputation passes through it is only on the way.)"""
    return info.tensor_refs > 0 or info.pending_uses > 0


cdef void _add_user(TensorInfo info, object producer_ref):
    """Note that a recorded producer reads `info`. Dead references are pruned whenever the
    list has doubled since the last pruning: a long-lived tensor (a parameter) read by
    every op would otherwise collect one per op, forever."""
    cdef list users = info.users
    if users is None:
        users = info.users = []
        info.users_prune_at = _MIN_USERS_PRUNE
    users.append(producer_ref)
    if len(users) >= info.users_prune_at:
        users[:] = [r for r in users if r() is not None]
        info.users_prune_at = max(_MIN_USERS_PRUNE, 2 * len(users))


cdef TensorInfo _first_missing_input(Producer p, TensorInfo t):
    """The first input of `p` that is dropped or swapped out (None when all are resident)."""
    cdef TensorInfo i
    for i in p.inputs:
        if i.status == DROPPED or i.status == SWAPPED:
            return i
        if i.status != PRODUCED:
            raise RuntimeError(f"cannot recompute a dropped tensor {t.shape} {t.dtype}: an "
                               f"input of its producer {p.op!r} is {Status(i.status).name}")
    return None


cdef bint _read_on_the_stack(TensorInfo info, list stack):
    """A recomputation still waiting on `stack` reads `info`: it stays until that one has
    run. Dropped in between and recomputed again, it would come back in another storage,
    and an op that read two views of one value (x.T @ x, which numpy runs as one
    symmetric product) would now read two values and round differently."""
    cdef TensorInfo t
    for t in stack:
        if t.producer is not None and _contains((<Producer>t.producer).inputs, info):
            return True
    return False


cdef bint _only_on_the_way(Storage storage, list inputs):
    """`storage` is held only by inputs that are dead records brought back for a
    recomputation (not by a live leaf or another view: a copy would then save nothing)."""
    cdef TensorInfo i
    cdef int holders = 0
    for i in inputs:
        if i.storage is storage:
            if _alive(i):
                return False
            holders += 1
    return holders == storage.refs


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


cdef _Ghost _ghost_of(TensorInfo info):
    """For a value about to be dropped whose storage other records (views) still hold:
    how to take it back from there. That storage is no longer written in place (marked
    exported), so the bits stay the value's. None otherwise."""
    cdef Storage st = info.storage
    value = info.value
    if st is None or st.refs <= 1 or value is None or type(value) is not _ndarray:
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
    g.offset = value.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    g.shape = value.shape
    g.strides = value.strides
    g.dtype = value.dtype
    g.writeable = value.flags.writeable
    st.exported = True
    return g


cdef bint _needed_by_evicted(TensorInfo leaf, list frontier) except -1:
    """Walk forward from `leaf` over the recipes that read it, through dead records (which
    would be recomputed on the way), to the records something still holds. True when one
    of those is evicted (dropped or swapped out): it needs `leaf` to come back. Otherwise
    `frontier` gets the held records, all resident or about to be."""
    cdef list stack = [leaf]
    cdef set seen = {_key(leaf)}
    cdef TensorInfo r, out
    while stack:
        r = stack.pop()
        for out in _consumer_outputs(r):
            if _key(out) in seen:
                continue
            seen.add(_key(out))
            if out.status == DROPPED or out.status == SWAPPED:
                if _alive(out):
                    return True
                stack.append(out)
            elif _alive(out):
                frontier.append(out)
            elif out.producer is not None and out.status != DELETED and out.status != INVALID:
                stack.append(out)
    return False


cdef bint _read_by_a_recipe(TensorInfo info):
    """Some recorded producer that is still alive reads this tensor."""
    if info.users is not None:
        for ref in info.users:
            if ref() is not None:
                return True
    return False


cdef bint _may_overwrite_dying(TensorInfo info):
    """While producers are recorded, may an op write its output over this dying input? Yes
    when the input will be dropped and can be recomputed, or when no recorded producer
    reads it; not when it is a leaf some recipe still reads (its value may be the only
    copy: whether it stays is decided when it dies, right after, in release_leaf)."""
    cdef Producer p = info.producer
    if p is not None:
        return (<OpDef>p.op).recomputable
    return not _read_by_a_recipe(info)


cdef void _remove_swap_file(TensorInfo info):
    if info.swap_path is not None:
        try:
            os.remove(info.swap_path)
        except OSError:
            pass
        info.swap_path = None
