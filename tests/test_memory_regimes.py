"""DTR in the regimes the zoo's first models never reached: a budget under the floor (what
must stay resident), and the caller running ahead of the worker (async levels 1-2)."""
import contextlib
import threading

import numpy as np
import pytest

import imperative as imp
from imperative import _core
from imperative import functional as F
from imperative import nn, optim
from imperative.autodiff import GradManager
from imperative.models import trainer, training_step
from imperative.ops.base import Op
import eighteenth_models
import eighth_models
import seventh_models
import tenth_models
import unseen_models
from unseen_models import LSTM


@contextlib.contextmanager
def _dtr_budget(threshold, evictee_minimum_size):
    """DTR on under `threshold` bytes; afterwards off, its two options as they were."""
    old = imp.get_option("dtr_eviction_threshold"), imp.get_option("dtr_evictee_minimum_size")
    imp.dtr.enable(eviction_threshold=threshold, evictee_minimum_size=evictee_minimum_size)
    try:
        yield
    finally:
        imp.dtr.disable()
        imp.set_option("dtr_eviction_threshold", old[0])
        imp.set_option("dtr_evictee_minimum_size", old[1])


def _step_peak(step):
    """The peak tensor memory of one more step (unconstrained, unless a budget is set)."""
    imp.sync()
    imp.reset_peak_memory_stats()
    float(step())
    imp.sync()
    return imp.memory_stats()["peak_allocated"]


def _dtr_steps(step, budget_fraction, steps=2, evictee_minimum_size=64 * 1024):
    """Peak of one unconstrained step, then `steps` steps under `budget_fraction` of it:
    (losses, recomputations, peak, floor, budget)."""
    budget = int(budget_fraction * _step_peak(step))
    with _dtr_budget(budget, evictee_minimum_size):
        imp.reset_peak_memory_stats()
        start = imp.memory_stats()["recomputes"]
        losses = [float(step()) for _ in range(steps)]
        imp.sync()
        stats = imp.memory_stats()
    return (losses, stats["recomputes"] - start, stats["peak_allocated"], stats["peak_floor"],
            budget)


def _watched_steps(make_step, budget_fraction, evictee_minimum_size, hook):
    """Two steps under `budget_fraction` of a step's peak, after two without, with
    `hook(action, record, clock)` as the decision hook meanwhile: whether their losses are
    those of the same steps run without DTR."""
    reference = make_step()
    want = [float(reference()) for _ in range(4)][2:]
    step = make_step()
    float(step())
    budget = int(budget_fraction * _step_peak(step))
    with _dtr_budget(budget, evictee_minimum_size):
        _core.set_decision_hook(hook)
        try:
            losses = [float(step()) for _ in range(2)]
            imp.sync()
        finally:
            _core.set_decision_hook(None)
    return losses == want


def _recomputations(make_step, budget_fraction, evictee_minimum_size, which):
    """_watched_steps: whether the losses are the same, and the shapes of the records
    recomputed that `which(record)` picks."""
    picked = []
    same = _watched_steps(make_step, budget_fraction, evictee_minimum_size,
                          lambda action, info, clock: picked.append(info.shape)
                          if action == "recompute" and which(info) else None)
    return same, picked


def _ops_per_step(step):
    imp.sync()
    before = _core.memory_manager_stats()["clock"]
    float(step())
    imp.sync()
    return _core.memory_manager_stats()["clock"] - before


def _beside_reference(make, fraction, evictee_minimum_size=64 * 1024):
    """Two steps of a fresh `make()` under `fraction` of a step's peak (after one step
    without a budget), checked against the same steps of another run without DTR:
    (whether their losses are the same, the ops run under the budget, the recomputations,
    those repeated within one restore, the peak, the floor, the budget)."""
    reference = make()
    want = [float(reference()) for _ in range(5)][3:]     # the steps run under the budget
    step = make()
    float(step())
    with imp.option("record_computing_path", 1):
        ops = _ops_per_step(step)
    repeated = imp.memory_stats()["recomputes_repeated"]
    losses, recomputes, peak, floor, budget = _dtr_steps(
        step, fraction, evictee_minimum_size=evictee_minimum_size)
    repeated = imp.memory_stats()["recomputes_repeated"] - repeated
    return losses == want, ops * len(losses), recomputes, repeated, peak, floor, budget


def test_a_budget_under_the_floor_holds_the_floor_without_a_storm(async_level):
    """A small U-Net whose floor is above half its peak: each op used to evict all it could,
    the next op recomputed its inputs' whole history, 13 recomputations per op issued.
    Memory up to the highest floor seen is now left alone."""
    same, ops, recomputes, _, peak, floor, budget = _beside_reference(
        lambda: trainer("unet", batch=4, size=32), 0.5)
    assert same
    assert floor > budget                       # the point of the test: infeasible
    assert peak <= floor + (1 << 20)            # + the largest op's outputs (768 KiB)
    assert 0 < recomputes <= 3 * ops


def test_the_caller_running_ahead_does_not_multiply_recomputations(async_level):
    """At async level 2 the caller has issued the whole step, and dropped its tensors, before
    the worker runs the backward pass: evicted tensors that queued ops still read counted as
    unwanted, and a U-Net at 0.5 P recomputed 2.5x as often as at level 0."""
    if async_level != 2:
        pytest.skip("compares async levels 0 and 2 itself: runs once")
    counts = {}
    for level in (0, 2):
        with imp.option("async_level", level):
            step = trainer("unet")
            float(step())
            counts[level] = _dtr_steps(step, 0.5)[1]
    assert counts[0] > 0
    assert counts[2] <= 1.6 * counts[0]


