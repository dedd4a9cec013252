"""The native float32 loops of issue 16: softmax, log_softmax and cross entropy over rows,
sigmoid and GELU, against PyTorch (and numpy's path, the native loops turned off), at the
edges (one-element rows, rows shorter and longer than a vector, infinities, NaNs, the
exp's underflow); the same bits whether an op runs on the caller's thread or the worker's;
and the eager paths that reach them with fewer steps (a Tensor index, a bias operand)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.autodiff import GradManager
from imperative.backend import native

torch = pytest.importorskip("torch")
TF = torch.nn.functional

EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.0, -88.0, -104.0, 1e-30, 30.0],
                 np.float32)


@pytest.fixture(params=["native", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(native, "_MODE", "always" if request.param == "native" else "never")
    return request.param


def rows(rng, n, k=5, scale=4.0):
    return (rng.standard_normal((k, n)) * scale).astype(np.float32)


def close(got, want, tol=2e-6):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 16, 17, 1000])
def test_softmax_family_matches_pytorch(kernels, n):
    rng = np.random.default_rng(n)
    x = rows(rng, n)
    labels = rng.integers(0, n, x.shape[0])
    t = torch.from_numpy(x)
    close(F.softmax(imp.Tensor(x), -1).numpy(), torch.softmax(t, -1).numpy())
    close(F.log_softmax(imp.Tensor(x), -1).numpy(), torch.log_softmax(t, -1).numpy(), 1e-5)
    for reduction in ("mean", "sum", "none"):
        close(F.cross_entropy(imp.Tensor(x), imp.Tensor(labels), reduction=reduction).numpy(),
              TF.cross_entropy(t, torch.from_numpy(labels), reduction=reduction).numpy(), 1e-5)


def test_softmax_rows_with_infinities_and_nans_are_pytorchs(kernels):
    x = np.array([[0, -np.inf, 1, 3], [np.inf, 1, 2, 3], [-np.inf] * 4, [1e30, -1e30, 0, 5],
                  [np.nan, 0, 1, 2], [-200, -100, -0.5, -104]], np.float32)
    t = torch.from_numpy(x)
    close(F.softmax(imp.Tensor(x), -1).numpy(), torch.softmax(t, -1).numpy())
    close(F.log_softmax(imp.Tensor(x), -1).numpy(), torch.log_softmax(t, -1).numpy(), 1e-5)


def test_cross_entropy_label_out_of_range_names_it(kernels):
    x = imp.Tensor(np.zeros((3, 4), np.float32))
    with imp.option("async_level", 0):
        with pytest.raises(IndexError, match="label 7 is out of range for 4 classes"):
            F.cross_entropy(x, imp.Tensor(np.array([0, 7, 9])))


def _sigmoid64(x):
    return 1 / (1 + np.exp(-x))


def _gelu64(x):
    return x * 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2))


@pytest.mark.parametrize("fn,torch_fn,exact", [(F.sigmoid, torch.sigmoid, _sigmoid64),
                                               (F.gelu, TF.gelu, _gelu64)])
def test_activations_match_pytorch_and_float64(kernels, fn, torch_fn, exact):
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(1001).astype(np.float32) * 6, EDGES])
    got = fn(imp.Tensor(x)).numpy()
    with np.errstate(all="ignore"):
        want = exact(x.astype(np.float64))
    # PyTorch's AVX-512 GELU gives NaN at +inf (the float64 value is +inf): where PyTorch
    # gives a NaN that the float64 value is not, the float64 value judges
    reference = torch_fn(torch.from_numpy(x)).numpy()
    agreed = ~(np.isnan(reference) & ~np.isnan(want))
    close(got[agreed], reference[agreed], 1e-6)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    infinite = np.isinf(want)
    np.testing.assert_array_equal(got[infinite], want[infinite])
    # relative accuracy where the values are normal floats (the exp flushes below e^-87;
    # PyTorch's GELU loses its relative accuracy in the negative tail, 1 + erf cancelling)
    normal = np.isfinite(want) & (np.abs(want) > 1e-30)
    np.testing.assert_allclose(got[normal], want[normal], rtol=1e-5)


def _gelu_grad64(x):
    cdf = 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2))
    return cdf + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("n", [1, 7, 31, 32, 33, 1000])
def test_gelu_gradient_matches_pytorch_and_float64(kernels, n):
    """GELU's backward (one native pass over blocks of four vectors, a zero-padded block at
    the end) against autograd in PyTorch and the float64 derivative."""
    rng = np.random.default_rng(n)
    x = np.concatenate([rng.standard_normal(n).astype(np.float32) * 4, EDGES[EDGES < 30]])
    dy = rng.standard_normal(x.shape).astype(np.float32)
    xt = imp.Tensor(x)
    gm = GradManager().attach([xt])
    with gm:
        gm.backward((F.gelu(xt) * imp.Tensor(dy)).sum())
    got = xt.grad.numpy()
    t = torch.from_numpy(x).requires_grad_()
    (TF.gelu(t) * torch.from_numpy(dy)).sum().backward()
    with np.errstate(all="ignore"):
        want = dy * _gelu_grad64(x.astype(np.float64))
    finite = np.isfinite(x)
    close(got[finite], t.grad.numpy()[finite], 1e-5)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax, F.sigmoid, F.gelu])
def test_caller_and_worker_give_the_same_bits(fn):
    """The tiny path (caller's thread) and a Command on the worker run one kernel."""
    x = imp.Tensor(np.random.default_rng(2).standard_normal((6, 40)).astype(np.float32))
    with imp.option("async_level", 2):
        here = fn(x).numpy()
        with imp.option("enable_host_compute", 0):
            there = fn(x).numpy()
    np.testing.assert_array_equal(here, there)


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_tensor_index_reuses_its_op_per_dtype(dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    index = (rng.random(6) > 0.5) if dtype == "bool" else np.array([4, 0, 5, 0], dtype)
    for _ in range(3):      # the first call makes the op, the others reuse it
        np.testing.assert_array_equal(imp.Tensor(a)[imp.Tensor(index)].numpy(), a[index])
    with pytest.raises(IndexError, match="integer .or boolean. type, got float32"):
        imp.Tensor(a)[imp.Tensor(np.array([1.0, 2.0], np.float32))]


@pytest.mark.parametrize("shapes", [((8, 64), (64,)), ((64,), (8, 64)), ((2, 3, 4), (3, 4))])
def test_a_bias_like_operand_takes_the_host_path_with_numpys_values(shapes):
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    for op in (np.add, np.multiply, np.subtract, np.greater):
        got = op(imp.Tensor(a), imp.Tensor(b))
        np.testing.assert_array_equal(got.numpy(), op(a, b))


def _gradients(forward, arrays, dy, outer):
    """The gradients of sum(forward(*arrays) * dy) with respect to each array: the fused
    ops' (nothing records the backward), or the composite rules' (an outer GradManager
    records it, so that the rules issue their ops)."""
    params = [imp.Parameter(a) for a in arrays]
    gm, outer_gm = GradManager().attach(params), GradManager().attach(params)
    with outer_gm if outer else gm:
        with gm if outer else outer_gm:
            gm.backward((forward(*params) * imp.Tensor(dy)).sum())
    return [p.grad.numpy() for p in params]


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,normalized", [((6, 40), (40,)), ((2, 3, 4, 5), (4, 5)),
                                              ((3, 7), (7,))])
