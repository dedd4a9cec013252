# Included by _core.pyx: the dead values the memory manager keeps resident under a budget
# instead of dropping them as they die (MemoryManager.on_dead, drop_dead), and when a kept
# leaf goes. A kept value is an eviction candidate like any other: the policy decides when
# it goes; whether a dead leaf that recipes read stays (release_leaf's decision); and what
# a value dropped for good does to the paths of dead records its readers would recompute.
# Module functions that take the manager as `self`.

# A dead value stays when recomputing it costs this many times more per byte than what the
# policy has been evicting (MemoryManager.victim_density) ...
cdef double _DENSER_THAN_VICTIMS = 4.0
# ... and a value held and not read for at least this many ops reads it.
cdef long long _READ_FAR = 16


cdef double _moving_average(double average, double value):
    """An average over about the last five values (the first one starts it)."""
    return value if average <= 0 else 0.8 * average + 0.2 * value


cdef bint _keep_dense_dead(MemoryManager self, TensorInfo info) except -1:
    """Whether `info`, dying with a resident value and a recipe, stays instead of being
    dropped (the DTR paper drops a dead tensor at once, keeping how to recompute it). Only
    once the budget binds (something was evicted): then a value that is dear for its size
    (_DENSER_THAN_VICTIMS) and that a tensor held for later reads (_READ_FAR) stays, since
    evicting that tensor would bring it back. A DenseNet's features (12-channel convolution
    outputs that every later concatenation reads, the concatenations held for the batch
    norms' backward) were dropped as the forward pass ended, and each concatenation brought
    back recomputed them all: the zoo's DenseNet at 0.5 P recomputed 54 values a step, 9.5
    of them convolutions (rel. cost 0.22 of the step); kept, 28 and 0.06 (0.3 P: 150-190
    and 0.65 -> 133 and 0.45). Looser, it kept gradients too: at twice the victims' density
    or readers 4 ops away, a weight-shared MLP recomputed twice as often at 0.5 P, a VGG
    2.7 times at 0.4 P, and a GRU's peak passed its budget by 10-15% at 0.7 P."""
    cdef TensorInfo out
    if (self.opts.budget == 0 or self.victim_density <= 0 or info.storage is None
            or info.storage.refs != 1 or _key(info) not in self.candidates
            or info.cost < _DENSER_THAN_VICTIMS * self.victim_density * info.size):
        return False
    for out in _consumer_output_list(info):     # (self.gap may make objects)
        if _alive(out) and (out.status == DROPPED or out.status == SWAPPED or (
                out.status == PRODUCED and _key(out) in self.candidates
                and self.gap(out) >= _READ_FAR)):
            info.read_since_produced = True      # (read: `choose` takes it like any other)
            if _decision_hook is not None:
                _decision_hook("keep", info, self.clock)
            return True
    return False


cdef int _keep_ghost_base(MemoryManager self, TensorInfo last) except -1:
    """`last` is about to be dropped dead, the last record in its storage: a dropped base
    whose value still lies there (views kept it) would go with it. Under a budget, where an
    evicted tensor needs that base to come back, it is taken back and stays, evictable like
    any value, so that the policy decides when it goes: a GRU's sequence-wide projection,
    which every time step's gates are sliced from, went with the last slice of the forward
    pass, and each backward step that restored a gate recomputed it (the zoo's GRU at 0.6 P:
    58 times a step, 5.7x the step time; kept, 1.1-1.5x)."""
    cdef Storage st = last.storage
    cdef TensorInfo base
    if self.opts.budget == 0 or st is None or st.refs != 1 or st.ghost_ref is None:
        return 0
    base = st.ghost_ref()
    st.ghost_ref = None
    if (base is None or base is last or base.status != DROPPED or base.producer is None
            or base.size < self.opts.min_evictee or not _needed_by_evicted(base, [])):
        return 0
    if _revive(self, base):
        base.read_since_produced = True
        base.ghost_kept = True
    return 0


# Records a dead value's walk to the evicted tensors that need it looks at, at most
cdef Py_ssize_t _READERS_WALK = 16


