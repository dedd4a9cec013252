"""PyTorch layers added for a user porting a model (docs/api.md, "PyTorch layers added in
session 49"): each module and functional against PyTorch on the same inputs, with the
torch module's state dict loaded into ours: forward values, the gradients of the inputs
and of every parameter, running statistics, state dict keys, the initialisation's
distribution, and the error each bad argument gets."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F, nn
from imperative.autodiff import GradManager

torch = pytest.importorskip("torch")
TF = torch.nn.functional
QUICK = settings(max_examples=12, deadline=None, database=None, derandomize=True)
RTOL, ATOL = 1e-4, 1e-5


def _leaves(out):
    """The tensors of a (nested) tuple of outputs, None left out."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _leaves(o)]
    return [] if out is None else [out]


def load_torch_state(ours, theirs):
    """Our module takes the torch module's parameters and buffers; the keys must match."""
    state = {k: v.detach().numpy() for k, v in theirs.state_dict().items()
             if not k.endswith("num_batches_tracked")}
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict(state)


def run_both(ours, theirs, *inputs, train=True, seed=0, rtol=RTOL, atol=ATOL, call=None):
    """Forward both modules (or `call(module, *inputs)`) on the float32 `inputs`, compare the
    outputs and the gradients of sum(y * dy) (dy random) for the inputs and parameters."""
    call = call or (lambda m, *xs: m(*xs))
    load_torch_state(ours, theirs)
    ours.train(train), theirs.train(train)
    xs = [imp.Parameter(a) for a in inputs]
    txs = [torch.tensor(a, requires_grad=True) for a in inputs]
    t_out = _leaves(call(theirs, *txs))
    rng = np.random.default_rng(seed)
    dys = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in t_out]
    sum((t * torch.from_numpy(dy)).sum() for t, dy in zip(t_out, dys)).backward()
    gm = GradManager().attach(ours.parameters() + xs)
    with gm:
        out = _leaves(call(ours, *xs))
        gm.backward(sum(F.sum(y * imp.Tensor(dy)) for y, dy in zip(out, dys)))
    assert len(out) == len(t_out)
    for y, t in zip(out, t_out):
        np.testing.assert_allclose(y.numpy(), t.detach().numpy(), rtol=rtol, atol=atol)
    for x, tx in zip(xs, txs):
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(),
                                   rtol=rtol, atol=atol, err_msg=name)
    for name, b in ours.named_buffers():
        np.testing.assert_allclose(b.numpy(), theirs.state_dict()[name].numpy(),
                                   rtol=rtol, atol=atol, err_msg=name)
    return out


