"""Fused optimizer updates (ops/optim.py): AdamStep gives the bits of Adam's update issued op
by op, on the native pass and on numpy's; optim.Adam takes it for float32 parameters and
the op-by-op update for others, and both agree with PyTorch's Adam."""
import math

import numpy as np
import pytest

import imperative as imp
from imperative import F, optim
from imperative._core import apply
from imperative.backend import native
from imperative.ops.optim import AdamStep



@pytest.fixture(params=["native", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(native, "_MODE", "always" if request.param == "native" else "never")
    return request.param


def op_by_op(param, grad, m, v, t, lr, b1, b2, eps):
    """Adam's update as the operators issue it (the reference AdamStep must equal)."""
    t = t + 1.0
    m = m * b1 + grad * (1 - b1)
    v = v * b2 + (grad * grad) * (1 - b2)
    c1, c2 = -F.expm1(t * math.log(b1)), -F.expm1(t * math.log(b2))
    return param + (m / c1) / (F.sqrt(v / c2) + eps) * -lr, m, v, t


def adam_operands(rng, shape, count):
    f32 = np.float32
    param, grad = (imp.Tensor(rng.standard_normal(shape).astype(f32)) for _ in range(2))
    m = imp.Tensor(rng.standard_normal(shape).astype(f32) * 0.1)
    v = imp.Tensor(rng.random(shape).astype(f32) * 0.01)
    return param, grad, m, v, imp.Tensor(np.array(count, f32))


@pytest.mark.parametrize("shapes", [[(3,)], [(5, 7)], [(64, 64)], [(2, 3, 40), (64,), (1,)]])
@pytest.mark.parametrize("count", [0.0, 41.0])
def test_adam_step_gives_the_bits_of_the_update_op_by_op(kernels, shapes, count):
    rng = np.random.default_rng(len(shapes[0]) + int(count))
    groups = [adam_operands(rng, shape, count) for shape in shapes]
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    op = AdamStep(lr, b1, b2, eps, math.log(b1), math.log(b2), len(shapes))
    fused = apply(op, *[x for group in groups for x in group])
    want = [y for group in groups for y in op_by_op(*group, lr, b1, b2, eps)]
    assert len(fused) == len(want) == 4 * len(shapes)
    for got, expected in zip(fused, want):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_adam_step_checks_its_inputs():
    op = AdamStep(1e-3, 0.9, 0.999, 1e-8, math.log(0.9), math.log(0.999))
    x = imp.Tensor(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="grad has shape"):
        apply(op, x, imp.Tensor(np.zeros(3, np.float32)), x, x, imp.Tensor(np.float32(0)))
    with pytest.raises(TypeError, match="m must be float32"):
        apply(op, x, x, x.astype("float16"), x, imp.Tensor(np.float32(0)))
    with pytest.raises(ValueError, match="t must be 0-d"):
        apply(op, x, x, x, x, x)


@pytest.mark.parametrize("cls,wd", [(optim.Adam, 0.0), (optim.Adam, 0.01), (optim.AdamW, 0.01)])
def test_adam_fused_or_not_follows_pytorch(kernels, cls, wd):
    """float32 parameters take one AdamStep together, float16 ones the update op by op; all
    track PyTorch's Adam (in float64 here) over several steps, a parameter without a
    gradient stays as it is."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    shapes_dtypes = [((6, 5), "float32"), ((4,), "float16"), ((3, 2), "float32"),
                     ((2,), "float32")]
    starts = [rng.standard_normal(shape).astype(dtype) for shape, dtype in shapes_dtypes]
    params = [imp.Parameter(s) for s in starts]
    tparams = [torch.nn.Parameter(torch.from_numpy(s.astype(np.float64))) for s in starts]
    opt = cls(params, lr=1e-2, weight_decay=wd)
    topt = (torch.optim.AdamW if cls is optim.AdamW else torch.optim.Adam)(
        tparams[:-1], lr=1e-2, weight_decay=wd)
    for _ in range(5):
        for p, tp, s in zip(params[:-1], tparams, starts):     # the last: never a gradient
            g = rng.standard_normal(s.shape).astype(s.dtype)
            p.grad = imp.Tensor(g)
            tp.grad = torch.from_numpy(g.astype(np.float64))
        opt.step()
        topt.step()
    for p, tp, s in zip(params, tparams, starts):
        tol = 1e-5 if s.dtype == np.float32 else 2e-3
        np.testing.assert_allclose(p.numpy().astype(np.float64), tp.detach().numpy(),
                                   rtol=tol, atol=tol)
    np.testing.assert_array_equal(params[-1].numpy(), starts[-1])


def fused_and_composite_grads(start, loss_of):
    """The gradient of `loss_of(x)` for x = Parameter(start), taken twice: with nothing
    recording the backward (a rule may issue its fused op) and with an outer GradManager
    recording it (the rule issues its composite ops, to differentiate them again)."""
    from imperative.autodiff import GradManager

    def grad(outer):
        x = imp.Parameter(start)
        gm, outer_gm = GradManager().attach([x]), GradManager().attach([x])
        with outer_gm if outer else gm:
            with gm if outer else outer_gm:
                gm.backward(loss_of(x))
        return x.grad.numpy()
    return grad(False), grad(True)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape,axis", [((6, 10), -1), ((4, 5, 3), 1), ((7,), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cross_entropy_gradient_is_the_composite_rule_bit_for_bit(reduction, shape, axis,
                                                                  dtype):
    """The fused gradient (nothing records the backward) against the composite rule's ops,
    which an outer GradManager makes the rule issue (to differentiate them again)."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(shape).astype(dtype) * 3
    labels = rng.integers(0, shape[axis], np.delete(shape, axis))

    def loss_of(x):
        loss = F.cross_entropy(x, imp.Tensor(labels), axis, reduction)
        return loss if reduction != "none" else loss.sum()

    fused, composite = fused_and_composite_grads(logits, loss_of)
    assert fused.dtype == composite.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fused, composite)


@pytest.mark.parametrize("shape,axis", [((6, 10), -1), ((4, 3, 300), -1), ((3, 200), 0),
                                        ((7,), 0), ((3, 0), -1), ((0,), 0)])
@pytest.mark.parametrize("transposed", [False, True])
def test_softmax_gradient_is_the_composite_rule_bit_for_bit(shape, axis, transposed):
    """SoftmaxGrad (the last axis, float32, nothing recording the backward) against the
    composite rule's ops, which an outer GradManager makes the rule issue; a transposed
    input reaches its layout fallback."""
    rng = np.random.default_rng(5)
    start = rng.standard_normal(shape[::-1] if transposed else shape).astype(np.float32)
    upstream = rng.standard_normal(shape).astype(np.float32)

    def loss_of(x):
        return (F.softmax(x.T if transposed else x, axis) * imp.Tensor(upstream)).sum()

    fused, composite = fused_and_composite_grads(start, loss_of)
    np.testing.assert_array_equal(fused, composite)
    y = np.exp(start.T if transposed else start)
    y /= y.sum(axis=axis, keepdims=True)
    want = y * (upstream - (upstream * y).sum(axis=axis, keepdims=True))
    np.testing.assert_allclose(fused, want.T if transposed else want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("written_over", [None, 0, 1])
def test_softmax_grad_may_write_over_either_input(written_over):
    """SoftmaxGrad reads each block of rows before it writes it: dx written over y or dy
    (the dying input the runtime hands it as `out`) has the bits of a fresh output."""
    from imperative.ops.softmax import SoftmaxGrad
    rng = np.random.default_rng(6)
    y = rng.random((70, 300)).astype(np.float32)          # several blocks of rows
    dy = rng.standard_normal((70, 300)).astype(np.float32)
    want = y * (dy - (dy * y).sum(axis=-1, keepdims=True))
    inputs = [y.copy(), dy.copy()]
    out = None if written_over is None else inputs[written_over]
    got = SoftmaxGrad().kernel(*inputs, out=out)
    assert out is None or got is out
    np.testing.assert_array_equal(got, want)


def test_softmax_backward_never_holds_the_product_whole(async_level):
    """The composite rule's dy * y was a third array beside y and dy: an attention block's
    backward held three of its (batch, heads, seq, seq) maps at once. SoftmaxGrad holds y,
    dy and dx, and at async level 2 it writes dx over dy, which dies with it (at level 0
    the op runs while the rule still holds dy: a fresh dx)."""
    from imperative.autodiff import GradManager
    rng = np.random.default_rng(7)
    one_map = 64 * 4096 * 4                                  # 1 MiB
    x = imp.Parameter(rng.standard_normal((64, 4096)).astype(np.float32))
    w = imp.Tensor(rng.standard_normal((64, 4096)).astype(np.float32))
    gm = GradManager().attach([x])
    with gm:
        y = F.softmax(x, -1)
        loss = (y * w).sum()
        imp.sync()
        imp.reset_peak_memory_stats()
        base = imp.memory_stats()["allocated"]              # x, w and y
        gm.backward(loss)                                   # dy = w, then softmax's
    imp.sync()
    maps = 2 if async_level == 0 else 1                     # (the composite: 3 and 2)
    assert imp.memory_stats()["peak_allocated"] - base <= maps * one_map + 64 * 1024