cdef inline bint _read_through_evicted(TensorInfo info):
    """`info` is resident and read by recipes only: a base _keep_ghost_base kept, or a dead
    value kept (_keep_dense_dead, or brought back by a restore and kept: _worth_keeping,
    _read_again). It is read next when the first evicted tensor that needs it is."""
    return info.ghost_kept or (info.status == PRODUCED and info.producer is not None
                               and not _alive(info))


cdef inline long long _staleness_gap(MemoryManager self, TensorInfo info):
    """MemoryManager.gap where no queued op or restore reads `info`: its staleness, and at
    least the queue's length (whatever reads it next is issued after the queue's end)."""
    return max(self.clock - info.last_use, self.queued_to - self.running, 1)


cdef long long _gap_of_evicted_readers(MemoryManager self, TensorInfo base):
    """MemoryManager.gap of a value _read_through_evicted: when the first evicted tensor
    that needs it is read, where that is sooner than its staleness. (Staleness alone made a
    base kept for its gates look unwanted right after each use, and it went before the
    gates that needed it next. A dead value a restore kept is as fresh as any other it
    brought back: a spiking network's potentials, which only recipes read, were evicted in
    the order they came back, not in the order the queued backward pass would read the
    spikes recomputed from them, and the recurrence was recomputed from its first step for
    each: at 0.3 P, async level 2, 3,050-3,420 recomputations a step, now 2,170-2,380.)
    A dead value's walk passes dropped records only: walking on through a resident one, a
    pointer network's gate product, just recomputed and read, looked needed by the gates
    being recomputed from it, and its attention's encoder states went instead (2.4x the
    recomputations)."""
    cdef list evicted = []
    cdef long long best = _staleness_gap(self, base)
    if base.ghost_kept:
        _needed_by_evicted(base, [], evicted)
    else:
        _needed_by_evicted(base, [], evicted, NULL, False, _READERS_WALK)
    for info in evicted:
        best = min(best, self.gap(<TensorInfo>info))
    return best


cdef bint _let_go_of_leaf(MemoryManager self, TensorInfo leaf,
                         bint bring_back=False) except -1:
    """MemoryManager.release_leaf's decision: True, after cutting the recipes of the
    tensors that reach `leaf`, when no evicted tensor needs it and keeping it would not pay
    (_keeping_leaf_pays). With `bring_back`, where evicted tensors need it, what
    _readers_brought_back decides."""
    cdef list frontier = []
    if _needed_by_evicted(leaf, frontier):
        return bring_back and _readers_brought_back(self, leaf)
    if _keeping_leaf_pays(self, leaf, frontier, 0):
        return False
    for info in frontier:
        self.cut(<TensorInfo>info)
    return True


cdef bint _keeping_leaf_pays(MemoryManager self, TensorInfo leaf, list frontier,
                             Py_ssize_t more_candidates) except -1:
    """Whether the tensors whose recipes reach `leaf` (the `frontier`, and
    `more_candidates` bytes of evicted ones about to come back as candidates) could be
    evicted for more bytes than it holds with the other kept leaves they read (twice as
    many where only drops by hand could take them)."""
    cdef Py_ssize_t by_budget = more_candidates, by_hand = 0, cost = leaf.size
    cdef Py_ssize_t counted = _evictable_frontier_bytes(self, leaf, cost, frontier, 0,
                                                        &by_budget, &by_hand)
    # The other kept leaves only add to the cost: where the leaf's own bytes outweigh
    # what keeping it buys, the walk that counts them is spared, for the same answer (in
    # an `x = f(x)` loop every record past _MAX_DEAD_CHAIN is cut, and so dies a leaf,
    # one an op: the walk was a tenth of a small op's time with recording on).
    if not _keeping_pays_at(self, leaf, by_budget, by_hand, cost):
        return False
    # What keeping it buys needs the other dead leaves those recipes read kept too: a
    # concatenation of two data batches is evictable only while both stay, for no byte
    # saved (a prototypical network's support and query sets, kept each for the
    # concatenation the encoder reads: 1.07x the step's peak under a budget never
    # reached).
    cdef Py_ssize_t kept_read = _kept_leaves_read(self, frontier, leaf)
    if kept_read < 0:
        return False
    cost += kept_read
    _evictable_frontier_bytes(self, leaf, cost, frontier, counted, &by_budget, &by_hand)
    # Under a budget the manager evicts its candidates itself once it binds. Dropped by
    # hand alone, nothing says they ever will be: such tensors count only where dropping
    # them would free at least twice the leaf's bytes, so that what it may buy is at least
    # what it costs. (An old gradient, kept for the clipped one of its size and the norm's
    # scalar, 4 bytes more, held all gradients twice over the update: an AdamW MLP with
    # gradient clipping, 1.13x its peak with enable_drop. Values under the evictee minimum
    # are no candidates: counted as the budget's, an in-place update's old version stayed
    # for a 5 KiB product that only a drop by hand could take, and that drop's restore
    # peaked above the same program with DTR off. Asking twice as many of the budget's
    # candidates too, tried in session 56, raised a reversible network's floor at 0.3 P
    # from 1.02x its budget to 1.12x.)
    # A leaf the manager made, cutting a recipe (for the dead records behind it, or for a
    # leaf it read that went), stands in a computation that lets everything go as it
    # runs, a backward pass or a recurrence: the tensors reading it are that
    # computation's transients, which no program drops by hand. It stays for the budget's
    # evictions alone. (Kept for drops by hand, a gradient cut in a CNN's backward pass
    # stayed beside the next layer's gradient, four times its size, until that was read:
    # NeuralSort and an RNN transducer, tests/fifteenth_models.py, peaked 1.05-1.06x the
    # same step with enable_drop off.)
    return _keeping_pays_at(self, leaf, by_budget, by_hand, cost)


