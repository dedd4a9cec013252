# Included by _core.pyx: the memory manager. Drop (free a value, keep how to recompute it),
# regeneration, swap to disk, and DTR eviction under a budget with pluggable policies
# (_policies.pxi). Its recipes are in _recipes.pxi, bringing values back in _restore.pxi,
# swap files in _swap.pxi.
#
# The Channel reaches it only through these hooks, each called while `_memory_on` (or while
# records made under it remain); docs/design.md lists them with the thread each runs on:
#   on_options      an option changed: the manager's snapshot of them is refreshed
#   on_dispatch     an op was issued: record how to recompute its outputs
#   make_room       a value is about to be allocated (host data under a budget); fits
#   on_produced     a value became resident;  on_freed: a value was freed
#   on_dead         no Tensor refers to a record any more: keep it, drop it, or let it go
#   run_managed     run a command: inputs pinned and resident, room made for its outputs
#   will_run_here, ran_here: the same around an op run at once, without a Command
#   ensure_resident bring a dropped or swapped-out value back for a read
#   may_overwrite   may an op write its output over this dying input?
# plus the user's verbs (drop, swap_out, swap_in, make_persistent, the policy, the swap
# folder). All under the GIL; values are replaced, never written in place, while recording.

import weakref as _weakref
from libc.math cimport sqrt

# A resident tensor whose recomputation would first recompute a path of more dead records
# than this stops being recomputable (its recipe is cut, and the dead history behind it):
# in an `x = f(x)` loop the records, and the leaves they read, would otherwise grow without
# end, and no policy would pick a tensor that costs that many ops to bring back (a training
# step's backward pass makes paths about two records a layer).
cdef int _MAX_DEAD_CHAIN = 64
cdef long long _MIN_SWEEP_INTERVAL = 64      # record deaths between two sweeps of kept leaves


# ------------------------------------------------------------------ the manager
# Its fields and cdef method signatures are declared in imperative/_core.pxd, each field with its
# owning thread ([C] caller threads, [W] the worker, [C/W] either, always under the GIL), and so
# are its two inline methods, pin and evictable, with their bodies. Kernels and swap files let
# other threads run midway: see "Several threads" in docs/design.md for what pins protect.


