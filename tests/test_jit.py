"""imp.jit.trace (API.md section 9): recording, replay checked op by op (symbolic=False) and
compiled replay (symbolic=True); mismatch and read errors, signatures, effects, training
steps, threads, leaks. Every result is compared with the eager run of the same function,
bit for bit, and with numpy where the function is numpy's."""
import collections
import gc
import json
import threading
import warnings
import weakref

import numpy as np
import pytest

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.jit import TraceMismatchError, TraceReadError, exclude_from_trace, trace
from imperative.models import training_step

from conftest import live_handle_count


def chain(x, y):
    """A mix of arithmetic, scalars and transcendental functions (numpy's loops)."""
    z = x * y + 1.0
    z = F.tanh(z) - y
    z = F.exp(z * 0.25) / 2.0
    return -z + x


def numpy_chain(x, y):
    z = x * y + np.float32(1.0)
    z = np.tanh(z) - y
    z = np.exp(z * np.float32(0.25)) / np.float32(2.0)
    return -z + x


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def tensors(rng, shape, n=2):
    return [imp.Tensor(rng.standard_normal(shape).astype(np.float32)) for _ in range(n)]


def calls_match_eager_and_numpy(traced, rng, shape):
    """Three calls of traced `chain` on fresh inputs of `shape` (the first records): each
    result the eager run's bits, and numpy's values."""
    for _ in range(3):
        x, y = tensors(rng, shape)
        got = traced(x, y).numpy()
        assert same_bits(got, chain(x, y).numpy())
        np.testing.assert_allclose(got, numpy_chain(x.numpy(), y.numpy()), rtol=1e-6)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("shape", [(16,), (3, 5), (70000,), ()])
def test_replay_is_bit_identical_to_eager_and_matches_numpy(rng, symbolic, shape):
    traced = trace(chain, symbolic=symbolic)
    calls_match_eager_and_numpy(traced, rng, shape)
    # (symbolic=False: the two checked calls' ops were served by the compiled plan)
    assert traced.stats == {"records": 1, "replays": 2, "mismatches": 0, "signatures": 1,
                            "served": 0 if symbolic else 2}


def test_long_chains_and_mixed_shapes_compile(rng):
    def f(x, m):
        for _ in range(50):                 # longer than one fused group
            x = F.tanh(x * 1.01 + 0.01)
        return x, (m * 2.0).sum(axis=0) + x[:3], m.reshape(-1) * 1.5

    traced = trace(f, symbolic=True)
    x = tensors(rng, (3,), 1)[0]
    m = tensors(rng, (4, 3), 1)[0]
    traced(x, m)
    for got, want in zip(traced(x, m), f(x, m)):
        assert same_bits(got.numpy(), want.numpy())


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_new_signature_records_again_and_the_cache_is_an_lru(rng, symbolic):
    traced = trace(chain, symbolic=symbolic, cache_size=2)
    for shape in [(4,), (5,), (4,), (6,), (5,)]:
        x, y = tensors(rng, shape)
        assert same_bits(traced(x, y).numpy(), chain(x, y).numpy())
    # (5,) was evicted by (6,): records for (4,), (5,), (6,), (5,) again
    assert traced.stats["records"] == 4 and traced.stats["replays"] == 1
    assert traced.stats["signatures"] == 2


def test_non_tensor_arguments_and_dtypes_key_the_cache(rng):
    traced = trace(lambda x, k: x * k, symbolic=True)
    x = imp.Tensor(np.arange(4, dtype=np.float32))
    assert traced(x, 2.0).numpy().tolist() == [0, 2, 4, 6]
    assert traced(x, 3.0).numpy().tolist() == [0, 3, 6, 9]
    assert traced(x.astype("int32"), 3.0).dtype == (x.astype("int32") * 3.0).dtype
    assert traced.stats["records"] == 3


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("by_keyword", [False, True])
def test_floats_equal_by_value_but_not_by_bits_key_their_own_signatures(symbolic, by_keyword):
    """0.0 and -0.0 are == but x * k differs in its zeros' signs; a NaN is not == itself
    but must find its own record (the C fast path takes positional calls, the Python one
    keyword calls)."""
    traced = trace(lambda x, k: x * k, symbolic=symbolic)
    x = imp.Tensor(np.array([1.0, -2.0], np.float32))
    ks = [0.0, -0.0, 0.0, -0.0, float("nan"), float("nan"), np.float32(-0.0), np.float32(0.0),
          np.float32(-0.0)]
    for k in ks:
        got = traced(x, k=k) if by_keyword else traced(x, k)
        same_results(got, x * k)
    assert traced.stats["records"] == 5 and traced.stats["replays"] == 4
    assert traced.stats["mismatches"] == 0 and traced.stats["signatures"] == 5


