"""DTR on the models outside the zoo (tests/unseen_models.py's fifteen, tests/fresh_models.py's
thirteen, tests/novel_models.py's ten, tests/heldout_models.py's ten, tests/sixth_models.py's
ten, tests/seventh_models.py's ten, tests/eighth_models.py's ten, tests/ninth_models.py's ten,
tests/tenth_models.py's ten, tests/eleventh_models.py's ten, tests/twelfth_models.py's ten,
tests/thirteenth_models.py's ten, tests/fourteenth_models.py's ten, tests/fifteenth_models.py's
ten, tests/sixteenth_models.py's ten, tests/seventeenth_models.py's ten,
tests/eighteenth_models.py's ten and tests/nineteenth_models.py's ten), which no rule of the
memory manager was tuned on: under a budget the losses are the unconstrained run's bit for
bit, and the peak keeps issue 12's rule, max(budget, floor) + one op's outputs, and never
passes the unconstrained peak by more than one op's outputs."""
import importlib
import os
import sys

import numpy as np
import pytest

import fresh_models
import imperative as imp
import novel_models
from test_memory_regimes import _dtr_budget, _step_peak

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
if not os.path.isdir(TOOLS):
    pytest.skip("tools/ is not here (an installed wheel)", allow_module_level=True)
sys.path.insert(0, TOOLS)
import bench_dtr  # noqa: E402

STEPS = 2
SETS = tuple(importlib.import_module(f"{name}_models") for name in bench_dtr.MODEL_SETS)
MODELS = {name: models for models in SETS for name in models.CONFIGS}
assert len(MODELS) == sum(len(models.CONFIGS) for models in SETS)      # no clash
NAMES = sorted(MODELS)
# a test's id names the set too ("sixteenth-hnn"), so that `-k sixteenth` picks one set
SET_AND_NAME = [f"{MODELS[name].__name__.removesuffix('_models')}-{name}" for name in NAMES]


def train(name, fraction=None, peak=None):
    """Train a fresh `name`: one step to make the optimizer's state, then STEPS steps,
    unconstrained or under `fraction` of `peak`. Returns (losses, memory stats)."""
    step = MODELS[name].trainer(name)
    float(step())
    with imp.option("dtr_eviction_threshold", 0), imp.option("dtr_evictee_minimum_size", 4096):
        if fraction is not None:
            imp.dtr.enable(eviction_threshold=int(fraction * peak))
        imp.sync()
        imp.reset_peak_memory_stats()
        try:
            losses = [float(step()) for _ in range(STEPS)]
            imp.sync()
            return losses, imp.memory_stats()
        finally:
            imp.dtr.disable()


_unconstrained_runs = {}


def unconstrained(name, async_level):
    """`name`'s losses, peak P and the largest outputs one op writes, at this async level
    (the peak differs between levels: what the worker has freed when the caller reads).
    Measured once a level."""
    key = name, async_level
    if key not in _unconstrained_runs:
        with imp.option("async_level", async_level):
            losses, stats = train(name)
            outputs = bench_dtr.largest_op_outputs(MODELS[name].trainer(name), 1 + STEPS)
        _unconstrained_runs[key] = losses, stats["peak_allocated"], outputs
    return _unconstrained_runs[key]


def peak_rules_broken(name, fraction, async_level):
    """`name` trained under `fraction` of its unconstrained peak: its memory stats and,
    for each rule, whether it broke: the losses of the unconstrained run bit for bit,
    a peak within max(budget, floor) + one op's outputs, and within the unmanaged peak
    + one op's outputs (tools/peak_rules_jitter.py counts them seed by seed)."""
    want, peak, outputs = unconstrained(name, async_level)
    got, stats = train(name, fraction, peak)
    budget = int(fraction * peak)
    # At level 2 the unmanaged peak differs from run to run, with the moment the caller
    # lets go of a step's tensors against the worker's progress (the highway MLP: 13.01
    # or 13.47 MB, about half the runs each; 13.40 at level 0): the bound is the higher
    # of this level's run and level 0's, a peak the program reaches unmanaged.
    unmanaged = max(peak, unconstrained(name, 0)[1]) if async_level else peak
    return stats, {
        "losses differ": got != want,
        "above max(budget, floor)":
            stats["peak_allocated"] > max(budget, stats["peak_floor"]) + outputs,
        "above P": stats["peak_allocated"] > unmanaged + outputs}


def trains_within_the_peak_rules(name, fraction, async_level):
    """`name` under `fraction` of its unconstrained peak keeps every peak rule."""
    stats, broken = peak_rules_broken(name, fraction, async_level)
    assert not broken["losses differ"]
    assert not broken["above max(budget, floor)"], stats
    assert not broken["above P"], (fraction, stats)


@pytest.mark.parametrize("fraction", [0.7, 0.4])
@pytest.mark.parametrize("name", NAMES, ids=SET_AND_NAME)
def test_an_unseen_model_trains_under_a_budget_bit_for_bit(name, fraction, async_level):
    trains_within_the_peak_rules(name, fraction, async_level)


def _recomputations(step):
    """(recomputes, recomputes_repeated) of one call of `step` (synced)."""
    imp.sync()
    before = imp.memory_stats()
    step()
    imp.sync()
    after = imp.memory_stats()
    return (after["recomputes"] - before["recomputes"],
            after["recomputes_repeated"] - before["recomputes_repeated"])


