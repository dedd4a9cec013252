"""imperative.nn.init (docs/api.md, "More PyTorch habits (session 49)"): the distributions
against PyTorch's formulas, the fans against torch.nn.init's, calculate_gain against
torch's, in-place writes that keep a Parameter the same object (and training), and the
errors of bad arguments."""
import math

import numpy as np
import pytest

import imperative as imp
from imperative import F, nn, optim
from imperative.autodiff import GradManager
from imperative.nn_init import _calculate_fan_in_and_fan_out

torch = pytest.importorskip("torch")
init = nn.init
SHAPES = [(64, 32), (16, 8, 3), (32, 16, 3, 3), (8, 4, 2, 3, 3), (5, 7, 1, 1)]


@pytest.mark.parametrize("shape", SHAPES)
def test_fans_are_pytorchs(shape):
    p = imp.Parameter(F.zeros(shape))
    assert _calculate_fan_in_and_fan_out(p) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


@pytest.mark.parametrize("name,param", [
    ("linear", None), ("conv1d", None), ("conv2d", None), ("conv3d", None),
    ("conv_transpose2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)])
def test_calculate_gain_is_pytorchs(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(
        torch.nn.init.calculate_gain(name, param), rel=1e-12)


def _check_moments(values, mean, std, low=None, high=None):
    values = values.astype(np.float64).ravel()
    n = values.size
    assert abs(values.mean() - mean) < 5 * std / math.sqrt(n) + 1e-12
    assert values.std() == pytest.approx(std, rel=0.03)
    if low is not None:
        assert values.min() >= low and values.max() <= high
        # the draws reach near both ends
        assert values.min() < low + 0.02 * (high - low)
        assert values.max() > high - 0.02 * (high - low)


def _param(shape=(256, 64, 3)):
    return imp.Parameter(F.zeros(shape))


def test_uniform_normal_constant():
    imp.random.seed(0)
    p = _param()
    assert init.uniform_(p, -0.5, 1.5) is p
    _check_moments(p.numpy(), 0.5, 2 / math.sqrt(12), -0.5, 1.5)
    assert init.normal_(p, 0.3, 0.02) is p
    _check_moments(p.numpy(), 0.3, 0.02)
    assert init.constant_(p, 0.25) is p and (p.numpy() == 0.25).all()
    assert (init.zeros_(p).numpy() == 0).all() and (init.ones_(p).numpy() == 1).all()


@pytest.mark.parametrize("shape", [(128, 96), (64, 32, 3, 3)])
def test_xavier_and_kaiming_match_pytorchs_scales(shape):
    imp.random.seed(1)
    p = imp.Parameter(F.zeros(shape))
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    std = 0.7 * math.sqrt(2 / (fan_in + fan_out))
    _check_moments(init.xavier_uniform_(p, gain=0.7).numpy(), 0, std,
                   -math.sqrt(3) * std, math.sqrt(3) * std)
    _check_moments(init.xavier_normal_(p, gain=0.7).numpy(), 0, std)
    std = math.sqrt(2 / (1 + 0.2 ** 2)) / math.sqrt(fan_out)
    _check_moments(init.kaiming_uniform_(p, a=0.2, mode="fan_out").numpy(), 0, std,
                   -math.sqrt(3) * std, math.sqrt(3) * std)
    std = math.sqrt(2) / math.sqrt(fan_in)
    _check_moments(init.kaiming_normal_(p, nonlinearity="relu").numpy(), 0, std)
    # torch's own draws have the same spread
    t = torch.empty(shape)
    torch.nn.init.kaiming_normal_(t, nonlinearity="relu")
    assert t.numpy().std() == pytest.approx(std, rel=0.03)


@pytest.mark.parametrize("mean,std,a,b", [(0, 1, -2, 2), (0, 0.02, -2, 2), (1, 2, 0, 1.5),
                                          (0, 1, 2.5, 4)])
def test_trunc_normal_has_the_truncated_moments(mean, std, a, b):
    imp.random.seed(2)
    p = imp.Parameter(F.zeros((200000,)))
    assert init.trunc_normal_(p, mean, std, a, b) is p
    values = p.numpy().astype(np.float64)
    assert values.min() >= a and values.max() <= b
    # the moments of the truncated normal (closed form)
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    t_mean = mean + std * (pdf(alpha) - pdf(beta)) / z
    t_var = std ** 2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z
                        - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    assert values.mean() == pytest.approx(t_mean, abs=5 * math.sqrt(t_var / values.size))
    assert values.std() == pytest.approx(math.sqrt(t_var), rel=0.02)
    t = torch.empty(200000)
    torch.nn.init.trunc_normal_(t, mean, std, a, b)
    assert t.numpy().std() == pytest.approx(math.sqrt(t_var), rel=0.02)


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (4, 3, 2, 2)])
def test_orthogonal(shape):
    imp.random.seed(3)
    p = imp.Parameter(F.zeros(shape))
    m = init.orthogonal_(p, gain=2.0).numpy().reshape(shape[0], -1).astype(np.float64)
    small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(small, 4 * np.eye(len(small)), atol=1e-5)


def test_seeded_draws_repeat():
    p, q = _param((20, 30)), _param((20, 30))
    imp.random.seed(7)
    init.kaiming_uniform_(p)
    init.trunc_normal_(q, std=0.02)
    a, b = p.numpy().copy(), q.numpy().copy()
    imp.random.seed(7)
    init.kaiming_uniform_(p)
    init.trunc_normal_(q, std=0.02)
    np.testing.assert_array_equal(p.numpy(), a)
    np.testing.assert_array_equal(q.numpy(), b)


def test_an_initialised_parameter_still_trains():
    imp.random.seed(4)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = optim.SGD(model.parameters(), lr=0.05)
    before = model.parameters()

    def init_weights(m):
        if isinstance(m, nn.Linear):
            init.xavier_uniform_(m.weight)
            init.zeros_(m.bias)
    model.apply(init_weights)
    assert all(a is b for a, b in zip(model.parameters(), before))
    assert (model[0].bias.numpy() == 0).all()
    x = imp.Tensor(np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32))
    y = F.sum(x, axis=1, keepdims=True)
    gm = GradManager().attach(model.parameters())
    losses = []
    for _ in range(30):
        with gm:
            loss = F.mean((model(x) - y) ** 2)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
        losses.append(float(loss.numpy()))
    assert losses[-1] < 0.5 * losses[0]


def test_bad_arguments_name_themselves():
    p = _param((3, 4))
    with pytest.raises(ValueError, match=r"calculate_gain: unsupported nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match=r"param \(the negative slope\) must be a number"):
        init.calculate_gain("leaky_relu", "x")
    with pytest.raises(ValueError, match=r"kaiming_uniform_: mode must be 'fan_in' or "
                                         r"'fan_out', got 'fan_avg'"):
        init.kaiming_uniform_(p, mode="fan_avg")
    with pytest.raises(ValueError, match=r"xavier_uniform_: fan in and fan out need a tensor "
                                         r"of at least 2 dimensions, got shape \(4,\)"):
        init.xavier_uniform_(_param((4,)))
    with pytest.raises(TypeError, match=r"normal_: expected an imperative Tensor \(a "
                                        r"Parameter\), got ndarray"):
        init.normal_(np.zeros(3))
    with pytest.raises(ValueError, match=r"normal_: std must be >= 0, got -1.0"):
        init.normal_(p, 0, -1)
    with pytest.raises(ValueError, match=r"uniform_: expected a <= b, got a=1.0, b=0.0"):
        init.uniform_(p, 1, 0)
    with pytest.raises(ValueError, match=r"trunc_normal_: expected a < b"):
        init.trunc_normal_(p, a=2, b=-2)
    with pytest.raises(TypeError, match=r"constant_: val must be a real number, got 'x'"):
        init.constant_(p, "x")
    with pytest.raises(TypeError, match=r"uniform_: expected a floating-point tensor, got "
                                        r"dtype int32"):
        init.uniform_(imp.Tensor(np.zeros(3, np.int32)))