cdef inline bint _keeping_pays_at(MemoryManager self, TensorInfo leaf, Py_ssize_t by_budget,
                                  Py_ssize_t by_hand, Py_ssize_t cost):
    """_keeping_leaf_pays's rule for a leaf whose keeping costs `cost` bytes."""
    return (by_budget > cost and self.opts.budget) or (
        by_budget + by_hand >= 2 * cost and not leaf.recipe_cut)


# Evicted tensors brought back at once so that a dead leaf they alone held can go: at most
# this many (_readers_brought_back)
cdef Py_ssize_t _READERS_BROUGHT_BACK = 8


cdef int _free_leaves_of_small_readers(MemoryManager self) except -1:
    """[W, or C running an op, the worker idle] Before the next op runs: the leaves kept as
    they died under a budget (`kept_since_op`) go where their evicted readers are small
    enough to bring back (_readers_brought_back)."""
    cdef dict pending = self.kept_since_op
    cdef TensorInfo leaf
    self.kept_since_op = {}
    for key, ref in pending.items():
        leaf = ref()
        if (leaf is not None and not _alive(leaf) and leaf.status == PRODUCED
                and key in self.kept and _readers_brought_back(self, leaf)):
            self.kept.pop(key, None)
            self.ch._finish_delete(leaf)
    return 0


cdef bint _readers_brought_back(MemoryManager self, TensorInfo leaf) except -1:
    """[W, or C running an op, the worker idle] `leaf` (no producer) is dead or dying, and
    under a budget evicted tensors need it: where they, with the dead records between,
    hold no more bytes than it, bring them back and let it go as release_leaf would
    (True): from then on they hold no more than it would have, and an update in place
    writes over it, as with the budget off. Kept, a dead leaf costs all its bytes for as
    long as any such reader stays evicted, more than turning the budget off: a 4-byte mean
    of a 0.5 MiB tensor, evicted as the budget bound, held the tensor's old value after an
    in-place update for the rest of the program (1.4x the peak of the same program with
    DTR off; 2x where the update could not write over it), and a 1 MiB product of a
    1 MiB tensor made the update copy it, and the product's read back held 3 MiB where
    DTR off held 2 (tools/fuzz_memory.py --seed 913691). Where the readers are larger,
    keeping the leaf is the cheaper way to have them back (the DTR paper keeps every input
    of an evicted tensor); and where the tensors reaching it would make keeping it worth
    its bytes once they are back (_keeping_leaf_pays), bringing them back buys nothing."""
    cdef list evicted = [], frontier = [], brought = []
    cdef Py_ssize_t gone = 0, more = 0
    cdef TensorInfo info
    if self.opts.budget == 0:
        return False
    _needed_by_evicted(leaf, frontier, evicted, &gone)
    if not evicted or len(evicted) > _READERS_BROUGHT_BACK or gone > leaf.size:
        return False
    for info in evicted:
        if info.size >= self.opts.min_evictee:
            more += info.size
    if _keeping_leaf_pays(self, leaf, frontier, more):
        return False
    if _decision_hook is not None:
        _decision_hook("bring_back", leaf, self.clock)
    leaf.pins += 1
    try:
        for info in evicted:
            _restore(self, info)
            info.pins += 1        # (until the leaf went: evicted again, it needs it)
            brought.append(info)
        return leaf.status == PRODUCED and _let_go_of_leaf(self, leaf)
    finally:
        leaf.pins -= 1
        for info in brought:
            info.pins -= 1


