"""The model zoo (imperative.models) at tiny sizes: every model trains, deterministically,
and DTR under a tight budget changes nothing in its losses."""
import math

import pytest

import imperative as imp
from imperative import models

# name -> overrides that make a model tiny (a few milliseconds a step) with its structure kept
TINY = {
    "relu_wide": dict(width=64, depth=3, batch=4),
    "relu_narrow": dict(width=16, depth=4, batch=64),
    "mlp": dict(width=16, depth=4, batch=32),
    "cnn": dict(channels=4, blocks=2, batch=2, size=8),
    "transformer": dict(dim=16, heads=2, blocks=2, seq=8, batch=4),
    "gru": dict(features=4, hidden=8, steps=64, batch=4),
    "unet": dict(channels=4, levels=2, size=8, batch=2),
    "densenet": dict(channels=4, growth=4, layers=3, size=8, batch=2),
    "adam_cnn": dict(channels=4, hidden=32, size=8, batch=4),
}


def losses(name, steps=2, **overrides):
    step = models.trainer(name, **TINY[name], **overrides)
    return [float(step()) for _ in range(steps)]


def test_every_model_of_the_zoo_has_a_tiny_size_here():
    assert set(TINY) == set(models.CONFIGS)


@pytest.mark.parametrize("name", sorted(models.CONFIGS))
def test_each_model_trains_and_is_deterministic(name):
    first = losses(name)
    assert all(math.isfinite(loss) for loss in first), first
    assert first[1] != first[0]
    assert losses(name) == first                  # seeded: a rebuilt model repeats itself


def test_each_config_names_its_optimizer():
    assert {c["optimizer"] for c in models.CONFIGS.values()} == {"sgd", "adam"}
    assert models.CONFIGS["adam_cnn"]["optimizer"] == "adam"
    params = models.build("adam_cnn", **TINY["adam_cnn"])[0].parameters()
    assert isinstance(models.optimizer("adam_cnn", params), imp.optim.Adam)


def test_unknown_models_and_settings_are_named():
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        models.build("nope")
    with pytest.raises(ValueError, match="no setting depth"):
        models.build("cnn", depth=3)


def test_describe_shows_the_overridden_sizes():
    assert "batch 3" in models.describe("transformer", batch=3)


def test_upsample_nearest_repeats_each_pixel():
    import numpy as np
    x = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    got = models.upsample_nearest(imp.Tensor(x)).numpy()
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))


def memory_of_one_step(name):
    """(bytes resident between steps: parameters, optimizer state, data; the step's peak)."""
    step = models.trainer(name, **TINY[name])
    step()
    imp.sync()
    imp.reset_peak_memory_stats()
    step()
    imp.sync()
    stats = imp.memory_stats()
    return stats["allocated"], stats["peak_allocated"]


@pytest.mark.parametrize("name", ["transformer", "unet"])
def test_dtr_at_a_tight_budget_gives_bit_identical_losses(name):
    want = losses(name, steps=3)
    resident, peak = memory_of_one_step(name)
    budget = resident + (peak - resident) // 2       # room for half of what a step adds
    evictions = imp.memory_stats()["evictions"]
    # tiny models' activations are a few KiB: a minimum below them lets DTR evict them
    with imp.option("dtr_eviction_threshold", budget), imp.option("dtr_evictee_minimum_size", 4096):
        imp.dtr.enable()
        try:
            got = losses(name, steps=3)
        finally:
            imp.dtr.disable()
    assert imp.memory_stats()["evictions"] > evictions
    assert got == want
