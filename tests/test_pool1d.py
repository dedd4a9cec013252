"""1-D pooling (docs/api.md, "More PyTorch habits (session 49)"): F.max_pool1d,
F.avg_pool1d, F.adaptive_avg_pool1d, F.adaptive_max_pool1d and their modules against
PyTorch, values and input gradients, batched (N, C, L) and unbatched (C, L)."""
import numpy as np
import pytest

import imperative as imp
from imperative import F, nn
from test_torch_layers import randn, run_both, run_fn

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.mark.parametrize("shape", [(2, 3, 11), (3, 11)])
@pytest.mark.parametrize("k,s,p", [(2, None, 0), (3, 1, 1), (3, 2, 1), (4, 3, 2), (5, 2, 0),
                                   (1, 1, 0), (11, None, 0)])
def test_max_and_avg_pool1d_match_pytorch(shape, k, s, p):
    x = randn(*shape, seed=k * 10 + p)
    run_fn(lambda t: F.max_pool1d(t, k, s, p), lambda t: TF.max_pool1d(t, k, s, p), x)
    run_fn(lambda t: F.avg_pool1d(t, k, s, p), lambda t: TF.avg_pool1d(t, k, s, p), x)
    run_fn(lambda t: F.avg_pool1d(t, k, s, p, count_include_pad=False),
           lambda t: TF.avg_pool1d(t, k, s, p, count_include_pad=False), x)
    run_both(nn.MaxPool1d(k, s, p), torch.nn.MaxPool1d(k, s, p), x)
    run_both(nn.AvgPool1d(k, s, p), torch.nn.AvgPool1d(k, s, p), x)
    run_both(nn.AvgPool1d(k, s, p, count_include_pad=False),
             torch.nn.AvgPool1d(k, s, p, count_include_pad=False), x)


@pytest.mark.parametrize("shape", [(2, 3, 10), (3, 7)])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 7, (4,), None])
def test_adaptive_pool1d_match_pytorch(shape, m):
    x = randn(*shape, seed=3)
    run_fn(lambda t: F.adaptive_avg_pool1d(t, m), lambda t: TF.adaptive_avg_pool1d(
        t, shape[-1] if m is None else m), x)
    run_fn(lambda t: F.adaptive_max_pool1d(t, m), lambda t: TF.adaptive_max_pool1d(
        t, shape[-1] if m is None else m), x)
    if m is not None:
        run_both(nn.AdaptiveAvgPool1d(m), torch.nn.AdaptiveAvgPool1d(m), x)
        run_both(nn.AdaptiveMaxPool1d(m), torch.nn.AdaptiveMaxPool1d(m), x)


def test_pool1d_in_a_model_against_pytorch():
    ours = nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool1d(2),
                         nn.AvgPool1d(3, 1, 1), nn.AdaptiveAvgPool1d(3), nn.Flatten(),
                         nn.Linear(12, 2))
    theirs = torch.nn.Sequential(torch.nn.Conv1d(2, 4, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.MaxPool1d(2), torch.nn.AvgPool1d(3, 1, 1),
                                 torch.nn.AdaptiveAvgPool1d(3), torch.nn.Flatten(),
                                 torch.nn.Linear(12, 2))
    run_both(ours, theirs, randn(5, 2, 16, seed=9))


def test_bad_arguments_name_themselves():
    x = imp.Tensor(np.zeros((2, 3, 8), np.float32))
    with pytest.raises(ValueError, match=r"max_pool1d: input must be 2-D \(C, L\) or 3-D "
                                         r"\(N, C, L\), got shape \(2, 3, 8, 1\)"):
        F.max_pool1d(x.reshape((2, 3, 8, 1)), 2)
    with pytest.raises(ValueError, match=r"MaxPool1d: padding must be at most half of "
                                         r"kernel_size, got padding=2, kernel_size=3"):
        nn.MaxPool1d(3, padding=2)
    with pytest.raises(TypeError, match=r"AvgPool1d: kernel_size must be an int or a 1-tuple "
                                        r"of ints, got \(2, 2\)"):
        nn.AvgPool1d((2, 2))
    with pytest.raises(ValueError, match=r"avg_pool1d: stride must be >= 1, got 0"):
        F.avg_pool1d(x, 2, 0)
    with pytest.raises(ValueError, match=r"max_pool1d: input length 8 with padding 0 on each "
                                         r"side is shorter than kernel_size 9"):
        F.max_pool1d(x, 9)
    with pytest.raises(NotImplementedError, match=r"MaxPool1d: ceil_mode=True"):
        nn.MaxPool1d(2, ceil_mode=True)
    with pytest.raises(NotImplementedError, match=r"max_pool1d: dilation other than 1"):
        F.max_pool1d(x, 2, dilation=2)
    with pytest.raises(ValueError, match=r"AdaptiveAvgPool1d: output_size must be >= 1, got 0"):
        nn.AdaptiveAvgPool1d(0)
    with pytest.raises(TypeError, match=r"adaptive_max_pool1d: output_size must be an int or "
                                        r"a 1-tuple of ints, got \(2, 2\)"):
        F.adaptive_max_pool1d(x, (2, 2))