def test_mismatch_names_the_op_index_both_ops_and_the_line(rng):
    flip = {"on": False}

    def f(x):
        y = x + 1.0
        return y * 2.0 if not flip["on"] else y - 2.0

    traced = trace(f)
    x = tensors(rng, (4,), 1)[0]
    traced(x)
    traced(x)
    flip["on"] = True
    with pytest.raises(TraceMismatchError) as info:
        traced(x)
    text = str(info.value)
    assert "op 1 differs" in text and "MUL" in text and "SUB" in text
    assert "test_jit.py:" in text
    assert isinstance(info.value, RuntimeError)
    # the trace was discarded: this call records afresh and the next replays
    assert same_bits(traced(x).numpy(), f(x).numpy())
    assert same_bits(traced(x).numpy(), f(x).numpy())
    assert traced.stats["mismatches"] == 1 and traced.stats["records"] == 2


def test_missing_extra_op_and_other_wiring_are_mismatches(rng):
    mode = {"n": 2, "swap": False}

    def f(x, y):
        z = x
        for _ in range(mode["n"]):
            z = z + (x if not mode["swap"] else y)
        return z

    traced = trace(f)
    x, y = tensors(rng, (3,))
    traced(x, y)
    mode["n"] = 1
    with pytest.raises(TraceMismatchError, match="was not issued"):
        traced(x, y)
    traced(x, y)                     # records n=1
    mode["n"] = 2
    with pytest.raises(TraceMismatchError, match="one more"):
        traced(x, y)
    traced(x, y)                     # records n=2
    mode["swap"] = True
    with pytest.raises(TraceMismatchError, match="input 1.*recorded the argument tensor 'arg0'"):
        traced(x, y)


def test_constants_are_compared_by_value(rng):
    scale = {"k": 2.0}
    traced = trace(lambda x: x * scale["k"] + imp.Tensor(np.ones(3, np.float32)))
    x = tensors(rng, (3,), 1)[0]
    traced(x)
    traced(x)
    scale["k"] = 3.0
    with pytest.raises(TraceMismatchError, match="input 1") as info:
        traced(x)
    # what was issued and what was recorded, by value (not the program's value ids)
    assert "tensor of value 3.0, recorded the constant 2.0" in str(info.value)
    traced(x)
    scale["k"] = -0.0                           # (a constant's bits, while served)
    with pytest.raises(TraceMismatchError, match="value -0.0, recorded the constant 3.0"):
        traced(x)
    traced(x)
    ones = {"data": np.ones(3, np.float32)}
    traced = trace(lambda x: x + imp.Tensor(ones["data"]))
    traced(x)
    ones["data"] = np.arange(3, dtype=np.float32)
    with pytest.raises(TraceMismatchError,
                       match=r"value \[0.0, 1.0, 2.0\], recorded the constant \[1.0, 1.0, 1.0\]"):
        traced(x)


def test_reading_what_was_not_read_raises_trace_read_error(rng):
    reads = {"value": False, "shape": False}

    def f(x):
        y = x * 2.0
        if reads["value"]:
            y.numpy()
        if reads["shape"]:
            y.shape
        return y + 1.0

    traced = trace(f)
    x = tensors(rng, (3,), 1)[0]
    traced(x)
    reads["value"] = True
    with pytest.raises(TraceReadError, match="value of this tensor is not read in trace"):
        traced(x)
    reads["value"], reads["shape"] = False, True
    traced(x)                                    # records, reading the shape
    traced(x)                                    # and replays it
    reads["shape"], reads["value"] = True, True
    with pytest.raises(TraceReadError, match="value of this tensor"):
        traced(x)
    # float(), int(), bool() of an unread one-element value read its value, and say so
    for convert in (float, int, bool):
        def g(x, convert=convert):
            total = (x * 2.0).sum()
            if reads["convert"]:
                convert(total)
            return total + 1.0

        reads["convert"] = False
        traced = trace(g)
        traced(x)
        traced(x)
        reads["convert"] = True
        with pytest.raises(TraceReadError, match="value of this tensor is not read in trace"):
            traced(x)
    # arguments are not the trace's values: reading them is always fine
    assert same_bits(trace(lambda a: a * float(a.numpy().sum()))(x).numpy(),
                     (x * float(x.numpy().sum())).numpy())