def randn(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_fn(ours, theirs, *inputs, rtol=RTOL, atol=ATOL):
    """A functional pair (ours, PyTorch's) as modules without parameters."""
    class Wrap(nn.Module):
        def forward(self, *xs):
            return ours(*xs)
    return run_both(Wrap(), _TorchWrap(theirs), *inputs, rtol=rtol, atol=atol)


class _TorchWrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


# ---------------------------------------------------------------------------------------
# Elementwise layers

ELEMENTWISE = [
    (lambda: nn.Identity(3, key=1), lambda: torch.nn.Identity(3, key=1)),
    (lambda: nn.LeakyReLU(), lambda: torch.nn.LeakyReLU()),
    (lambda: nn.LeakyReLU(0.2, inplace=True), lambda: torch.nn.LeakyReLU(0.2)),
    (lambda: nn.Softplus(), lambda: torch.nn.Softplus()),
    (lambda: nn.Softplus(beta=2.0, threshold=1.5), lambda: torch.nn.Softplus(2.0, 1.5)),
    (lambda: nn.Softplus(beta=0.5), lambda: torch.nn.Softplus(0.5)),
    (lambda: nn.Mish(), lambda: torch.nn.Mish()),
    (lambda: nn.Hardswish(), lambda: torch.nn.Hardswish()),
    (lambda: nn.Hardsigmoid(), lambda: torch.nn.Hardsigmoid()),
    (lambda: nn.PReLU(), lambda: torch.nn.PReLU()),
    (lambda: nn.PReLU(3, init=0.1), lambda: torch.nn.PReLU(3, init=0.1)),
    (lambda: nn.Softmax(dim=1), lambda: torch.nn.Softmax(dim=1)),
    (lambda: nn.LogSoftmax(-1), lambda: torch.nn.LogSoftmax(-1)),
]


@pytest.mark.parametrize("make", ELEMENTWISE, ids=lambda m: type(m[0]()).__name__)
@pytest.mark.parametrize("shape", [(2, 3), (4, 3, 5), (1, 3, 2, 7)])
def test_elementwise_layers_match_torch(make, shape):
    x = randn(*shape) * 4
    x[x == 0] = 0.5                                # (no input on the kink of (P)ReLU)
    run_both(make[0](), make[1](), x)


def test_prelu_and_mish_functionals_match_torch():
    x = randn(3, 4, 5) * 3
    w = np.array([0.1, -0.2, 0.3, 0.4], np.float32)
    run_fn(lambda a: F.prelu(a, w), lambda a: TF.prelu(a, torch.from_numpy(w)), x)
    run_fn(F.mish, TF.mish, x)


def test_softplus_threshold_passes_large_inputs_through():
    x = np.array([-30.0, -1.0, 0.0, 10.0, 25.0, 80.0], np.float32)
    run_both(nn.Softplus(), torch.nn.Softplus(), x)
    run_both(nn.Softplus(3.0, 5.0), torch.nn.Softplus(3.0, 5.0), x)


def test_dropout2d_zeroes_whole_channels_in_training_only():
    x = np.abs(randn(8, 16, 3, 3)) + 1
    layer = nn.Dropout2d(0.5)
    y = layer(imp.Tensor(x)).numpy()
    per_channel = y.reshape(8, 16, 9)
    kept = np.all(per_channel != 0, axis=2)
    assert np.all(kept | np.all(per_channel == 0, axis=2))     # all or nothing per channel
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(per_channel[kept], 2 * x.reshape(8, 16, 9)[kept], rtol=1e-6)
    np.testing.assert_array_equal(layer.eval()(imp.Tensor(x)).numpy(), x)
    p = imp.Parameter(x)
    gm = GradManager().attach([p])
    layer.train()
    with gm:
        y = layer(p)
        gm.backward(F.sum(y))
    np.testing.assert_array_equal(p.grad.numpy(), (y.numpy() != 0) * 2.0)


# ---------------------------------------------------------------------------------------
# Padding, reshaping, resampling

@pytest.mark.parametrize("ours, theirs", [
    (lambda: nn.ZeroPad2d(2), lambda: torch.nn.ZeroPad2d(2)),
    (lambda: nn.ZeroPad2d((1, 0, 2, 3)), lambda: torch.nn.ZeroPad2d((1, 0, 2, 3))),
    (lambda: nn.ConstantPad2d((0, 2, 1, 1), 1.5),
     lambda: torch.nn.ConstantPad2d((0, 2, 1, 1), 1.5)),
    (lambda: nn.ReflectionPad2d(2), lambda: torch.nn.ReflectionPad2d(2)),
    (lambda: nn.ReflectionPad2d((3, 0, 1, 2)), lambda: torch.nn.ReflectionPad2d((3, 0, 1, 2))),
    (lambda: nn.ReplicationPad2d((2, 1, 0, 3)), lambda: torch.nn.ReplicationPad2d((2, 1, 0, 3))),
    (lambda: nn.Unflatten(-1, (-1, 2)), lambda: torch.nn.Unflatten(-1, (-1, 2))),
    (lambda: nn.AdaptiveAvgPool2d(1), lambda: torch.nn.AdaptiveAvgPool2d(1)),
    (lambda: nn.AdaptiveAvgPool2d((2, None)), lambda: torch.nn.AdaptiveAvgPool2d((2, None))),
    (lambda: nn.AdaptiveAvgPool2d((3, 4)), lambda: torch.nn.AdaptiveAvgPool2d((3, 4))),
    (lambda: nn.AdaptiveMaxPool2d(1), lambda: torch.nn.AdaptiveMaxPool2d(1)),
    (lambda: nn.AdaptiveMaxPool2d((3, 4)), lambda: torch.nn.AdaptiveMaxPool2d((3, 4))),
])
@pytest.mark.parametrize("shape", [(2, 3, 6, 10), (3, 5, 8)])
def test_resize_layers_match_torch(ours, theirs, shape):
    run_both(ours(), theirs(), randn(*shape))


@pytest.mark.parametrize("ours, theirs", [
    (lambda: nn.Upsample(scale_factor=2), lambda: torch.nn.Upsample(scale_factor=2)),
    (lambda: nn.Upsample(size=(7, 5)), lambda: torch.nn.Upsample(size=(7, 5))),
    (lambda: nn.Upsample(scale_factor=1.7, mode="bilinear"),
     lambda: torch.nn.Upsample(scale_factor=1.7, mode="bilinear")),
    (lambda: nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True),
     lambda: torch.nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True)),
])
@pytest.mark.parametrize("shape", [(2, 3, 6, 10), (1, 2, 5, 3)])
def test_upsample_matches_torch(ours, theirs, shape):
    run_both(ours(), theirs(), randn(*shape))


def test_unflatten_matches_torch():
    run_both(nn.Unflatten(1, (3, 5)), torch.nn.Unflatten(1, (3, 5)), randn(2, 15))
    run_both(nn.Unflatten(0, (2, -1, 1)), torch.nn.Unflatten(0, (2, -1, 1)), randn(6, 4))