def test_a_sequence_projection_that_every_step_is_sliced_from_comes_back_rarely(async_level):
    """A GRU computes the input's part of its gates for the whole sequence in one matmul
    and slices each time step's gates from it; the projection dies after the forward
    pass. Every gate that needs it back was costed with the class of all the dead slices
    of the sequence, as dear as any other value, and so evicted like any other: the
    projection came back 88 times in two steps at 0.8 P. Costed by the ancestors it
    really brings back, those gates stay."""
    config = dict(features=8, hidden=64, steps=32, batch=128)
    projection_bytes = config["batch"] * config["steps"] * 3 * config["hidden"] * 4
    same, projections = _recomputations(lambda: trainer("gru", **config), 0.8, 0,
                                        lambda info: info.size >= projection_bytes)
    assert same
    assert len(projections) <= 2                   # at most once a step


def test_a_dead_base_its_last_view_takes_away_stays_for_the_evicted_that_need_it(
        async_level, rng):
    """A GRU's projection dies after the forward pass, its memory kept by the time steps'
    slices (views); evicted gates need it to come back. When the last slice was dropped
    the memory went with it, and the zoo's GRU at 0.6 P recomputed the whole projection
    for each backward step that restored a gate (58 times a step, 5.7x the step time).
    Now the base is taken back as its last view goes, and restoring the gates reads it."""
    steps, width = 8, 4096
    x = imp.Tensor(rng.standard_normal((steps, 16), dtype=np.float32))
    w = imp.Tensor(rng.standard_normal((16, width), dtype=np.float32))
    want = [np.tanh(v) for v in np.split(x.numpy() @ w.numpy(), steps)]
    recomputed = []
    with _dtr_budget(1 << 40, 0), imp.option("enable_drop", 1):
        # (a slice cut again from the resident base is a view of it: no computation)
        _core.set_decision_hook(lambda action, info, clock: recomputed.append(info.shape)
                                if action == "recompute" and not info.producer.op.aliases_input
                                else None)
        try:
            slices = F.split(x @ w, steps, axis=0)
            gates = [F.tanh(s) for s in slices]
            imp.sync()
            for g in gates:
                g._drop()                      # evicted: each needs its slice, so the base
            del slices                         # the last views of the base go
            got = [g.numpy() for g in gates]
        finally:
            _core.set_decision_hook(None)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-5, atol=1e-6)
    assert (steps, width) not in recomputed             # the base was kept, not recomputed
    assert recomputed.count((1, width)) == steps        # each gate came back from its slice


def test_a_view_dropped_while_its_base_is_resident_leaves_the_base_writable(async_level,
                                                                            rng):
    """A slice that dies before its base does (`g[tap] = g[tap] + c`, a max-pool's
    backward) was dropped with a ghost, which marks the shared storage exported: every
    later in-place write into the base became a copy of it under DTR. The slice can be
    cut again from the resident base, so it needs no ghost; the writes stay in place, as
    with DTR off, and the values are the same."""
    c = [rng.standard_normal((512, 512), dtype=np.float32) for _ in range(4)]
    taps = [(slice(i, None, 2), slice(j, None, 2)) for i in range(2) for j in range(2)]

    def program():
        g = F.zeros((1024, 1024))
        for tap, part in zip(taps, c):
            g[tap] = g[tap] + imp.Tensor(part)
        return g.numpy()

    def reuses_of(run):
        before = imp.memory_stats()["inplace_reuses"]
        value = run()
        return value, imp.memory_stats()["inplace_reuses"] - before

    plain, plain_reuses = reuses_of(program)
    with _dtr_budget(1 << 40, 0):
        managed, managed_reuses = reuses_of(program)
    np.testing.assert_array_equal(managed, plain)
    if async_level:                  # (level 0 runs each op on the caller, never in place)
        assert plain_reuses >= len(taps)
    assert managed_reuses >= plain_reuses


def test_a_kept_leaf_that_buys_no_evictable_tensor_goes_when_room_is_needed(async_level,
                                                                           rng):
    """A dead leaf that recipes read stays while the tensors those recipes make could be
    evicted and outweigh it. In a ReLU MLP's backward each layer's gradient was such a
    leaf, kept for the next gradient, which the next op reads at once: two gradients stayed
    where one was needed. Where room is needed and the tensors it is kept for cannot be
    evicted now and weigh no more than it, it goes without a recomputation, instead of the
    budget passing."""
    size = 512
    w = imp.Tensor(rng.standard_normal((size, size), dtype=np.float32))
    g_value = rng.standard_normal((size, size), dtype=np.float32)
    want = ((imp.Tensor(g_value) @ w) * 2).numpy()          # (the same kernels, no DTR)
    with _dtr_budget(1 << 40, 0):
        g = imp.Tensor(g_value)
        h = g @ w                              # its recipe reads g
        h2 = g * 3                             # and so does this one's
        imp.sync()
        with_g = imp.memory_stats()["allocated"]
        del g                                  # kept: h and h2 could be evicted, and outweigh it
        imp.sync()
        assert imp.memory_stats()["allocated"] == with_g
        del h2                                 # dropped as it dies: h alone reads g now
        imp.sync()
        held = imp.memory_stats()["allocated"]
        imp.dtr.enable(eviction_threshold=held, evictee_minimum_size=0)
        imp.reset_peak_memory_stats()
        before = imp.memory_stats()
        k = h * 2                              # reads h: room for k is needed
        got = k.numpy()
        after = imp.memory_stats()
    np.testing.assert_array_equal(got, want)
    assert after["peak_allocated"] <= held       # g went instead of the budget passing
    assert after["evictions"] == before["evictions"]
    assert after["recomputes"] == before["recomputes"]
    assert after["budget_overshoots"] == before["budget_overshoots"]


