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


@pytest.mark.parametrize("shape", [(3,), (5, 7), (64, 64), (2, 3, 40)])
@pytest.mark.parametrize("count", [0.0, 41.0])
def test_adam_step_gives_the_bits_of_the_update_op_by_op(kernels, shape, count):
    rng = np.random.default_rng(len(shape) + int(count))
    f32 = np.float32
    param, grad = (imp.Tensor(rng.standard_normal(shape).astype(f32)) for _ in range(2))
    m = imp.Tensor(rng.standard_normal(shape).astype(f32) * 0.1)
    v = imp.Tensor(rng.random(shape).astype(f32) * 0.01)
    t = imp.Tensor(np.array(count, f32))
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    fused = apply(AdamStep(lr, b1, b2, eps, math.log(b1), math.log(b2)), param, grad, m, v, t)
    for got, want in zip(fused, op_by_op(param, grad, m, v, t, lr, b1, b2, eps)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_adam_step_checks_its_inputs():
    op = AdamStep(1e-3, 0.9, 0.999, 1e-8, math.log(0.9), math.log(0.999))
    x = imp.Tensor(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="grad has shape"):
        apply(op, x, imp.Tensor(np.zeros(3, np.float32)), x, x, imp.Tensor(np.float32(0)))
    with pytest.raises(TypeError, match="m must be float32"):
        apply(op, x, x, x.astype("float16"), x, imp.Tensor(np.float32(0)))
    with pytest.raises(ValueError, match="t must be 0-d"):
        apply(op, x, x, x, x, x)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("cls,wd", [(optim.Adam, 0.0), (optim.Adam, 0.01), (optim.AdamW, 0.01)])
def test_adam_fused_or_not_follows_pytorch(kernels, dtype, cls, wd):
    """float32 parameters take AdamStep, float16 ones the update op by op; both track
    PyTorch's Adam (in float64 here) over several steps."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    start = rng.standard_normal((6, 5)).astype(dtype)
    grads = [rng.standard_normal((6, 5)).astype(dtype) for _ in range(5)]
    p = imp.Parameter(start)
    opt = cls([p], lr=1e-2, weight_decay=wd)
    tp = torch.nn.Parameter(torch.from_numpy(start.astype(np.float64)))
    topt = (torch.optim.AdamW if cls is optim.AdamW else torch.optim.Adam)([tp], lr=1e-2,
                                                                          weight_decay=wd)
    for g in grads:
        p.grad = imp.Tensor(g)
        opt.step()
        tp.grad = torch.from_numpy(g.astype(np.float64))
        topt.step()
    tol = 1e-5 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(p.numpy().astype(np.float64), tp.detach().numpy(),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape,axis", [((6, 10), -1), ((4, 5, 3), 1), ((7,), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cross_entropy_gradient_is_the_composite_rule_bit_for_bit(reduction, shape, axis,
                                                                  dtype):
    """The fused gradient (nothing records the backward) against the composite rule's ops,
    which an outer GradManager makes the rule issue (to differentiate them again)."""
    from imperative.autodiff import GradManager
    rng = np.random.default_rng(3)
    logits = rng.standard_normal(shape).astype(dtype) * 3
    labels = rng.integers(0, shape[axis], np.delete(shape, axis))

    def grad_of_logits(outer):
        x = imp.Parameter(logits)
        gm, outer_gm = GradManager().attach([x]), GradManager().attach([x])
        with outer_gm if outer else gm:
            with gm if outer else outer_gm:
                loss = F.cross_entropy(x, imp.Tensor(labels), axis, reduction)
                gm.backward(loss if reduction != "none" else loss.sum())
        return x.grad.numpy()

    fused, composite = grad_of_logits(False), grad_of_logits(True)
    assert fused.dtype == composite.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fused, composite)