def test_pixel_shuffle_and_unshuffle_match_torch():
    run_both(nn.PixelShuffle(2), torch.nn.PixelShuffle(2), randn(2, 12, 3, 5))
    run_both(nn.PixelShuffle(3), torch.nn.PixelShuffle(3), randn(9, 2, 4))
    run_both(nn.PixelUnshuffle(2), torch.nn.PixelUnshuffle(2), randn(2, 3, 4, 6))
    x = randn(1, 8, 2, 3)
    np.testing.assert_array_equal(
        F.pixel_unshuffle(F.pixel_shuffle(imp.Tensor(x), 2), 2).numpy(), x)


@QUICK
@given(h=st.integers(1, 9), w=st.integers(1, 9), oh=st.integers(1, 5), ow=st.integers(1, 5))
def test_adaptive_pools_match_torch_on_any_sizes(h, w, oh, ow):
    x = randn(2, 3, h, w, seed=h * 10 + w)
    run_fn(lambda a: F.adaptive_avg_pool2d(a, (oh, ow)),
           lambda a: TF.adaptive_avg_pool2d(a, (oh, ow)), x)
    run_fn(lambda a: F.adaptive_max_pool2d(a, (oh, ow)),
           lambda a: TF.adaptive_max_pool2d(a, (oh, ow)), x)


@QUICK
@given(n=st.integers(1, 7), m=st.integers(1, 15),
       mode=st.sampled_from(["nearest", "nearest-exact", "linear"]),
       align=st.booleans())
def test_interpolate_sizes_match_torch(n, m, mode, align):
    align = align if mode == "linear" else None
    x = randn(2, 3, n, seed=n)
    run_fn(lambda a: F.interpolate(a, size=m, mode=mode, align_corners=align),
           lambda a: TF.interpolate(a, size=m, mode=mode, align_corners=align), x)


@QUICK
@given(n=st.integers(1, 6), factor=st.sampled_from([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]),
       mode=st.sampled_from(["nearest", "bilinear"]))
def test_interpolate_scale_factors_match_torch(n, factor, mode):
    x = randn(1, 2, n + 1, n, seed=n)
    if int((n) * factor) < 1:
        return
    run_fn(lambda a: F.interpolate(a, scale_factor=factor, mode=mode),
           lambda a: TF.interpolate(a, scale_factor=factor, mode=mode), x)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_match_torch(mode):
    x = randn(2, 3, 5, 4)
    run_fn(lambda a: F.pad(a, (1, 3, 2, 0), mode), lambda a: TF.pad(a, (1, 3, 2, 0), mode), x)
    run_fn(lambda a: F.pad(a, (2, 1), mode), lambda a: TF.pad(a, (2, 1), mode), randn(2, 3, 4))


# ---------------------------------------------------------------------------------------
# Convolutions and normalisation

@pytest.mark.parametrize("args, kwargs, length", [
    ((3, 4, 3), {}, 9),
    ((4, 6, 5), dict(stride=2, padding=2, dilation=1, groups=2), 11),
    ((2, 3, 2), dict(stride=3, padding=1, dilation=2, bias=False), 7),
    ((3, 3, 3), dict(groups=3, padding=1), 1),
    ((2, 4, 3), dict(padding=2, padding_mode="reflect"), 6),
    ((2, 4, 3), dict(padding=1, padding_mode="circular"), 5),
    ((2, 4, 3), dict(padding=(1,), padding_mode="replicate", stride=(2,)), 5),
])
def test_conv1d_matches_torch(args, kwargs, length):
    run_both(nn.Conv1d(*args, **kwargs), torch.nn.Conv1d(*args, **kwargs),
             randn(2, args[0], length))


@pytest.mark.parametrize("args, kwargs, hw", [
    ((3, 4, 3), {}, (5, 6)),
    ((2, 3, (2, 3)), dict(stride=2), (4, 3)),
    ((4, 6, 3), dict(stride=(2, 3), padding=1, output_padding=(1, 2), groups=2), (3, 5)),
    ((2, 2, 3), dict(stride=2, padding=2, dilation=2, bias=False), (4, 4)),
    ((3, 2, 1), dict(stride=3, output_padding=1), (2, 3)),
    ((4, 4, 2), dict(groups=4, stride=2), (3, 1)),
])
def test_conv_transpose2d_matches_torch(args, kwargs, hw):
    run_both(nn.ConvTranspose2d(*args, **kwargs), torch.nn.ConvTranspose2d(*args, **kwargs),
             randn(2, args[0], *hw))


@QUICK
@given(h=st.integers(1, 6), w=st.integers(1, 6), k=st.integers(1, 4), s=st.integers(1, 3),
       p=st.integers(0, 2))