def test_dense_dead_features_every_concatenation_reads_stay_under_a_binding_budget(
        async_level):
    """A DenseNet's features (small convolution outputs that every later concatenation
    reads) die as the forward pass ends; the concatenations, held for the backward pass,
    are evicted. Dropped at death, the features were recomputed each time a concatenation
    came back (18 convolutions in two steps at 0.5 P). Dense for their size and read by
    evicted or far-off tensors, they now stay as eviction candidates."""
    same, convolutions = _recomputations(lambda: trainer("densenet", batch=4), 0.5, 64 * 1024,
                                         lambda info: type(info.op).__name__ == "Convolution")
    assert same
    assert len(convolutions) <= 4


class Gate(Op):
    """x + 0 once `opened` is set: holds the worker, so that the ops issued after it wait in
    its queue (bounded: a broken test must not hang)."""

    _fields = ("opened",)

    def __init__(self, opened):
        self._set(opened=opened)

    def infer(self, inputs):
        return ((inputs[0].shape, inputs[0].dtype),)

    def kernel(self, x):
        self.opened.wait(30)
        return x + 0


def test_what_the_queue_reads_next_stays_and_what_it_reads_last_goes(async_level):
    """Ranked by staleness alone, the value made first goes first, though the next queued
    op reads it (a pooled U-Net feature read by four backward ops in a row was recomputed
    7 times a step). With the queue in view, the one read only at its end goes."""
    if async_level != 2:
        pytest.skip("sets async level 2 itself: runs once")
    x = imp.Tensor(np.arange(1 << 18, dtype=np.float32))          # 1 MiB, a leaf
    small = imp.Tensor(np.ones(4, np.float32))
    events, opened = [], threading.Event()
    with (imp.option("async_level", 2), imp.option("enable_drop", 1),
          imp.option("enable_host_compute", 0)):            # (all ops to the worker)
        read_next, read_last = x * 2.0, x * 3.0                  # made in this order
        imp.sync()
        with _dtr_budget(imp.memory_stats()["allocated"] + (1 << 19), 1 << 16):
            _core.set_decision_hook(lambda action, record, clock: events.append((action, record)))
            try:
                (held,) = imp.apply(Gate(opened), small)
                made = x * 4.0                                   # no room: one must go
                soon = read_next + 1.0
                for _ in range(20):
                    held = held * 2.0
                late = read_last + 1.0
                opened.set()
                got = [t.numpy() for t in (made, soon, late, held)]
            finally:
                opened.set()
                _core.set_decision_hook(None)
    base = np.arange(1 << 18, dtype=np.float32)
    for value, want in zip(got, (base * 4, base * 2 + 1, base * 3 + 1, np.full(4, 2.0 ** 20))):
        np.testing.assert_array_equal(value, want.astype(np.float32))
    evicted = [record for action, record in events if action == "evict"]
    assert evicted and evicted[0] is read_last._record


def test_data_put_while_the_worker_runs_takes_room_under_the_budget(async_level, rng):
    """A Tensor made from host data while the worker runs an op is budgeted as an op's
    output is: the caller waits for the queue and evicts before the value becomes resident
    (before, the room was made only when the worker was idle: the data passed the budget
    by its whole size)."""
    if async_level != 2:
        pytest.skip("sets async level 2 itself: runs once")
    n = 1 << 18                                                    # 1 MiB of float32
    base, data = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, np.float32)
    opened = threading.Event()
    with (imp.option("async_level", 2), imp.option("enable_drop", 1),
          imp.option("enable_host_compute", 0)):
        x = imp.Tensor(base)
        small = imp.Tensor(np.ones(4, np.float32))
        products = [x * float(k) for k in (2, 3, 4)]              # 3 MiB, evictable
        imp.sync()
        budget = imp.memory_stats()["allocated"] + (1 << 19)
        with _dtr_budget(budget, 1 << 16):
            imp.reset_peak_memory_stats()
            timer = threading.Timer(0.2, opened.set)               # (the caller may wait)
            timer.start()
            try:
                (held,) = imp.apply(Gate(opened), small)            # the worker is busy
                for _ in range(8):                     # (past the Del-folding buffer's 3)
                    held = held * 2.0
                arrived = imp.Tensor(data)
                got = [arrived.numpy(), held.numpy()] + [p.numpy() for p in products]
                imp.sync()
                stats = imp.memory_stats()
            finally:
                opened.set()
                timer.cancel()
    np.testing.assert_array_equal(got[0], data)
    np.testing.assert_array_equal(got[1], np.full(4, 256.0, np.float32))
    for value, k in zip(got[2:], (2, 3, 4)):
        np.testing.assert_array_equal(value, base * np.float32(k))
    assert stats["evictions"] >= 1
    # (peak_allocated: the put and the reads back, each within the budget)
    assert stats["peak_allocated"] <= budget + 16, (stats["peak_allocated"], budget)


