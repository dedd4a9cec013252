"""End to end: models built from imperative.nn, trained with GradManager and an optimizer,
reach a loss target on synthetic tasks (fixed seeds); detach stays out of gradients."""
import numpy as np

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager


def blobs(n, dim, classes, seed):
    """Gaussian clusters: a task a small model learns in a few dozen steps."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, dim)).astype(np.float32) * 3
    labels = rng.integers(0, classes, n)
    x = centers[labels] + rng.standard_normal((n, dim)).astype(np.float32)
    return x.astype(np.float32), labels.astype(np.int32)


def train(model, x, labels, opt, steps):
    gm = GradManager().attach(model.parameters())
    losses = []
    for _ in range(steps):
        with gm:
            loss = F.cross_entropy(model(x), labels)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    return losses


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                                  nn.Linear(32, 4))

    def forward(self, x):
        return self.body(x)


def test_mlp_reaches_the_loss_target():
    imp.random.seed(0)
    x, labels = blobs(256, 8, 4, seed=1)
    model = MLP()
    losses = train(model, imp.Tensor(x), imp.Tensor(labels),
                   optim.SGD(model.parameters(), 0.1, momentum=0.9), 60)
    assert losses[0] > 1.0
    assert losses[-1] < 0.1, losses[-5:]


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.head = nn.Linear(8 * 4 * 4, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.reshape(x.shape[0], -1))


def test_small_cnn_reaches_the_loss_target():
    imp.random.seed(0)
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 64).astype(np.int32)
    x = rng.standard_normal((64, 1, 16, 16)).astype(np.float32) * 0.5
    x[labels == 1, :, 4:12, 4:12] += 1.5          # class 1: a bright square in the middle
    model = CNN()
    losses = train(model, imp.Tensor(x), imp.Tensor(labels), optim.Adam(model.parameters(), 0.01),
                   40)
    assert losses[-1] < 0.1, losses[-5:]
    model.eval()
    pred = model(imp.Tensor(x)).numpy().argmax(1)
    assert (pred == labels).mean() > 0.95


def test_detach_is_outside_the_gradient_record():
    w = imp.Parameter(np.ones((3, 3), np.float32))
    x = imp.Tensor(np.ones((2, 3), np.float32))
    gm = GradManager().attach(w)
    with gm:
        y = x @ w
        gm.backward((y * y.detach()).sum())      # d/dw = x.T @ y (the detached factor is constant)
    np.testing.assert_allclose(w.grad.numpy(), np.full((3, 3), 6.0))