def test_recomputations_repeated_within_a_restore_are_counted(async_level):
    """memory_stats()'s recomputes_repeated counts a value one restore brings back more
    than once, the sign of a storm: the highway MLP's first step under half its peak
    (nothing learned of the floor yet) brings back values through the gated layers before
    them and evicts on the way what the replay reads again. A restore that fits brings
    each value back once."""
    step = fresh_models.MODEL_SET.trainer("highway")
    float(step())
    _, peak, _ = unconstrained("highway", async_level)
    with imp.option("dtr_evictee_minimum_size", 0), imp.option("dtr_eviction_threshold", 0):
        imp.dtr.enable(eviction_threshold=peak // 2)
        try:
            recomputes, repeated = _recomputations(lambda: float(step()))
        finally:
            imp.dtr.disable()
    assert 0 < repeated < recomputes

    with imp.option("enable_drop", 1), imp.option("record_computing_path", 1):
        x = imp.Tensor(np.arange(4096, dtype=np.float32))
        chain = [x]
        for _ in range(8):
            chain.append(chain[-1] * 1.5 + 1.0)
        for t in chain[1:]:
            t._drop()
        expected = np.arange(4096, dtype=np.float32)
        for _ in range(8):
            expected = expected * np.float32(1.5) + np.float32(1.0)
        result = []
        recomputes, repeated = _recomputations(lambda: result.append(chain[-1].numpy()))
    np.testing.assert_array_equal(result[0], expected)
    assert recomputes >= 8 and repeated == 0


def test_batch_norm_gradients_leave_a_multitask_cnn_nothing_to_storm_on(async_level):
    """The multi-task CNN at the bench's size under half its peak: batch norm's gradient as
    one op leaves no temporaries of the input's size to evict and bring back by replaying
    the backward pass, so that no step, the first included, brings a value back twice,
    and every step holds well under the unconstrained peak (with the composite rule: 333
    repeats in the first step, then every step at the peak)."""
    step = novel_models.MODEL_SET.bench_trainer("multitask")
    float(step())
    imp.sync()
    imp.reset_peak_memory_stats()
    float(step())
    imp.sync()
    peak = imp.memory_stats()["peak_allocated"]
    with (imp.option("dtr_eviction_threshold", 0),
          imp.option("dtr_evictee_minimum_size", 65536)):
        imp.dtr.enable(eviction_threshold=peak // 2)
        try:
            for _ in range(3):
                imp.reset_peak_memory_stats()
                _, repeated = _recomputations(lambda: float(step()))
                assert repeated == 0
                assert imp.memory_stats()["peak_allocated"] <= 0.75 * peak
        finally:
            imp.dtr.disable()


@pytest.mark.parametrize("seed", range(6))
def test_the_peak_rules_hold_whatever_the_measured_costs(seed, async_level):
    """Evictions follow measured run times, so another machine, or this one under load,
    takes other decisions: with every cost jittered by a factor up to e^2 either way, the
    highway MLP under 0.4 and 0.2 of its peak still trains bit for bit within issue 12's
    peak rules. (A restore that pinned every dead value it would read again held the
    forward activations of four layers for one gradient, 0.4 MiB above the unmanaged
    peak, in one run of ten so jittered: _restore_reads.pxi.)"""
    unconstrained("highway", async_level)          # (measured with the costs as they are)
    unconstrained("highway", 0)
    imp._core.set_cost_jitter(2.0, seed)
    try:
        for fraction in (0.4, 0.2):
            trains_within_the_peak_rules("highway", fraction, async_level)
    finally:
        imp._core.set_cost_jitter(0.0)


# issue 12's three ways of recording recipes with nothing evicted
RECORDING = {
    "record_computing_path": lambda: imp.option("record_computing_path", 1),
    "enable_drop": lambda: imp.option("enable_drop", 1),
    "a DTR budget never reached": lambda: _dtr_budget(1 << 40, 4096),
}


@pytest.mark.parametrize("recording", sorted(RECORDING))
@pytest.mark.parametrize("name", NAMES, ids=SET_AND_NAME)
def test_recording_recipes_leaves_an_unseen_model_peak_where_it_was(name, recording,
                                                                    async_level):
    """Issue 12's second rule: recording producers (record_computing_path, enable_drop,
    or a DTR budget the step never reaches) holds no value past the moment it would go
    without, so a step peaks within 5% of the same step unrecorded (the higher of the
    peaks around it). A dead leaf that only dead records' recipes still read was held
    until those records went (an Inception net: 1.13x); two data batches concatenated
    for an encoder were both kept for the concatenation (a prototypical network under a
    budget never reached: 1.07x). At async level 0 only: at level 2 a step's peak
    follows how far the caller runs ahead of the worker (the memory-writing RNN's plain
    steps peaked at 2.1, 7.8 and 2.3 MB in a row in a CI run), not what recording holds."""
    if async_level != 0:
        pytest.skip("the peak at level 2 follows the caller's lead over the worker")
    step = MODELS[name].trainer(name)
    float(step())
    plain = [_step_peak(step) for _ in range(2)]
    with RECORDING[recording]():
        recorded = max(_step_peak(step) for _ in range(2))
    plain.append(_step_peak(step))
    assert recorded <= 1.05 * max(plain), (recorded, plain)
