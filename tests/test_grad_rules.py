"""Backward rules checked one by one, without the autodiff engine: each rule's gradients
are a vector-Jacobian product, so for a random output cotangent dy and random directions v
they must satisfy

    <rule(dy)_i, v> == d/de <dy, f(x + e v)> at e = 0

which we estimate with central differences of the op's own numpy kernel. The kernels
compute in float32 (float64 inputs are downcast by the contract), so the differences are
taken on float32 outputs accumulated in float64, with an eps large enough that float32
rounding stays small and inputs chosen away from kinks (relu at 0, ties of max, ...).
Where PyTorch imports, the NN rules are also compared with its autograd."""
import functools
import math
from typing import NamedTuple

import numpy as np
import pytest

import imperative as imp
from imperative import ops as O
from imperative.grad_rules import GradContext, IndexingIncrMultiAxisVec, get_rule
from imperative.ops.elemwise import ActivationGrad, ScaledAdd
from imperative.ops.indexing import TENSOR

EPS = 1e-3


# ---------------------------------------------------------------------------------------
# Input generators: each takes the test's rng and returns float32 (or index) arrays


def normal(*shape):
    return lambda r: r.standard_normal(shape).astype(np.float32)


def uniform(lo, hi, *shape):
    return lambda r: r.uniform(lo, hi, shape).astype(np.float32)


def away(*shape, gap=0.3):
    """Values with |x| in [gap, 2]: clear of a kink at 0."""
    return lambda r: (r.uniform(gap, 2, shape) * r.choice([-1, 1], shape)).astype(np.float32)


def distinct(*shape):
    """A permutation of values 0.1 apart: no ties for max/min, even after perturbation."""
    size = int(np.prod(shape))
    return lambda r: ((r.permutation(size) - size / 2) * 0.1).reshape(shape).astype(np.float32)


def off_integers(*shape):
    """k + 0.25: clear of the steps of floor, ceil, trunc, round and sign."""
    return lambda r: (r.integers(-3, 3, shape) + 0.25).astype(np.float32)


def clear_of(points, *shape):
    """Normal values at least 0.1 away from each of `points` (clip's bounds, hswish's)."""
    def make(r):
        x = r.uniform(-5, 5, shape)
        for p in points:
            near = np.abs(x - p) < 0.1
            x[near] += 0.2
        return x.astype(np.float32)
    return make


def indices(high, *shape):
    return lambda r: r.integers(0, high, shape).astype(np.int32)


def const(array):
    return lambda r: np.asarray(array)


class Case(NamedTuple):
    id: str
    op: object
    inputs: tuple                 # generators
    cotangents: tuple = None      # indices of the outputs that get a dy (None: all)
    buffers: tuple = ()           # float inputs without gradients (running statistics)
    rtol: float = 2e-3


def C(id, op, *inputs, **kw):
    return Case(id, op, inputs, **kw)


def E(mode):
    return O.Elemwise(mode)


def R(mode, axis=None, keepdims=False):
    return O.Reduce(mode, axis, keepdims)


S = slice

_UNARY = {
    "NEGATE": normal(3, 4), "ABS": away(3, 4), "EXP": normal(3, 4), "EXPM1": normal(3, 4),
    "LOG": uniform(0.5, 2, 3, 4), "LOG1P": uniform(0.5, 2, 3, 4), "SQRT": uniform(0.5, 2, 3, 4),
    "RSQRT": uniform(0.5, 2, 3, 4), "SIN": normal(3, 4), "COS": normal(3, 4),
    "TAN": uniform(-1, 1, 3, 4), "TANH": normal(3, 4), "ERF": normal(3, 4), "RELU": away(3, 4),
    "SIGMOID": normal(3, 4), "GELU": normal(3, 4), "GELU_TANH": normal(3, 4),
    "SOFTPLUS": normal(3, 4), "SILU": normal(3, 4), "HSWISH": clear_of((-3, 3), 3, 4),
    "HSIGMOID": clear_of((-3, 3), 3, 4), "SIGN": off_integers(3, 4),
    "FLOOR": off_integers(3, 4), "CEIL": off_integers(3, 4), "TRUNC": off_integers(3, 4),
    "ROUND": off_integers(3, 4),
}

