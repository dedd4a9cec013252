"""A compiled plan shares a long elementwise chain's blocks among as many threads as numpy's
BLAS runs (imperative/_plan.pxi): the same bits as eager code and as one thread, at every
thread count and at sizes that are no multiple of a block; the floating-point warnings a
part raised on another thread are numpy's; several callers at once."""
import warnings

import numpy as np
import pytest

import imperative as imp
from imperative.backend import native
from imperative.jit import trace

from test_jit import calls_match_eager_and_numpy, chain, in_threads, same_bits, tensors

# past two threads' minimum share (1 << 16 elements each), and no multiple of a block
LONG = (613, 577)


@pytest.fixture(params=[1, 2, 3, 5])
def threads(request, monkeypatch):
    monkeypatch.setattr(native, "blas_threads", lambda: request.param)
    return request.param


def test_a_long_chain_gives_eagers_bits_at_every_thread_count(rng, threads):
    traced = trace(chain, symbolic=True)
    calls_match_eager_and_numpy(traced, rng, LONG)
    assert traced.stats["replays"] == 2


def test_a_warning_raised_by_the_last_part_is_numpys(threads):
    """(At async level 0: a plan run on the worker ignores floating-point flags, as every
    op there does, since a warning would print from a foreign thread.)"""
    traced = trace(lambda x: imp.F.exp(x) * 2.0, symbolic=True)
    values = np.zeros(LONG, np.float32)
    values[-1, -1] = 100.0                  # overflows, in the last thread's part
    x = imp.Tensor(values)
    with imp.option("async_level", 0), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced(x)
        warnings.simplefilter("default")
        with pytest.warns(RuntimeWarning, match="overflow encountered in exp"):
            got = traced(x).numpy()
    assert np.isinf(got[-1, -1]) and np.all(got[:-1] == 2.0)


def test_several_callers_replay_a_threaded_plan_at_once(rng, threads):
    traced = trace(chain, symbolic=True)
    x, y = tensors(rng, LONG)
    want = chain(x, y).numpy()
    traced(x, y)

    def work(_):
        for _ in range(5):
            assert same_bits(traced(x, y).numpy(), want)

    in_threads(work, range(3))
