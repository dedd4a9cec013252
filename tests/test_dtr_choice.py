"""Each victim DTR evicts is the candidate a brute-force choice picks (issue 12): the lowest
full score among the evictable candidates some op has read (among the others when none
has, or among all where the round's read ones could not make its room: then a read one
before an unread one of equal score), the first in the manager's order among equal ones.
The manager keeps each candidate in a heap by a lower bound of its score for the round,
made dearer (cheap bound, dearer bound, full score) until a full score comes first; this
checks, over random programs and each policy, that the shortcut never changes the choice.
(The shortcut trusts a full score found earlier in the round as a bound: a score that falls
while the round evicts, as a long recurrence's can by a fraction of a percent where its
ancestors' walk is cut short, may let a near tie go the other way.) At async level 0, so
that no op is queued between a round's ranking and its choices."""
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import imperative as imp
import memory_programs as mp
from imperative import _core
from memory_strategies import programs


def _brute_force_victim():
    scored = _core.candidate_scores()
    if _core.last_choice_merged_tiers():
        return min(scored, key=lambda c: (c[1], not c[2]))[0] if scored else None
    read = [c for c in scored if c[2]]
    pool = read or scored
    return min(pool, key=lambda c: c[1])[0] if pool else None   # (min keeps the first)


@pytest.mark.parametrize("policy", ["dtr_eq", "lru", "size"])
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(program=programs(min_ops=20), fraction=st.sampled_from([0.2, 0.35, 0.5]))
def test_each_victim_is_the_brute_force_choice(policy, program, fraction):
    reference = mp.run_program(program)
    setting = mp.Setting(enable_swap=0, dtr=True, budget_fraction=fraction, policy=policy)
    victims, wrong = [], []

    def hook(action, info, clock):
        if action == "evict":
            expected = _brute_force_victim()
            victims.append(info)
            if expected is not info:
                wrong.append((clock, info.shape, None if expected is None else expected.shape))

    old_level = imp.get_option("async_level")
    imp.set_option("async_level", 0)
    _core.set_decision_hook(hook)
    try:
        run = mp.run_program(program, setting, mp.budget_for(setting, reference))
    finally:
        _core.set_decision_hook(None)
        imp.set_option("async_level", old_level)
    assert not wrong, f"{len(wrong)} of {len(victims)} victims differ: {wrong[:5]}"
    assert not mp.mismatches(reference.reads, run.reads)