def test_conv_transpose2d_shapes_match_torch(h, w, k, s, p):
    if (h - 1) * s - 2 * p + k < 1 or (w - 1) * s - 2 * p + k < 1:
        return
    x, wt = randn(1, 2, h, w, seed=h), randn(2, 3, k, k, seed=w) * 0.5
    run_fn(lambda a, b: F.conv_transpose2d(a, b, stride=s, padding=p),
           lambda a, b: TF.conv_transpose2d(a, b, stride=s, padding=p), x, wt)


def test_conv1d_functional_matches_torch():
    x, w, b = randn(2, 4, 9), randn(6, 2, 3, seed=2), randn(6, seed=3)
    run_fn(lambda *a: F.conv1d(*a, stride=2, padding=1, groups=2),
           lambda *a: TF.conv1d(*a, stride=2, padding=1, groups=2), x, w, b)


@pytest.mark.parametrize("kwargs", [{}, dict(affine=False), dict(momentum=0.3, eps=1e-3),
                                    dict(track_running_stats=False)])
@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 7), (2, 3, 1)])
def test_batch_norm1d_matches_torch_in_train_and_eval(kwargs, shape):
    ours, theirs = nn.BatchNorm1d(3, **kwargs), torch.nn.BatchNorm1d(3, **kwargs)
    x = randn(*shape) * 2 + 1
    run_both(ours, theirs, x, train=True)            # running statistics move as torch's
    run_both(ours, theirs, randn(*shape, seed=4), train=False)


@pytest.mark.parametrize("groups, channels, affine", [(1, 4, True), (2, 4, True),
                                                      (4, 4, False), (3, 6, True)])
@pytest.mark.parametrize("spatial", [(), (5,), (3, 2)])
def test_group_norm_matches_torch(groups, channels, affine, spatial):
    if not spatial and groups == channels:
        return                       # one value per group: PyTorch's variance is 0 too
    run_both(nn.GroupNorm(groups, channels, affine=affine),
             torch.nn.GroupNorm(groups, channels, affine=affine),
             randn(3, channels, *spatial) * 3)


@pytest.mark.parametrize("kwargs", [{}, dict(affine=True, eps=1e-3)])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (3, 1, 7), (1, 3, 2, 1)])
def test_instance_norm2d_matches_torch(kwargs, shape):
    run_both(nn.InstanceNorm2d(3, **kwargs), torch.nn.InstanceNorm2d(3, **kwargs),
             randn(*shape) + 2, train=True)
    run_both(nn.InstanceNorm2d(3, **kwargs), torch.nn.InstanceNorm2d(3, **kwargs),
             randn(*shape) + 2, train=False)


# ---------------------------------------------------------------------------------------
# Parameters: PyTorch's names, shapes and initial distribution

INITS = [
    (lambda: nn.Conv1d(6, 8, 5, groups=2), lambda: torch.nn.Conv1d(6, 8, 5, groups=2)),
    (lambda: nn.ConvTranspose2d(6, 4, 3, groups=2),
     lambda: torch.nn.ConvTranspose2d(6, 4, 3, groups=2)),
    (lambda: nn.Conv2d(4, 8, 3), lambda: torch.nn.Conv2d(4, 8, 3)),
    (lambda: nn.BatchNorm1d(5), lambda: torch.nn.BatchNorm1d(5)),
    (lambda: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6)),
    (lambda: nn.InstanceNorm2d(3, affine=True), lambda: torch.nn.InstanceNorm2d(3, affine=True)),
    (lambda: nn.PReLU(4), lambda: torch.nn.PReLU(4)),
]


def _draws(make, keys, count=30):
    """Each key's values over `count` freshly made modules, as one flat array."""
    torch.manual_seed(0)
    states = [make().state_dict() for _ in range(count)]
    return {k: np.concatenate([np.asarray(s[k].numpy()).ravel() for s in states]) for k in keys}