CASES = [C(f"elemwise-{m}", E(m), gen) for m, gen in _UNARY.items()] + [
    # binary elemwise, with broadcasting and 0-d operands
    C("add", E("ADD"), normal(3, 4), normal(3, 4)),
    C("add-bcast", E("ADD"), normal(2, 1, 4), normal(3, 1)),
    C("sub-bcast", E("SUB"), normal(4), normal(3, 4)),
    C("mul-bcast", E("MUL"), normal(2, 3, 1), normal(1, 4)),
    C("mul-scalar", E("MUL"), normal(), normal(3)),
    C("div-bcast", E("TRUE_DIV"), normal(3, 4), away(4)),
    C("pow", E("POW"), uniform(0.5, 2, 3, 4), normal(3, 4)),
    C("pow-bcast", E("POW"), uniform(0.5, 2, 3, 4), normal(1)),
    C("max", E("MAX"), distinct(3, 4), lambda r: distinct(3, 4)(r) + 0.05),
    C("min-bcast", E("MIN"), distinct(3, 4), lambda r: distinct(4)(r) + 0.05),
    # x / y in [3.05, 3.8]: clear of floor's steps, and the y gradient (-floor) is not 0
    C("mod", E("MOD"), uniform(3.2, 3.8, 3, 4), uniform(1, 1.05, 3, 4)),
    C("floor_div", E("FLOOR_DIV"), uniform(0.2, 0.8, 3, 4), uniform(1, 2, 3, 4)),
    C("add-int-float", E("ADD"), indices(5, 3, 4), normal(3, 4)),
    C("mul-float-int", E("MUL"), normal(3, 4), indices(5, 4)),
    C("leaky_relu", O.LeakyRelu(0.1), away(3, 4)),
    # reductions
    C("sum-all", R("SUM"), normal(3, 4)),
    C("sum-axis1", R("SUM", 1), normal(2, 3, 4)),
    C("sum-axes-keep", R("SUM", (0, 2), True), normal(2, 3, 4)),
    C("sum-0d", R("SUM"), normal()),
    C("mean-last-keep", R("MEAN", -1, True), normal(2, 3, 4)),
    C("mean-all", R("MEAN"), normal(2, 3)),
    C("sum_sqr", R("SUM_SQR", 0), normal(3, 4)),
    C("prod", R("PRODUCT", 1), away(3, 4, gap=0.5)),
    C("max-axis", R("MAX", 1), distinct(3, 4, 2)),
    C("max-all", R("MAX"), distinct(3, 4)),
    C("min-keep", R("MIN", (0, 1), True), distinct(3, 4, 2)),
    # matrix products
    C("matmul", O.MatrixMul(), normal(3, 4), normal(4, 5)),
    C("matmul-ta", O.MatrixMul(True, False), normal(4, 3), normal(4, 5)),
    C("matmul-tb", O.MatrixMul(False, True), normal(3, 4), normal(5, 4)),
    C("matmul-ta-tb", O.MatrixMul(True, True), normal(4, 3), normal(5, 4)),
    C("matmul-vec-mat", O.MatrixMul(), normal(4), normal(4, 5)),
    C("matmul-mat-vec", O.MatrixMul(), normal(3, 4), normal(4)),
    C("matmul-vec-vec", O.MatrixMul(), normal(4), normal(4)),
    C("matmul-batch-bcast", O.MatrixMul(), normal(2, 1, 3, 4), normal(5, 4, 2)),
    C("matmul-batch-mat", O.MatrixMul(False, True), normal(2, 3, 4), normal(5, 4)),
    C("bmm", O.BatchedMatrixMul(), normal(2, 3, 4), normal(2, 4, 5)),
    C("bmm-ta-tb", O.BatchedMatrixMul(True, True), normal(2, 4, 3), normal(1, 5, 4)),
    # shapes
    C("reshape", O.Reshape((4, -1)), normal(2, 3, 2)),
    C("broadcast", O.Broadcast((2, 3, 4)), normal(3, 1)),
    C("dimshuffle", O.Dimshuffle((2, 0, 1)), normal(2, 3, 4)),
    C("add_axis", O.AddAxis((0, 2)), normal(3, 4)),
    C("remove_axis", O.RemoveAxis((1,)), normal(3, 1, 4)),
    C("identity", O.Identity(), normal(3)),
    C("typecvt", O.TypeCvt("float32"), normal(3)),
    C("copy", O.Copy("cpu0"), normal(3)),
    C("subtensor", O.Subtensor((S(1, None), 0, S(None, None, 2))), normal(3, 4, 5)),
    C("subtensor-none-ellipsis", O.Subtensor((None, Ellipsis, S(-2, None))), normal(3, 4)),
    # indexing (repeated indices accumulate)
    C("getitem-int-array", O.IndexingMultiAxisVec((TENSOR,)), normal(4, 3), const([0, 2, 0, 3])),
    C("getitem-slice-array", O.IndexingMultiAxisVec((S(1, None), TENSOR)), normal(3, 4),
      const([[1, 1], [3, 0]])),
    C("getitem-mask", O.MaskedIndexingMultiAxisVec((TENSOR,)), normal(3, 4),
      const(np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 0, 0]], bool))),
    C("setitem-basic-bcast", O.SetSubtensor((S(1, 3),)), normal(4, 3), normal(3)),
    C("setitem-array", O.IndexingSetMultiAxisVec((TENSOR,)), normal(5, 3), normal(2, 3),
      const([1, 3])),
    C("incr-array", IndexingIncrMultiAxisVec((TENSOR,)), normal(5, 3), normal(1, 3),
      const([1, 3, 1])),
    # join, split, select
    C("concat", O.Concat(1), normal(2, 3), normal(2, 1), normal(2, 2)),
    C("concat-int", O.Concat(0), normal(2, 3), indices(4, 1, 3)),
    C("split-sections", O.Split(1, 3), normal(2, 6)),
    C("split-indices", O.Split(0, (1, 3)), normal(5, 2)),
    C("split-one-output", O.Split(0, (2,)), normal(5, 2), cotangents=(1,)),
    C("where-bcast", O.Where(), const(np.array([True, False, True, False])), normal(3, 4),
      normal(4)),
    C("clip", O.Clip(-0.5, 0.5), clear_of((-0.5, 0.5), 3, 4)),
    C("clip-lower", O.Clip(0.0, None), clear_of((0,), 3, 4)),
    # NN
    C("softmax", O.Softmax(1), normal(2, 5, 3)),
    C("softmax-last", O.Softmax(-1), normal(3, 4)),
    C("log_softmax", O.LogSoftmax(0), normal(4, 3)),
    C("cross_entropy-mean", O.CrossEntropy(-1, "mean"), normal(4, 5), indices(5, 4)),
    C("cross_entropy-none", O.CrossEntropy(1, "none"), normal(2, 5, 3), indices(5, 2, 3)),
    C("cross_entropy-sum", O.CrossEntropy(0, "sum"), normal(5, 3), indices(5, 3)),
    C("conv", O.Convolution(), normal(2, 3, 5, 5), normal(4, 3, 3, 3)),
    C("conv-stride-pad-bias", O.Convolution(2, 1), normal(2, 3, 6, 7), normal(4, 3, 3, 2),
      normal(4)),
    C("conv-dilation", O.Convolution(1, (1, 2), 2), normal(1, 2, 7, 6), normal(3, 2, 2, 3)),
    C("conv-groups", O.Convolution((2, 1), (0, 1), 1, 2), normal(2, 4, 7, 5),
      normal(6, 2, 3, 3), normal(6)),
    C("conv-int-input", O.Convolution(), indices(3, 1, 2, 4, 4), normal(3, 2, 2, 2)),
    # the backward ops of conv2d and of the activations have rules too (second order)
    C("conv-backward-data", O.ConvolutionBackwardData(2, 1, 1, 1, (6, 7)), normal(2, 4, 3, 4),
      normal(4, 3, 3, 2)),
    C("conv-backward-data-groups", O.ConvolutionBackwardData((2, 1), (0, 1), 1, 2, (7, 5)),
      normal(2, 6, 3, 5), normal(6, 2, 3, 3)),
    C("conv-backward-filter", O.ConvolutionBackwardFilter(1, (1, 2), 2, 1, (2, 3)),
      normal(1, 2, 7, 6), normal(1, 3, 7, 6)),
    C("conv-backward-filter-groups", O.ConvolutionBackwardFilter((2, 1), (0, 1), 1, 2, (3, 3)),
      normal(2, 4, 7, 5), normal(2, 6, 3, 5)),
    C("conv-backward-filter-bias", O.ConvolutionBackwardFilter(1, (1, 2), 2, 1, (2, 3), True),
      normal(2, 2, 7, 6), normal(2, 3, 7, 6)),
    # the bias gradient alone does not depend on x: x gets none
    C("conv-backward-filter-bias-only", O.ConvolutionBackwardFilter(1, 1, 1, 1, (3, 3), True),
      normal(1, 2, 5, 4), normal(1, 3, 5, 4), cotangents=(1,), buffers=(0,)),
    C("relu-grad", ActivationGrad("RELU"), normal(3, 4), away(3, 4)),
    C("sigmoid-grad", ActivationGrad("SIGMOID"), normal(3, 4), uniform(0.1, 0.9, 3, 4)),
    C("tanh-grad", ActivationGrad("TANH"), normal(3, 4), uniform(-0.9, 0.9, 3, 4)),
    C("gelu-grad", ActivationGrad("GELU"), normal(3, 4), normal(3, 4)),
    C("scaled-add", ScaledAdd(-0.3), normal(3, 4), normal(3, 4)),
    C("maxpool", O.Pooling("MAX", 2), distinct(2, 3, 4, 6)),
    C("maxpool-overlap-pad", O.Pooling("MAX", 3, 2, 1), distinct(2, 2, 7, 6)),
    C("avgpool", O.Pooling("AVERAGE", 2, 1, 1), normal(2, 3, 5, 4)),
    C("avgpool-exclude-pad", O.Pooling("AVERAGE_COUNT_EXCLUDE_PADDING", 3, 2, 1),
      normal(2, 2, 7, 6)),
    C("layer_norm", O.LayerNormForward((4,)), normal(3, 4)),
    C("layer_norm-affine", O.LayerNormForward((3, 4)), normal(2, 3, 4), normal(3, 4),
      normal(3, 4)),
    C("batch_norm-train", O.BatchNormForward(True), normal(4, 3, 2, 2), normal(3), normal(3)),
    C("batch_norm-train-running", O.BatchNormForward(True), normal(4, 3, 5), normal(3),
      normal(3), normal(3), uniform(0.5, 2, 3), cotangents=(0,), buffers=(3, 4)),
    C("batch_norm-eval", O.BatchNormForward(False), normal(4, 3, 2), normal(3), normal(3),
      normal(3), uniform(0.5, 2, 3), buffers=(3, 4)),
    C("embedding", O.Embedding(), const(np.array([[0, 2, 4], [2, 2, 1]], np.int32)),
      normal(5, 4)),
]


