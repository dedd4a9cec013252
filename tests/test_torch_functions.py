"""PyTorch's norms, distances, activations and scans in imperative.functional
(imperative/distances.py, activations.py, cumulative.py) and nn.CosineSimilarity /
nn.PairwiseDistance, against PyTorch on the same inputs: values and gradients, the edges
(zero vectors, equal or infinite arguments, zeros in a product), gumbel_softmax's
properties (it samples: its values are imperative.random's), and bad arguments."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative.jit import trace

from test_torch_losses import assert_matches, normal

torch = pytest.importorskip("torch")
F = imp.functional
TF = torch.nn.functional
QUICK = settings(max_examples=25, deadline=None, database=None, derandomize=True)


# ---------------------------------------------------------------------------------------
# Norms and distances


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("axis", [1, 0, -1])
def test_normalize_matches_torch(p, axis):
    x = normal(3, 4, 2)
    x[0, :, 0] = 0.0 if axis == 1 else x[0, :, 0]           # a zero vector along axis 1
    assert_matches(lambda a: F.normalize(a, p, axis), lambda a: TF.normalize(a, p, axis), [x])


@pytest.mark.parametrize("shapes, axis", [(((4, 5), (4, 5)), 1), (((3, 4, 5), (3, 4, 5)), -1),
                                          (((3, 1, 5), (3, 4, 5)), 1), (((5,), (3, 5)), 1),
                                          (((4, 5), (4, 5)), 0)])
def test_cosine_similarity_matches_torch(shapes, axis):
    x1, x2 = normal(*shapes[0]), normal(*shapes[1], seed=1)
    assert_matches(lambda a, b: F.cosine_similarity(a, b, axis),
                   lambda a, b: TF.cosine_similarity(a, b, axis), [x1, x2], attach=(0, 1))


def test_cosine_similarity_of_a_zero_vector_is_0_with_finite_gradients():
    x1, x2 = np.zeros((2, 3), np.float32), normal(2, 3)
    assert_matches(lambda a, b: F.cosine_similarity(a, b),
                   lambda a, b: TF.cosine_similarity(a, b), [x1, x2], attach=(1,))


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, float("inf")])
@pytest.mark.parametrize("keepdims", [False, True])
def test_pairwise_distance_matches_torch(p, keepdims):
    x1, x2 = normal(4, 6), normal(4, 6, seed=1)
    assert_matches(lambda a, b: F.pairwise_distance(a, b, p, keepdims=keepdims),
                   lambda a, b: TF.pairwise_distance(a, b, p, keepdim=keepdims), [x1, x2],
                   attach=(0, 1))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf"), 0.0])
@pytest.mark.parametrize("shapes", [((5, 3), (4, 3)), ((2, 5, 3), (2, 6, 3)),
                                    ((2, 5, 3), (6, 3))])
def test_cdist_from_differences_matches_torch(p, shapes):
    x1, x2 = normal(*shapes[0]), normal(*shapes[1], seed=1)
    if p == 0:                      # a count of differing coordinates: no gradient
        x1[..., 0, 1] = x2[..., 0, 1]
        got = F.cdist(imp.Tensor(x1), imp.Tensor(x2), p).numpy()
        np.testing.assert_array_equal(got, torch.cdist(torch.tensor(x1), torch.tensor(x2), p))
        return
    assert_matches(lambda a, b: F.cdist(a, b, p), lambda a, b: torch.cdist(a, b, p), [x1, x2],
                   attach=(0, 1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist"])
def test_cdist_through_a_matrix_product_matches_torch(mode):
    x1, x2 = normal(30, 4), normal(3, 4, seed=1)      # 30 rows: the product, as PyTorch's
    assert_matches(lambda a, b: F.cdist(a, b, compute_mode=mode),
                   lambda a, b: torch.cdist(a, b, compute_mode=mode), [x1, x2],
                   attach=(0, 1), rtol=1e-4, atol=1e-5)


def test_cdist_of_a_set_with_itself_has_zero_diagonal_and_finite_gradients():
    x = normal(5, 3)
    d = None
    for mode in ("donot_use_mm_for_euclid_dist", "use_mm_for_euclid_dist"):
        p = imp.Parameter(x)
        gm = imp.autodiff.GradManager().attach([p])
        with gm:
            d = F.cdist(p, p, compute_mode=mode)
            gm.backward(F.sum(d))
        assert np.isfinite(p.grad.numpy()).all()
        np.testing.assert_allclose(np.diag(d.numpy()), 0.0, atol=1e-3)
        np.testing.assert_allclose(d.numpy(), torch.cdist(torch.tensor(x), torch.tensor(x)),
                                   rtol=1e-4, atol=1e-3)


def test_cosine_similarity_and_pairwise_distance_modules_match_torchs():
    x1, x2 = normal(4, 6), normal(4, 6, seed=1)
    assert_matches(imp.nn.CosineSimilarity(0, 1e-6), torch.nn.CosineSimilarity(0, 1e-6),
                   [x1, x2], attach=(0, 1))
    assert_matches(imp.nn.PairwiseDistance(1.0, keepdims=True),
                   torch.nn.PairwiseDistance(1.0, keepdim=True), [x1, x2], attach=(0, 1))
    assert repr(imp.nn.CosineSimilarity()) == "CosineSimilarity(axis=1, eps=1e-08)"


# ---------------------------------------------------------------------------------------
# Activations


def test_logaddexp_matches_torch_with_ties_and_infinities():
    inf = np.inf
    x1 = np.array([0.0, 1.0, -3.0, 50.0, 2.0, -inf, inf, -inf, 5.0], np.float32)
    x2 = np.array([-20.0, 1.0, 4.0, -50.0, 2.0, -inf, inf, 3.0, inf], np.float32)
    got = F.logaddexp(imp.Tensor(x1), imp.Tensor(x2)).numpy()
    np.testing.assert_allclose(got, torch.logaddexp(torch.tensor(x1), torch.tensor(x2)),
                               rtol=1e-6)
    finite = slice(0, 5)          # gradients where the value is finite, ties included
    assert_matches(F.logaddexp, torch.logaddexp, [x1[finite], x2[finite]], attach=(0, 1))
    assert_matches(F.logaddexp, torch.logaddexp, [normal(3, 4), normal(4, seed=1)],
                   attach=(0, 1))


@pytest.mark.parametrize("name", ["softsign", "logsigmoid"])
def test_softsign_and_logsigmoid_match_torch(name):
    x = np.concatenate([normal(20, scale=3.0), [-100.0, 100.0, 0.0]]).astype(np.float32)
    assert_matches(getattr(F, name), getattr(TF, name), [x])


@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((4, 6), 1), ((2, 4, 3), 1), ((8,), 0)])
def test_glu_matches_torch(shape, axis):
    assert_matches(lambda a: F.glu(a, axis), lambda a: TF.glu(a, axis), [normal(*shape)])


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("axis", [-1, 0])
def test_gumbel_softmax_samples_distributions_or_one_hots(hard, axis):
    imp.random.seed(7)
    logits = normal(5, 4)
    p = imp.Parameter(logits)
    gm = imp.autodiff.GradManager().attach([p])
    with gm:
        y = F.gumbel_softmax(p, tau=0.5, hard=hard, axis=axis)
        gm.backward(F.sum(y * imp.Tensor(normal(5, 4, seed=2))))
    values = y.numpy()
    assert values.shape == logits.shape and (values >= 0).all()
    np.testing.assert_allclose(values.sum(axis), 1.0, rtol=1e-6)
    if hard:
        assert set(np.unique(values)) <= {0.0, 1.0}
    grad = p.grad.numpy()
    assert np.isfinite(grad).all() and np.abs(grad).max() > 0
    np.testing.assert_allclose(grad.sum(axis), 0.0, atol=1e-5)   # a softmax's gradient
    imp.random.seed(7)
    again = F.gumbel_softmax(imp.Tensor(logits), tau=0.5, hard=hard, axis=axis)
    np.testing.assert_array_equal(again.numpy(), values)          # seeded: the same sample


def test_gumbel_softmax_follows_the_softmax_of_its_logits():
    """Hard samples of logits log(q) pick class i with probability q_i (Gumbel-max)."""
    q = np.array([0.1, 0.2, 0.7], np.float32)
    imp.random.seed(11)
    samples = F.gumbel_softmax(imp.Tensor(np.tile(np.log(q), (4000, 1))), hard=True).numpy()
    np.testing.assert_allclose(samples.mean(0), q, atol=0.03)


def test_gumbel_softmax_replays_new_noise_under_a_trace():
    traced = trace(lambda x: F.gumbel_softmax(x, hard=True), symbolic=True)
    x = imp.Tensor(np.zeros((64, 8), np.float32))
    first, second = traced(x).numpy(), traced(x).numpy()
    assert not np.array_equal(first, second)                      # fresh noise each call
    assert set(np.unique(second)) <= {0.0, 1.0}


# ---------------------------------------------------------------------------------------
# Scans


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape, axis", [((7,), 0), ((3, 9), 1), ((3, 9), 0), ((2, 3, 5), -2),
                                         ((4, 1), 1), ((0, 3), 1), ((2, 17), -1)])
def test_scans_match_torch(name, shape, axis):
    x = normal(*shape) + (1.0 if name == "cumprod" else 0.0)
    assert_matches(lambda a: getattr(F, name)(a, axis), lambda a: getattr(torch, name)(a, axis),
                   [x.astype(np.float32)], rtol=1e-5, atol=1e-5)


def test_cumprod_gradient_is_exact_where_a_value_is_zero():
    x = np.array([[2.0, 0.0, 3.0, 0.5, 0.0, 4.0], [1.5, -2.0, 0.0, 1.0, 3.0, -1.0]],
                 np.float32)
    assert_matches(lambda a: F.cumprod(a, 1), lambda a: torch.cumprod(a, 1), [x])


@QUICK
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=3).map(tuple),
       data=st.data())
def test_scans_take_any_shape_and_dtype(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    dtype = data.draw(st.sampled_from([np.float32, np.int32, np.int8, np.bool_]))
    x = np.random.default_rng(0).integers(-3, 4, shape).astype(dtype)
    for name in ("cumsum", "cumprod"):
        got = getattr(F, name)(imp.Tensor(x), axis)
        want = getattr(np, name)(x.astype(np.int64) if dtype != np.float32 else x, axis)
        assert got.shape == want.shape
        assert got.dtype == (np.float32 if dtype == np.float32 else np.int32)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)


def test_scans_flatten_without_an_axis_and_keep_a_0d_tensor():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(F.cumsum(imp.Tensor(x)).numpy(), np.cumsum(x))
    np.testing.assert_array_equal(F.cumprod(imp.Tensor(x)).numpy(), np.cumprod(x))
    np.testing.assert_array_equal(F.cumsum(imp.Tensor(np.float32(3.0)), 0).numpy(), 3.0)


# ---------------------------------------------------------------------------------------
# Errors


def T(a):
    return imp.Tensor(np.asarray(a, np.float32))


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.normalize(T([1.0]), p=0), ValueError, r"normalize: p must be > 0 \(or inf\)"),
    (lambda: F.normalize(T([[1.0]]), axis=2), IndexError, "normalize: axis 2 is out of range"),
    (lambda: F.cosine_similarity(T([1.0, 2.0]), T([1.0, 2.0, 3.0]), 0), ValueError,
     r"cosine_similarity: shapes \(2,\) and \(3,\) do not broadcast"),
    (lambda: F.pairwise_distance(T(1.0), T(2.0)), ValueError, "at least one axis"),
    (lambda: F.cdist(T([1.0, 2.0]), T([[1.0, 2.0]])), ValueError,
     r"cdist: x1 and x2 must be \(\.\.\., P, M\) and \(\.\.\., R, M\)"),
    (lambda: F.cdist(T([[1.0]]), T([[1.0]]), p=-1), ValueError, "cdist: p must be >= 0"),
    (lambda: F.cdist(T([[1.0]]), T([[1.0]]), compute_mode="mm"), ValueError,
     "cdist: compute_mode must be one of"),
    (lambda: F.glu(T([1.0, 2.0, 3.0])), ValueError, "glu: axis 0 of input .* must have an even"),
    (lambda: F.gumbel_softmax(T([1.0]), tau=0), ValueError, "gumbel_softmax: tau must be > 0"),
    (lambda: F.cumsum(T([1.0]), 1), IndexError, "cumsum: axis 1 is out of range"),
    (lambda: F.cumprod(T([1.0]), 0.5), TypeError, "cumprod: axis must be an int"),
    (lambda: F.normalize(T([[1.0]]), dim=1), TypeError, "dim= as axis="),
])
def test_bad_arguments_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