def test_exclude_from_trace_runs_eagerly_every_call(rng):
    calls = []

    def f(x):
        y = x * 2.0
        with exclude_from_trace():
            calls.append(float(y.numpy().sum()))
            noise = x * 0.0 + len(calls)
        return y + noise

    traced = trace(f)
    x = tensors(rng, (3,), 1)[0]
    for n in (1, 2, 3):
        assert same_bits(traced(x).numpy(), (x * 2.0 + (x * 0.0 + n)).numpy())
    assert len(calls) == 3 and traced.stats["replays"] == 2
    symbolic = trace(f, symbolic=True)
    with pytest.raises(ValueError, match="symbolic"):
        symbolic(x)


def test_nested_traces_are_refused_and_errors_discard_the_record(rng):
    inner = trace(lambda x: x + 1.0)
    outer = trace(lambda x: inner(x) * 2.0)
    x = tensors(rng, (3,), 1)[0]
    with pytest.raises(RuntimeError, match="nested"):
        outer(x)
    assert not imp._core.tracing_active()
    assert same_bits(inner(x).numpy(), (x + 1.0).numpy())      # usable after

    fail = {"on": True}

    def f(x):
        y = x + 1.0
        if fail["on"]:
            raise KeyError("boom")
        return y

    traced = trace(f, symbolic=True)
    with pytest.raises(KeyError):
        traced(x)
    assert traced.stats["signatures"] == 0
    fail["on"] = False
    assert same_bits(traced(x).numpy(), (x + 1.0).numpy())
    assert traced.stats == {"records": 1, "replays": 0, "mismatches": 0, "signatures": 1,
                            "served": 0}


@pytest.mark.parametrize("outer_symbolic", [False, True])
@pytest.mark.parametrize("by_keyword", [False, True])
def test_a_symbolic_trace_that_would_replay_is_refused_inside_another(rng, outer_symbolic,
                                                                      by_keyword):
    """Nesting is refused whatever the inner trace would do: here replay (by the C fast
    path for a positional call, the Python one for a keyword call)."""
    inner = trace(lambda x: x + 1.0, symbolic=True)
    call = (lambda x: inner(x=x)) if by_keyword else inner
    x = tensors(rng, (3,), 1)[0]
    call(x)
    call(x)
    outer = trace(lambda x: call(x) * 2.0, symbolic=outer_symbolic)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="nested"):
            outer(x)
    assert not imp._core.tracing_active() and outer.stats["signatures"] == 0
    same_results(call(x), x + 1.0)                      # usable after
    assert inner.stats["records"] == 1


class Twice(imp.GenericPyOp):
    def _default_rule(self, x):
        return x * 2.0


class SumAndScaled(imp.GenericPyOp):
    def __init__(self, k):
        self.k = k

    def _default_rule(self, x):
        return x.sum(), x * self.k


class Same(imp.GenericPyOp):
    def _default_rule(self, x):
        return x


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("shared", [False, True])
def test_apply_of_a_generic_py_op_in_a_trace_records_the_ops_of_its_rule(rng, symbolic, shared):
    """imp.apply(GenericPyOp, ...) inside a traced call: the rule's ops are recorded (not
    the op, whose kernel a replay cannot run), so an op made per call, equal or not to the
    recorded one, checks and replays; its outputs stay new tensors (Same: an in-place
    update of its output leaves its input alone)."""
    twice = Twice()

    def f(x):
        (y,) = imp.apply(twice if shared else Twice(), x + 1.0)
        total, scaled = imp.apply(SumAndScaled(3.0), y)
        (z,) = imp.apply(Same(), scaled)
        z += 1.0
        return y - 1.0, total, scaled, z

    xs = tensors(rng, (4,), 4)
    traced = replays_match_eager(f, symbolic, lambda k: (xs[k],), calls=4)
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 3
    assert not any(isinstance(step.op, imp.GenericPyOp) for step in traced._last.program.steps)