# ---------------------------------------------------------------------------------------
# Running a rule by hand, as the engine would


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def run_rule(op, arrays, dys):
    """The rule's gradients (numpy arrays or None) for inputs `arrays` and cotangents `dys`
    (None for outputs without one). The context holds only what the rule declared."""
    tensors = [imp.Tensor(a) for a in arrays]
    outputs = imp.apply(op, *tensors)
    rule = get_rule(op)
    assert rule is not None, f"no rule for {op!r}"
    keep_in, keep_out = set(rule.save_inputs(op)), set(rule.save_outputs(op))
    ctx = GradContext(
        tuple(t if i in keep_in else None for i, t in enumerate(tensors)),
        tuple(t if i in keep_out else None for i, t in enumerate(outputs)),
        tuple(t.shape for t in tensors), tuple(t.dtype for t in tensors),
        tuple(t.shape for t in outputs), tuple(t.dtype for t in outputs),
        (True,) * len(tensors))
    grads = rule.backward(op, ctx, tuple(None if d is None else imp.Tensor(d, dtype=o.dtype)
                                         for d, o in zip(dys, outputs)))
    assert len(grads) == len(arrays)
    return [None if g is None else g.numpy() for g in grads]


def objective(op, arrays, dys):
    """<dy, f(x)> summed over the outputs with a cotangent, in float64."""
    outs = _as_tuple(op.kernel(*arrays))
    return sum(float(np.sum(d.astype(np.float64) * np.asarray(o, np.float64)))
               for d, o in zip(dys, outs) if d is not None)