def assert_same_initial_distribution(ours, theirs):
    """Same keys and shapes; constants equal; random tensors spread as PyTorch's: over many
    modules (3000 values at least), the largest magnitude (the bound of the uniform) and
    the deviation agree."""
    mine = ours().state_dict()
    want = {k: v for k, v in theirs().state_dict().items()
            if not k.endswith("num_batches_tracked")}
    assert list(mine) == list(want)
    assert [mine[k].shape for k in want] == [tuple(v.shape) for v in want.values()]
    random = [k for k, v in want.items() if not np.all(v.numpy() == v.numpy().flat[0])]
    for k in set(want) - set(random):
        np.testing.assert_array_equal(mine[k].numpy(), want[k].numpy(), err_msg=k)
    count = max(30, 3000 // min(want[k].numel() for k in random)) if random else 0
    a, b = _draws(ours, random, count), _draws(theirs, random, count)
    for k in random:
        assert np.abs(a[k]).max() == pytest.approx(np.abs(b[k]).max(), rel=0.1), k
        assert np.std(a[k]) == pytest.approx(np.std(b[k]), rel=0.15), k


@pytest.mark.parametrize("make", INITS, ids=lambda m: type(m[0]()).__name__)
def test_parameters_are_initialised_as_torchs(make):
    assert_same_initial_distribution(*make)


# ---------------------------------------------------------------------------------------
# Bad arguments: an error at the call naming the argument, what was expected and given

X4 = np.zeros((2, 4, 6, 6), np.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.LeakyReLU("0.1"), TypeError,
     r"LeakyReLU: negative_slope must be a real number, got '0\.1'"),
    (lambda: nn.Softplus(beta=0), ValueError, "Softplus: beta must be non-zero"),
    (lambda: nn.PReLU(0), ValueError, "PReLU: num_parameters must be a positive int, got 0"),
    (lambda: nn.PReLU(3)(imp.Tensor(X4)), ValueError,
     r"prelu: weight has 3 slopes; expected 1 or the 4 channels of input \(2, 4, 6, 6\)"),
    (lambda: nn.Softmax(), ValueError, "Softmax: give dim"),
    (lambda: nn.LogSoftmax(dim=1.0), TypeError, r"LogSoftmax: dim must be an int, got 1\.0"),
    (lambda: nn.Dropout2d(1.0), ValueError, r"Dropout2d: p must be in \[0, 1\), got 1\.0"),
    (lambda: nn.Dropout2d()(imp.Tensor(np.zeros((2, 3)))), ValueError,
     r"Dropout2d: input must be 3-D or 4-D \(N, C, \.\.\.\), got \(2, 3\)"),
    (lambda: nn.ZeroPad2d((1, 2)), TypeError,
     r"ZeroPad2d: padding must be an int or a tuple of 4 ints, got \(1, 2\)"),
    (lambda: nn.ConstantPad2d(1, "x"), TypeError, "ConstantPad2d: value must be a real number"),
    (lambda: nn.ReflectionPad2d(6)(imp.Tensor(X4)), ValueError,
     r"pad: reflect padding \(6, 6\) must be less than the size 6 of axis 3"),
    (lambda: nn.ZeroPad2d(1)(imp.Tensor(np.zeros(3))), ValueError,
     r"ZeroPad2d: input must be 3-D \(C, H, W\) or 4-D \(N, C, H, W\), got shape \(3,\)"),
    (lambda: nn.Unflatten(1, (0, 2)), ValueError, "Unflatten: unflattened_size must be"),
    (lambda: nn.Unflatten(1, (3, 5))(imp.Tensor(X4)), ValueError,
     r"Unflatten: axis 1 of input \(2, 4, 6, 6\) \(size 4\) does not split into \(3, 5\)"),
    (lambda: nn.PixelShuffle(0), ValueError, "PixelShuffle: upscale_factor must be a positive int"),
    (lambda: nn.PixelShuffle(3)(imp.Tensor(X4)), ValueError,
     r"pixel_shuffle: the 4 channels of input \(2, 4, 6, 6\) must be divisible by "
     r"upscale_factor \*\* 2 = 9"),
    (lambda: nn.Upsample(), ValueError, "Upsample: give exactly one of size and scale_factor"),
    (lambda: nn.Upsample(scale_factor=2, mode="cubic"), ValueError,
     r"Upsample: mode must be one of \('nearest', 'nearest-exact', 'linear', 'bilinear', "
     r"'trilinear'\), got 'cubic'"),
    (lambda: F.interpolate(imp.Tensor(X4), scale_factor=2, mode="linear"), ValueError,
     r"interpolate: mode 'linear' takes a 3-D input \(N, C, \.\.\.\), got shape \(2, 4, 6, 6\)"),
    (lambda: F.interpolate(imp.Tensor(X4), size=3, align_corners=True), ValueError,
     "align_corners can only be set with the linear modes"),
    (lambda: F.interpolate(imp.Tensor(X4), size=(3, 0)), ValueError,
     "interpolate: size must be a positive int, got 0"),
    (lambda: F.interpolate(imp.Tensor(X4), scale_factor=2, mode="bicubic"), NotImplementedError,
     "got 'bicubic'"),
    (lambda: nn.AdaptiveAvgPool2d(0), ValueError,
     "AdaptiveAvgPool2d: output_size must be a positive int, got 0"),
    (lambda: nn.AdaptiveMaxPool2d((1, 2, 3)), ValueError,
     r"AdaptiveMaxPool2d: output_size must be a positive int or a pair of them"),
    (lambda: nn.AdaptiveMaxPool2d(2, return_indices=True), NotImplementedError,
     "return_indices"),
    (lambda: F.adaptive_avg_pool2d(imp.Tensor(np.zeros((2, 3))), 1), ValueError,
     r"adaptive_avg_pool2d: input must be 3-D \(C, H, W\) or 4-D \(N, C, H, W\), got shape"),
    (lambda: nn.Conv1d(4, 6, 3, groups=4), ValueError,
     "Conv1d: in_channels 4 and out_channels 6 must be divisible by groups 4"),
    (lambda: nn.Conv1d(4, 6, 0), ValueError, "Conv1d: kernel_size must be >= 1, got 0"),
    (lambda: nn.Conv1d(4, 6, 3, stride=(1, 2)), TypeError,
     r"Conv1d: stride must be an int or a 1-tuple of ints, got \(1, 2\)"),
    (lambda: nn.Conv1d(4, 6, 3, padding_mode="mirror"), ValueError,
     "Conv1d: padding_mode must be one of"),
    (lambda: nn.Conv1d(4, 6, 3)(imp.Tensor(X4)), ValueError,
     r"conv1d: input must be 3-D \(N, C, L\), got shape \(2, 4, 6, 6\)"),
    (lambda: nn.ConvTranspose2d(4, 4, 3, stride=2, output_padding=2), ValueError,
     "ConvTranspose2d: output_padding 2 must be less than stride 2"),
    (lambda: nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect"), ValueError,
     "ConvTranspose2d: padding_mode must be 'zeros'"),
    (lambda: nn.ConvTranspose2d(3, 4, 3)(imp.Tensor(X4)), ValueError,
     r"conv_transpose2d: weight \(3, 4, 3, 3\) expects 3 input channels"),
    (lambda: F.conv_transpose2d(imp.Tensor(X4), imp.Tensor(np.zeros((4, 1, 3, 3))), padding=5),
     ValueError, r"conv_transpose2d: the output would be"),
    (lambda: nn.BatchNorm1d(4)(imp.Tensor(X4)), ValueError,
     r"BatchNorm1d: input must be 2 or 3-D \(N, C, \.\.\.\), got shape \(2, 4, 6, 6\)"),
    (lambda: nn.BatchNorm1d(0), ValueError, "BatchNorm1d: num_features must be a positive int"),
    (lambda: nn.BatchNorm1d(3, momentum=None), TypeError,
     "BatchNorm1d: momentum must be a real number, got None"),
    (lambda: nn.GroupNorm(3, 4), ValueError,
     "GroupNorm: num_channels 4 must be divisible by num_groups 3"),
    (lambda: nn.GroupNorm(2, 6)(imp.Tensor(X4)), ValueError,
     r"GroupNorm: input must be \(N, 6, \.\.\.\), got shape \(2, 4, 6, 6\)"),
    (lambda: F.group_norm(imp.Tensor(X4), 3), ValueError,
     r"group_norm: num_groups must be a positive int dividing the 4 channels"),
    (lambda: nn.InstanceNorm2d(4, track_running_stats=True), NotImplementedError,
     "InstanceNorm2d: track_running_stats=True is not supported"),
    (lambda: nn.InstanceNorm2d(4)(imp.Tensor(np.zeros((2, 4, 1, 1)))), ValueError,
     "instance_norm: expected more than 1 spatial element"),
    (lambda: nn.InstanceNorm2d(3, affine=True)(imp.Tensor(X4)), ValueError,
     r"InstanceNorm2d: input must have 3 channels, got shape \(2, 4, 6, 6\)"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------------------
# Recurrent layers

@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch, with_state", [(3, False), (3, True), (None, True), (1, False)])
def test_cells_match_torch(cls, bias, batch, with_state):
    ours, theirs = getattr(nn, cls)(5, 4, bias=bias), getattr(torch.nn, cls)(5, 4, bias=bias)
    lead = () if batch is None else (batch,)
    inputs = [randn(*lead, 5)]
    if with_state:
        inputs += [randn(*lead, 4, seed=k) for k in range(2 if cls == "LSTMCell" else 1)]

    def call(m, x, *state):
        return m(x, (tuple(state) if len(state) == 2 else state[0]) if state else None)
    run_both(ours, theirs, *inputs, call=call)


RNN_CONFIGS = [
    dict(),
    dict(num_layers=2),
    dict(bidirectional=True),
    dict(num_layers=2, bidirectional=True, batch_first=True),
    dict(bias=False, batch_first=True),
    dict(num_layers=3, dropout=0.3),             # (eval mode: dropout off, as torch's)
]


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
@pytest.mark.parametrize("config", RNN_CONFIGS, ids=str)
@pytest.mark.parametrize("steps, batch", [(4, 3), (1, 2), (5, None)])
def test_rnns_match_torch(cls, config, steps, batch):
    ours, theirs = getattr(nn, cls)(3, 4, **config), getattr(torch.nn, cls)(3, 4, **config)
    shape = (steps, 3) if batch is None else \
        (batch, steps, 3) if config.get("batch_first") else (steps, batch, 3)
    run_both(ours, theirs, randn(*shape), train="dropout" not in config)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch", [2, None])
def test_rnns_take_an_initial_state(cls, batch):
    config = dict(num_layers=2, bidirectional=True)
    ours, theirs = getattr(nn, cls)(3, 5, **config), getattr(torch.nn, cls)(3, 5, **config)
    lead = () if batch is None else (batch,)
    x = randn(4, *lead, 3)
    states = [randn(4, *lead, 5, seed=k) for k in range(2 if cls == "LSTM" else 1)]

    def call(m, x, *state):
        return m(x, tuple(state) if len(state) == 2 else state[0])
    run_both(ours, theirs, x, *states, call=call)


def test_rnn_dropout_between_layers_in_training():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = imp.Tensor(randn(3, 2, 3))
    y1, y2 = lstm(x)[0].numpy(), lstm(x)[0].numpy()
    assert not np.array_equal(y1, y2)              # a new mask each call
    lstm.eval()
    np.testing.assert_array_equal(lstm(x)[0].numpy(), lstm(x)[0].numpy())


RNN_INITS = [
    (lambda: nn.LSTMCell(6, 5), lambda: torch.nn.LSTMCell(6, 5)),
    (lambda: nn.GRUCell(6, 5, bias=False), lambda: torch.nn.GRUCell(6, 5, bias=False)),
    (lambda: nn.LSTM(6, 5, num_layers=2, bidirectional=True),
     lambda: torch.nn.LSTM(6, 5, num_layers=2, bidirectional=True)),
    (lambda: nn.GRU(6, 5, num_layers=2), lambda: torch.nn.GRU(6, 5, num_layers=2)),
]


@pytest.mark.parametrize("make", RNN_INITS, ids=lambda m: type(m[0]()).__name__)
def test_recurrent_parameters_are_initialised_as_torchs(make):
    assert_same_initial_distribution(*make)


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.LSTM(0, 4), ValueError, "LSTM: input_size must be a positive int, got 0"),
    (lambda: nn.GRU(3, 4, num_layers=0), ValueError, "GRU: num_layers must be a positive int"),
    (lambda: nn.LSTM(3, 4, proj_size=2), NotImplementedError, "LSTM: proj_size is not supported"),
    (lambda: nn.GRU(3, 4, dropout=1.0), ValueError, r"GRU: p must be in \[0, 1\), got 1\.0"),
    (lambda: nn.LSTM(3, 4)(imp.Tensor(np.zeros((2, 5, 2)))), ValueError,
     r"LSTM: input must be 3-D \(batched\) or 2-D \(unbatched\) with 3 features last, "
     r"got shape \(2, 5, 2\)"),
    (lambda: nn.LSTM(3, 4)(imp.Tensor(np.zeros((2, 5, 3))), imp.Tensor(np.zeros((1, 5, 4)))),
     TypeError, r"LSTM: hx must be a tuple \(h_0, c_0\), got Tensor"),
    (lambda: nn.GRU(3, 4, num_layers=2)(imp.Tensor(np.zeros((2, 5, 3))),
                                        imp.Tensor(np.zeros((1, 5, 4)))),
     ValueError, r"GRU: h_0 must have shape \(2, 5, 4\), got \(1, 5, 4\)"),
    (lambda: nn.LSTMCell(3, 4)(imp.Tensor(np.zeros((2, 3))), imp.Tensor(np.zeros((2, 4)))),
     TypeError, r"LSTMCell: hx must be a tuple \(h, c\), got Tensor"),
    (lambda: nn.GRUCell(3, 4)(imp.Tensor(np.zeros((2, 3))), imp.Tensor(np.zeros((3, 4)))),
     ValueError, r"GRUCell: h must have shape \(2, 4\), got \(3, 4\)"),
])
def test_recurrent_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------------------------
# Attention

