"""imperative against PyTorch on random programs (tests/torch_differential.py): forward
values, first- and second-order gradients and optimizer steps, with float64 PyTorch as the
reference, and every result bit-identical between async levels 0 and 2. This is the quick
profile (a few hundred programs, derandomized); `tools/fuzz_torch.py` runs thousands."""
import math

import pytest

pytest.importorskip("torch", reason="the differential tests compare against PyTorch "
                                    "(pip install torch); CI installs it")

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import imperative as imp  # noqa: E402
import torch_differential as D  # noqa: E402

# Each test compares the two async levels itself, so the conftest's level parameter
# picks a different seed instead of repeating the same programs.
QUICK = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def _run_checks(strategy, check, examples, level_seed):
    tally = D.Tally()

    @seed(level_seed)
    @settings(max_examples=examples, **QUICK)
    @given(strategy)
    def run(case):
        found = check(case, tally)
        assert found is None, f"{found[0]}: {tally.examples[found[0]][-1]}"

    run()
    assert tally.checks > 0


def test_small_programs_match_torch(async_level):
    _run_checks(D.programs(sizes=("scalar", "empty", "small")), D.check_program, 120,
                1900 + async_level)


def test_large_programs_match_torch(async_level):
    """Thousands of elements (past numpy's pairwise-sum blocks), with host compute off: the
    worker thread runs them at level 2 (the host-compute limit is larger than these)."""
    assert min(map(math.prod, D.SHAPES["large"])) > 4096
    with imp.option("enable_host_compute", 0):
        _run_checks(D.programs(sizes=("large",), max_steps=3), D.check_program, 40,
                    2900 + async_level)


def test_training_steps_match_torch(async_level):
    _run_checks(D.trainings(), D.check_training, 12, 3900 + async_level)