def check_vjp(op, arrays, dys, grads, rng, rtol=2e-3, buffers=(), directions=2):
    for i, (x, g) in enumerate(zip(arrays, grads)):
        if x.dtype.kind != "f" or i in buffers:
            assert g is None, f"input {i} ({x.dtype}) is not differentiable, got a gradient"
            continue
        assert g is not None, f"input {i}: no gradient"
        assert g.shape == x.shape and g.dtype == x.dtype, (i, g.shape, g.dtype)
        for _ in range(directions):
            v = rng.standard_normal(x.shape)
            shifted = [list(arrays), list(arrays)]
            shifted[0][i] = (x + EPS * v).astype(x.dtype)
            shifted[1][i] = (x - EPS * v).astype(x.dtype)
            fd = (objective(op, shifted[0], dys) - objective(op, shifted[1], dys)) / (2 * EPS)
            terms = g.astype(np.float64) * v
            vjp = float(terms.sum())
            # relative to the size of the terms: a sum of cancelling terms is no easier
            scale = abs(fd) + math.sqrt(float(np.sum(terms ** 2))) + 1e-3
            assert abs(vjp - fd) <= rtol * scale, (
                f"input {i}: rule {vjp} vs finite differences {fd}")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_matches_finite_differences(case, rng):
    arrays = [make(rng) for make in case.inputs]
    outs = _as_tuple(case.op.kernel(*arrays))
    wanted = range(len(outs)) if case.cotangents is None else case.cotangents
    dys = [rng.standard_normal(np.shape(o)).astype(np.float32) if k in wanted else None
           for k, o in enumerate(outs)]
    grads = run_rule(case.op, arrays, dys)
    check_vjp(case.op, arrays, dys, grads, rng, case.rtol, case.buffers)


