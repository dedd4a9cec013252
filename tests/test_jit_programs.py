"""imp.jit.trace on random programs (hypothesis): a replay, checked (symbolic=False) or
compiled (symbolic=True), gives the eager run's bits on fresh inputs of the same
signature; and many replays keep the handle count and the process's memory flat."""
import gc
import resource

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import imperative as imp
from imperative import F
from imperative.jit import trace

from conftest import live_handle_count

UNARY = [F.tanh, F.exp, lambda t: -t, F.abs, lambda t: F.sqrt(F.abs(t)), F.sigmoid, F.relu,
         lambda t: t * 0.5, lambda t: 1.0 - t, lambda t: t / 3.0]
BINARY = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
          lambda a, b: a / (F.abs(b) + 1.0), F.maximum]
OTHER = [lambda t: t.sum(axis=-1, keepdims=True) + t,       # a reduction, broadcast back
         lambda t: (t.T @ t)[: t.shape[0], : t.shape[1]] if t.ndim == 2 and
         t.shape[0] <= t.shape[1] else t + 1.0,
         lambda t: F.softmax(t, axis=-1),
         lambda t: t.reshape(-1).reshape(t.shape)]


@st.composite
def programs(draw):
    """(shape, number of inputs, [(kind, function index, operand picks)], results)."""
    shape = draw(st.sampled_from([(7,), (4, 5), (3, 1500), (2, 3, 4)]))
    n_in = draw(st.integers(1, 3))
    steps = []
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["unary", "binary", "other"]))
        table = {"unary": UNARY, "binary": BINARY, "other": OTHER}[kind]
        steps.append((kind, draw(st.integers(0, len(table) - 1)),
                      draw(st.integers(0, 10 ** 6)), draw(st.integers(0, 10 ** 6))))
    n_results = draw(st.integers(1, 3))
    return shape, n_in, steps, n_results


def run_program(program, *inputs):
    _, _, steps, n_results = program
    values = list(inputs)
    for kind, index, pick_a, pick_b in steps:
        a = values[pick_a % len(values)]
        if kind == "unary":
            values.append(UNARY[index](a))
        elif kind == "binary":
            values.append(BINARY[index](a, values[pick_b % len(values)]))
        else:
            values.append(OTHER[index](a))
    return tuple(values[-n_results:])


def fresh_inputs(rng, program):
    shape, n_in, _, _ = program
    return [imp.Tensor(rng.standard_normal(shape).astype(np.float32)) for _ in range(n_in)]


@settings(max_examples=40, deadline=None)
@given(program=programs(), seed=st.integers(0, 2 ** 32 - 1))
@pytest.mark.parametrize("symbolic", [False, True])
def test_random_programs_replay_bit_identical(program, seed, symbolic):
    rng = np.random.default_rng(seed)
    traced = trace(lambda *xs: run_program(program, *xs), symbolic=symbolic)
    for _ in range(3):
        inputs = fresh_inputs(rng, program)
        got = traced(*inputs)
        want = run_program(program, *inputs)
        for g, w in zip(got, want):
            g, w = g.numpy(), w.numpy()
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 2


@pytest.mark.parametrize("symbolic", [False, True])
def test_an_op_reading_a_dying_value_twice_frees_its_buffer_once(symbolic):
    """tanh(x) three times, t1 + t1 (t1 dies there), two more tanh(x), tanh(t1 + t1): the
    fused pass handed t1's block buffer to two live values when it freed it twice."""
    program = ((7,), 1, [("unary", 0, 0, 0)] * 3 + [("binary", 0, 1, 1)]
               + [("unary", 0, 0, 0)] * 2 + [("unary", 0, 4, 0)], 1)
    traced = trace(lambda *xs: run_program(program, *xs), symbolic=symbolic)
    rng = np.random.default_rng(0)
    for _ in range(3):
        inputs = fresh_inputs(rng, program)
        got, want = traced(*inputs)[0].numpy(), run_program(program, *inputs)[0].numpy()
        assert got.tobytes() == want.tobytes()
        np.testing.assert_allclose(got, np.tanh(2 * np.tanh(inputs[0].numpy())), rtol=1e-6)


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


@pytest.mark.parametrize("symbolic,shape", [(True, (16,)), (True, (20000,)), (False, (16,))])
def test_many_replays_keep_handles_and_memory_flat(symbolic, shape):
    rng = np.random.default_rng(0)
    program = (shape, 2, [("binary", 2, 0, 1), ("unary", 0, 2, 0), ("binary", 0, 3, 0),
                          ("unary", 1, 4, 0)], 1)
    # (symbolic=False: checked calls served from the plan)
    traced = trace(lambda *xs: run_program(program, *xs), symbolic=symbolic)
    inputs = fresh_inputs(rng, program)
    for _ in range(200):                   # warm: block caches, allocator pools
        traced(*inputs)[0].numpy()
    gc.collect()
    handles, rss = live_handle_count(), _rss_kib()
    for _ in range(2000 if shape != (16,) else 20000 if symbolic else 5000):
        traced(*inputs)[0].numpy()
    gc.collect()
    assert live_handle_count() == handles
    assert traced.stats["served"] == (0 if symbolic else traced.stats["replays"])
    assert _rss_kib() - rss < 4096          # KiB: flat, not growing per call