cdef int _KEPT_WALK = 64        # records _kept_leaves_read takes, at most
cdef int _KEPT_INPUTS = 256     # their recipes' inputs it reads, at most


cdef Py_ssize_t _kept_leaves_read(MemoryManager self, list frontier, TensorInfo besides):
    """Bytes of the kept leaves (dead, resident, held for recipes) other than `besides`
    that recomputing the `frontier` would read: its recipes' inputs, and those of the
    dead records they would recompute on the way. Each producer's inputs are read once:
    the outputs of one op share them. -1 where the recipes read more than _KEPT_INPUTS
    records: keeping a leaf for a recomputation that needs so many back is taken not to
    pay. (An AdamStep over a model's parameters reads four tensors a parameter, and its
    outputs are the frontier of each old parameter, moment and count it releases: the
    releases read its inputs a quadratic number of times in all, 64 times over each
    before producers were told apart. DINO's step with enable_drop at async level 0:
    178 ms, then 91; off, 84-91.) The producers and inputs read are marked with the
    walk's number: C++ sets of them allocated a node an insert, half of this walk's time,
    and the walk was 5% of an xLSTM's step at 0.5 P."""
    global _walks
    cdef list todo = []             # taken before the frontier's next, as a stack would
    cdef Py_ssize_t next_in_frontier = len(frontier) - 1
    cdef Py_ssize_t total = 0
    cdef int looked = 0, inputs_read = 0
    cdef TensorInfo t, i
    cdef Producer p
    _walks += 1
    cdef long long walk = _walks     # (no other walk runs inside this one)
    besides.walk_mark = walk
    while (todo or next_in_frontier >= 0) and looked < _KEPT_WALK:
        if todo:
            t = <TensorInfo>todo.pop()
        else:
            t = <TensorInfo>frontier[next_in_frontier]
            next_in_frontier -= 1
        looked += 1
        p = <Producer>t.producer
        if p is None or p.walk_mark == walk:
            continue
        p.walk_mark = walk
        inputs_read += len(p.inputs)
        if inputs_read > _KEPT_INPUTS:
            return -1
        for i in p.inputs:
            if _alive(i) or i.walk_mark == walk:
                continue
            i.walk_mark = walk
            if i.producer is not None:
                todo.append(i)
            elif i.status == PRODUCED and _key(i) in self.kept:
                total += i.size
    return total


cdef Py_ssize_t _evictable_frontier_bytes(
        MemoryManager self, TensorInfo leaf, Py_ssize_t cost, list frontier,
        Py_ssize_t start, Py_ssize_t* by_budget, Py_ssize_t* by_hand) except -1:
    """Adds to the sums the bytes of the held records from frontier[start] on that could
    be evicted now: the candidates, which a budget evicts (`by_budget`), and with
    enable_drop the other resident ones with a recipe, which only `_drop()` takes (any
    size: `by_hand`). (Not those still to be made: the output of the op that reads a dying
    leaf last had better take the leaf's memory in place, as it does with recording off.)
    It stops where keeping `leaf` at `cost` pays (_keeping_pays_at), since more bytes
    cannot change that, and returns the index it stopped at: an AdamStep's hundreds of
    outputs are the frontier of each old parameter it releases, and summing them all at
    each release made the optimizer step quadratic in the parameters."""
    cdef TensorInfo info
    cdef bint dropping = self.opts.drop
    cdef Py_ssize_t k, n = len(frontier)
    for k in range(start, n):
        if _keeping_pays_at(self, leaf, by_budget[0], by_hand[0], cost):
            return k
        info = <TensorInfo>frontier[k]
        if _key(info) in self.candidates:
            by_budget[0] += info.size
        elif dropping and info.status == PRODUCED and info.producer is not None:
            by_hand[0] += info.size
    return n


