"""A compiled plan's order (imperative/jit/schedule.py): an optimizer's update of a weight
moves up to the product making its gradient, which does the update in its stores (the
native sgemm's AXPY epilogue). The parameters must be those of the eager loop, bit for bit,
with the native products and with numpy's, and the epilogue must give ScaledAdd's bits."""
import numpy as np
import pytest

import imperative as imp
from imperative import _kernels, nn, optim
from imperative.backend import native
from imperative.jit import trace
from imperative.jit.schedule import update_moves
from imperative.models import training_step

native_only = pytest.mark.skipif(not native._SUPPORTED,
                                 reason="no AVX2 or AVX-512: the native sgemm does not run")


@native_only
@pytest.mark.parametrize("m,n,k,transposed", [(64, 80, 96, False), (37, 50, 400, False),
                                              (64, 48, 800, True), (1024, 1024, 8, True),
                                              (5, 33, 0, False)])
def test_the_axpy_epilogue_gives_scaled_adds_bits(m, n, k, transposed):
    """y + alpha * (a @ b) in the product's stores: one depth block or several (K past the
    384-deep blocks), a transposed a (a weight gradient's dy^T), streaming stores (C of 1M
    values), no depth at all; NaN and infinities in y."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((k, m) if transposed else (m, k)).astype(np.float32)
    a = a.T if transposed else a
    b = rng.standard_normal((k, n)).astype(np.float32)
    y = rng.standard_normal((m, n)).astype(np.float32)
    y.flat[:3] = [np.nan, np.inf, -np.inf]
    alpha = -0.01
    fused = _kernels.sgemm(a, b, np.empty((m, n), np.float32), epilogue="axpy", y=y,
                           alpha=alpha, streaming=transposed)
    product = _kernels.sgemm(a, b, np.empty((m, n), np.float32))
    apart = _kernels.axpy(y, alpha, product, np.empty_like(y))
    with np.errstate(invalid="ignore"):
        by_numpy = np.add(y, np.multiply(product, np.float32(alpha)))
    assert fused.tobytes() == apart.tobytes() == by_numpy.tobytes()


@native_only
def test_the_axpy_epilogue_needs_its_y_and_is_a_products_only():
    a = np.ones((8, 8), np.float32)
    with pytest.raises(ValueError, match="axpy epilogue needs y"):
        _kernels.sgemm(a, a, np.empty((8, 8), np.float32), epilogue="axpy")
    with pytest.raises(ValueError, match="no axpy epilogue"):
        _kernels.conv2d_s1(np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32),
                           (1, 1), (1, 1), epilogue="axpy")


def _mlp(rng, width, depth, bias):
    layers = []
    for i in range(depth):
        lin = nn.Linear(width, width, bias=bias)
        lin.weight = imp.Parameter((rng.standard_normal((width, width)) / 8).astype(np.float32))
        if bias:
            lin.bias = imp.Parameter((rng.standard_normal(width) / 8).astype(np.float32))
        layers += [lin, nn.ReLU()] if i < depth - 1 else [lin]
    return nn.Sequential(*layers)


@pytest.mark.parametrize("batch,width,bias", [(32, 128, False), (400, 64, True)])
def test_an_sgd_step_replays_with_its_updates_moved_bit_identical(kernels, batch, width, bias):
    """Each weight's update rides on its gradient's product (biases' gradients are sums: they
    stay where they were); three replayed steps leave the parameters of three eager steps."""
    rng = np.random.default_rng(batch)
    x = imp.Tensor(rng.standard_normal((batch, width)).astype(np.float32))
    labels = imp.Tensor(rng.integers(0, width, batch).astype(np.int32))
    models = [_mlp(np.random.default_rng(0), width, 3, bias) for _ in range(2)]
    steps = [training_step(m, optim.SGD(m.parameters(), 0.05)) for m in models]
    replayed = trace(steps[1], symbolic=True)
    for _ in range(4):
        eager_loss = steps[0](x, labels).numpy()
        assert replayed(x, labels).numpy().tobytes() == eager_loss.tobytes()
    recording = replayed._last
    assert len(update_moves(recording.program, recording.plan.kept)) == 3
    assert replayed.stats["replays"] >= 2
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        assert p.numpy().tobytes() == q.numpy().tobytes()


def _step_keeping_grads(width):
    """A step whose .grad outlives it (accumulated over calls): model, step."""
    model = _mlp(np.random.default_rng(3), width, 2, False)
    gm = imp.autodiff.GradManager().attach(model.parameters())
    opt = optim.SGD(model.parameters(), 0.1)

    def step(x):
        with gm:
            loss = (model(x) ** 2).mean()
            gm.backward(loss)
        opt.step()
        return loss
    return model, step


def test_an_update_whose_gradient_is_kept_is_not_moved(kernels):
    """A gradient the call leaves in .grad must exist: its update stays where it was, and
    the replay still matches the eager loop, gradients included."""
    x = imp.Tensor(np.random.default_rng(4).standard_normal((16, 64)).astype(np.float32))
    (eager_model, eager_step), (model, step) = _step_keeping_grads(64), _step_keeping_grads(64)
    replayed = trace(step, symbolic=True)
    for _ in range(3):
        assert replayed(x).numpy().tobytes() == eager_step(x).numpy().tobytes()
    recording = replayed._last
    assert update_moves(recording.program, recording.plan.kept) == {}
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert p.numpy().tobytes() == q.numpy().tobytes()
        assert p.grad.numpy().tobytes() == q.grad.numpy().tobytes()
