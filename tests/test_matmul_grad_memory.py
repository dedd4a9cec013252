"""The weight gradient of a batch of rows times one matrix (nn.Linear on a sequence, or
any x @ w with x of three or more dimensions and w a matrix) is one product over all rows:
the values PyTorch gives, and no (batch, in, out) tensor of per-entry products along the
way (8 MiB for a 2 MiB input, in both the peak and the floor a memory budget must hold)."""
import numpy as np
import pytest

import imperative as imp
from imperative import F, nn
from imperative.autodiff import GradManager


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("shape", [(4, 5, 6), (2, 3, 5, 6), (1, 1, 6), (3, 0, 6)])
def test_gradients_match_pytorch(shape, transpose_b):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(len(shape))
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal((7, 6) if transpose_b else (6, 7)).astype(np.float32)
    pa, pb = imp.Parameter(a), imp.Parameter(b)
    gm = GradManager().attach([pa, pb])
    with gm:
        y = F.matmul(pa, pb, transpose_b=transpose_b)
        gm.backward((y * y).sum())
    ta, tb = torch.from_numpy(a).requires_grad_(), torch.from_numpy(b).requires_grad_()
    yt = ta @ (tb.T if transpose_b else tb)
    (yt * yt).sum().backward()
    np.testing.assert_allclose(pa.grad.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pb.grad.numpy(), tb.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_linear_on_a_sequence_makes_no_per_entry_products():
    batch, seq, width = 64, 16, 128
    x = imp.Tensor(np.random.default_rng(0).standard_normal((batch, seq, width))
                   .astype(np.float32))
    layer = nn.Linear(width, width)
    gm = GradManager().attach(layer.parameters())
    target = imp.Tensor(np.ones((batch, seq, width), np.float32))
    imp.sync()
    imp.reset_peak_memory_stats()
    before = imp.memory_stats()["allocated"]
    with gm:
        gm.backward(F.mse_loss(layer(x), target))
    imp.sync()
    per_entry = batch * width * width * 4       # 4 MiB: (batch, in, out); an activation 0.5
    assert imp.memory_stats()["peak_allocated"] - before < per_entry      # (was 6 MiB)
    assert layer.weight.grad.shape == (width, width)