def test_every_case_op_has_a_rule():
    missing = {type(c.op).__name__ for c in CASES if get_rule(c.op) is None}
    assert not missing


@pytest.mark.parametrize("op", [E("EQ"), E("LT"), E("AND"), O.Argmax(0), O.GetVarShape(),
                                O.Fill((2,), 1.0), O.UniformRNG(0, shape=(2,))],
                         ids=lambda op: op.name)
def test_non_differentiable_ops_give_no_gradient(op):
    rule = get_rule(op)
    if rule is None:
        return
    x = imp.Tensor([1.0, 2.0])
    ctx = GradContext((x, x), (None,), ((2,), (2,)), (x.dtype, x.dtype), ((2,),), (np.dtype(bool),),
                     (True, True))
    assert all(g is None for g in rule.backward(op, ctx, (imp.Tensor([1.0, 1.0]),)))


def test_no_output_gradient_gives_no_input_gradient():
    op = E("MUL")
    rule = get_rule(op)
    x = imp.Tensor([1.0, 2.0])
    ctx = GradContext((x, x), (None,), ((2,), (2,)), (x.dtype,) * 2, ((2,),), (x.dtype,),
                     (True, True))
    assert rule.backward(op, ctx, (None,)) == (None, None)


@pytest.mark.parametrize("op,shapes", [
    (O.MatrixMul(False, True), [(3, 4), (5, 4)]),
    (O.Convolution(1, 1), [(2, 3, 5, 5), (4, 3, 3, 3)]),
    (E("MUL"), [(3, 4), (3, 4)]),
    (E("TRUE_DIV"), [(3, 4), (3, 4)]),
])
def test_rules_skip_unneeded_gradients(op, shapes, rng):
    """With ctx.needs False for an input, the rule returns None there and the other
    gradients unchanged (the first layer's input gradient is never computed)."""
    arrays = [uniform(0.5, 2, *s)(rng) for s in shapes]
    tensors = [imp.Tensor(a) for a in arrays]
    outputs = imp.apply(op, *tensors)
    rule = get_rule(op)
    keep_in, keep_out = set(rule.save_inputs(op)), set(rule.save_outputs(op))
    dy = imp.Tensor(rng.standard_normal(outputs[0].shape).astype(np.float32))
    full = None
    for skip in range(len(arrays)):
        needs = tuple(i != skip for i in range(len(arrays)))
        ctx = GradContext(
            tuple(t if i in keep_in else None for i, t in enumerate(tensors)),
            tuple(t if i in keep_out else None for i, t in enumerate(outputs)),
            tuple(t.shape for t in tensors), tuple(t.dtype for t in tensors),
            tuple(t.shape for t in outputs), tuple(t.dtype for t in outputs), needs)
        grads = rule.backward(op, ctx, (dy,))
        assert grads[skip] is None
        if full is None:
            full = run_rule(op, arrays, [dy.numpy()])
        for i, g in enumerate(grads):
            if i != skip:
                np.testing.assert_allclose(g.numpy(), full[i], rtol=1e-6)


