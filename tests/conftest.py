"""Shared fixtures for the imperative test suite.

* Every test runs twice: at async level 0 (every op waited for) and at level 2 (every op
  returns at once; errors surface at the next sync point). The level is set with
  `imp.option("async_level", level)`, which must restore the previous value on exit.
* After every test the interpreter is synced and the options dict must be exactly what it
  was before the test (a test that changes an option must restore it), and no room the
  memory manager reserved for a kernel's values is still held.
* `live_handles()` / `assert_no_leak(fn)`: handle-leak checks built on
  `imp._core._channel_stats()["live_handles"]`.
* `kernels`: a test of products and their epilogues runs on the native kernels and on numpy's.
"""
import gc

import numpy as np
import pytest

import imperative as imp
from imperative.backend import native

ASYNC_LEVELS = (0, 2)


def live_handle_count():
    """Number of live tensor handles in the interpreter (after letting the worker drain)."""
    imp.sync()
    return imp._core._channel_stats()["live_handles"]


def assert_no_leak(fn, *args, repeat=1, **kwargs):
    """Run `fn(*args, **kwargs)` (`repeat` times), drop its results, collect garbage, sync,
    and assert that the live handle count is back to where it was before.

    Returns nothing: results are discarded so that they cannot keep handles alive.
    """
    gc.collect()
    before = live_handle_count()
    for _ in range(repeat):
        result = fn(*args, **kwargs)
        del result
    gc.collect()
    imp.sync()
    after = live_handle_count()
    assert after == before, (f"{getattr(fn, '__name__', fn)!s} leaked {after - before} "
                             f"handle(s): {before} live before, {after} after")


@pytest.fixture(autouse=True)
def options_restored():
    """After the test: the options as they were before it, and no room reserved. A fixture
    of its own, so that a test parametrizing `async_level` itself (which replaces the
    fixture below) is checked too: one that left DTR's evictee minimum at 0 made every
    later recorded op's output an eviction candidate."""
    before = imp.options()
    yield
    imp.sync()
    after = imp.options()
    assert after == before, f"options not restored by the test: {before} -> {after}"
    # room reserved for a kernel's values is given back once they are stored (or it failed)
    assert imp._core.memory_manager_stats()["reserved_bytes"] == 0


@pytest.fixture(autouse=True, params=ASYNC_LEVELS, ids=[f"async{lv}" for lv in ASYNC_LEVELS])
def async_level(request, options_restored):
    """Parametrizes every test over async levels 0 and 2."""
    with imp.option("async_level", request.param):
        assert imp.get_option("async_level") == request.param
        yield request.param
        imp.sync()


@pytest.fixture(scope="module")
def earlier_objects_frozen():
    """The objects the tests before a module's left out of the garbage collector's sight
    (gc.freeze) while its tests run, for tests that collect or list objects again and
    again: in the full suite each full collection walked the whole suite's heap, so that
    test_memory_kept_leaves.py's random programs took 95 s instead of 5 and
    test_memory_fuzz.py's 200k tiny ops 14 s instead of 1 (gc.get_objects() does not
    list frozen objects either: a count before and after compares this module's)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def live_handles():
    """A callable returning the live handle count (syncs first)."""
    return live_handle_count


@pytest.fixture(name="assert_no_leak")
def assert_no_leak_fixture():
    """The `assert_no_leak(fn, *args, repeat=1, **kwargs)` helper as a fixture."""
    return assert_no_leak


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(params=["native", "numpy"])
def kernels(request, monkeypatch):
    """Both product paths: the native sgemm's stores (epilogues there), and numpy plus the
    follower's kernel (tests/test_epilogue.py, test_jit_schedule.py)."""
    if request.param == "native" and not native._SUPPORTED:
        pytest.skip("no AVX2 or AVX-512: the native sgemm does not run")
    monkeypatch.setattr(native, "_MODE", "always" if request.param == "native" else "never")
    return request.param
