"""nn.Embedding's padding_idx (docs/api.md, "More PyTorch habits (session 49)") against
PyTorch: the row starts as zeros, the output there is the row's value, the row gets no
gradient and stays what it is under training; negative padding_idx counts from the end."""
import numpy as np
import pytest

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("padding_idx", [0, 3, -1, -7, None])
def test_outputs_and_weight_gradient_match_pytorch(padding_idx):
    ours, theirs = nn.Embedding(7, 4, padding_idx=padding_idx), \
        torch.nn.Embedding(7, 4, padding_idx=padding_idx)
    assert ours.padding_idx == theirs.padding_idx
    if padding_idx is not None:
        assert (ours.weight.numpy()[padding_idx] == 0).all()
    # a non-zero padding row (as after loading weights): the output there is its value
    table = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    ours.load_state_dict({"weight": table})
    theirs.load_state_dict({"weight": torch.from_numpy(table)})
    idx = np.array([[0, 3, 6, 3], [1, 0, 6, 6], [3, 3, 2, 5]], np.int32)
    dy = np.random.default_rng(1).standard_normal((3, 4, 4)).astype(np.float32)
    t_out = theirs(torch.from_numpy(idx.astype(np.int64)))
    (t_out * torch.from_numpy(dy)).sum().backward()
    gm = GradManager().attach(ours.parameters())
    with gm:
        out = ours(idx)
        gm.backward(F.sum(out * imp.Tensor(dy)))
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(),
                               rtol=1e-5, atol=1e-6)
    if padding_idx is not None:
        assert (ours.weight.grad.numpy()[padding_idx] == 0).all()


def test_the_padding_row_stays_under_training():
    imp.random.seed(0)
    emb = nn.Embedding(6, 3, padding_idx=2)
    head = nn.Linear(3, 1)
    emb.weight[...] = imp.Tensor(np.arange(18, dtype=np.float32).reshape(6, 3) / 10)
    row = emb.weight.numpy()[2].copy()
    params = emb.parameters() + head.parameters()
    opt = optim.Adam(params, lr=0.1)
    gm = GradManager().attach(params)
    idx = imp.Tensor(np.array([[2, 1, 2], [0, 2, 5]], np.int32))
    for _ in range(5):
        with gm:
            loss = F.mean(head(emb(idx)) ** 2)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
    np.testing.assert_array_equal(emb.weight.numpy()[2], row)
    assert not np.allclose(emb.weight.numpy()[1], np.arange(3, 6) / 10)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match=r"Embedding: padding_idx must lie in \[-5, 5\) "
                                         r"\(num_embeddings=5\), got 5"):
        nn.Embedding(5, 2, padding_idx=5)
    with pytest.raises(ValueError, match=r"got -6"):
        nn.Embedding(5, 2, padding_idx=-6)
    with pytest.raises(TypeError, match=r"Embedding: padding_idx must be an int or None, "
                                        r"got 1.0"):
        nn.Embedding(5, 2, padding_idx=1.0)
    with pytest.raises(NotImplementedError, match=r"Embedding: max_norm=1.0 is not supported"):
        nn.Embedding(5, 2, max_norm=1.0)
    with pytest.raises(NotImplementedError, match=r"Embedding: sparse=True is not supported"):
        nn.Embedding(5, 2, sparse=True)