cdef class MemoryManager:
    def __cinit__(self, Channel ch):
        self.ch = ch
        self.opts = MemoryOptions()
        self.policy = DTREqPolicy()
        self.candidates = {}
        self.kept = {}
        self.kept_since_op = {}
        self.sweep_after = _MIN_SWEEP_INTERVAL
        self.swap = SwapSpace()
        import random as _random
        self._rng = _random.Random(0)

    # ---- the hooks the Channel calls

    cdef void on_options(self, long long* opts):
        """[C] An option was set (or the Channel starts): refresh the snapshot. Turned off,
        the manager lets go of every record it holds. A new budget starts without a highest
        floor (make_room)."""
        cdef long long budget = self.opts.budget
        self.opts.read(opts)
        if self.opts.budget != budget:
            self.highest_floor = self.high_water = self.victim_density = 0
            self.live_high = 0
            self.budget_from = self.ch._seq
        if self.opts.swap:
            # (from the main thread, where signal handlers can be installed: the first
            # swap may happen on the worker)
            guard_signals(self.swap)
        if not self.opts.on:
            self.candidates.clear()    # nothing is evicted while off; hold no records
            _forget_waiting_chains()
            self.sweep_kept()
            self.size_pool(0)

    cdef void on_dispatch(self, OpDef op, list inputs, list outputs):
        """[C] An op was issued: its outputs' recipe, if it can run again."""
        if op.recomputable:
            self.record(op, inputs, outputs)

    cdef void on_queued(self, Command cmd):
        """[C] An op entered the worker's queue: under a budget, note that its inputs will
        be read when it runs (how soon a value is needed again, see `gap`)."""
        cdef TensorInfo info
        self.queued_to = cmd.seq
        if self.opts.budget == 0 or cmd.kind != CMD_APPLY:
            return
        self.queued_ops.push_back(cmd.seq)
        for info in cmd.inputs:
            info.queued_reads.push_back(cmd.seq)

    cdef void on_freed(self, TensorInfo info):
        """[C/W] A value was freed: it is no eviction candidate any more."""
        self.forget(info)

    cdef bint on_dead(self, TensorInfo info) except -1:
        """[C/W] No Tensor refers to `info` any more (its value resident, dropped or swapped
        out). A tensor that can be recomputed is dropped, its record kept for whoever needs
        it again (under a budget it may stay: _keeping.pxi); a leaf that a recorded producer
        reads keeps its value while an evicted tensor needs it (release_leaf). True when the
        Channel should free it now."""
        self.note_death()
        if info.producer is not None:
            if info.status == PRODUCED and not info.pins and not _keep_dense_dead(self, info):
                self.drop_dead(info, "deleted")
            # (pinned: a recomputation on the worker is reading it while the caller runs
            # ahead; the restore drops it once read, with the other dead values it kept)
            elif info.uf_class is not None:     # evicted earlier, and now dead
                _member_dies(info.uf_class)
            return False
        if _read_by_a_recipe(info):
            self.forget(info)
            if info.storage is None and info.status == PRODUCED:
                # A Python number's constant (a shared array no count holds) stays for its
                # readers without release_leaf's walk: dying in a backward pass, each walked
                # the dead forward region (a latent ODE's step weights, 1,240 records each)
                return False
            if not self.release_leaf(info):
                if self.opts.budget:
                    self.kept_since_op[_key(info)] = _weakref.ref(info)
                return False
        return True

    cdef int run_managed(self, Command cmd) except -1:
        """[W, or C for an op it runs itself] Run an op with its inputs pinned and
        resident (recomputed or swapped in), room made for its outputs under the budget
        (none for one it writes over a dying input: _bytes_to_allocate)."""
        cdef TensorInfo info
        cdef long long t0
        cdef Py_ssize_t reserved = 0
        if cmd.seq:
            self.running = cmd.seq
            self.pass_queued_ops()
        self.pin(cmd.inputs)
        try:
            if self.kept_since_op:
                _free_leaves_of_small_readers(self)     # (_keeping.pxi)
            for info in cmd.inputs:
                if info.status == DROPPED or info.status == SWAPPED:
                    _restore(self, info)
            _check_held(cmd.inputs, cmd.op)
            if cmd.outputs:
                reserved = self.reserve(_bytes_to_allocate(self.ch, cmd),
                                        (<TensorInfo>cmd.outputs[0]).device)
            t0 = _now_ns()
            _run_unmanaged(self.ch, cmd)
            self.measured(cmd.op, cmd.inputs, cmd.outputs, _now_ns() - t0)
        finally:
            self.release(reserved)
            self.clock += 1            # (a program's op: recomputations do not tick, see ran)
            self.ran(cmd.inputs)
        return 0

    cdef Py_ssize_t will_run_here(self, list inputs, Py_ssize_t needed,
                                  Device device) except -1:
        """[C] An op whose inputs are all resident is about to run on the caller's thread
        without a Command (_run_tiny, _host_run): run_managed's first half. Its inputs are
        pinned and room is reserved for its outputs' `needed` bytes on `device` (returned,
        for ran_here); on an error nothing stays pinned."""
        cdef TensorInfo info
        self.pin(inputs)
        try:
            if self.kept_since_op and self.ch._processed == self.ch._seq:   # (worker idle)
                _free_leaves_of_small_readers(self)
            return self.reserve(needed, device, True) if needed else 0
        except BaseException:
            for info in inputs:
                info.pins -= 1
            raise

    cdef void ran_here(self, OpDef op, list inputs, list outputs, Py_ssize_t reserved,
                       long long nanoseconds):
        """[C] ... and its second half, once it ran and stored its values (or failed:
        `nanoseconds` < 0, and the Command that runs it again is run_managed's)."""
        self.release(reserved, True)
        if nanoseconds >= 0:
            self.measured(op, inputs, outputs, nanoseconds)
            self.clock += 1
        self.ran(inputs)

    cdef int ensure_resident(self, TensorInfo info) except -1:
        """[C, the worker idle] Bring a dropped or swapped-out value back for a read."""
        return _restore(self, info)

    cdef bint may_overwrite(self, TensorInfo info) except -1:
        """[W, or C] While producers are recorded, may an op write its output over this
        dying input? Yes when the input will be dropped and can be recomputed, or when no
        recorded producer reads it. A leaf some recipe still reads holds the only copy of
        its value: yes when what its death would decide right after (release_leaf) lets
        it go, decided now, so that an optimizer writes a parameter's and its momentum's
        new value over the old one, as it does with recording off; under a budget, after
        bringing back the small evicted tensors that alone needed it."""
        cdef Producer p = info.producer
        if p is not None:
            return (<OpDef>p.op).recomputable
        return not _read_by_a_recipe(info) or _let_go_of_leaf(self, info, True)

    # ---- running an op (run_managed, and a recomputation; pin, inline, is in _core.pxd)

    cdef void ran(self, list inputs):
        """An op read `inputs` (or failed): they are unpinned and as fresh as the op (a
        recomputation is an access like any other). Only the program's ops tick the clock
        (run_managed), not recomputations: staleness is program time. Ticking for them
        aged everything a deep recomputation did not touch, the values the next ops read
        included, by hundreds of ticks at once, so that those were evicted next and
        recomputed in turn: a small LSTM under 0.4 P ran 300,000 recomputations a step."""
        cdef TensorInfo info
        for info in inputs:
            _pass_reads(info, self.running)
            info.pins -= 1
            info.last_use = self.clock
            info.read_since_produced = True

    # ---- recording producers

    cdef void record(self, OpDef op, list inputs, list outputs):
        _new_producer(op, inputs, outputs,
                      _estimate_cost(op, inputs, outputs) / max(len(outputs), 1))

    cdef void measured(self, OpDef op, list inputs, list outputs, long long nanoseconds):
        """The op took this long: its outputs' recompute cost from now on (the estimate
        made at dispatch stands in until the op has run). Measured, as the DTR prototype
        does: estimates are off by up to 10x here (an im2col convolution against a ReLU).
        Results never depend on it, only which tensor is evicted. The fastest run seen on
        such inputs (_fastest_run)."""
        cdef TensorInfo info
        cdef double cost = _fastest_run(op, inputs, nanoseconds * 1e-9) / max(len(outputs), 1)
        for info in outputs:
            info.cost = cost
            if info.producer is not None:
                (<Producer>info.producer).cost = cost

    cdef void on_produced(self, TensorInfo info):
        """A value became resident: maybe an eviction candidate."""
        info.last_use = self.clock
        info.read_since_produced = False
        if info.producer is None or info.persistent:
            # Cutting the producer ends the history chain: without this, evicting a
            # parameter would mean recomputing every earlier training step.
            _let_go_of_producer(info)
            self.consider_swapping(info)
            return
        info.dead_chain = _dead_chain_behind(<Producer>info.producer)
        if info.dead_chain > _MAX_DEAD_CHAIN:
            self.cut(info)
        elif info.size >= self.opts.min_evictee and (<OpDef>(<Producer>info.producer).op).recomputable:
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
            _let_go_of_producer(info)
            self.consider_swapping(info)
        return 0

    cdef void consider_swapping(self, TensorInfo leaf):
        """With enable_swap on, a value nothing can recompute (data, a parameter, an
        optimizer's state) is a candidate too: swapping is its only way out, at the cost of
        writing and reading it at the measured bandwidth. Without it the floor held every
        parameter, gradient and momentum buffer (a parameter-heavy MLP's floor was its
        whole peak), so no budget below that could hold, while the momentum sits unread
        from one step's update to the next."""
        if (self.opts.swap and self.opts.dtr
                and leaf.size >= self.opts.min_evictee and self.swap.calibrate()):
            leaf.cost = self.swap.seconds_to_swap(leaf.size)
            self.candidates[_key(leaf)] = _weakref.ref(leaf)

    cdef void forget(self, TensorInfo info):
        self.candidates.pop(_key(info), None)

    cdef void cut(self, TensorInfo info):
        """`info` stops being recomputable: it keeps its value (resident, or still to be
        made by a queued op) and lets go of its recipe, and so of the history behind it."""
        self.forget(info)
        _let_go_of_producer(info)
        info.recipe_cut = True
        self.cuts += 1

    # ---- leaves that recipes read

    cdef bint release_leaf(self, TensorInfo leaf) except -1:
        """`leaf` (a value without producer: data, an RNG result, a parameter's old value)
        has no tensor left, but recorded recipes read it. Its value is the only copy. It
        stays while an evicted tensor needs it to come back (unless those hold no more than
        it: the next op brings them back, _free_leaves_of_small_readers), or while the
        tensors whose recipes reach it could be evicted and are together larger than it and
        the other kept leaves they read (keeping it is then the cheaper way to keep them
        evictable: a batch norm's old running mean, which its output's recipe reads; not
        for readers of its own size, an accumulator's next value: evicting them would only
        trade its bytes for theirs; not for a concatenation of it and another dead batch).
        Otherwise those tensors, all resident or about to be, stop being recomputable and
        the value goes (a parameter's old value after the update, which only the step's
        loss still reaches). True then: the recipes still reading it are those of dead
        records that no tensor reaches any more, and nothing recomputes those. (Held for
        them, an Inception net's branch outputs, read by the dead concatenation behind the
        logits that the backward pass keeps, stayed until the step ended: 1.13x the peak
        of the same step with record_computing_path off.)"""
        if not _let_go_of_leaf(self, leaf):
            self.kept[_key(leaf)] = _weakref.ref(leaf)
            return False
        self.kept.pop(_key(leaf), None)
        return True

    cdef void note_death(self):
        """A record died: now and then, see whether a kept leaf is still needed."""
        self.deaths_since_sweep += 1
        if self.kept and self.deaths_since_sweep >= self.sweep_after:
            self.sweep_kept()

    cdef void sweep_kept(self):
        """Free the kept leaves no evicted tensor needs any more."""
        cdef TensorInfo leaf
        self.deaths_since_sweep = 0
        for key, ref in self.kept.copy().items():     # (a copy: the loop changes the dict)
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
        info.ghost_kept = False
        info.ghost = _ghost_of(info)
        self.ch._free_value(info)
        info.status = DROPPED
        if _profiling:
            record_memory_event(t0, "drop", info, reason)
        return 0

    cdef int drop_dead(self, TensorInfo info, str reason) except -1:
        """Drop a value no tensor refers to (kept only as a recipe's input). It joins its
        evicted neighbourhood: recomputing a neighbour now costs it too (h_DTR^eq sees)."""
        if _decision_hook is not None:
            _decision_hook("drop_dead", info, self.clock)
        _keep_ghost_base(self, info)
        self.drop(info, reason)
        self.policy.on_evict(info)
        _lengthen_chains(self, info)
        _out_of_collectors_sight(info)
        return 0

    def remove_swap_files(self):
        """At close (and so at exit): remove the swap files and the private folders."""
        self.swap.remove_all()

    # ---- the budget

    cdef void size_pool(self, long long threshold):
        """The worker's block pool keeps freed memory the budget does not count: under a
        budget (threshold > 0) what it hands out and keeps mapped stay within the budget
        (or the peak where higher, with room for fragmentation: _pool.c), so that the
        process's memory falls with the budget."""
        if threshold != self.pool_sized_for:
            self.pool_sized_for = threshold
            _kernels.pool_set_reserve(threshold)

    cdef int make_room(self, Py_ssize_t needed, Device device) except -1:
        """Best effort: evict, lowest score first, until tensor memory on `device` plus
        `needed` fits the threshold or nothing evictable is left; then the op runs anyway
        and the overshoot is counted. So the peak stays within max(threshold, floor) plus
        the op's outputs, where the floor is what cannot be evicted (pinned inputs, leaves,
        values no recipe can rebuild).

        Once even evicting everything would not fit, memory up to the highest floor seen
        since the threshold was set is left alone: the peak has reached it already, and
        evicting below it, before every op, evicted what the next ops read, so that each
        recomputed its inputs' whole history (a small U-Net 20% under its floor: 10,000
        recomputations in 2 steps, 60x the step time). Leaving it alone only at the
        moments that do not fit brought the storms back: what the moments in between
        evict, the next such moment recomputes. Forgetting it when the peak statistics
        are reset (a training loop may reset them every step) brought them back too, where
        the floor climbs through the backward pass as gradients are held: each op evicted
        all there was above the floor it had just raised (the zoo's GRU at 0.5 P: 30,000
        recomputations a step, 30x the step time); carried over only from the last window
        of the statistics, they came back every other step, since a step without a storm
        pins less than one with a storm and so measures a lower floor. A floor seen while
        commands issued before the threshold was set still run is not the threshold's.

        While the floor climbs, the highest floor seen is the one the op has just raised,
        and the first step under a new threshold still evicted all there was above it,
        op after op (a small GRU at 0.5 P: 7,000-16,000 recomputations in that step).
        So the high water too, the most an op has run with over the threshold since it
        was set, is left alone: evicting below it lowers no peak. That keeps the rule as
        long as make_room hears of every allocation an op makes (a recomputation whose
        kernel takes no `out=`, a recomputed view's copy: see _restore.pxi, _execute.pxi).
        The cost: one deep recomputation's pins may hold all later steps above their own
        floor (the highest floor, and the high water over it by one op's outputs at most)."""
        cdef long long threshold = self.opts.budget
        cdef long long limit = max(threshold, self.high_water)   # (what need not be evicted)
        cdef long long t0
        cdef TensorInfo victim
        cdef Py_ssize_t own = needed
        self.size_pool(threshold)
        if self.fits(needed, device):
            return 0
        needed += self.reserved      # (another thread's kernel will store that much too)
        if device.stats.allocated <= self.highest_floor:
            if self.reserved_beside and _waited_for_ops_beside(self):    # (_tiny.pxi)
                return self.make_room(own, device)
            self.overshoot(device, needed, threshold)
            return 0
        t0 = _now_ns()
        if self.kept:
            _let_idle_leaves_go(self, device)
        # (one snapshot for the evictions below: a victim leaves it by its status)
        cdef list pool = self.live_candidates()
        ranking = _round_ranking(self, device, pool, device.stats.allocated   # (_choosing.pxi:
                                 - max(limit - needed, self.highest_floor))    # the most freed)
        self.floor_now(device, _evictable_bytes(self, device, pool, ranking), needed)
        while (device.stats.allocated + needed > limit
               and device.stats.allocated > self.highest_floor):
            victim = self.choose(device, pool, ranking)
            if victim is None:
                # all that stays is the floor (one ranked evictable may not be now: loaded,
                # a Siamese pair's 1 MiB product ran 16 KiB above the floor measured above)
                self.floor_now(device, 0, needed)
                break
            self.evict(victim)
            if victim.status == PRODUCED and ranking is None:   # it stayed (another thread
                pool.remove(victim)          # reads it, or it could not be swapped out): not
                                             # again here (a ranking leaves it out itself)
            # (taken again: an eviction that swaps out lets the GIL go, and an op beside
            # may have stored its values and let its room go meanwhile; counted still, its
            # bytes made a high water no op reached, under which later ops ran without
            # evicting: 40 bytes past max(budget, floor) + one op's outputs, one run in
            # two, tools/fuzz_memory.py --grad --seed 6020436)
            needed = own + self.reserved
        if (device.stats.allocated + needed > limit and self.reserved_beside
                and _waited_for_ops_beside(self)):
            self.eviction_seconds += (_now_ns() - t0) * 1e-9
            return self.make_room(own, device)
        if device.stats.allocated + needed > threshold:
            self.overshoot(device, needed, threshold)
        self.eviction_seconds += (_now_ns() - t0) * 1e-9
        return 0

    cdef bint fits(self, Py_ssize_t needed, Device device):
        """Whether `needed` more bytes on `device` leave nothing to evict (make_room), the
        bytes reserved by kernels running now counted as allocated."""
        return (self.opts.budget == 0
                or device.stats.allocated + self.reserved + needed
                <= max(self.opts.budget, self.high_water))

    cdef Py_ssize_t reserve(self, Py_ssize_t needed, Device device, bint beside=False) except -1:
        """make_room, then hold the room until the caller has stored its values and lets
        the bytes (returned) go (`release`): a kernel lets the GIL go, and another
        thread's op must not take the same room meanwhile. `beside`: an op on a caller's
        thread that may run while the worker runs its own (_tiny.pxi, Channel.put)."""
        self.make_room(needed, device)
        needed = max(needed, 0)
        self.reserved += needed
        if beside:
            self.reserved_beside += needed
        return needed

    cdef void release(self, Py_ssize_t reserved, bint beside=False):
        self.reserved -= reserved
        if beside:
            self.reserved_beside -= reserved

    cdef void floor_now(self, Device device, Py_ssize_t evictable, Py_ssize_t needed):
        """What cannot be evicted on `device` now (all but the `evictable` bytes), for the
        peak_floor statistic and, where it and `needed` pass the budget, for make_room."""
        cdef long long floor = device.stats.allocated - evictable
        if floor > self.peak_floor:
            self.peak_floor = floor
        if (floor + needed > self.opts.budget and floor > self.highest_floor
                and self.budget_in_force()):
            self.highest_floor = floor

    cdef bint budget_in_force(self):
        """The op running was issued after the threshold was set (or none is left): what it
        runs with is the threshold's doing, not that of the commands issued before it."""
        return self.running > self.budget_from or self.ch._processed == self.ch._seq

    cdef void new_window(self):
        """[C] The peak statistics were reset: the floor statistic starts from the highest
        floor seen, which make_room still leaves alone."""
        self.peak_floor = self.highest_floor

    cdef void overshoot(self, Device device, Py_ssize_t needed, long long threshold):
        self.overshoots += 1
        if self.budget_in_force():
            self.high_water = max(self.high_water, device.stats.allocated + needed)
        if _overshoot_hook is not None:
            _overshoot_hook(device.stats.allocated, needed, threshold)

    cdef list live_candidates(self):
        """The candidates still alive (a snapshot), pruning the dead ones."""
        cdef list out = [], dead_keys = [], dead_refs = []
        cdef Py_ssize_t pos = 0, i
        cdef PyObject* key
        cdef PyObject* ref
        # The dict is walked in place: nothing in the loop makes an object the garbage
        # collector tracks (a weak reference's call, appends to lists made before it), so
        # no collection can run, free a record and change the dict mid-way. (A copy of it
        # each round of evictions was a quarter of a GRU's bookkeeping: 340 candidates.)
        while PyDict_Next(self.candidates, &pos, &key, &ref):
            info = (<object>ref)()
            if info is None:
                dead_keys.append(<object>key)
                dead_refs.append(<object>ref)
            else:
                out.append(info)
        for i in range(len(dead_keys)):
            if self.candidates.get(dead_keys[i]) is dead_refs[i]:
                del self.candidates[dead_keys[i]]
        return out

    cdef bint read_next(self, TensorInfo info):
        """The queued op after the running one reads `info`: it belongs to the floor. Evicted
        now, it would be recomputed at once, while what the running op makes is still there:
        never a lower peak, only a recomputation, and a higher peak where that brings back
        larger ancestors (an embedding's gradient broadcast, evicted to make room for the
        table's gradient, came back with the 8 MiB lookup it was made from: +11%)."""
        cdef long long nxt = self.next_op()
        _pass_reads(info, self.running)
        return (nxt != 0 and info.queued_reads_from < info.queued_reads.size()
                and info.queued_reads[info.queued_reads_from] == nxt)

    cdef long long next_op(self):
        """The sequence number of the queued op after the one running (0: none queued)."""
        return 0 if self.queued_ops.empty() else self.queued_ops.front()

    cdef void pass_queued_ops(self):
        """Forget the queued ops up to the one running now (as it starts: under a budget never
        reached no eviction asks, and the array grew by one number an op)."""
        while not self.queued_ops.empty() and self.queued_ops.front() <= self.running:
            self.queued_ops.pop_front()

    cdef TensorInfo choose(self, Device device, list pool, object ranking):
        """The evictable candidate with the lowest score (_choosing.pxi). A value no op has
        read yet is taken only when nothing else is left (or with the others by score,
        where they cannot make the room: _merge_tiers_if_short): it was made to be used
        next (a gradient flowing back, an output just recomputed), and evicting it makes
        its op wait on a recomputation whose inputs may be gone by then. `pool`: the live
        candidates, `ranking` the round's (_rank), or None to sample the pool."""
        if ranking is None:
            pool = self._rng.sample(pool, <Py_ssize_t>sqrt(<double>len(pool)) + 1)
            ranking = _rank(self, device, pool)
        return _lowest_score(self, device, <Ranking>ranking)

    cdef long long gap(self, TensorInfo info):
        """How many ops from now `info` will be read again, as far as the manager can tell:
        1 while a recipe the restore under way will run reads it (read by no queued op, it
        looked unread to the queue's end: a spiking network's restores evicted what they were
        about to read, 370,000 recomputations a step at 0.35 P); up to the first queued op
        that reads it; with none, at least to the end of the queue, and at least its
        staleness (ops since its last read: the DTR paper's stand-in for the distance to the
        next use, all there is at async level 0; alone, a pooled U-Net feature read by four
        backward ops in a row was evicted between each two of them). A value only recipes
        read is read when the first evicted tensor that needs it is (_keeping.pxi:
        _gap_of_evicted_readers), where that is sooner."""
        _pass_reads(info, self.running)
        if self.restore_reads and self.restore_reads.get(_key(info), 0) > 0:
            return 1
        if info.queued_reads_from < info.queued_reads.size():
            return max(info.queued_reads[info.queued_reads_from] - self.running, 1)
        if _read_through_evicted(info):
            return _gap_of_evicted_readers(self, info)
        return _staleness_gap(self, info)

    cdef int evict(self, TensorInfo victim) except -1:
        """Drop the victim, or swap it out when reading it back is estimated cheaper than
        recomputing it (and its evicted neighbourhood), or when it has no recipe (a leaf
        that consider_swapping made a candidate: swapping is its only way out)."""
        cdef bint leaf = victim.producer is None
        cdef bint swapped = False
        if _decision_hook is not None:
            _decision_hook("evict", victim, self.clock)
        if not leaf and victim.storage is not None and victim.storage.refs > 1:
            return _evict_together(self, victim)          # (_sharing.pxi)
        if leaf or (self.opts.swap and _swap_is_cheaper(self, victim)):
            try:
                if not _swap_out(self, victim, "evicted (no recipe: swapped)" if leaf
                                 else "evicted (swap cheaper than recompute)"):
                    return 0              # another thread began to read it: it stays
                swapped = True
            except OSError:
                if leaf:                  # not again: the budget passes if need be
                    self.forget(victim)
                    return 0
                # else fall back to dropping it
        if not swapped:
            # (the hook, or the disk measured by _swap_is_cheaper, may have let another
            # thread run and begin to read it)
            if not self.evictable(victim, victim.device):
                return 0
            self.drop(victim, "evicted")
        return _counted_eviction(self, victim, swapped)