def _mask(kind, shape, seed=5):
    """A bool mask (True: may not attend; never a whole row) or a float one, as arrays."""
    rng = np.random.default_rng(seed)
    if kind == "bool":
        mask = rng.random(shape) < 0.3
        mask[..., 0] = False
        return mask
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def _as_torch(a):
    return None if a is None else torch.from_numpy(a)


def encoder_call(config, masked, mask_keyword):
    """run_both's `call` for an encoder (layer) on (3, 5, 8) inputs: with `masked`, a key
    padding mask and a causal-like `mask_keyword` mask (the same arrays on both sides)."""
    n, s = (3, 5) if config.get("batch_first") else (5, 3)
    padding = _mask("bool", (n, s)) if masked else None
    causal = _mask("bool", (s, s), seed=9) if masked else None

    def call(m, x):
        to = _as_torch if isinstance(m, torch.nn.Module) else (lambda a: a)
        return m(x, **{mask_keyword: to(causal)}, src_key_padding_mask=to(padding))
    return call


@pytest.mark.parametrize("config", [dict(), dict(batch_first=True), dict(bias=False)], ids=str)
@pytest.mark.parametrize("masks", [(None, None), ("bool", None), (None, "float"),
                                   ("bool", "bool"), ("float", "float3")], ids=str)
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)])
def test_multihead_attention_matches_torch(config, masks, need_weights, average):
    e, h, n, length, s = 8, 2, 3, 4, 5
    ours = nn.MultiheadAttention(e, h, **config)
    theirs = torch.nn.MultiheadAttention(e, h, **config)
    lead = (n, length) if config.get("batch_first") else (length, n)
    kv = (n, s) if config.get("batch_first") else (s, n)
    q, k, v = randn(*lead, e), randn(*kv, e, seed=2), randn(*kv, e, seed=3)
    padding = None if masks[0] is None else _mask(masks[0], (n, s))
    attn = None if masks[1] is None else \
        _mask(masks[1][:5], (n * h, length, s) if masks[1] == "float3" else (length, s), seed=6)

    def call(m, q, k, v):
        to = _as_torch if isinstance(m, torch.nn.Module) else (lambda a: a)
        return m(q, k, v, key_padding_mask=to(padding), need_weights=need_weights,
                 attn_mask=to(attn), average_attn_weights=average)
    run_both(ours, theirs, q, k, v, call=call)