# _let_idle_leaves_go's kept leaves that stayed for one record, by key (_witnessed)
cdef dict _kept_leaf_witnesses = {}


cdef bint _still_keeps(MemoryManager self, tuple witnessed, TensorInfo leaf,
                       Device device) except -1:
    """The record that made a kept leaf stay (_walk_witness) would make it stay again: no
    recipe was let go since (so the path of recipes between them stands), and it is held,
    and evicted or evictable now. (Asked before each eviction of every kept leaf, the walk
    was all but the whole cost under a budget below the floor: a web of Runge-Kutta
    stages of 64-float values, 48 steps under 4 KiB, took 5.1-5.6 s, 0.9 s now.)"""
    cdef TensorInfo w = _standing_witness(witnessed, leaf)
    return w is not None and (w.status == DROPPED or w.status == SWAPPED
                              or self.evictable(w, device))


cdef int _let_idle_leaves_go(MemoryManager self, Device device) except -1:
    """Before make_room evicts: free the kept leaves (release_leaf) no evicted tensor needs
    and whose frontier, the held tensors whose recipes reach them, has nothing evictable at
    this moment (pinned by the running op, read by the next, or still to be made) and holds
    no more bytes than the leaf. Keeping a leaf pays for those tensors' evictability; one
    that buys none now frees its bytes without a recomputation, and the frontier its
    release leaves unevictable for good is no larger than what it frees. A ReLU MLP's
    backward: each layer's gradient, once its recipe was cut, was a leaf kept for the next
    gradient, which the following op read at once; two 2 MiB gradients stayed where one
    was needed (the zoo's relu_narrow at 0.5 P: floor 19.6 -> 17.3 MiB of 22.1, 75 -> 69
    recomputations a step). Without the size bound, a GRU's backward let gradients go whose
    frontier was larger: at 0.5 P (under its floor) about one run in two recomputed twice
    as often, with 12% of the step in choosing victims. Leaves under the evictee minimum
    stay (a batch norm's old running mean, which its output's recipe reads: freeing it
    saves nothing). A leaf that stayed for one record is walked from again only once that
    record would not keep it (_still_keeps)."""
    global _kept_leaf_witnesses
    cdef TensorInfo leaf, held
    cdef list frontier
    cdef dict before = _kept_leaf_witnesses, witnesses = {}
    _kept_leaf_witnesses = witnesses
    for key, ref in self.kept.copy().items():     # (a copy: the loop changes the dict)
        leaf = ref()
        if (leaf is None or _alive(leaf) or leaf.status != PRODUCED or leaf.device is not device
                or leaf.size < self.opts.min_evictee):
            continue
        entry = before.get(key)
        if entry is not None and _still_keeps(self, <tuple>entry, leaf, device):
            witnesses[key] = entry
            continue
        frontier = []
        if _needed_by_evicted(leaf, frontier, None, NULL, True, -1, self, device):
            if _walk_witness != NULL:
                witnesses[key] = _witnessed(leaf)
            continue
        if _decision_hook is not None:
            _decision_hook("let_go", leaf, self.clock)
        for held in frontier:
            self.cut(held)
        self.kept.pop(key, None)
        self.ch._finish_delete(leaf)   # (what still reads it is dead: see release_leaf)
    return 0


# _lengthen_chains' heap of the records still to take, kept between walks: (-birth, record),
# so that the earliest born is on top
ctypedef pair[long long, PyObject*] _Born
cdef priority_queue[_Born] _chain_heap
# The dead records whose readers' paths wait to be lengthened (weak references: a record
# whose recipes all went has no reader left), and how many wait before one walk takes them
cdef list _chains_waiting = []
cdef Py_ssize_t _CHAINS_BATCH = 64


