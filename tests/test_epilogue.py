"""A matrix product doing the next op's work on its way out (backend/epilogue.py): the worker
hands MatrixMul a following ReLU or ReLU gradient when the product dies at that op. The
results must be those of the two ops run apart, bit for bit, and the product must never be
changed where anything else can still read it."""
import numpy as np
import pytest

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.ops.matmul import MatrixMul

# elements: past the host-compute limits: the worker
BIG = imp._core.HOST_COMPUTE_MEDIUM_ELEMENTS + 1


def _record_epilogues(monkeypatch, cls, seen, entry=lambda op, kind: kind):
    """Append entry(op, the epilogue kind or None) to `seen` for each run of cls's kernel."""
    kernel = cls.kernel

    def recording(self, *arrays, epilogue=None):
        seen.append(entry(self, None if epilogue is None else epilogue.kind))
        return kernel(self, *arrays, epilogue=epilogue)
    monkeypatch.setattr(cls, "kernel", recording)


@pytest.fixture
def epilogues(monkeypatch):
    """The epilogue kinds MatrixMul's kernel was handed, in order."""
    seen = []
    _record_epilogues(monkeypatch, MatrixMul, seen)
    return seen


def _arrays(dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 96)).astype(dtype)
    w = rng.standard_normal((96, 80)).astype(dtype)
    x[3, 5] = np.nan                                  # a NaN row through the product
    return x, w


def _queued(fn):
    """fn() at async level 2 with a buffer long enough to hold all its commands until the
    sync sends them together (so that the worker sees them side by side, as it does when
    it runs behind the caller, the usual case in a training step)."""
    with imp.option("async_level", 2), imp.option("buffer_length", 99), \
            imp.option("enable_host_compute", 0):   # (small products too: the worker's)
        # the worker running first: starting it lets it run before the sync's flush ends
        (imp.Tensor(np.zeros(BIG, np.float32)) + 1).numpy()
        out = fn()
        imp.sync()
        return out


def test_relu_of_a_dying_product_is_its_epilogue(epilogues, kernels):
    x, w = _arrays()

    def run():
        z = F.matmul(imp.Tensor(x), imp.Tensor(w))
        return F.relu(z)                              # z dies here: nothing else reads it
    y = _queued(run)
    assert epilogues == ["relu"]
    with np.errstate(invalid="ignore"):
        want = np.maximum(MatrixMul().kernel(x, w), np.float32(0))
    assert np.array_equal(y.numpy(), want, equal_nan=True)


def test_a_product_still_held_is_left_alone(epilogues, kernels):
    x, w = _arrays()

    def run():
        z = F.matmul(imp.Tensor(x), imp.Tensor(w))
        return z, F.relu(z)
    z, y = _queued(run)
    assert epilogues == [None]
    plain = MatrixMul().kernel(x, w)
    assert np.array_equal(z.numpy(), plain, equal_nan=True)
    assert np.array_equal(y.numpy(), np.maximum(plain, np.float32(0)), equal_nan=True)


def test_relu_gradient_of_a_dying_product_is_its_epilogue(epilogues, kernels):
    from imperative.ops.elemwise import ActivationGrad
    from imperative._core import apply
    x, w = _arrays()
    y = np.maximum(np.random.default_rng(1).standard_normal((64, 80)), 0).astype(np.float32)
    y[0, :2] = [0.0, np.nan]

    def run():
        dx = F.matmul(imp.Tensor(x), imp.Tensor(w))
        return apply(ActivationGrad("RELU"), dx, imp.Tensor(y))[0]
    got = _queued(run)
    assert epilogues == ["relu_grad"]
    with np.errstate(invalid="ignore"):
        want = np.multiply(MatrixMul().kernel(x, w), y > 0)
    assert np.array_equal(got.numpy(), want, equal_nan=True)


def test_a_broadcast_relu_output_is_left_to_the_follower(epilogues, kernels):
    from imperative.ops.elemwise import ActivationGrad
    from imperative._core import apply
    x, w = _arrays()
    y = np.maximum(np.random.default_rng(2).standard_normal(80), 0).astype(np.float32)

    def run():
        dx = F.matmul(imp.Tensor(x), imp.Tensor(w))
        return apply(ActivationGrad("RELU"), dx, imp.Tensor(y))[0]
    got = _queued(run)
    assert epilogues == [None]              # y is not of the product's shape
    with np.errstate(invalid="ignore"):
        want = np.multiply(MatrixMul().kernel(x, w), y > 0)
    assert np.array_equal(got.numpy(), want, equal_nan=True)