def test_multihead_attention_unbatched_and_in_eval_mode():
    ours = nn.MultiheadAttention(6, 3, dropout=0.2)
    theirs = torch.nn.MultiheadAttention(6, 3, dropout=0.2)
    x = randn(4, 6)
    run_both(ours, theirs, x, x, x, train=False, call=lambda m, *a: m(*a))


def test_multihead_attention_dropout_in_training():
    mha = nn.MultiheadAttention(4, 2, dropout=0.5)
    x = imp.Tensor(randn(3, 2, 4))
    w1, w2 = mha(x, x, x)[1].numpy(), mha(x, x, x)[1].numpy()
    assert not np.array_equal(w1, w2)
    mha.eval()
    np.testing.assert_allclose(mha(x, x, x)[1].numpy().sum(-1), 1, rtol=1e-6)


@pytest.mark.parametrize("config", [
    dict(), dict(norm_first=True), dict(batch_first=True, activation="gelu"),
    dict(bias=False, dim_feedforward=16), dict(layer_norm_eps=1e-3, dim_feedforward=8)], ids=str)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("train", [False, True])
def test_transformer_encoder_layer_matches_torch(config, masked, train):
    config = dict(dict(dropout=0.0), **config)     # dropout's masks differ from torch's
    ours = nn.TransformerEncoderLayer(8, 2, **config)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, **config)
    shape = (3, 5, 8)                               # (L, N, E), or (N, L, E) batch_first
    run_both(ours, theirs, randn(*shape), train=train,
             call=encoder_call(config, masked, "src_mask"), rtol=2e-4, atol=2e-5)