class OwnGradient(imp.GenericPyOp):
    def _default_rule(self, x):
        return x * 2.0


@pytest.mark.parametrize("symbolic", [False, True])
def test_apply_of_a_generic_py_op_in_a_traced_gradient_recording(symbolic):
    """No gradient passes the op, as in eager (it has no rule); one with its own rule is
    refused, as a replay could not apply that rule."""
    from imperative.autodiff.registry import RULES, defgrad
    w = imp.Parameter(np.ones(3, np.float32))

    def step(op):
        gm = GradManager().attach([w])
        with gm:
            (y,) = imp.apply(op, w * 3.0)
            gm.backward((y + w).sum())
        return y

    traced = trace(lambda: step(Twice()), symbolic=symbolic)
    for _ in range(3):
        w.grad = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = traced()
        assert same_bits(w.grad.numpy(), np.ones(3, np.float32))     # from `+ w` alone
        assert same_bits(got.numpy(), np.full(3, 6.0, np.float32))
    defgrad(OwnGradient)(lambda *args: None)
    try:
        with pytest.raises(NotImplementedError, match="gradient rule"):
            trace(lambda: step(OwnGradient()), symbolic=symbolic)()
    finally:
        del RULES[OwnGradient]


def test_structures_kwargs_and_returned_arguments(rng):
    def f(pair, *, scale, extra=None):
        a, b = pair
        return {"sum": a + b * scale, "a": a, "n": 3}

    for symbolic in (False, True):
        traced = trace(f, symbolic=symbolic)
        for _ in range(3):
            a, b = tensors(rng, (2, 2))
            got = traced((a, b), scale=2.0)
            assert same_bits(got["sum"].numpy(), (a + b * 2.0).numpy())
            assert got["a"] is a or same_bits(got["a"].numpy(), a.numpy())
            assert got["n"] == 3


