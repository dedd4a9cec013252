"""imp.jit.trace over random numbers: each later call of a traced function draws the next
seeds from imperative.random's generator, as its eager call would, so that it gives the
eager call's numbers (new ones each call, not the recorded call's again), and a checked
call (symbolic=False) takes an RNG op that differs only by its seed for the recorded one.
A symbolic replay runs the compiled plan, its RNG ops with the call's seeds."""
import numpy as np
import pytest

import imperative as imp
from imperative import F, nn, optim
from imperative.jit import TraceMismatchError, trace
from imperative.models import training_step


def noisy(x):
    return F.dropout(x, 0.3) * imp.random.normal(1.0, 0.5, size=x.shape) + imp.random.uniform(
        size=x.shape[-1])


@pytest.mark.parametrize("symbolic", [False, True])
def test_each_call_draws_the_next_numbers_as_the_eager_call_does(symbolic):
    x = imp.Tensor(np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8))
    imp.random.seed(11)
    eager = [noisy(x).numpy() for _ in range(4)]
    imp.random.seed(11)
    traced = trace(noisy, symbolic=symbolic)
    got = [traced(x).numpy() for _ in range(4)]
    for want, have in zip(eager, got):
        assert want.tobytes() == have.tobytes()
    assert not np.array_equal(got[1], got[2])                    # new numbers each call
    assert traced.stats["records"] == 1 and traced.stats["replays"] == 3
    assert traced.stats["mismatches"] == 0
    if symbolic:
        _assert_compiled(traced)


def _assert_compiled(traced):
    """The replays ran the compiled plan as one op, its RNG ops among its steps."""
    plan = traced._last.plan
    assert plan.compiled is not None and plan.op is not None
    assert len(plan.rng_ops) >= 1


def test_a_checked_call_with_other_rng_parameters_is_a_mismatch():
    x = imp.Tensor(np.ones((4, 4), np.float32))
    p = [0.3]
    traced = trace(lambda t: F.dropout(t, p[0]), symbolic=False)
    traced(x)
    traced(x)                                                     # another seed: the same op
    p[0] = 0.5
    with pytest.raises(TraceMismatchError, match="DropoutBitsRNG"):
        traced(x)


def _dropout_step():
    imp.random.seed(3)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.25), nn.Linear(32, 4))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, training_step(model, opt)


@pytest.mark.parametrize("symbolic", [False, True])
def test_a_training_step_with_dropout_replays_the_eager_loop_bit_for_bit(symbolic):
    data = np.random.default_rng(0)
    batches = [(data.standard_normal((8, 16)).astype(np.float32), data.integers(0, 4, 8))
               for _ in range(4)]
    eager_model, eager_step = _dropout_step()
    imp.random.seed(7)
    eager_losses = [eager_step(imp.Tensor(x), imp.Tensor(y)).numpy() for x, y in batches]
    model, step = _dropout_step()
    traced = trace(step, symbolic=symbolic)
    imp.random.seed(7)
    losses = [traced(imp.Tensor(x), imp.Tensor(y)).numpy() for x, y in batches]
    assert [a.tobytes() for a in losses] == [a.tobytes() for a in eager_losses]
    for (name, a), (_, b) in zip(eager_model.state_dict().items(),
                                 model.state_dict().items()):
        assert a.numpy().tobytes() == b.numpy().tobytes(), name
    assert traced.stats["replays"] == 3
    if symbolic:
        _assert_compiled(traced)


@pytest.mark.parametrize("shape", [(6, 8), (640, 512)])
def test_a_compiled_plan_with_rng_ops_runs_them_with_each_calls_seeds(async_level, shape):
    """Each replay runs the plan with its own call's seeds, on the caller's thread (small)
    or as one command on the worker (large); the plan run with the recorded seeds gives
    the recorded call's numbers."""
    x = imp.Tensor(np.linspace(-2, 2, shape[0] * shape[1], dtype=np.float32).reshape(shape))
    imp.random.seed(5)
    eager = [noisy(x).numpy() for _ in range(3)]
    imp.random.seed(5)
    traced = trace(noisy, symbolic=True)
    runs = [traced(x).numpy() for _ in range(3)]
    assert [a.tobytes() for a in runs] == [a.tobytes() for a in eager]
    _assert_compiled(traced)
    plan = traced._last.plan
    assert plan.compiled.run([x.numpy()])[0].tobytes() == eager[0].tobytes()