cdef int _lengthen_chains(MemoryManager self, TensorInfo dead) except -1:
    """`dead` was dropped for good: whoever reads it would recompute it (and what it
    needs) first. The longer path reaches its readers, and through those that are dead
    and dropped already (a temporary can die before its input does) the resident ones
    beyond; a resident reader whose path of dead records grows too long is cut.
    Lengthened _CHAINS_BATCH deaths at a time, by one walk from all of them: a record
    dying behind others that died first (a backward pass lets its saved values go last
    made first) walked them all again, each a pointer or two to a record far in memory:
    218 records a death in a latent ODE's backward pass, whose step took 240 ms with
    enable_drop=1 against 90 without (160 batched); one walk takes each record once for
    the batch. A cut comes up to a batch later than _MAX_DEAD_CHAIN says. Under a budget
    with values to evict (candidates), each death is walked from at once: a cut value is
    no candidate any more, so the policy's choices depend on when cuts come."""
    _chains_waiting.append(_weakref.ref(dead))
    if len(_chains_waiting) >= _CHAINS_BATCH or (self.opts.budget and self.candidates):
        _lengthen_waiting_chains(self)
    return 0


cdef long long _chain_records_taken = 0     # by _lengthen_waiting_chains (tests)


def chain_records_taken():
    """Debugging and tests: how many records the walks lengthening dead chains have taken
    (_lengthen_waiting_chains) since the module was loaded."""
    return _chain_records_taken


cdef void _forget_waiting_chains():
    """The manager was turned off: no record is its to walk or cut."""
    _chains_waiting.clear()


cdef int _lengthen_waiting_chains(MemoryManager self) except -1:
    """_lengthen_chains for the deaths waiting, those still dead and dropped (or swapped
    out). The records are taken earliest born first: a reader is born after what it reads, so
    each is taken once, once every path of the walk to it is counted. A path is counted up
    to _MAX_DEAD_CHAIN + 1, all the rule needs: past it, a death near the start of a long
    dead region (a backward pass letting a recurrence's saved values go, last made first)
    walked the whole region again to count each path one longer (7.7% of an xLSTM's step
    at 0.5 P, 3.8% counted so). Taken in the order
    a stack gave, a record was lengthened, and its readers walked again, once for each
    longer path found: a latent ODE's backward pass, whose saved values die last made
    first behind the Dormand-Prince stages that read them all, walked 2.5 records for
    each one reached, 540 a death (the step's time: _lengthen_chains).
    (A record given a recipe after its birth is taken again where a later walk lengthens
    it: the order saves work, it decides nothing.)"""
    global _walks, _chains_waiting, _chain_records_taken
    cdef TensorInfo d, out
    cdef Producer user
    cdef PyObject* rec
    cdef vector[PyObject*] too_long
    cdef size_t k
    cdef Py_ssize_t j
    cdef int longer
    cdef list sources = []           # (held to the end of the walk)
    for ref in _chains_waiting:
        d = ref()
        if d is not None and (d.status == DROPPED or d.status == SWAPPED):
            sources.append(d)
    _chains_waiting = []
    # (borrowed pointers: the walk frees no record and runs no Python code)
    _walks += 1
    cdef long long walk = _walks     # (marks the records taken; _recipes.pxi's walks' numbers)
    while not _chain_heap.empty():
        _chain_heap.pop()
    for d in sources:
        _chain_heap.push(_Born(-d.birth, <PyObject*>d))
    while not _chain_heap.empty():
        d = <TensorInfo>_chain_heap.top().second
        _chain_heap.pop()
        if d.walk_mark == walk:
            continue                 # (pushed by each reader that lengthened it: taken)
        d.walk_mark = walk
        _chain_records_taken += 1
        for k in range(d.users.size()):
            user = <Producer>d.users[k]
            for j in range(user.n_outputs()):
                rec = user.outs[j]
                if rec == NULL or rec == <PyObject*>d:
                    continue
                out = <TensorInfo>rec
                longer = _one_longer(d.dead_chain)
                if out.dead_chain >= longer:
                    continue
                out.dead_chain = longer
                if out.status == DROPPED or out.status == SWAPPED:
                    if not _alive(out):
                        out.walk_mark = 0        # (taken already, out of birth order: again)
                        _chain_heap.push(_Born(-out.birth, rec))
                elif out.dead_chain > _MAX_DEAD_CHAIN and out.producer is not None:
                    too_long.push_back(rec)
    # Cut after the walk, each held until its cut: a cut may let recipes, and the
    # records only they held, go.
    for k in range(too_long.size()):
        Py_INCREF(<object>too_long[k])
    for k in range(too_long.size()):
        self.cut(<TensorInfo>too_long[k])
        Py_DECREF(<object>too_long[k])
    return 0
