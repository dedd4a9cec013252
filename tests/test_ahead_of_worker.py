"""Values made on the caller's thread beside a busy worker (imperative/_tiny.pxi,
_may_run_ahead): such a value exists from the moment it is made until the queued op that
reads it runs, however far behind the worker is, so the peak at async level 2 could pass the
program's own (its peak at level 0) by every value made ahead of the worker. They are allowed
a sixteenth of the allocated bytes, or 1 MiB: beyond that an op is queued and made where the
program made it.

Each program keeps the worker busy with a large product, then makes values on the caller's
thread (fills, elementwise ops on resident tensors, random draws, small products) that only
queued ops read, and lets them go: on the old code each stayed until the worker reached its
reader (40 x 256 KiB past the level-0 peak)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import functional as F

MiB = 1 << 20
SHAPE = (256, 256)                  # 256 KiB of float32: host compute takes each such op
ROUNDS = 40


def _ahead_allowance(peak):
    return max(MiB, peak // 16)


def _made_on_the_caller(kind, i, leaf):
    if kind == "fill":
        return F.full(SHAPE, float(i))
    if kind == "elementwise":
        return leaf * float(i)
    if kind == "random":
        return imp.random.normal(size=SHAPE)
    if kind == "product":
        return leaf[:, :2] @ leaf[:2, :]    # (256, 256) of few flops: the caller's too
    raise ValueError(kind)


def _busy_worker(seed, n):
    """An (n, n) matrix, its product with itself that the worker is computing (tens of ms)
    and a resident (256, 256) leaf; the peak is reset and the RNG seeded after their data.
    (The caller holds the matrix, as a program holds its data.)"""
    rng = np.random.default_rng(seed)
    big = imp.Tensor(rng.standard_normal((n, n), dtype=np.float32))
    leaf = imp.Tensor(rng.standard_normal(SHAPE, dtype=np.float32))
    imp.sync()
    imp.reset_peak_memory_stats()
    imp.random.seed(seed)
    return big, big @ big, leaf


def _program(kind, seed):
    """The sum of ROUNDS values made while the worker computes a large product, each read
    only by the queued sum that follows it."""
    big, busy, leaf = _busy_worker(seed, 1200)
    total = busy[:256, :256] * 0
    for i in range(ROUNDS):
        total = total + _made_on_the_caller(kind, i, leaf)
    result = total.numpy()
    return result, imp.memory_stats()["peak_allocated"]


# (each test sets the async levels it compares: run once, not at both levels)
@pytest.mark.parametrize("async_level", [2])
@pytest.mark.parametrize("kind", ["fill", "elementwise", "random", "product"])
def test_values_made_beside_a_busy_worker_hold_a_small_share_of_memory(kind, async_level):
    with imp.option("async_level", 0):
        expected, peak_in_order = _program(kind, 5)
    with imp.option("async_level", 2):
        got, peak = _program(kind, 5)
    np.testing.assert_array_equal(got, expected)
    assert peak <= peak_in_order + _ahead_allowance(peak), (peak, peak_in_order)


@pytest.mark.parametrize("async_level", [2])
def test_under_a_budget_above_the_programs_peak_nothing_is_evicted(async_level):
    """The values made ahead took the worker's room under a budget the program itself
    never reaches, and it evicted (an mLSTM's backward pass at 0.5 P: 1,385 recomputations
    of values already brought back, a step)."""
    with imp.option("async_level", 0):
        expected, peak_in_order = _program("fill", 9)
    budget = peak_in_order + 2 * _ahead_allowance(peak_in_order)
    with imp.option("async_level", 2), imp.option("dtr_evictee_minimum_size", 0), \
            imp.option("dtr_eviction_threshold", budget), imp.option("enable_dtr_auto_drop", 1):
        before = imp.memory_stats()["evictions"]
        got, peak = _program("fill", 9)
        evictions = imp.memory_stats()["evictions"] - before
    np.testing.assert_array_equal(got, expected)
    assert evictions == 0
    assert peak <= budget


@pytest.mark.parametrize("async_level", [2])
def test_beside_a_busy_worker_values_are_made_here_up_to_the_allowance_then_queued(async_level):
    """The allowance is no ban: the first values are made at once on this thread, the
    ones past it queued behind the product; once the worker is idle, values are made here
    again whatever was made ahead before (it is the program's own by then)."""
    rng = np.random.default_rng(3)
    big = imp.Tensor(rng.standard_normal((1200, 1200), dtype=np.float32))
    leaf = imp.Tensor(rng.standard_normal(SHAPE, dtype=np.float32))
    with imp.option("async_level", 2):
        imp.sync()
        busy = big @ big
        kept = [leaf * float(i) for i in range(ROUNDS)]
        made_here = [imp._core.tensor_status(t) == "PRODUCED" for t in kept]
        busy.numpy()
        imp.sync()
        after = [leaf * float(i) for i in range(ROUNDS)]
        made_here_after = [imp._core.tensor_status(t) == "PRODUCED" for t in after]
    value = leaf.numpy()
    for i, t in enumerate(kept + after):
        np.testing.assert_array_equal(t.numpy(), value * np.float32(i % ROUNDS))
    allowed = MiB // (SHAPE[0] * SHAPE[1] * 4)          # big, busy and leaf: 11 MiB < 16 MiB
    assert 1 <= sum(made_here) <= allowed < ROUNDS
    assert all(made_here_after)


KINDS = ["fill", "elementwise", "random", "product"]


def _random_program(steps, seed):
    """Values made on the caller (`steps`: kind, slot, whether a queued op reads it) while
    the worker computes, kept in slots or summed into the first, which waits for the
    worker; returns the slots' values and the peak."""
    big, busy, leaf = _busy_worker(seed, 1000)
    slots = [busy[:256, :256] * 0, leaf * 1]
    for i, (kind, slot, summed) in enumerate(steps):
        made = _made_on_the_caller(kind, i, leaf)
        if summed:
            slots[0] = slots[0] + made               # a queued op reads it (slot 0 waits
        elif len(slots) < 6:                         # for the product)
            slots.append(made)                       # the program keeps it
        else:
            slots[1 + slot % 5] = made               # and lets an older one go
    values = [t.numpy() for t in slots]
    return values, imp.memory_stats()["peak_allocated"]


@pytest.mark.parametrize("async_level", [2])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 5), st.booleans()),
                      min_size=1, max_size=40),
       seed=st.integers(0, 2**16))
def test_random_programs_peak_within_the_allowance_of_their_own_order(async_level, steps,
                                                                      seed):
    with imp.option("async_level", 0):
        expected, peak_in_order = _random_program(steps, seed)
    with imp.option("async_level", 2):
        got, peak = _random_program(steps, seed)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert peak <= peak_in_order + _ahead_allowance(peak), (peak, peak_in_order)