def test_layer_norm_gradients_in_one_op_match_the_composite_rule(kernels, affine, shape,
                                                                 normalized):
    """The fused gradients (nothing records the backward) against the composite rule's
    ops (an outer GradManager makes the rule issue them) and PyTorch's."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    w = rng.standard_normal(normalized).astype(np.float32)
    b = rng.standard_normal(normalized).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)

    def grads(outer):
        return _gradients(lambda x, *wb: F.layer_norm(x, normalized, *wb),
                          [x, w, b] if affine else [x], dy, outer)

    tparams = [torch.tensor(a, requires_grad=True) for a in ([x, w, b] if affine else [x])]
    (TF.layer_norm(tparams[0], normalized, *tparams[1:]) * torch.from_numpy(dy)).sum().backward()
    for fused, composite, t in zip(grads(False), grads(True), tparams):
        close(fused, composite, 2e-5)
        close(fused, t.grad.numpy(), 2e-5)


@pytest.mark.parametrize("norm", ["layer", "batch"])
def test_norm_gradients_of_a_read_only_input(kernels, norm):
    """A row cut from a broadcast is a read-only, C-contiguous array: the layer norm's
    native gradient kernel took its input for the array it writes and raised "arrays must
    have one size and out be writeable" (found by tools/fuzz_torch.py --seed 5702). The
    gradients of the base, the weight and the bias against PyTorch's in float64."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal((1, 4, 20, 18)).astype(np.float32)
    channels = 18 if norm == "layer" else 4
    w, b = (rng.standard_normal(channels).astype(np.float32) for _ in range(2))

    def ours(F, x, w, b):
        return (F.layer_norm(x, (18,), w, b) if norm == "layer"
                else F.batch_norm(x, None, None, w, b, training=True))

    def theirs(x, w, b):
        return (TF.layer_norm(x, (18,), w, b) if norm == "layer"
                else TF.batch_norm(x, None, None, w, b, training=True))
    params = [imp.Tensor(a) for a in (base, w, b)]
    gm = GradManager().attach(params)
    with gm:
        y = ours(F, F.broadcast_to(params[0], (3, 4, 20, 18))[1::2], *params[1:])
        gm.backward(F.sum(y * y))
    tparams = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (base, w, b)]
    ty = theirs(tparams[0].expand(3, 4, 20, 18)[1::2], *tparams[1:])
    (ty * ty).sum().backward()
    for p, t in zip(params, tparams):
        close(p.grad.numpy(), t.grad.numpy(), 1e-4)


@settings(max_examples=60, deadline=None)
@given(lead=st.lists(st.integers(1, 5), min_size=1, max_size=3), size=st.integers(1, 70),
       transposed=st.booleans(), weight_dtype=st.sampled_from(["float32", "float16"]),
       eps=st.sampled_from([1e-5, 1e-3, 0.5]), seed=st.integers(0, 2**16))
