"""Recomputation from a memo the recorded run kept (OpDef.KEEPS_MEMO): a batch norm or a
layer norm under DTR is recomputed from its batch's or rows' statistics, one pass over x
instead of three, with the bits of its first run."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import imperative as imp
from imperative import _core
from imperative.models import build, optimizer, training_step
from imperative.ops.norm import BatchNormForward, LayerNormForward

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


@settings(max_examples=60, deadline=None)
@given(lead=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       normalized=st.lists(st.integers(1, 40), min_size=1, max_size=2), affine=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2 ** 16))
def test_layer_norm_from_its_statistics_gives_the_kernels_bits(lead, normalized, affine, dtype,
                                                               seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(tuple(lead) + tuple(normalized)) * 4 - 1).astype(dtype)
    parameters = ([rng.standard_normal(normalized).astype(dtype) for _ in range(2)]
                  if affine else [])
    op = LayerNormForward(tuple(normalized), eps=1e-4)
    assert op.keeps_memo
    want = op.kernel(x, *parameters)
    result, memo = op.kernel_keeping(x, *parameters)
    np.testing.assert_array_equal(result, want)
    if dtype == np.float32:          # (the native row loop: the statistics are kept)
        assert memo is not None and memo.size == 2 * int(np.prod(lead))
    if memo is not None:
        again = op.kernel_from(memo, x, *parameters)
        assert again.dtype == want.dtype
        np.testing.assert_array_equal(again, want)
    rows = x.astype(np.float64).reshape(int(np.prod(lead)), -1)
    y = (rows - rows.mean(axis=1, keepdims=True)) / np.sqrt(rows.var(axis=1, keepdims=True)
                                                            + 1e-4)
    if affine:
        y = y * parameters[0].astype(np.float64).reshape(-1) + parameters[1].reshape(-1)
    tolerance = 1e-4 if want.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(want, y.reshape(x.shape), rtol=tolerance, atol=tolerance)


def _zoo_model(name, **sizes):
    """A model of the zoo and its training step."""
    model, x, labels = build(name, **sizes)
    step = training_step(model, optimizer(name, model.parameters()))
    return model, lambda: step(x, labels)


# the zoo's ResNet (batch norms) and LayerNorm MLP: in both a ReLU writes over the
# normalisation's output, so that a ReLU evicted needs the normalisation again
NORMALISED_MODELS = [("cnn", dict(channels=8, blocks=3, batch=4, size=16), BatchNormForward),
                     ("mlp", dict(width=64, depth=6, batch=64), LayerNormForward)]


@pytest.mark.parametrize("fraction", [0.5, 0.3])
@pytest.mark.parametrize("name, sizes, op_class", NORMALISED_MODELS)
def test_normalisations_under_dtr_come_back_from_their_statistics(async_level, monkeypatch,
                                                                  fraction, name, sizes,
                                                                  op_class):
    """Under a binding budget the normalisations come back from their statistics, and the
    losses and parameters are those of the steps run without DTR, bit for bit."""
    reference_model, reference = _zoo_model(name, **sizes)
    want = [float(reference()) for _ in range(3)]
    want_parameters = [p.numpy() for p in reference_model.parameters()]

    from_statistics = []
    real_kernel_from = op_class.kernel_from

    def counted_kernel_from(self, memo, *arrays):
        from_statistics.append(arrays[0].shape)
        return real_kernel_from(self, memo, *arrays)
    monkeypatch.setattr(op_class, "kernel_from", counted_kernel_from)

    model, step = _zoo_model(name, **sizes)
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
    assert op_class.__name__ in recomputed
    assert len(from_statistics) == recomputed.count(op_class.__name__)