def same_results(got, want):
    """Equal structures (same types) whose Tensors have the eager run's shape, bits and
    `.shape`."""
    assert type(got) is type(want)
    if isinstance(want, imp.Tensor):
        assert got.shape == want.shape
        assert same_bits(got.numpy(), want.numpy())
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same_results(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            same_results(got[k], want[k])
    else:
        assert got == want


def replays_match_eager(f, symbolic, make_args, calls=3):
    """`calls` calls of traced `f` (the first records) on fresh arguments, each the eager
    run's results; returns the trace."""
    traced = trace(f, symbolic=symbolic)
    for k in range(calls):
        same_results(traced(*make_args(k)), f(*make_args(k)))
    return traced


def _set(t, index, value):
    t[index] = value
    return t


# 0-d constants of a compiled plan (a 0-d Python scalar or Tensor literal) must stay 0-d
ZERO_D_CONSTANTS = {
    "setitem of one element": lambda x: _set(x * 1.0, 0, 3.0),
    "setitem of the last element": lambda x: _set(x * 1.0, -1, 3.0),
    "setitem of one element from a 0-d Tensor": lambda x: _set(x * 1.0, 0, imp.Tensor(3.0)),
    "setitem of one element of a matrix": lambda x: _set(x.reshape(2, 2) * 1.0, (0, 1), 3.0),
    "where with a 0-d constant": lambda x: F.where(x.sum() > 0, x.sum(), 0.0),
    "a 0-d constant cast": lambda x: (x * 2.0, imp.Tensor(3.0).astype("int32")),
    "a 0-d constant reduced": lambda x: (x * 2.0, imp.Tensor(3.0).sum()),
    "a stack of 0-d values": lambda x: F.stack([x.sum(), imp.Tensor(1.0)]),
}


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("case", list(ZERO_D_CONSTANTS))
def test_zero_d_constants_stay_zero_d_in_a_compiled_replay(rng, symbolic, case):
    xs = tensors(rng, (4,), 3)
    traced = replays_match_eager(ZERO_D_CONSTANTS[case], symbolic, lambda k: (xs[k],))
    assert traced.stats["records"] == 1


Pair = collections.namedtuple("Pair", "a b")


class Items(list):
    pass


class TwoFields(tuple):
    """A tuple subclass whose constructor takes its fields, not an iterable of them."""

    def __new__(cls, a, b):
        return super().__new__(cls, (a, b))


class Box:
    def __init__(self, t):
        self.t = t


CONTAINER_RESULTS = {
    "namedtuple": lambda x: Pair(x * 2.0, x + 1.0),
    "namedtuple in a dict": lambda x: {"p": Pair(x * 2.0, (x + 1.0, 3))},
    "OrderedDict": lambda x: collections.OrderedDict([("b", x * 2.0), ("a", x + 1.0)]),
    "defaultdict": lambda x: collections.defaultdict(list, {"a": x * 2.0}),
    "list subclass": lambda x: Items([x * 2.0, x - 1.0]),
}


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("case", list(CONTAINER_RESULTS))
def test_tuple_list_and_dict_subclasses_are_walked_in_results(rng, symbolic, case):
    xs = tensors(rng, (3,), 3)
    f = CONTAINER_RESULTS[case]
    traced = replays_match_eager(f, symbolic, lambda k: (xs[k],))
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 2
    if case == "defaultdict":
        assert traced(xs[0]).default_factory is list


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_namedtuple_argument_is_walked_and_not_kept_by_the_cache(rng, symbolic):
    def f(p):
        return p.a * 10.0 + p.b

    traced = trace(f, symbolic=symbolic)
    refs = []
    for _ in range(3):
        p = Pair(*tensors(rng, (3,)))
        refs.append(weakref.ref(p.a))
        same_results(traced(p), f(p))
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 2
    del p
    gc.collect()
    assert all(r() is None for r in refs)


def test_a_result_that_cannot_be_rebuilt_or_keeps_tensors_is_refused_at_record(rng):
    x = tensors(rng, (3,), 1)[0]
    for f, name in [(lambda x: TwoFields(x * 2.0, x), "TwoFields"),
                    (lambda x: Box(x * 2.0), "Box"), (lambda x: (Box(x), 1), "Box")]:
        traced = trace(f, symbolic=True)
        with pytest.raises(TypeError, match=name):
            traced(x)
        assert traced.stats["records"] == 0
        traced = trace(f)                   # (the body runs at every call: nothing is kept)
        assert traced(x) is not traced(x)
    # an object holding only tensors the call did not make (a Module) is kept as it is
    model = nn.Linear(3, 2)
    traced = trace(lambda x: (model(x), model), symbolic=True)
    for _ in range(3):
        got, m = traced(x)
        assert m is model and same_bits(got.numpy(), model(x).numpy())


@pytest.mark.parametrize("symbolic", [False, True])
def test_an_argument_given_twice_is_part_of_the_signature(rng, symbolic):
    traced = trace(lambda a, b: a * 2.0 + b, symbolic=symbolic)
    x, y = tensors(rng, (5,))
    for a, b in [(x, x), (x, y), (y, y), (x, y)]:
        assert same_bits(traced(a, b).numpy(), (a * 2.0 + b).numpy())
    assert traced.stats["records"] == 2


def test_a_symbolic_record_that_reads_a_computed_value_warns(rng):
    from imperative.jit import TraceValueReadWarning
    traced = trace(lambda x: x * 2.0 if float((x * 1.0).sum()) > 0 else x, symbolic=True)
    with pytest.warns(TraceValueReadWarning, match="read the value"):
        traced(tensors(rng, (3,), 1)[0])


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="function"):
        trace(3)
    with pytest.raises(TypeError, match="function.*NoneType"):
        trace(None)
    with pytest.raises(ValueError, match="cache_size"):
        trace(chain, cache_size=0)
    # section 3's convention: a value of another type is a TypeError, at once in the
    # decorator form too
    for options in [dict(symbolic="yes"), dict(capture_as_const=1), dict(cache_size=1.5),
                    dict(cache_size=True)]:
        name = next(iter(options))
        with pytest.raises(TypeError, match=name):
            trace(chain, **options)
        with pytest.raises(TypeError, match=name):
            trace(**options)
    assert trace(symbolic=np.bool_(True), cache_size=np.int64(2))(chain).symbolic is True
    traced = trace(lambda x, opts: x, symbolic=True)
    with pytest.raises(TypeError, match="hashable"):
        traced(imp.Tensor([1.0]), {1, 2})
    with pytest.raises(ValueError, match="capture_as_const"):
        traced.dump("/tmp/never.onnx")