def test_values_no_op_has_read_compete_when_read_ones_cannot_make_the_room(async_level, rng):
    """A value no op has read yet is evicted only when nothing read is left, unless the
    read values cannot make the room by themselves: then an unread one goes in any case,
    and the cheapest by score goes first. Kept apart, a round evicted every read value
    (an RNN's states, each brought back through the recurrence) before the unread buffer
    that alone made the room."""
    n = 1 << 18                                               # 1 MiB of float32
    base = rng.standard_normal(n, dtype=np.float32)
    factors = [(rng.standard_normal((64, 256), dtype=np.float32),
                rng.standard_normal((256, 64), dtype=np.float32)) for _ in range(4)]
    events = []
    with (imp.option("enable_host_compute", 0), imp.option("enable_drop", 1),
          imp.option("dtr_evictee_minimum_size", 0)):           # (recipes for them all)
        x = imp.Tensor(base)
        operands = [(imp.Tensor(a), imp.Tensor(b)) for a, b in factors]
        products = [a @ b for a, b in operands]                # 16 KiB each: dear
        sums = [p + 0.0 for p in products]                     # the products are read
        got_sums = [t.numpy() for t in sums]
        del sums                                               # (dropped as they die)
        cheap = x + 1.0                                        # 1 MiB, read by nothing yet
        imp.sync()
        with _dtr_budget(imp.memory_stats()["allocated"], 0):
            _core.set_decision_hook(lambda action, record, clock: events.append((action,
                                                                                 record)))
            try:
                made = x * 3.0                                 # no room: 1 MiB must go
                got = [made.numpy(), cheap.numpy()] + [p.numpy() for p in products]
            finally:
                _core.set_decision_hook(None)
    wants = [base * 3, base + 1] + [a @ b for a, b in factors]
    for value, want in zip(got[:2], wants[:2]):
        np.testing.assert_array_equal(value, want)
    for value, want in zip(got[2:], wants[2:]):
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got[2:], got_sums)           # (+ 0.0 changes no bit)
    evicted = [record for action, record in events if action == "evict"]
    assert evicted and evicted[0] is cheap._record              # the one that makes the room
    assert not {id(p._record) for p in products} & {id(r) for r in evicted}


def _embedding_bag_trainer():
    """unseen_models' embedding bag: a 5000 x 64 table averaged over 32 ids and a small MLP
    head (SGD, momentum): the table, its gradient and its momentum outweigh every
    activation."""
    return unseen_models.trainer("embed", vocab=5000, dim=64, hidden=64, seq=32, batch=64)


def test_a_value_the_next_op_reads_is_not_evicted_to_make_room(async_level):
    """The mean's backward broadcasts a (64, 1, 64) gradient to the lookup's (64, 32, 64),
    and the table's gradient (zeros, then a scatter-add of that broadcast) is allocated
    next. Making room for those zeros evicted the broadcast, which the very next op reads:
    it came back at once, through the lookup recomputed, and the step peaked 0.5 MiB
    above the same step without DTR."""
    reference = _embedding_bag_trainer()
    want = [float(reference()) for _ in range(3)][2:]
    step = _embedding_bag_trainer()
    float(step())
    losses, _, peak, _, budget = _dtr_steps(step, 0.9, steps=1)
    assert losses == want
    # never above the run without DTR: within 16 bytes (at async level 2 one 0-d value,
    # 4 bytes, outlives its twin of the run without DTR; before, 512 KiB above)
    assert peak <= budget / 0.9 + 16


def _lstm_trainer():
    imp.random.seed(0)
    model = LSTM(8, 64)
    x = imp.Tensor(np.random.default_rng(0).standard_normal((64, 16, 8), dtype=np.float32))
    labels = imp.Tensor(np.arange(64, dtype=np.int32) % 10)
    train = training_step(model, optim.SGD(model.parameters(), 0.02))
    return lambda: train(x, labels)


def test_the_gates_a_view_of_one_pre_activation_bring_it_back_once(async_level):
    """Four gates are views of one pre-activation: recomputing the first of them brought it
    back, and it was dropped while that gate's view still shared its storage (dropping it
    freed nothing), so each of the other gates recomputed it, and the two products it is
    the sum of, again: 166-188 recomputations of the pre-activations in two steps of 16
    time steps at 0.5 P, 62-165 now. How many come back depends on the costs measured
    (machine and test order), so the test counts the rule's own mistake instead: a
    pre-activation dropped while a view still holds its storage. That happens once per
    time step, when the forward pass lets it go (its views keep the bytes, and it is
    taken back from them for free), and never on the way of a recomputation."""
    shared_drops, sums_back = [], []

    def watch(action, info, clock):
        if info.shape == (64, 256) and type(info.op).__name__ == "Elemwise":
            if action == "drop_dead" and info.storage is not None and info.storage.refs > 1:
                shared_drops.append(clock)
            elif action == "recompute":
                sums_back.append(clock)

    assert _watched_steps(_lstm_trainer, 0.5, 16 * 1024, watch)
    assert sums_back                                   # the point: they do come back
    assert len(shared_drops) <= 2 * 16                 # 2 steps x 16 time steps


@pytest.mark.parametrize("fraction", [0.4, 0.3])
def test_a_recurrence_brought_back_through_its_history_ends_without_a_storm(fraction,
                                                                          async_level):
    """Under 0.4 P the backward pass of a small LSTM brings a time step's gates back
    through the whole recurrence before them. Two things made that a storm of 300,000
    recomputations a step (2,000x the step): the clock ticked for every recomputation,
    so that a deep one aged the values the next ops read until they were evicted in
    turn; and each level of the recomputation could start over once before it pinned
    what it had, twice the work per level, 1.6 million values brought back for one op."""
    same, ops, recomputes, _, peak, floor, budget = _beside_reference(
        _lstm_trainer, fraction, evictee_minimum_size=16 * 1024)
    assert same
    # (0.7-2.7 an op seen on session 16's code, up to 4.4 since the dead-value rules of
    # session 17 in a cold process; the storm was thousands)
    assert 0 < recomputes <= 6 * ops
    assert peak <= max(budget, floor) + 64 * 1024        # + the largest op's outputs


