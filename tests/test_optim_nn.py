"""Optimizers against hand-written numpy updates (and PyTorch's optimizers where installed);
modules: parameter discovery, scope names, train/eval, shapes against numpy."""
import re

import numpy as np
import pytest

import imperative as imp
from imperative import nn, optim


def run_optimizer(make, grads, start):
    p = imp.Parameter(start)
    opt = make([p])
    for g in grads:
        p.grad = imp.Tensor(g)
        opt.step()
    return p


def numpy_sgd(start, grads, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
    p, buf = start.astype(np.float64), None
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g if buf is None else momentum * buf + g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def numpy_adam(start, grads, lr, b1, b2, eps, weight_decay, decoupled):
    p, m, v = start.astype(np.float64), 0.0, 0.0
    for t, g in enumerate(grads, 1):
        if weight_decay and not decoupled:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if weight_decay and decoupled:
            p = p * (1 - lr * weight_decay)
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    return rng.standard_normal((3, 4)).astype(np.float32), \
        [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(5)]


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
                                {"momentum": 0.5, "weight_decay": 0.1}])
def test_sgd_matches_numpy(problem, kw):
    start, grads = problem
    p = run_optimizer(lambda ps: optim.SGD(ps, 0.1, **kw), grads, start)
    np.testing.assert_allclose(p.numpy(), numpy_sgd(start, grads, 0.1, **kw), rtol=1e-5, atol=1e-6)
    assert isinstance(p, imp.Parameter)


@pytest.mark.parametrize("cls, decoupled, wd", [(optim.Adam, False, 0.0), (optim.Adam, False, 0.1),
                                                (optim.AdamW, True, 0.01)])
def test_adam_and_adamw_match_numpy(problem, cls, decoupled, wd):
    start, grads = problem
    p = run_optimizer(lambda ps: cls(ps, lr=0.01, weight_decay=wd), grads, start)
    want = numpy_adam(start, grads, 0.01, 0.9, 0.999, 1e-8, wd, decoupled)
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=1e-6)


def test_optimizers_match_pytorch(problem):
    torch = pytest.importorskip("torch")
    start, grads = problem
    cases = [(lambda ps: optim.SGD(ps, 0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
              lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
             (lambda ps: optim.Adam(ps, 0.01, weight_decay=0.1),
              lambda ps: torch.optim.Adam(ps, 0.01, weight_decay=0.1)),
             (lambda ps: optim.AdamW(ps, 0.01), lambda ps: torch.optim.AdamW(ps, 0.01))]
    for ours, theirs in cases:
        p = run_optimizer(ours, grads, start)
        tp = torch.nn.Parameter(torch.from_numpy(start.copy()))
        topt = theirs([tp])
        for g in grads:
            tp.grad = torch.from_numpy(g.copy())
            topt.step()
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_clear_grad_and_parameters_without_grad(problem):
    start, grads = problem
    p, q = imp.Parameter(start), imp.Parameter(start)
    opt = optim.SGD([p, q], 0.1)
    p.grad = imp.Tensor(grads[0])
    opt.step()                          # q has no grad: unchanged
    np.testing.assert_array_equal(q.numpy(), start)
    opt.zero_grad()
    assert p.grad is None and q.grad is None


def test_optimizer_argument_errors():
    p = imp.Parameter(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="lr"):
        optim.SGD([p], -1.0)
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD([p], 0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(TypeError, match="Tensors"):
        optim.SGD([1.0], 0.1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)

    def forward(self, x):
        return self.norm(self.linear(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.ReLU(), nn.Dropout(0.5), nn.Linear(3, 2))

    def forward(self, x):
        return self.head(self.block(x))


def test_parameters_are_named_by_scope():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["block.linear.weight", "block.linear.bias", "block.norm.weight",
                     "block.norm.bias", "head.2.weight", "head.2.bias"]
    assert all(isinstance(p, imp.Parameter) for p in net.parameters())
    y = net(imp.Tensor(np.ones((5, 4), np.float32)))
    assert y.shape == (5, 2)
    # the module's scope (versioned when entered again: Net[1], ...) names its ops
    assert re.match(r"Net(\[\d+\])?\.head\.2\.", y._name), y._name


def test_linear_matches_numpy_and_train_eval_switch_dropout():
    imp.random.seed(0)
    lin = nn.Linear(4, 3)
    x = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    want = x @ lin.weight.numpy().T + lin.bias.numpy()
    np.testing.assert_allclose(lin(imp.Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    bound = 1 / np.sqrt(4)
    assert np.abs(lin.weight.numpy()).max() <= bound
    drop = nn.Dropout(0.5)
    ones = imp.Tensor(np.ones(1000, np.float32))
    assert (drop(ones).numpy() == 0).any()
    drop.eval()
    np.testing.assert_array_equal(drop(ones).numpy(), np.ones(1000))
    net = Net().eval()
    assert not net.head[1].training and not net.block.training


def test_linear_with_no_input_features_is_pytorchs():
    # it was a ZeroDivisionError from the init bound
    torch = pytest.importorskip("torch")
    lin, theirs = nn.Linear(0, 3), torch.nn.Linear(0, 3)
    assert lin.weight.shape == tuple(theirs.weight.shape) == (3, 0)
    np.testing.assert_array_equal(lin.bias.numpy(), theirs.bias.detach().numpy())   # zeros
    out = lin(imp.Tensor(np.zeros((2, 0), np.float32)))
    np.testing.assert_array_equal(out.numpy(), theirs(torch.zeros(2, 0)).detach().numpy())
    assert nn.Linear(np.int64(2), 3).weight.shape == (3, 2)
    with pytest.raises(ValueError, match="in_features must be >= 0, got -1"):
        nn.Linear(-1, 3)
    with pytest.raises(TypeError, match=r"out_features must be an int, got 2\.5"):
        nn.Linear(2, 2.5)


def test_conv2d_and_batchnorm_modules():
    imp.random.seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    bn = nn.BatchNorm2d(4)
    x = imp.Tensor(np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32))
    y = bn(conv(x))
    assert y.shape == (2, 4, 8, 8)
    out = y.numpy()
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-4)   # batch statistics
    np.testing.assert_allclose(out.var(axis=(0, 2, 3)), 1, atol=1e-2)
    assert not np.allclose(bn.running_mean.numpy(), 0)                    # running stats moved
    with pytest.raises(TypeError, match="Modules"):
        nn.Sequential(nn.ReLU(), 3)
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv2d(3, 4, 3, groups=2)