def test_first_layer_input_gradient_is_not_computed():
    """An MLP step computes 2 matmuls per layer backward except the first (no input grad)."""
    from imperative import autodiff
    rng = np.random.default_rng(0)
    x = imp.Tensor(rng.standard_normal((4, 5)).astype(np.float32))
    ws = [imp.Parameter(rng.standard_normal((5, 5)).astype(np.float32)) for _ in range(3)]
    calls = []
    original = O.MatrixMul.kernel
    gm = autodiff.GradManager().attach(ws)
    with gm:
        h = x
        for w in ws:
            h = imp.functional.relu(imp.functional.linear(h, w))
        loss = h.sum()
        O.MatrixMul.kernel = lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
        try:    # (on the worker, which runs kernels: the tiny path may call numpy directly)
            with imp.option("async_level", 2), imp.option("enable_host_compute", 0):
                gm.backward(loss)
                [w.grad.numpy() for w in ws]
        finally:
            O.MatrixMul.kernel = original
    assert len(calls) == 5


@pytest.mark.parametrize("stride,bias", [(2, False), (1, True)])
def test_conv2d_second_order_matches_torch(rng, stride, bias):
    """Gradients of a function of conv2d's gradients (through ConvolutionBackwardData and
    ConvolutionBackwardFilter, with its bias output when there is a bias) match PyTorch's
    double backward."""
    torch = pytest.importorskip("torch")
    from imperative import autodiff
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in [(2, 3, 6, 5), (4, 3, 3, 3)] + ([(4,)] if bias else [])]
    ours = [imp.Tensor(a) for a in arrays]
    outer, inner = autodiff.GradManager().attach(ours), autodiff.GradManager().attach(ours)
    with outer:
        with inner:
            y = imp.functional.conv2d(*ours, stride=stride, padding=1)
            inner.backward((y * y).sum())
        grads = [t.grad for t in ours]
        for t in ours:
            t.grad = None
        outer.backward(sum((g * g).sum() for g in grads))
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    py = torch.nn.functional.conv2d(*theirs, stride=stride, padding=1)
    qs = torch.autograd.grad((py * py).sum(), theirs, create_graph=True)
    sum((q * q).sum() for q in qs).backward()
    for t, p in zip(ours, theirs):
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-3, atol=1e-2)


def test_gradients_take_each_input_dtype():
    # float16 + float32 computes in float32; the float16 input's gradient is float16
    a, b = np.ones(3, np.float16), np.ones((2, 3), np.float32)
    ga, gb = run_rule(E("ADD"), [a, b], [np.ones((2, 3), np.float32)])
    assert ga.dtype == np.float16 and gb.dtype == np.float32
    np.testing.assert_array_equal(ga, [2, 2, 2])
    (g,) = run_rule(O.TypeCvt("float16"), [b], [np.ones((2, 3), np.float16)])
    assert g.dtype == np.float32
    # a cast to an integer type lets no gradient through
    assert run_rule(O.TypeCvt("int32"), [b], [np.ones((2, 3), np.int32)]) == [None]


def test_max_reduction_shares_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], np.float32)
    (g,) = run_rule(R("MAX", 1), [x], [np.array([1.0, 2.0], np.float32)])
    np.testing.assert_allclose(g, [[0, 0.5, 0.5], [2, 0, 0]])


@pytest.mark.parametrize("mode", ["MAX", "MIN"])
def test_elementwise_max_min_route_ties_and_nans_as_pytorch(mode):
    """The winner takes dy, a tie halves it, and a NaN (neither input lost) gives it to
    both; the tie once went all to the first input."""
    x = np.array([1, 2, np.nan, 3, -1, 0], np.float32)
    y = np.array([1, 1, 0.5, 4, np.nan, 0], np.float32)
    dy = np.arange(1, 7, dtype=np.float32)
    gx, gy = run_rule(E(mode), [x, y], [dy])
    with np.errstate(invalid="ignore"):
        x_lost, y_lost = (x < y, x > y) if mode == "MAX" else (x > y, x < y)
    share = np.where(x == y, dy / 2, dy)
    np.testing.assert_array_equal(gx, np.where(x_lost, 0, share))
    np.testing.assert_array_equal(gy, np.where(y_lost, 0, share))
    np.testing.assert_array_equal(gx[[0, 2, 4]], [0.5, 3, 5])
    torch = pytest.importorskip("torch")
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    fn = torch.maximum if mode == "MAX" else torch.minimum
    (fn(tx, ty) * torch.tensor(dy)).sum().backward()
    np.testing.assert_array_equal(gx, tx.grad.numpy())
    np.testing.assert_array_equal(gy, ty.grad.numpy())


