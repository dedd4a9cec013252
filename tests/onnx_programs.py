"""Test-only helpers of the ONNX export tests: programs of one op, a stand-in recorder, and
running an exported model in onnxruntime.

`record` stands in for `imp.jit.trace` until the tracer lands on main: it runs a function
eagerly and notes each op the core issues (through the core's per-op hook, the one autodiff
uses, so operators and the host fast path are seen as well as `apply`) into a Program. It
classifies inputs the simple way: the function's tensor arguments, what the recorded ops made,
and everything else (Parameters, scalar operands) as external with its value captured.
"""
from __future__ import annotations

import math

import numpy as np
import onnxruntime as ort
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import _core
from imperative.jit.onnx_export import export
from imperative.jit.program import ARGUMENT, CONSTANT, EXTERNAL, INTERNAL, Program, Step

# "within 1e-5 relative": each element within 1e-5 of the expected one relatively, or
# within 1e-5 of the largest expected magnitude (float32 sums taken in another order differ
# by rounding relative to their terms, not to a result that cancels to near zero)
RTOL = 1e-5
FLOAT16_RTOL = 1e-3     # float16 results: one float16 rounding step apart at most

# the per-op tests: a dozen draws each (every op is tested at two async levels)
QUICK = settings(max_examples=12, deadline=None, database=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])
SEEDS = st.integers(0, 2 ** 32 - 1)


def one_step_program(op, tensors):
    """A Program with one step, `op` applied to `tensors` (all arguments), and the eager
    results of `imp.apply(op, *tensors)`."""
    results = imp.apply(op, *tensors)
    program = Program()
    ins = [program.new_value(t.shape, t.dtype, ARGUMENT).id for t in tensors]
    outs = [program.new_value(r.shape, r.dtype, INTERNAL).id for r in results]
    program.arguments, program.results = ins, list(outs)
    program.steps.append(Step(op, tuple(ins), tuple(outs)))
    return program, results


def record(fn, *args):
    """(Program, results): `fn(*args)` run eagerly, every op it issued recorded. `args` are
    Tensors; `fn` returns a Tensor or a tuple of them."""
    program = Program()
    ids = {}                    # id(TensorInfo) -> value id
    keep = []                   # the infos seen, alive so that their ids stay unique
    captured = []               # (Value, Tensor) of external values, read after the run

    def value_of(info, kind):
        keep.append(info)
        value = program.new_value(info.shape, info.dtype, kind)
        ids[id(info)] = value.id
        return value

    for a in args:
        program.arguments.append(value_of(a._record, ARGUMENT).id)

    def on_op(op, inputs, outputs):
        for info in inputs:
            if id(info) not in ids:
                if info.handle < 0:     # a Python scalar operand: a resident constant
                    value_of(info, CONSTANT).data = np.array(info.value)
                else:
                    captured.append((value_of(info, EXTERNAL), _core.wrap_info(info)))
        outs = [value_of(info, INTERNAL).id for info in outputs]
        program.steps.append(Step(op, tuple(ids[id(i)] for i in inputs), tuple(outs)))
        if saved is not None:
            saved(op, inputs, outputs)

    saved = _core.get_grad_hook()
    _core.set_grad_hook(on_op)
    try:
        results = fn(*args)
    finally:
        _core.set_grad_hook(saved)
    results = results if isinstance(results, tuple) else (results,)
    program.results = [ids[id(r._record)] for r in results]
    for value, tensor in captured:
        value.data = tensor.numpy()
    return program, results


def run_exported(program, path, inputs, **export_args):
    """Export `program` to `path`, run it in onnxruntime on `inputs` (numpy arrays, by
    argument position); returns (outputs, the ModelProto)."""
    model = export(program, path, **export_args)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1        # the machine is shared
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs))), model


def assert_matches(actual, expected, rtol=RTOL):
    """An onnxruntime output equals an eager result: same dtype and shape, values within
    `rtol` (see RTOL); exact for integers and bools."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(actual, expected)
        return
    finite = np.abs(expected[np.isfinite(expected)])
    scale = float(finite.max()) if finite.size else 0.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


def random_values(seed, shape, dtype, low=-3.0, high=3.0):
    """Random values of `dtype` in [low, high) (integers: whole numbers in that range)."""
    r = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return r.random(shape) < 0.5
    if dtype.kind in "iu":
        return r.integers(math.ceil(low), math.floor(high), shape, endpoint=True).astype(dtype)
    return r.uniform(low, high, shape).astype(dtype)


def check_op(op, arrays, tmp_path, opset=17):
    """Export `op` applied to `arrays` (one step), run it in onnxruntime: equal to the
    eager result."""
    tensors = [imp.Tensor(a, dtype=a.dtype) for a in arrays]
    program, results = one_step_program(op, tensors)
    outputs, _ = run_exported(program, tmp_path / "op.onnx", [t.numpy() for t in tensors],
                              opset=opset)
    assert len(outputs) == len(results)
    for got, expected in zip(outputs, results):
        expected = expected.numpy()
        assert_matches(got, expected, FLOAT16_RTOL if expected.dtype == np.float16 else RTOL)