def test_external_tensors_are_read_afresh_each_call(rng):
    w = imp.Parameter(np.ones((3,), np.float32))
    traced = trace(lambda x: x * w, symbolic=True)
    x = tensors(rng, (3,), 1)[0]
    traced(x)
    w._set_info_from(w + 1.0)                  # an update outside the trace
    assert same_bits(traced(x).numpy(), (x * w).numpy())
    assert traced.stats["replays"] == 1


def test_inplace_updates_of_parameters_and_arguments_are_effects(rng):
    w = imp.Parameter(np.zeros((3,), np.float32))

    def f(x):
        w._set_info_from(w + x)
        x += 1.0
        return w * 2.0

    traced = trace(f, symbolic=True)
    eager_w = imp.Parameter(np.zeros((3,), np.float32))
    for _ in range(3):
        x = tensors(rng, (3,), 1)[0]
        x_eager = imp.Tensor(x)
        eager_w._set_info_from(eager_w + x_eager)
        want = (eager_w * 2.0).numpy()
        x_eager += 1.0
        assert same_bits(traced(x).numpy(), want)
        assert same_bits(w.numpy(), eager_w.numpy())
        assert same_bits(x.numpy(), x_eager.numpy())


class _Unflatten(nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], 1, 4, 4)


def _mlp_step(opt_cls, batch_norm=False, **opt_kw):
    """A training step on (8, 16) inputs: an MLP, or with batch_norm a small CNN with
    BatchNorm (its running statistics are effects too)."""
    if batch_norm:
        model = nn.Sequential(nn.Flatten(), nn.Linear(16, 16), _Unflatten(),
                              nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(),
                              nn.Flatten(), nn.Linear(32, 4))
    else:
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = opt_cls(model.parameters(), **opt_kw)
    return model, opt, training_step(model, opt)


@pytest.mark.parametrize("symbolic", [False, True])
@pytest.mark.parametrize("opt_cls,kw,bn", [(optim.SGD, dict(lr=0.1, momentum=0.9), False),
                                           (optim.Adam, dict(lr=1e-2), True)])