def _grad_and_torch_grad(fn, torch_fn, values):
    torch = pytest.importorskip("torch")
    w = imp.Parameter(np.array(values, np.float32))
    gm = imp.autodiff.GradManager().attach([w])
    with gm:
        gm.backward(fn(w).sum())
    tw = torch.tensor(np.array(values, np.float32), requires_grad=True)
    torch_fn(tw).sum().backward()
    return w.grad.numpy(), tw.grad.numpy()


AT_ZERO = [0.0, 2.0, 0.0, 1.5]


@pytest.mark.parametrize("ours, theirs, values", [
    (lambda w: w ** 0, lambda t: t ** 0, AT_ZERO),
    (lambda w: w ** 0.0, lambda t: t ** 0.0, AT_ZERO),
    (lambda w: imp.F.pow(w, 0), lambda t: t.pow(0), AT_ZERO),
    (lambda w: w ** imp.Tensor([0.0, 0.0, 1.0, 3.0]),
     lambda t: t ** t.new_tensor([0.0, 0.0, 1.0, 3.0]), AT_ZERO),
    (lambda w: w ** 3.5, lambda t: t ** 3.5, AT_ZERO),
    (lambda w: w ** -1, lambda t: t ** -1, [1.0, 2.0, -0.5, 4.0])],
    ids=["int 0", "float 0", "F.pow", "tensor exponent", "3.5", "-1"])
def test_a_zero_exponent_has_a_zero_gradient_at_zero_as_pytorch(ours, theirs, values):
    # y * x ** (y - 1) at x = 0, y = 0 was 0 * inf: nan
    got, expected = _grad_and_torch_grad(ours, theirs, values)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("axis", [None, 1])
@pytest.mark.parametrize("ddof", [0, 1])
def test_std_of_a_constant_slice_has_a_zero_gradient_as_pytorch(axis, ddof):
    # sqrt's 1 / (2 * 0) times var's 0 was nan; PyTorch masks the zero-std case
    values = [[1.0, 1.0, 1.0], [2.0, 3.0, 7.0]] if axis == 1 else [[1.0] * 3] * 2
    ours, theirs = _grad_and_torch_grad(
        lambda w: imp.F.std(w, axis, ddof=ddof),
        lambda t: t.std(dim=axis, correction=ddof), values)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    ours, theirs = _grad_and_torch_grad(lambda w: imp.F.var(w, axis, ddof=ddof),
                                        lambda t: t.var(dim=axis, correction=ddof), values)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    # the values are numpy's (nan where N - ddof is 0 stays nan)
    x = np.array(values, np.float32)
    np.testing.assert_allclose(imp.F.std(imp.Tensor(x), axis, ddof=ddof).numpy(),
                               np.std(x, axis=axis, ddof=ddof), rtol=1e-6)
    with np.errstate(invalid="ignore", divide="ignore"):
        assert np.isnan(imp.F.std(imp.Tensor([1.0]), ddof=1).numpy())


def test_rules_declare_minimal_saves():
    def saved(op):
        rule = get_rule(op)
        return tuple(rule.save_inputs(op)), tuple(rule.save_outputs(op))
    assert saved(E("ADD")) == ((), ())
    assert saved(E("MUL")) == ((0, 1), ())
    for mode in ("RELU", "SIGMOID", "TANH", "EXP"):
        assert saved(E(mode)) == ((), (0,)), mode
    assert saved(R("SUM", 0)) == ((), ()) and saved(R("MEAN")) == ((), ())
    assert saved(R("MAX", 0)) == ((0,), (0,))
    assert saved(O.MatrixMul()) == ((0, 1), ())
    for op in (O.Reshape((2,)), O.Broadcast((2,)), O.Dimshuffle((0,)), O.AddAxis(0),
               O.RemoveAxis(0), O.Subtensor(0), O.Concat(0), O.Split(0, 2)):
        assert saved(op) == ((), ()), op
    assert saved(O.Pooling("AVERAGE", 2)) == ((), ())
    assert saved(O.Softmax()) == ((), (0,))


# ---------------------------------------------------------------------------------------
# PyTorch autograd on the NN ops


