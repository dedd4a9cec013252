"""Recomputation from a memo the recorded run kept (OpDef.KEEPS_MEMO): a batch norm under
DTR is recomputed from its batch's statistics, one pass over x instead of three, with the
bits of its first run."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import imperative as imp
from imperative import _core
from imperative.models import build, optimizer, training_step
from imperative.ops.norm import BatchNormForward

from test_memory_regimes import _dtr_budget, _step_peak


def _batch_norm_inputs(rng, shape, dtype, running):
    c = shape[1]
    arrays = [rng.standard_normal(shape).astype(dtype) * 3 + 1,
              rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)]
    if running:
        arrays += [rng.standard_normal(c).astype(dtype), rng.random(c).astype(dtype) + 0.5]
    return arrays


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), c=st.integers(1, 20), spatial=st.lists(st.integers(1, 9), max_size=2),
       dtype=st.sampled_from([np.float32, np.float64]), running=st.booleans(),
       training=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_batch_norm_from_its_statistics_gives_the_kernels_bits(n, c, spatial, dtype, running,
                                                               training, seed):
    shape = (n, c) + tuple(spatial)
    if training and n * int(np.prod(spatial)) < 2:
        n, shape = 2, (2, c) + tuple(spatial)
    running = running or not training          # (evaluation needs the running statistics)
    arrays = _batch_norm_inputs(np.random.default_rng(seed), shape, dtype, running)
    op = BatchNormForward(training=training, momentum=0.3, eps=1e-3)
    assert op.keeps_memo
    want = _as_tuple(op.kernel(*arrays))
    result, memo = op.kernel_keeping(*arrays)
    if not training:
        assert memo is None                    # nothing the running statistics do not give
        return
    got = _as_tuple(op.kernel_from(memo, *arrays))
    for kept, again, expected in zip(_as_tuple(result), got, want):
        assert again.dtype == expected.dtype and kept.dtype == expected.dtype
        np.testing.assert_array_equal(kept, expected)
        np.testing.assert_array_equal(again, expected)
    # and the kernel is batch normalisation: against float64 by hand
    x = arrays[0].astype(np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    channels = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    y = ((x - mean.reshape(channels)) / np.sqrt(var.reshape(channels) + 1e-3)
         * arrays[1].astype(np.float64).reshape(channels)
         + arrays[2].astype(np.float64).reshape(channels))
    tolerance = 1e-4 if want[0].dtype == np.float32 else 1e-10
    np.testing.assert_allclose(want[0], y, rtol=tolerance, atol=tolerance)


def _resnet(**sizes):
    """The zoo's ResNet and its training step."""
    model, x, labels = build("cnn", **sizes)
    step = training_step(model, optimizer("cnn", model.parameters()))
    return model, lambda: step(x, labels)


@pytest.mark.parametrize("fraction", [0.5, 0.3])
def test_a_resnet_under_dtr_recomputes_batch_norms_from_their_statistics(async_level,
                                                                         monkeypatch, fraction):
    """The zoo's ResNet (its ReLUs write over the batch norms' outputs, so that a ReLU
    evicted needs its batch norm again) under a binding budget: the batch norms come back
    from their statistics, and the losses and parameters are those of the steps run
    without DTR, bit for bit."""
    reference_model, reference = _resnet(channels=8, blocks=3, batch=4, size=16)
    want = [float(reference()) for _ in range(3)]
    want_parameters = [p.numpy() for p in reference_model.parameters()]

    from_statistics = []
    real_kernel_from = BatchNormForward.kernel_from

    def counted_kernel_from(self, memo, *arrays):
        from_statistics.append(arrays[0].shape)
        return real_kernel_from(self, memo, *arrays)
    monkeypatch.setattr(BatchNormForward, "kernel_from", counted_kernel_from)

    model, step = _resnet(channels=8, blocks=3, batch=4, size=16)
    losses = [float(step())]
    budget = int(fraction * _step_peak(step))
    recomputed = []
    with _dtr_budget(budget, 0):
        _core.set_decision_hook(lambda action, info, clock: recomputed.append(
            type(info.producer.op).__name__ if info.producer is not None else None)
            if action == "recompute" else None)
        try:
            losses += [float(step())]
            imp.sync()
        finally:
            _core.set_decision_hook(None)
        parameters = [p.numpy() for p in model.parameters()]
    assert losses == want[:1] + want[2:]
    for got, expected in zip(parameters, want_parameters):
        np.testing.assert_array_equal(got, expected)
    assert "BatchNormForward" in recomputed
    assert len(from_statistics) == recomputed.count("BatchNormForward")