def test_layer_norm_in_one_call_gives_the_kernels_bits(lead, size, transposed, weight_dtype,
                                                       eps, seed):
    """LayerNormForward's direct kernel (the tiny path) against its kernel (the worker's),
    for contiguous and transposed inputs and weights of another dtype (the fallback); the
    normalized shape given as a tuple, a list or an int is the same op."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + [size]).astype(np.float32) * 3
    if transposed and len(lead) >= 1:
        x = np.ascontiguousarray(x.swapaxes(0, -1)).swapaxes(0, -1)
    w = rng.standard_normal(size).astype(weight_dtype)
    b = rng.standard_normal(size).astype(weight_dtype)
    t, tw, tb = imp.Tensor(x), imp.Tensor(w), imp.Tensor(b)
    with imp.option("async_level", 2):
        here = F.layer_norm(t, (size,), tw, tb, eps=eps).numpy()
        assert F.layer_norm(t, [size], tw, tb, eps=eps).numpy().tobytes() == here.tobytes()
        assert F.layer_norm(t, size, tw, tb, eps=eps).numpy().tobytes() == here.tobytes()
        with imp.option("enable_host_compute", 0):
            there = F.layer_norm(t, (size,), tw, tb, eps=eps).numpy()
    assert here.dtype == there.dtype and here.tobytes() == there.tobytes()
    want = torch.nn.functional.layer_norm(torch.from_numpy(np.ascontiguousarray(x)), (size,),
                                          torch.from_numpy(w.astype(np.float32)),
                                          torch.from_numpy(b.astype(np.float32)), eps=eps)
    close(here.astype(np.float32), want.numpy(), 2e-3 if weight_dtype == "float16" else 1e-5)


def _batch_norm_grads(x, w, b, dy, outer):
    """x's, the weight's and the bias's gradients of training batch norm (_gradients)."""
    return _gradients(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                      [x, w, b], dy, outer)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), c=st.integers(1, 5), spatial=st.lists(st.integers(1, 9), max_size=2),
       scale=st.sampled_from([1e-3, 1.0, 1e3]), strided=st.booleans(), seed=st.integers(0, 2**16))
def test_batch_norm_gradients_in_one_op_match_the_composite_rule_and_torch(
        n, c, spatial, scale, strided, seed):
    """BatchNormBackward (native, and numpy's path with the native loops off) against the
    composite rule's ops and PyTorch, on contiguous and strided inputs."""
    if n * int(np.prod(spatial)) < 2:
        n = 2                               # (training needs two values a channel)
    rng = np.random.default_rng(seed)
    shape = [n, c] + spatial
    x = (rng.standard_normal(shape) * scale + scale).astype(np.float32)
    if strided:
        x = np.ascontiguousarray(np.moveaxis(x, 0, -1)).transpose(
            (len(shape) - 1,) + tuple(range(len(shape) - 1)))    # (N last in memory)
    w, b = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    tparams = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in (x, w, b)]
    (TF.batch_norm(tparams[0], None, None, tparams[1], tparams[2], training=True)
     * torch.from_numpy(dy)).sum().backward()
    composite = _batch_norm_grads(x, w, b, dy, outer=True)
    for mode in ("always", "never"):
        native._MODE, saved = mode, native._MODE
        try:
            fused = _batch_norm_grads(x, w, b, dy, outer=False)
        finally:
            native._MODE = saved
        for f, comp, t in zip(fused, composite, tparams):
            close(f, comp, 1e-4)
            close(f, t.grad.numpy(), 1e-4)


def test_batch_norm_backward_op_names_its_bad_inputs():
    from imperative.ops.norm import BatchNormBackward
    from imperative import _core
    x = imp.Tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="takes 3 inputs"):
        _core.apply(BatchNormBackward(), x, x)
    with pytest.raises(TypeError, match="dy must be float32"):
        _core.apply(BatchNormBackward(), x, x.astype("float16"), imp.Tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="must be of one shape"):
        _core.apply(BatchNormBackward(), x, x[:1], imp.Tensor(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match="weight must have shape \\(3,\\)"):
        _core.apply(BatchNormBackward(), x, x, imp.Tensor(np.ones(4, np.float32)))
    dx, dw, db = _core.apply(BatchNormBackward(), x, x, imp.Tensor(np.ones(3, np.float32)))
    assert dx.shape == (2, 3, 4) and dw.shape == db.shape == (3,)      # usable after errors


def test_batch_norm_backward_reads_read_only_inputs():
    """x and dy are only read: read-only arrays (a value revived from views, a broadcast
    made contiguous by numpy without a copy) take the native path as writeable ones do."""
    from imperative.ops.norm import BatchNormBackward
    rng = np.random.default_rng(7)
    x, dy = (rng.standard_normal((4, 3, 5)).astype(np.float32) for _ in range(2))
    w = rng.standard_normal(3).astype(np.float32)
    want = BatchNormBackward().kernel(x, dy, w)
    for a in (x, dy, w):
        a.flags.writeable = False
    for got, expected in zip(BatchNormBackward().kernel(x, dy, w), want):
        assert np.array_equal(got, expected)