def test_a_floor_that_climbs_through_the_backward_pass_is_remembered_across_steps(
        async_level):
    """A GRU holds the gradients of its sequence's slices until the split's backward
    joins them, so its floor climbs through the backward pass, past the budget at 0.5 P.
    The memory up to the highest floor seen was left alone only until the peak
    statistics were reset, which a training loop may do every step: every step then
    evicted, op after op, all there was above the floor the op had just raised (20
    recomputations per op issued; 30x the step time on the zoo's GRU). Remembered since
    the budget was set, only the first step under the budget pays for finding it, and
    it pays little: what memory the peak has reached since the budget was set is left
    alone (7-15 recomputations per op in the first step before, about 1 now)."""
    step = trainer("gru", features=8, hidden=64, steps=32, batch=128)
    float(step())
    with imp.option("record_computing_path", 1):
        ops = _ops_per_step(step)
    budget = int(0.5 * _step_peak(step))
    recomputes = []
    with _dtr_budget(budget, 16 * 1024):
        for _ in range(3):
            imp.reset_peak_memory_stats()
            start = imp.memory_stats()["recomputes"]
            float(step())
            imp.sync()
            stats = imp.memory_stats()
            recomputes.append(stats["recomputes"] - start)
            assert stats["peak_floor"] > budget                   # the point: infeasible
            # within the floor (the highest seen, where the statistics start) + the
            # largest op's outputs (the sequence's input projection, 3 MiB)
            assert stats["peak_allocated"] <= stats["peak_floor"] + 128 * 32 * 3 * 64 * 4
    assert recomputes[0] <= 2 * ops                       # (0.7-1.1 an op seen; 7-15 before)
    assert max(recomputes[1:]) <= ops                     # (0.1-0.2 an op seen; 20 before)


def _gated_trainer():
    """unseen_models' SwiGLU MLP: each layer's product split in halves, both kept for the
    backward pass (silu's input and the product's other factor): views of one storage."""
    return unseen_models.trainer("gated", width=64, depth=6, batch=512)


def test_the_halves_of_a_split_product_are_evicted_together(async_level):
    """Evicting one view of a storage another view still holds frees nothing, so the two
    halves of each layer's product stayed in the floor: at 0.5 P the floor was above the
    budget (1.06x here, with session 32's rules) and every op overshot. Now the values
    sharing a storage are evicted together: the budget holds, the losses are the same."""
    together = []
    same = _watched_steps(_gated_trainer, 0.5, 64 * 1024,
                          lambda action, info, clock: together.append(info.shape)
                          if action == "evict_sharer" else None)
    assert same
    assert together                                    # the point: the halves did go
    step = _gated_trainer()
    float(step())
    losses, recomputes, peak, floor, budget = _dtr_steps(step, 0.5)
    assert floor <= budget
    assert peak <= budget + (512 * 256 * 4)            # + the largest op's outputs


def _dropout_trainer():
    return unseen_models.trainer("dropout", width=128, depth=6, batch=512)


def test_dropout_masks_are_recomputed_from_one_byte_an_element(async_level):
    """A dropout mask cannot be recomputed (an RNG op): the float32 masks a dropout MLP's
    backward pass keeps were all floor, above a 0.5 P budget (1.20x here, with session
    32's masks), and every op overshot. The masks are drawn boolean now, and the float32
    copies the products keep are recomputed from them."""
    step = _dropout_trainer()
    float(step())
    losses, recomputes, peak, floor, budget = _dtr_steps(step, 0.5)
    reference = _dropout_trainer()
    assert losses == [float(reference()) for _ in range(4)][2:]
    assert floor <= budget
    assert peak <= budget + 512 * 128 * 4              # + the largest op's outputs


