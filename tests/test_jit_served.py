"""imp.jit.trace(symbolic=False): a checked call's ops are served from the compiled plan
(API.md section 9) and still behave as the eager run: values that outlive the call, values
excluded code reads, constants, errors. Every value is compared with the eager run's bits."""
import numpy as np
import pytest

import imperative as imp
from imperative import F
from imperative.jit import TraceMismatchError, TraceReadError, exclude_from_trace, trace


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def tensor(rng, shape=(6,)):
    return imp.Tensor(rng.standard_normal(shape).astype(np.float32))


def test_a_value_stashed_away_keeps_its_eager_bits(rng):
    """An intermediate neither returned nor read, but kept by a Tensor after the call, is
    one the plan keeps: reading it later gives the eager value."""
    stash = []

    def f(x, y):
        h = F.tanh(x * y + 1.0)
        stash.append(h)
        return F.exp(h * 0.5) - y

    traced = trace(f, symbolic=False)
    for _ in range(3):
        x, y = tensor(rng), tensor(rng)
        got = traced(x, y)
        kept = stash[-1]
        want = f(x, y)
        assert same_bits(got.numpy(), want.numpy())
        assert same_bits(kept.numpy(), stash[-1].numpy())
    assert traced.stats["served"] == 2


def test_excluded_code_reads_served_values(rng):
    seen = []

    def f(x):
        h = x * 3.0 + 1.0
        with exclude_from_trace():
            seen.append(float((h * 2.0).sum()))      # eager, every call
        return F.tanh(h)

    traced = trace(f, symbolic=False)
    for _ in range(3):
        x = tensor(rng)
        got = traced(x).numpy()
        want_seen = float(((x * 3.0 + 1.0) * 2.0).sum())
        assert seen[-1] == want_seen
        assert same_bits(got, F.tanh(x * 3.0 + 1.0).numpy())
    assert traced.stats["served"] == 2


def test_reading_a_value_unread_at_record_still_raises(rng):
    def f(x, read):
        h = x + 1.0
        if read:
            h.numpy()
        return h * 2.0

    traced = trace(lambda x: f(x, state["read"]), symbolic=False)
    state = {"read": False}
    x = tensor(rng)
    traced(x)
    state["read"] = True
    with pytest.raises(TraceReadError, match="value of this tensor is not read"):
        traced(x)
    state["read"] = False
    assert same_bits(traced(x).numpy(), f(x, False).numpy())   # recorded afresh


def test_a_constant_with_other_bits_is_a_mismatch_when_served(rng):
    """0.0 and -0.0 are equal values, but a served call would carry the recorded bits:
    it is a mismatch (the next call records afresh) rather than other bits than eager's.
    (The constant is written in the body: as arguments, 0.0 and -0.0 key two signatures.)"""
    c = {"value": 0.0}
    traced = trace(lambda x: x * c["value"], symbolic=False)
    x = tensor(rng)
    traced(x)
    c["value"] = -0.0
    with pytest.raises(TraceMismatchError, match="input 1"):
        traced(x)
    assert same_bits(traced(x).numpy(), (x * -0.0).numpy())
    assert same_bits(traced(x).numpy(), (x * -0.0).numpy())
    assert traced.stats["served"] == 1


def test_not_served_where_the_memory_manager_must_see_each_op(rng):
    traced = trace(lambda x: F.exp(x * 0.5) + 1.0, symbolic=False)
    x = tensor(rng)
    traced(x)
    with imp.option("enable_drop", 1):
        got = traced(x)
    assert same_bits(got.numpy(), (F.exp(x * 0.5) + 1.0).numpy())
    assert traced.stats == {"records": 1, "replays": 1, "mismatches": 0, "signatures": 1,
                            "served": 0}