ATTENTION_INITS = [
    (lambda: nn.MultiheadAttention(16, 4), lambda: torch.nn.MultiheadAttention(16, 4)),
    (lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=32),
     lambda: torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=32)),
]


@pytest.mark.parametrize("make", ATTENTION_INITS, ids=lambda m: type(m[0]()).__name__)
def test_attention_parameters_are_initialised_as_torchs(make):
    assert_same_initial_distribution(*make)


Q = np.zeros((3, 2, 4), np.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.MultiheadAttention(6, 4), ValueError,
     "MultiheadAttention: embed_dim 6 must be divisible by num_heads 4"),
    (lambda: nn.MultiheadAttention(4, 2, kdim=3), NotImplementedError, "kdim/vdim"),
    (lambda: nn.MultiheadAttention(4, 2, dropout=1.5), ValueError,
     r"MultiheadAttention: p must be in \[0, 1\), got 1\.5"),
    (lambda: nn.MultiheadAttention(4, 2)(Q, Q[:, :, :3], Q), ValueError,
     r"got key of shape \(3, 2, 3\)"),
    (lambda: nn.MultiheadAttention(4, 2)(Q, Q, Q, attn_mask=np.zeros((3, 4), bool)), ValueError,
     r"MultiheadAttention: attn_mask must have shape \(3, 3\), got \(3, 4\)"),
    (lambda: nn.MultiheadAttention(4, 2)(Q, Q, Q, key_padding_mask=np.zeros((3, 2), bool)),
     ValueError, r"key_padding_mask must have shape \(2, 3\), got \(3, 2\)"),
    (lambda: nn.MultiheadAttention(4, 2)(Q, Q, Q, attn_mask=np.zeros((3, 3), np.int32)),
     TypeError, "attn_mask must be a bool or float tensor, got dtype int32"),
    (lambda: nn.MultiheadAttention(4, 2)(Q, Q, Q, is_causal=True), ValueError,
     "is_causal needs attn_mask"),
    (lambda: nn.TransformerEncoderLayer(4, 2, activation="tanh"), ValueError,
     "TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got 'tanh'"),
])
def test_attention_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