def _qkv_views(x, heads):
    """An attention block's query, key and value from one projection `x` (b, s, 3 d):
    a reshape, a transpose and a split cut them, views of one storage (models.py's)."""
    b, s, width = x.shape
    qkv = F.transpose(F.reshape(F.exp(x), (b, s, 3, heads, width // (3 * heads))),
                      (2, 0, 3, 1, 4))
    return [F.squeeze(t, 0) for t in F.split(qkv, 3, axis=0)]


def test_views_cut_through_dead_views_go_and_come_back_together(async_level):
    """The reshape, transpose and split between a projection and its three views die
    while the projection is still resident, so they keep no ghost: through them the
    views never found each other, and none of them was ever evictable (a vision
    transformer's floor held them: 1.5 of its 6.4 MiB budget at 0.5 P). Now they go
    together, and reading one brings the others back beside it, as views of its new
    storage, instead of each recomputing the projection in turn."""
    x = imp.Tensor(np.random.default_rng(4).standard_normal((2, 64, 96)).astype(np.float32))
    with _dtr_budget(1, 0):                            # evict whatever can go
        views = _qkv_views(x, heads=2)
        want = [v.numpy().copy() for v in views]
        (F.exp(x) * 2.0).numpy()                       # an op that needs room
        assert [_core.tensor_status(v) for v in views] == ["DROPPED"] * 3
        recomputes = imp.memory_stats()["recomputes"]
        views[0].numpy()
        assert [_core.tensor_status(v) for v in views] == ["PRODUCED"] * 3
        assert imp.memory_stats()["recomputes"] - recomputes <= 10   # exp once, views
        for v, expected in zip(views, want):
            assert np.array_equal(v.numpy().view(np.uint32), expected.view(np.uint32))


def test_a_vision_transformers_query_key_and_value_are_evictable(async_level):
    """unseen_models' vision transformer at 0.5 P: its attention's query, key and value
    (16, 2, 64, 16) go together, the losses are the same, the budget holds."""
    together = []
    make_step = lambda: unseen_models.trainer("vit", patch=4, dim=32, heads=2,  # noqa: E731
                                              blocks=2, batch=16, size=32)
    same = _watched_steps(make_step, 0.5, 16 * 1024,
                          lambda action, info, clock: together.append(info.shape)
                          if action == "evict_sharer" else None)
    assert same
    assert (16, 2, 64, 16) in together                 # the point: the views did go
    step = make_step()
    float(step())
    losses, recomputes, peak, floor, budget = _dtr_steps(step, 0.5,
                                                         evictee_minimum_size=16 * 1024)
    assert floor <= budget
    assert peak <= budget + 16 * 2 * 64 * 64 * 4       # + the largest op's outputs


def test_an_op_written_over_its_dying_input_makes_no_room_for_it():
    """An op that writes its output over a dying input's storage allocates nothing: under a
    budget it used to make room for that output all the same, evicting a value a later op
    then recomputed (an attention block's softmax gradient, written over its 4 MiB input,
    evicted the block's gradients: 128 recomputations a step at 0.5 P where 41 do now)."""
    mib = 1 << 18                                   # float32 elements in 1 MiB
    with imp.option("async_level", 2), imp.option("buffer_length", 3):
        with _dtr_budget(1 << 40, 0):               # (recorded: evictable)
            a = imp.Tensor(np.arange(mib, dtype=np.float32))
            kept = [a + float(i) for i in range(3)]     # recomputed from a
            imp.sync()
            imp.set_option("dtr_eviction_threshold", imp.memory_stats()["allocated"] + (5 << 18))
            stats = imp.memory_stats()
            b = a * 2.0                             # fits: 1 MiB of the 1.25 left
            c = b + 1.0                             # b's last reader
            del b                                   # ... which may write over it
            imp.sync()
            after = imp.memory_stats()
            assert after["inplace_reuses"] == stats["inplace_reuses"] + 1
            assert after["evictions"] == stats["evictions"]     # the point
            assert [_core.tensor_status(k) for k in kept] == ["PRODUCED"] * 3
            d = a - 1.0                             # a new 1 MiB: the budget binds
            imp.sync()
            assert imp.memory_stats()["evictions"] > after["evictions"]
            np.testing.assert_array_equal(c.numpy(), np.arange(mib, dtype=np.float32) * 2 + 1)
            np.testing.assert_array_equal(d.numpy(), np.arange(mib, dtype=np.float32) - 1)
            for i, k in enumerate(kept):
                np.testing.assert_array_equal(k.numpy(), np.arange(mib, dtype=np.float32) + i)



@pytest.mark.parametrize("read", [False, True])
def test_the_last_view_of_a_dead_base_costs_the_bases_history(async_level, read):
    """Evicting the last view of a dead base takes the base's memory with it: bringing it
    back recomputes the base and what the base was made from. Such a view was scored as if
    the base were still free to take back from the view. Unread (as a section of a
    gradient's split that a queued backward op is about to read), the last section of an
    Inception block's gradient split looked as cheap as the split itself (5 us against 14
    ms to replay the 77 ops behind it) and was evicted every step, each time replaying the
    forward and backward passes up to it. Read (a ConvNeXt block's channels-last
    transpose of a layer norm's gradient, read by the next backward op), it looked as cheap
    as the transpose, and its restore replayed the forward pass and the backward pass to
    it: 81 recomputations at once, 1.70x the step at 0.5 P. A value as large, as fresh
    (both read alike) and far cheaper to recompute goes first."""
    mib = 1 << 18                                      # float32 elements in 1 MiB
    x = imp.Tensor(np.linspace(-1, 1, 3 * mib, dtype=np.float32).reshape(3, mib))
    with _dtr_budget(1 << 40, 0):
        cheap = F.exp(x[0])                            # one op from a resident leaf
        history = x
        for _ in range(12):                            # a dear history behind the base
            history = F.tanh(history * 1.5)
        last, *others = F.split(history, 3, axis=0)    # views of the base's storage
        del history, others                            # dead: the base lies in `last`
        if read:                                       # (an op's read; numpy's is none)
            F.sum(last).numpy(), F.sum(cheap).numpy()
        want = last.numpy().copy(), cheap.numpy().copy()
        imp.sync()
        imp.set_option("dtr_eviction_threshold", imp.memory_stats()["allocated"])
        (x[1] + 1.0).numpy()                           # needs room for 1 MiB
        assert _core.tensor_status(cheap) == "DROPPED"
        assert _core.tensor_status(last) == "PRODUCED"   # the point
        assert np.array_equal(last.numpy(), want[0])
        assert np.array_equal(cheap.numpy(), want[1])


def test_the_last_view_of_a_dead_base_is_scored_for_the_bases_bytes():
    """Evicting the last view of a dead base frees the base's whole storage: h_DTR^eq's
    score is a cost per byte freed, so the view is scored for those bytes, not for its own
    (a GRU's hidden-gate section, a third of the product it was cut from, scored for a
    third of the bytes its eviction frees, looked dearer than the 24 MiB input projection
    of the whole sequence, which then went and came back every time step). Scored so, the
    view's score is its base's, plus the view's own cost, over the same bytes."""
    def score_of(t):
        (score, gap), = [(c[1], c[3]) for c in _core.candidate_scores()
                         if c[0].handle == t._handle]
        return score * gap          # (the gap is the staleness here: it grows with time)

    x = imp.Tensor(np.linspace(-1, 1, 1 << 20, dtype=np.float32).reshape(4, 1 << 18))
    with _dtr_budget(1 << 40, 0):
        base = F.tanh(x * 1.5)
        imp.sync()
        alone = score_of(base)
        view = base[0]              # a quarter of the base's storage
        del base                    # dead: its value lies in the view's storage
        imp.sync()
        assert score_of(view) == pytest.approx(alone, rel=0.5)   # (not four times it)


@pytest.mark.parametrize("activation", ["sigmoid", "silu", "gelu", "erf", "softplus"])
def test_an_activation_written_over_its_dying_input_allocates_nothing(activation):
    """The memory manager makes no room for an elementwise op's output written over a
    dying input (_bytes_to_allocate), so the kernel must write it there: the native
    activations returned a new array instead, one output's bytes the manager never heard
    of (a highway network's sigmoid of `t(x) - 1` held every later step at 0.5 P one
    output above its floor). At async level 2, where the worker runs the op after the
    caller has let go of `x - 1.0` (at level 0 the call's own frame still holds it)."""
    x = imp.Tensor(np.linspace(-3, 3, 1 << 17, dtype=np.float32).reshape(512, 256))
    want = getattr(F, activation)(x - 1.0).numpy()
    with imp.option("async_level", 2), _dtr_budget(1 << 40, 0):
        imp.sync()
        imp.reset_peak_memory_stats()
        before = imp.memory_stats()["allocated"]
        y = getattr(F, activation)(x - 1.0)
        imp.sync()
        assert imp.memory_stats()["peak_allocated"] - before == 512 * 256 * 4   # one output
        np.testing.assert_array_equal(y.numpy(), want)


def _coupled_leaky_trainer(time_steps, width=128):
    """Two coupled leaky recurrences over `time_steps` (tests/seventh_models.py's spiking
    network with a sigmoid for the spike): the potentials v1, v2 are dead once the next
    step has read them (no backward rule reads them), so bringing back a late time step's
    sigmoid recomputes them from the first step on, a chain of cheap ops."""
    imp.random.seed(0)
    l1, l2 = nn.Linear(width, width), nn.Linear(width, width)
    params = l1.parameters() + l2.parameters()
    x = imp.Tensor(np.random.default_rng(0).standard_normal((width, width), dtype=np.float32))
    gm = GradManager().attach(params)
    opt = optim.SGD(params, 0.01)

    def step():
        with gm:
            cur = l1(x)
            v1 = s1 = v2 = s2 = F.zeros((width, width))
            total = 0.0
            for _ in range(time_steps):
                v1 = 0.9 * v1 + cur - s1
                s1 = F.sigmoid(5.0 * (v1 - 1.0))
                v2 = 0.9 * v2 + l2(s1) - s2
                s2 = F.sigmoid(5.0 * (v2 - 1.0))
                total = total + s2
            loss = F.mean(total * total)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        return loss
    return step


def test_a_restore_keeps_what_its_recipes_will_still_read(async_level):
    """A restore recomputes a chain one recipe at a time. What its recipes read was read
    by no queued op, so its gap reached to the end of the queue and it was evicted first,
    just before its turn; and a value brought back on the way was dropped once no recipe
    waiting on the stack read it, though one pushed later would: under 0.7 P the 14-step
    coupled recurrence recomputed 40,000 values a step, 39,500 of them twice in one
    restore (164 an op at async level 2; 0.67 s against 7 ms unconstrained); now 0.2-2.3
    an op, as many as the costs measured make it (machine and test order)."""
    same, ops, recomputes, _, peak, floor, budget = _beside_reference(
        lambda: _coupled_leaky_trainer(14), 0.7)
    assert same
    assert 0 < recomputes <= 8 * ops
    assert peak <= max(budget, floor) + 64 * 1024        # + the largest op's outputs


def test_a_dead_value_is_read_when_an_evicted_tensor_that_needs_it_is(async_level):
    """A value only recipes read (dead, kept resident by a restore) is read next when the
    first evicted tensor that needs it is, and at async level 2 the queued backward pass
    tells when (MemoryManager.gap, _keeping.pxi: _gap_of_evicted_readers). As fresh as
    every other value the restore brought back, the spiking network's potentials were
    evicted in the order they came back, and the recurrence was recomputed from its first
    step for each spike restored: at its bench size under 0.3 P, the two steps after the
    first under the budget recomputed 6,250 values a step (now 3,900-4,000)."""
    if async_level != 2:
        pytest.skip("the queued ops tell when an evicted tensor is read: async level 2")
    reference = seventh_models.bench_trainer("lif")
    want = [float(reference()) for _ in range(5)][3:]
    step = seventh_models.bench_trainer("lif")
    float(step())
    budget = int(0.3 * _step_peak(step))
    with _dtr_budget(budget, 64 * 1024):
        float(step())
        start = imp.memory_stats()["recomputes"]
        losses = [float(step()) for _ in range(2)]
        imp.sync()
        recomputes = imp.memory_stats()["recomputes"] - start
    assert losses == want
    assert 0 < recomputes <= 2 * 5000


def test_a_restore_keeps_the_small_values_its_recipes_will_still_read(async_level):
    """The same for values under the evictee minimum, which are never candidates: a
    pointer network's LSTM states (32 KiB) that two recipes of one restore read were
    dropped after the first and recomputed, with the recurrence behind them, for the
    second, at every decoder step: 1.7-2.2 recomputations an op, 1.2-1.7 of them repeats
    inside one restore, where now 0.4-0.5 and 0.04-0.05 (the measured costs steer the
    choices: once on a loaded machine 1.3 recomputations an op, and once in the whole
    suite's order at async level 0, whose earlier tests leave other costs, 0.49 repeats)."""
    same, ops, recomputes, repeated, peak, floor, budget = _beside_reference(
        lambda: eighth_models.trainer("pointer", features=4, hidden=128, n=12, batch=64), 0.5)
    assert same
    assert 0 < recomputes <= 2 * ops
    assert repeated <= 0.6 * ops                   # (the old code: 1.2 an op and more)
    assert peak <= max(budget, floor) + (1 << 20)         # + the largest op's outputs


def test_a_split_whose_dead_outputs_come_back_one_at_a_time_keeps_its_input(async_level):
    """The same pointer network with its gates (128 KiB) under the evictee minimum too: an
    LSTM splits its four gates from one pre-activation, and a dead gate comes back alone,
    running the split again (_recompute brings back only the outputs a tensor holds). A
    restore counted one read of the pre-activation for the split, dropped it after the
    first gate and recomputed it, with the recurrence behind it, for each other gate:
    5.4-9.4 recomputations an op, 4.8-8.7 of them repeats (now 1.3-1.6 and 0.5-1.0)."""
    same, ops, recomputes, repeated, peak, floor, budget = _beside_reference(
        lambda: eighth_models.trainer("pointer", features=4, hidden=128, n=12, batch=64),
        0.5, evictee_minimum_size=256 * 1024)
    assert same
    assert 0 < recomputes <= 3.5 * ops
    assert repeated <= 2 * ops
    assert peak <= max(budget, floor) + (1 << 20)


def test_a_restore_that_brings_a_value_back_twice_pins_what_it_will_still_read(async_level):
    """A restore whose working set does not fit evicts what it has just brought back and
    will read again: a spiking network (seventh_models' at its test size: 4 KiB values, a
    4 KiB evictee minimum, 0.5 P, under its floor) recomputed 40-80 values an op, 35-78 of
    them a second time within one restore. Once a restore brings a value back twice, it
    pins each value it will still read until that read (4-7 an op, about one repeat)."""
    same, ops, recomputes, repeated, peak, floor, budget = _beside_reference(
        lambda: seventh_models.trainer("lif"), 0.5, evictee_minimum_size=4096)
    assert same
    assert 0 < recomputes <= 15 * ops
    assert repeated <= 3 * ops                    # (the old code: 35 an op and more)
    assert peak <= max(budget, floor) + (1 << 20)


def test_a_value_a_restore_brought_back_and_lost_is_walked_again(async_level):
    """A restore evicts a value it has brought back (a weight's gradient, waiting beside
    the other input of its reader): bringing it back again runs the recipes behind it
    again, whose reads were counted down on their first run. Walked again, their values
    stay until those reads; uncounted, each was dropped after its first read and
    recomputed with its history for the next: Show, Attend and Tell (tenth_models' at its
    test size, values under a 4 KiB evictee minimum, 0.7 P) recomputed 5,086 values in
    its first step at async level 0, 4,782 of them repeats (now about 400 and 90)."""
    same, ops, recomputes, repeated, peak, floor, budget = _beside_reference(
        lambda: tenth_models.trainer("showattend"), 0.7, evictee_minimum_size=4096)
    assert same
    assert recomputes <= ops // 2                 # (the old code: 3.3 an op)
    assert repeated <= ops // 10
    assert peak <= max(budget, floor) + (64 << 10)


def test_a_round_that_runs_out_of_victims_measures_the_floor_it_leaves(async_level):
    """A round of evictions measures the floor as it starts (what is resident, less what it
    ranks evictable), but a value ranked so may not be evictable by its turn: another
    thread began to read it (pinned here by the decision hook, at the round's first
    eviction). What stays when the round runs out of victims is the floor at that moment;
    measured only at the start, the peak broke rule 1 by what stayed (a Siamese pair at
    async level 2 on a loaded machine: its 1 MiB product ran 16 KiB above that floor)."""
    elements = 1 << 18                                   # 1 MiB of float32
    x = imp.Tensor(np.ones(elements, np.float32))
    pinned = []

    def pin_the_others(action, record, clock):
        if action == "evict" and not pinned:
            for other, *_ in _core.candidate_scores():
                if other is not record:
                    other.pins += 1
                    pinned.append(other)

    with _dtr_budget(1 << 40, 0):
        values = [x * float(i) for i in range(6)]
        imp.sync()
        imp.set_option("dtr_eviction_threshold", 4 << 20)    # 7 MiB resident
        imp.reset_peak_memory_stats()
        _core.set_decision_hook(pin_the_others)
        try:
            y = x + 1.0
            imp.sync()
        finally:
            _core.set_decision_hook(None)
            for other in pinned:
                other.pins -= 1
        stats = imp.memory_stats()
    assert len(pinned) == 5
    assert stats["peak_allocated"] <= max(4 << 20, stats["peak_floor"]) + (1 << 20)
    np.testing.assert_array_equal(y.numpy(), 2.0)
    for i, v in enumerate(values):
        np.testing.assert_array_equal(v.numpy(), float(i))


def test_a_restore_of_a_long_recurrence_counts_every_read_to_come(async_level):
    """An mLSTM of two blocks over 32 tokens (tests/eighteenth_models.py) under 0.5 P, 4 KiB
    evictee minimum: a restore behind one of its gradients replays both blocks'
    recurrences, more than a thousand records. The walk counting what those recipes will
    read stopped at 1,024 records; the reads past it went uncounted, and their values were
    dropped after their first read and recomputed, with the chain behind them, for each
    later one: 3,026 of 6,189 recomputations were repeats within one restore (async level
    0; 5,681 of 9,492 at level 2); now about 220 of 3,400."""
    same, ops, recomputes, repeated, peak, floor, budget = _beside_reference(
        lambda: eighteenth_models.trainer("mlstm", layers=2, seq=32), 0.5, 4096)
    assert same
    # (at level 2 the worker's timing moves the choices: 4-15% repeats in runs of the
    # suite, and 30-41% in 3 runs of 10, with one of 10,874 recomputations, with another
    # process multiplying matrices beside it on this 2-core machine; the same on session
    # 62's code, 4 runs of 12 failing the bounds of ops // 2 and a quarter)
    assert 0 < recomputes <= (ops // 2 if async_level == 0 else ops)
    assert repeated <= recomputes // (8 if async_level == 0 else 2)
