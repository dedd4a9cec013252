"""The memory manager behind its hooks (docs/design.md, "The memory manager's hooks"): it
decides by a snapshot of the options that every set_option refreshes, and a recomputation
stores its results the way a first run does (views, several outputs, bit for bit)."""
import gc

import numpy as np
import pytest

import imperative as imp

N = 50000      # elements: 200 KB float32


@pytest.fixture
def dtr():
    """DTR on at async level 0 (every op runs at the call: evictions are counted at once),
    with nothing evicted until a test lowers the threshold."""
    with imp.option("async_level", 0), imp.option("enable_drop", 1), \
            imp.option("dtr_eviction_threshold", 1 << 40), \
            imp.option("dtr_evictee_minimum_size", 1024), \
            imp.option("record_computing_path", 1), imp.option("enable_dtr_auto_drop", 1):
        yield
    gc.collect()


def evictions():
    imp.sync()
    return imp.memory_stats()["evictions"]


def chain(x, n):
    """x, then n elementwise steps of it, every one kept (so that the budget must evict)."""
    out = [x]
    for i in range(n):
        out.append(out[-1] * 1.5 + i)
    return out


def numpy_chain(x, n):
    """chain(x, n) twice over, in numpy: x's n steps, then n more from the last one."""
    out = [x]
    for i in list(range(n)) * 2:
        out.append(out[-1] * np.float32(1.5) + np.float32(i))
    return out


def test_a_threshold_set_between_ops_decides_the_next_op(dtr):
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    before = evictions()
    kept = chain(imp.Tensor(x), 4)
    assert evictions() == before               # the budget is far away
    imp.set_option("dtr_eviction_threshold", 3 * N * 4)
    more = chain(kept[-1], 4)
    assert evictions() > before                # the next ops saw the new threshold
    for got, want in zip(kept + more[1:], numpy_chain(x, 4)):
        np.testing.assert_array_equal(got.numpy(), want)


def test_the_evictee_minimum_set_between_ops_decides_what_may_go(dtr):
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)
    imp.set_option("dtr_evictee_minimum_size", 2 * N * 4)      # every value too small to go
    imp.set_option("dtr_eviction_threshold", 3 * N * 4)
    before = evictions()
    kept = chain(imp.Tensor(x), 4)
    assert evictions() == before
    imp.set_option("dtr_evictee_minimum_size", 1024)
    more = chain(kept[-1], 4)
    assert evictions() > before
    for got, want in zip(kept + more[1:], numpy_chain(x, 4)):
        np.testing.assert_array_equal(got.numpy(), want)


def test_a_recomputed_split_brings_back_each_output_bit_for_bit(dtr):
    x = np.random.default_rng(2).standard_normal((4, N // 4)).astype(np.float32)
    base = imp.F.exp(imp.Tensor(x))
    parts = imp.F.split(base, 2, axis=0)
    wants = [p.numpy().copy() for p in parts]
    del base
    for p in parts:
        p._drop()
    for p, want, expected in zip(parts, wants, np.split(np.exp(x), 2, axis=0)):
        np.testing.assert_array_equal(p.numpy(), want)
        np.testing.assert_allclose(p.numpy(), expected, rtol=1e-6)


def test_a_recomputed_view_of_a_dead_base_is_a_copy_with_the_views_strides(dtr):
    x = np.random.default_rng(3).standard_normal((64, N // 64)).astype(np.float32)
    base = imp.F.exp(imp.Tensor(x))
    view = base[:8, ::2]             # an eighth of the rows, every other column: strided
    want = view.numpy().copy()
    del base                         # the base's record lives on only in the view's recipe
    view._drop()
    allocated = imp.memory_stats()["allocated"]
    got = view.numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.exp(x)[:8, ::2], rtol=1e-6)
    # the base, brought back only for the view, went again: the view holds its own copy
    # of what its strides span, not the whole base
    assert imp.memory_stats()["allocated"] - allocated < x.nbytes // 4