def test_training_step_replays_bit_identical_to_the_eager_loop(rng, symbolic, opt_cls, kw, bn):
    m1, o1, eager = _mlp_step(opt_cls, bn, **kw)
    m2, o2, step = _mlp_step(opt_cls, bn, **kw)
    m2.load_state_dict(m1.state_dict())
    traced = trace(step, symbolic=symbolic)
    for _ in range(4):
        x = imp.Tensor(rng.standard_normal((8, 16)).astype(np.float32))
        y = imp.Tensor(rng.integers(0, 4, 8))
        assert same_bits(traced(x, y).numpy(), eager(x, y).numpy())
    for (name, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert same_bits(a.numpy(), b.numpy()), name       # incl. BatchNorm's statistics
    for s1, s2 in zip(o1.state.values(), o2.state.values()):
        for k in s1:
            assert same_bits(s1[k].numpy(), s2[k].numpy()), k
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 3
    assert traced.stats["served"] == (0 if symbolic else 3)   # checked calls: from the plan


def test_gradients_land_in_grad_and_accumulate(rng):
    w = imp.Parameter(np.ones((4,), np.float32))
    gm = GradManager().attach([w])

    def f(x):
        with gm:
            gm.backward((w * x).sum())

    traced = trace(f, symbolic=True)
    x = imp.Tensor(np.arange(4, dtype=np.float32))
    traced(x)
    assert same_bits(w.grad.numpy(), x.numpy())
    traced(x)                          # w.grad is set now: another path (old + grad)
    assert same_bits(w.grad.numpy(), (x + x).numpy())
    traced(x)
    assert same_bits(w.grad.numpy(), (x + x + x).numpy())
    w.grad = None
    traced(x)
    assert same_bits(w.grad.numpy(), x.numpy())
    assert traced.stats["records"] == 2 and traced.stats["replays"] == 2


def test_float_warnings_of_fused_loops_are_numpys(rng):
    traced = trace(lambda x: F.exp(x) * 2.0, symbolic=True)
    x = imp.Tensor(np.array([1.0, 100.0], np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced(x)
    with pytest.warns(RuntimeWarning, match="overflow encountered in exp"):
        got = traced(x).numpy()
    assert np.isinf(got[1])
    with np.errstate(over="raise"), pytest.raises((FloatingPointError, imp.AsyncError)):
        traced(x).numpy()
        imp.sync()


def in_threads(work, args):
    """work(arg) for each arg, each on a thread of its own, all at once; re-raises the
    first error."""
    errors = []

    def run(arg):
        try:
            work(arg)
        except BaseException as e:          # pragma: no cover - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_replay_from_several_threads(rng):
    traced = trace(chain, symbolic=True)
    x, y = tensors(rng, (64,))
    want = chain(x, y).numpy()
    traced(x, y)
    big_x, big_y = tensors(rng, (40000,))
    big_want = chain(big_x, big_y).numpy()
    traced(big_x, big_y)

    def work(_):
        for _ in range(50):
            assert same_bits(traced(x, y).numpy(), want)
            assert same_bits(traced(big_x, big_y).numpy(), big_want)

    in_threads(work, range(4))


def test_first_calls_from_several_threads_record_in_turn(rng):
    traced = trace(chain, symbolic=False)
    inputs = [tensors(rng, (n,)) for n in range(1, 9)]
    results = {}

    def work(i):
        results[i] = traced(*inputs[i]).numpy()

    in_threads(work, range(len(inputs)))
    for i, (x, y) in enumerate(inputs):
        assert same_bits(results[i], chain(x, y).numpy())


@pytest.mark.parametrize("symbolic", [False, True])
def test_replays_leak_no_handles(rng, symbolic):
    model, opt, step = _mlp_step(optim.Adam, lr=1e-3)
    traced = trace(step, symbolic=symbolic)
    x = imp.Tensor(rng.standard_normal((8, 16)).astype(np.float32))
    y = imp.Tensor(rng.integers(0, 4, 8))
    traced(x, y)
    traced(x, y).numpy()
    gc.collect()
    before = live_handle_count()
    for _ in range(200):
        traced(x, y)
    gc.collect()
    assert live_handle_count() == before


def test_profiler_shows_each_replayed_op_in_its_recorded_scope(rng, tmp_path):
    def f(x, y):
        with imp.scope("layer"):
            return chain(x, y)

    traced = trace(f, symbolic=True)
    x, y = tensors(rng, (16,))
    traced(x, y)
    with imp.Profiler(path=str(tmp_path)) as prof:
        got = traced(x, y)
    assert same_bits(got.numpy(), chain(x, y).numpy())
    with open(prof.files[0]) as fh:
        events = json.load(fh)["traceEvents"]
    ops = [e for e in events if e["ph"] == "X" and e.get("cat") == "op"]
    assert {"Elemwise.TANH", "Elemwise.EXP", "Elemwise.MUL"} <= {e["name"] for e in ops}
    scopes = {e["args"].get("scope") for e in ops if e["name"].startswith("Elemwise")}
    assert len(scopes) == 1 and scopes.pop().startswith("layer")   # (layer[1], ... run again)


def test_replay_under_a_dtr_budget_holds_it_and_stays_bit_identical(rng):
    n = 50000

    def f(x):
        outs, t = [], x
        for _ in range(12):
            t = F.tanh(t * 0.9 + 0.1)
            outs.append(t)
        return outs

    traced = trace(f, symbolic=True)
    x = tensors(rng, (n,), 1)[0]
    want = [t.numpy().copy() for t in f(x)]
    traced(x)
    old = (imp.get_option("dtr_eviction_threshold"), imp.get_option("dtr_evictee_minimum_size"))
    budget = 8 * n * 4
    imp.dtr.enable(eviction_threshold=budget, evictee_minimum_size=1024)
    try:
        imp.sync()
        base = imp.memory_stats()["allocated"]
        imp.reset_peak_memory_stats()
        outs = traced(x)
        imp.sync()
        assert imp.memory_stats()["peak_allocated"] <= max(budget, base) + 2 * n * 4
        for t, w in zip(outs, want):
            assert same_bits(t.numpy(), w)
    finally:
        imp.dtr.disable()
        imp.set_option("dtr_eviction_threshold", old[0])
        imp.set_option("dtr_evictee_minimum_size", old[1])


def test_kernel_errors_in_a_replay_surface_as_async_errors(rng):
    traced = trace(lambda x, i: x[i] * 2.0, symbolic=True)
    x = imp.Tensor(np.arange(4, dtype=np.float32))
    traced(x, imp.Tensor(np.array([1, 2], np.int32)))
    with pytest.raises((imp.AsyncError, IndexError)) as info:
        traced(x, imp.Tensor(np.array([1, 9], np.int32))).numpy()
        imp.sync()
    notes = "".join(getattr(info.value, "__notes__", ()))
    assert "jit.plan" in str(info.value) or "replay" in notes
    assert same_bits(traced(x, imp.Tensor(np.array([3, 0], np.int32))).numpy(),
                     np.array([6.0, 0.0], np.float32))


def test_dump_writes_the_recorded_forward_program_as_onnx(rng, tmp_path):
    pytest.importorskip("imperative.jit.onnx_export")     # (the exporter's own branch)
    ort = pytest.importorskip("onnxruntime")
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    traced = trace(lambda x: F.softmax(model(x), axis=-1), symbolic=True,
                   capture_as_const=True)
    x = tensors(rng, (2, 8), 1)[0]
    want = traced(x).numpy()
    path = str(tmp_path / "mlp.onnx")
    traced.dump(path, arg_names=["x"], output_names=["y"])
    got = ort.InferenceSession(path).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_replayed_view_of_an_argument_shares_its_storage(rng, symbolic):
    """A plan's output that views an input (a reshape handed back) is counted once, as the
    eager view is; a fresh output adds its own bytes."""
    traced = trace(lambda x: (x.reshape(-1), x * 2.0), symbolic=symbolic)
    x = imp.Tensor(rng.standard_normal((64, 32)).astype(np.float32))
    nbytes = 64 * 32 * 4
    for _ in range(3):
        imp.sync()
        before = imp.memory_stats()["allocated"]
        view, doubled = traced(x)
        imp.sync()
        assert imp.memory_stats()["allocated"] - before == nbytes     # the product only
        assert same_bits(view.numpy(), x.numpy().reshape(-1))
        assert same_bits(doubled.numpy(), x.numpy() * np.float32(2.0))
        del view, doubled


@pytest.mark.parametrize("read, what", [
    (lambda x, y: x * 2.0 if y.numpy().sum() > 0 else x, "the value of an argument"),
    (lambda x, y: x * float(WEIGHT.numpy().sum()), "the value of a tensor from outside"),
    (lambda x, y: x[x > 0].sum() / x[x > 0].shape[0],
     "the shape of a tensor whose shape depends on data"),
    (lambda x, y: y * (x[x > 0] * 2.0).shape[0],
     "the shape of a tensor whose shape depends on data"),
])
def test_a_symbolic_record_warns_of_each_read_its_replays_freeze(rng, read, what):
    """Reads whose result a later call could change (an argument's value, an outside
    tensor's, a data-dependent shape) are replayed as the first call read them: warned,
    as a computed value's read is (the audit's D7: an argument's value read gave no
    warning, and the replays computed with the first call's number)."""
    from imperative.jit import TraceValueReadWarning
    x, y = tensors(rng, (6,), 2)
    with pytest.warns(TraceValueReadWarning, match=what):
        trace(read, symbolic=True)(x, y)


def test_a_symbolic_record_reading_shapes_of_arguments_or_constants_does_not_warn(rng):
    """An argument's shape is part of the signature and a constant is the same at every
    call: nothing to warn of."""
    from imperative.jit import TraceValueReadWarning

    def body(x):
        scale = imp.Tensor(np.float32(2.0))
        return x * float(scale) / x.shape[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceValueReadWarning)
        traced = trace(body, symbolic=True)
        x = tensors(rng, (5,), 1)[0]
        assert same_bits(traced(x).numpy(), body(x).numpy())


WEIGHT = imp.Tensor(np.arange(3, dtype=np.float32))
