"""h_DTR^eq's bounds: make_room skips the full score (with its walk of the evicted
ancestors) of a candidate whose bound already loses, so each bound must be at most the full
score, on records with real evicted neighbourhoods: random recurrences (an LSTM-like cell
whose state and gates chain the steps) trained under random budgets."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F, _core


def _recurrence(steps, width, seed):
    """A few steps of c = sigmoid(f) * c + tanh(g), h = sigmoid(o) * tanh(c), the gates
    cut from one product; returns every tensor made (all still held)."""
    rng = np.random.default_rng(seed)
    w = imp.Tensor(rng.standard_normal((width, 3 * width)).astype(np.float32) * 0.3)
    h = imp.Tensor(rng.standard_normal((16, width)).astype(np.float32))
    c = F.zeros((16, width))
    made = []
    for _ in range(steps):
        f, g, o = F.split(h @ w, 3, axis=1)
        c = F.sigmoid(f) * c + F.tanh(g)
        h = F.sigmoid(o) * F.tanh(c)
        made += [f, g, o, c, h]
    return made


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(2, 8), width=st.sampled_from([8, 32]), seed=st.integers(0, 99),
       fraction=st.floats(0.1, 0.6))
def test_the_bounds_never_pass_the_score(steps, width, seed, fraction):
    with imp.option("dtr_evictee_minimum_size", 0), imp.option("record_computing_path", 1):
        made = _recurrence(steps, width, seed)
        peak = sum(int(np.prod(t.shape)) * 4 for t in made)
        with imp.option("dtr_eviction_threshold", max(int(fraction * peak), 1)), \
                imp.option("enable_dtr_auto_drop", 1):
            made += _recurrence(steps, width, seed + 1)
            imp.sync()
            policy = _core.POLICIES["dtr_eq"]()
            channel = _core.channel()
            evicted = 0
            for t in made:
                info = channel.lookup(t._handle)
                evicted += info.status != 1
                for gap in (1, 5):
                    full = policy.score(info, gap)
                    assert policy.score_at_least(info, gap) <= policy.score_bound(info, gap)
                    assert policy.score_bound(info, gap) <= full
            assert evicted           # (the budget made some neighbourhoods)