def test_float16_products_apply_the_follower_after_numpy(epilogues):
    x, w = (a.astype(np.float16) for a in _arrays())

    def run():
        return F.relu(F.matmul(imp.Tensor(x), imp.Tensor(w)))
    y = _queued(run)
    assert epilogues == ["relu"] and y.dtype == np.float16
    with np.errstate(invalid="ignore"):
        assert np.array_equal(y.numpy(), np.maximum(x @ w, np.float16(0)), equal_nan=True)


def _sgd_step(net, x, labels, head=lambda out: out):
    """Loss and parameters after one SGD step of `net` on (x, labels)."""
    gm = GradManager().attach(net.parameters())
    with gm:
        loss = F.cross_entropy(head(net(imp.Tensor(x))), imp.Tensor(labels))
        gm.backward(loss)
    optim.SGD(net.parameters(), 0.1).step()
    return [float(loss)] + [p.numpy() for p in net.parameters()]


def _mlp_step(seed):
    """One step of a ReLU MLP (epilogues in forward and backward; a bias would put its add
    between a product and its ReLU)."""
    imp.random.seed(seed)
    net = nn.Sequential(nn.Linear(96, 128, bias=False), nn.ReLU(),
                        nn.Linear(128, 128, bias=False), nn.ReLU(), nn.Linear(128, 10))
    rng = np.random.default_rng(seed)
    return _sgd_step(net, rng.standard_normal((64, 96)).astype(np.float32),
                     rng.integers(0, 10, 64).astype(np.int32))


def test_a_training_step_gives_the_same_bits_with_and_without_epilogues(epilogues, kernels):
    with imp.option("async_level", 0):          # every op apart: no epilogue
        apart = _mlp_step(3)
    assert set(epilogues) == {None}
    together = _queued(lambda: _mlp_step(3))
    assert "relu" in epilogues and "relu_grad" in epilogues
    for a, b in zip(apart, together):
        assert np.array_equal(a, b)


def test_under_the_memory_manager_the_epilogue_runs_and_recomputation_stays_exact(epilogues):
    """Under DTR too the product does its ReLU's work; its recipe stays the plain product,
    so that the ReLU's output, dropped and recomputed (the product first: it died at the
    ReLU), has the same bits."""
    old = imp.get_option("dtr_eviction_threshold")
    imp.dtr.enable(eviction_threshold="1GB")
    try:
        x, w = _arrays()
        xt, wt = imp.Tensor(x), imp.Tensor(w)          # (held: the recipe reads them)
        y = _queued(lambda: F.relu(F.matmul(xt, wt)))
        assert epilogues == ["relu"]
        first = y.numpy().copy()
        with imp.option("enable_drop", 1):
            y._drop()
            again = y.numpy()
        assert epilogues == ["relu", None]            # recomputed: the product alone
    finally:
        imp.dtr.disable()
        imp.set_option("dtr_eviction_threshold", old)
    with np.errstate(invalid="ignore"):
        expected = np.maximum(MatrixMul().kernel(x, w), 0)
    assert np.array_equal(first, expected, equal_nan=True)
    assert np.array_equal(again, expected, equal_nan=True)


def _conv_step(seed):
    """One step of a small ReLU conv net: conv (+ bias) and its ReLU, and the data gradient
    and its ReLU gradient, each as one kernel."""
    imp.random.seed(seed)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 8, 3))
    rng = np.random.default_rng(seed)
    return _sgd_step(net, rng.standard_normal((8, 3, 20, 20)).astype(np.float32),
                     rng.integers(0, 8, 8).astype(np.int32), head=lambda out: out.mean(axis=(2, 3)))


def test_a_conv_net_step_gives_the_same_bits_with_and_without_epilogues(monkeypatch, kernels):
    from imperative.ops.nn import Convolution, ConvolutionBackwardData
    seen = []
    for cls in (Convolution, ConvolutionBackwardData):
        _record_epilogues(monkeypatch, cls, seen, lambda op, kind: (type(op).__name__, kind))
    with imp.option("async_level", 0):
        apart = _conv_step(5)
    assert {kind for _, kind in seen} == {None}
    seen.clear()
    together = _queued(lambda: _conv_step(5))
    assert ("Convolution", "relu") in seen
    assert ("ConvolutionBackwardData", "relu_grad") in seen
    for a, b in zip(apart, together):
        assert np.array_equal(a, b)