def torch_vjp(fn, arrays, dy, grad_of):
    """PyTorch's gradients of <dy, fn(*tensors)> w.r.t. the inputs at `grad_of`."""
    torch = pytest.importorskip("torch")
    ts = [torch.tensor(a, requires_grad=(i in grad_of)) for i, a in enumerate(arrays)]
    out = fn(*ts)
    out.backward(torch.tensor(dy))
    return [ts[i].grad.numpy() for i in grad_of]


def _compare_with_torch(op, arrays, torch_fn, rng, grad_of=None, atol=1e-4):
    pytest.importorskip("torch")
    if grad_of is None:
        grad_of = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    out = _as_tuple(op.kernel(*arrays))
    dys = [rng.standard_normal(np.shape(out[0])).astype(np.float32)] + [None] * (len(out) - 1)
    ours = run_rule(op, arrays, dys)
    theirs = torch_vjp(torch_fn, arrays, dys[0], grad_of)
    for i, t in zip(grad_of, theirs):
        np.testing.assert_allclose(ours[i], t, rtol=1e-4, atol=atol, err_msg=f"input {i}")


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), ((2, 1), (1, 2), (2, 1), 1), (1, 1, 1, 2), (2, 0, 1, 4)])
def test_conv2d_matches_torch(stride, padding, dilation, groups, rng):
    tf = pytest.importorskip("torch.nn.functional")
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((8, 4 // groups, 3, 2)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    _compare_with_torch(O.Convolution(stride, padding, dilation, groups), [x, w, b],
                        lambda x, w, b: tf.conv2d(x, w, b, stride, padding, dilation, groups), rng)


@pytest.mark.parametrize("mode,kernel,stride,padding", [
    ("MAX", 2, None, 0), ("MAX", 3, 2, 1), ("AVERAGE_COUNT_EXCLUDE_PADDING", 3, 2, 1),
    ("AVERAGE", (2, 3), 1, (1, 1))])
def test_pooling_matches_torch(mode, kernel, stride, padding, rng):
    tf = pytest.importorskip("torch.nn.functional")
    x = distinct(2, 3, 7, 6)(rng)
    if mode == "MAX":
        fn = lambda x: tf.max_pool2d(x, kernel, stride, padding)  # noqa: E731
    else:
        fn = lambda x: tf.avg_pool2d(x, kernel, stride, padding,  # noqa: E731
                                     count_include_pad=(mode == "AVERAGE"))
    _compare_with_torch(O.Pooling(mode, kernel, stride, padding), [x], fn, rng)


def test_softmax_family_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    _compare_with_torch(O.Softmax(1), [x], lambda t: torch.softmax(t, 1), rng)
    _compare_with_torch(O.LogSoftmax(-1), [x], lambda t: torch.log_softmax(t, -1), rng)
    labels = rng.integers(0, 5, (3, 4)).astype(np.int64)
    for reduction in ("mean", "sum", "none"):
        _compare_with_torch(O.CrossEntropy(1, reduction), [x, labels],
                            functools.partial(torch.nn.functional.cross_entropy,
                                              reduction=reduction),
                            rng, grad_of=[0])


def test_layer_norm_matches_torch(rng):
    tf = pytest.importorskip("torch.nn.functional")
    x, w, b = normal(2, 3, 4, 5)(rng), normal(4, 5)(rng), normal(4, 5)(rng)
    _compare_with_torch(O.LayerNormForward((4, 5)), [x, w, b],
                        lambda x, w, b: tf.layer_norm(x, (4, 5), w, b), rng)


def test_batch_norm_training_matches_torch(rng):
    tf = pytest.importorskip("torch.nn.functional")
    x, w, b = normal(4, 3, 2, 5)(rng), normal(3)(rng), normal(3)(rng)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    _compare_with_torch(O.BatchNormForward(True), [x, w, b, rm, rv],
                        lambda x, w, b, rm, rv: tf.batch_norm(x, rm, rv, w, b, training=True),
                        rng, grad_of=[0, 1, 2])


@pytest.mark.parametrize("approximate,mode", [("none", "GELU"), ("tanh", "GELU_TANH")])
def test_gelu_matches_torch(approximate, mode, rng):
    tf = pytest.importorskip("torch.nn.functional")
    x = (normal(50)(rng) * 3)
    _compare_with_torch(E(mode), [x], lambda t: tf.gelu(t, approximate=approximate), rng)
