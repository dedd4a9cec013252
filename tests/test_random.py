"""imperative.random: seeded, deterministic at every async level, RNG ops not recomputable."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import ops as O
from imperative import random as R

DRAWS = {
    "normal": lambda: R.normal(1.0, 2.0, size=(3, 4)),
    "uniform": lambda: R.uniform(-1.0, 3.0, size=7),
    "randint": lambda: R.randint(-5, 5, size=(2, 5)),
    "permutation": lambda: R.permutation(9),
    "shuffle": lambda: R.permutation(imp.Tensor(np.arange(12).reshape(6, 2))),
    "dropout": lambda: R.dropout(imp.Tensor(np.ones((4, 4), np.float32)), 0.3),
}


def draw_all(seed):
    R.seed(seed)
    return {name: fn().numpy() for name, fn in DRAWS.items()}


@pytest.mark.parametrize("name", DRAWS)
def test_same_seed_same_numbers(name):
    R.seed(3)
    a = DRAWS[name]().numpy()
    R.seed(3)
    b = DRAWS[name]().numpy()
    np.testing.assert_array_equal(a, b)


def test_different_seeds_differ():
    a, b = draw_all(1), draw_all(2)
    assert not np.array_equal(a["normal"], b["normal"])
    assert not np.array_equal(a["uniform"], b["uniform"])


def test_numbers_do_not_depend_on_the_async_level():
    results = []
    for level in (0, 1, 2):
        with imp.option("async_level", level):
            results.append(draw_all(11))
    for other in results[1:]:
        for name in DRAWS:
            np.testing.assert_array_equal(results[0][name], other[name])


def test_numbers_do_not_depend_on_when_they_are_read():
    R.seed(5)
    a, b = R.normal(size=2000), R.uniform(size=2000)
    b_first = b.numpy()
    R.seed(5)
    c, d = R.normal(size=2000), R.uniform(size=2000)
    imp.sync()
    np.testing.assert_array_equal(b_first, d.numpy())
    np.testing.assert_array_equal(a.numpy(), c.numpy())


def test_a_rejected_call_does_not_shift_the_stream():
    R.seed(9)
    want = R.normal(size=4).numpy()
    R.seed(9)
    with pytest.raises(ValueError):
        R.normal(std=-1.0, size=4)
    np.testing.assert_array_equal(R.normal(size=4).numpy(), want)


def test_default_dtypes_and_shapes():
    assert R.normal().shape == () and R.normal().dtype == np.float32
    assert R.uniform(size=(2, 3)).shape == (2, 3) and R.uniform().dtype == np.float32
    assert R.randint(4, size=5).dtype == np.int32
    assert R.permutation(6).dtype == np.int32 and R.permutation(6).shape == (6,)
    assert R.normal(size=3, dtype="float16").dtype == np.float16
    assert R.randint(0, 200, size=3, dtype="uint8").dtype == np.uint8


def test_distributions():
    R.seed(0)
    n = R.normal(2.0, 0.5, size=20000).numpy()
    assert abs(n.mean() - 2.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    u = R.uniform(-2.0, 6.0, size=20000).numpy()
    assert u.min() >= -2.0 and u.max() < 6.0 and abs(u.mean() - 2.0) < 0.1
    r = R.randint(3, 8, size=2000).numpy()
    assert set(np.unique(r)) == {3, 4, 5, 6, 7}
    assert set(np.unique(R.randint(4, size=200).numpy())) == {0, 1, 2, 3}
    np.testing.assert_array_equal(np.sort(R.permutation(50).numpy()), np.arange(50))


def test_permutation_of_a_tensor_shuffles_its_rows():
    a = np.arange(30, dtype=np.float32).reshape(10, 3)
    R.seed(4)
    p = R.permutation(imp.Tensor(a)).numpy()
    assert not np.array_equal(p, a)
    np.testing.assert_array_equal(p[np.argsort(p[:, 0])], a)


def test_dropout():
    x = imp.Tensor(np.full((100, 100), 2.0, np.float32))
    assert R.dropout(x, 0.5, training=False) is x
    R.seed(1)
    y = R.dropout(x, 0.25).numpy()
    assert y.dtype == np.float32
    assert set(np.unique(y)) <= {0.0, np.float32(2.0 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    assert R.dropout(imp.Tensor([1, 2, 3]), 0.5).dtype == np.float32
    np.testing.assert_array_equal(R.dropout(x, 0.0).numpy(), x.numpy())


def test_dropout_with_its_boolean_mask_is_the_float_masks_product():
    """A float dropout multiplies by a boolean mask (a quarter of the bytes a memory manager
    must keep to recompute it): the values and the gradient of the float mask that
    dropout_mask draws from the same seed, bit for bit."""
    from imperative.autodiff import GradManager
    x = imp.Tensor(np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32))
    R.seed(5)
    want = (x * R.dropout_mask(x, 0.3) / 0.7).numpy()
    gm = GradManager().attach([x])
    with gm:
        R.seed(5)
        y = R.dropout(x, 0.3)
        gm.backward(y.sum())
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(x.grad.numpy(), (want != 0) / np.float32(0.7))


def test_dropout_mask():
    R.seed(2)
    m = R.dropout_mask(imp.Tensor(np.zeros((50, 40), np.float16)), 0.75)
    assert m.shape == (50, 40) and m.dtype == np.float16
    values = m.numpy()
    assert set(np.unique(values)) <= {0.0, 1.0}
    assert abs(values.mean() - 0.25) < 0.03


@pytest.mark.parametrize("call", [
    lambda: R.normal(size=-1),
    lambda: R.normal(size=(2, -3)),
    lambda: R.normal(0.0, -0.1),
    lambda: R.normal(float("nan")),
    lambda: R.uniform(1.0, 1.0),
    lambda: R.uniform(2.0, 1.0),
    lambda: R.randint(5, 5),
    lambda: R.randint(0),
    lambda: R.randint(0, 300, dtype="int8"),
    lambda: R.permutation(-1),
    lambda: R.permutation(imp.Tensor(3)),
    lambda: R.seed(-1),
    lambda: R.dropout(imp.Tensor([1.0]), 1.5),
    lambda: R.dropout(imp.Tensor([1.0]), -0.1),
], ids=["size-1", "size(2,-3)", "std<0", "mean nan", "high==low", "high<low", "randint high==low",
        "randint(0)", "randint out of int8", "permutation(-1)", "permutation 0-d", "seed(-1)",
        "dropout p>1", "dropout p<0"])
def test_bad_arguments_raise_value_error_at_the_call(call):
    with pytest.raises(ValueError):
        call()


def test_dropout_with_p_1_zeroes_everything_as_pytorch():
    # it was refused (p must be in [0, 1)); PyTorch gives input * 0, its gradient 0
    torch = pytest.importorskip("torch")
    x = np.array([[1.5, -2.0, 0.0], [3.0, np.inf, 7.0]], np.float32)
    for ours in (lambda t: imp.F.dropout(t, 1.0), imp.nn.Dropout(1.0), imp.nn.Dropout(p=1)):
        w = imp.Parameter(x)
        gm = imp.autodiff.GradManager().attach([w])
        with gm:
            y = ours(w)
            gm.backward(y.sum())
        t = torch.tensor(x, requires_grad=True)
        ty = torch.nn.functional.dropout(t, 1.0)
        ty.sum().backward()
        assert y.dtype == np.float32 and y.shape == x.shape
        np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())     # nan at the inf
        np.testing.assert_array_equal(w.grad.numpy(), t.grad.numpy())
    np.testing.assert_array_equal(imp.nn.Dropout(1.0).eval()(imp.Tensor(x)).numpy(), x)
    assert imp.F.dropout(imp.Tensor([3, 4]), 1.0).dtype == np.float32      # as p < 1 gives
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        imp.nn.Dropout(1.5)


@pytest.mark.parametrize("call", [lambda: R.normal(size=2.5), lambda: R.uniform(dtype="int32"),
                                  lambda: R.randint(0, 4, dtype="float32")])
def test_bad_types_raise_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_rng_ops_are_not_recomputable_values():
    for cls in (O.GaussianRNG, O.UniformRNG, O.RandIntRNG, O.PermutationRNG, O.ShuffleRNG,
                O.DropoutMaskRNG, O.DropoutBitsRNG):
        assert cls.RECOMPUTABLE is False
    op = O.GaussianRNG(7, 0.0, 1.0, (2,))
    assert not op.recomputable
    assert op == O.GaussianRNG(7, 0.0, 1.0, (2,)) and op != O.GaussianRNG(8, 0.0, 1.0, (2,))
    assert hash(op) == hash(O.GaussianRNG(7, 0.0, 1.0, (2,)))
    assert repr(op) == ("GaussianRNG(seed=7, mean=0.0, std=1.0, shape=(2,), dtype=float32, "
                        "device=None)")
    a, = imp.apply(op)
    b, = imp.apply(op)
    np.testing.assert_array_equal(a.numpy(), b.numpy())     # the numbers are the op's


def test_rng_ops_follow_the_device():
    x = imp.Tensor(np.ones(4, np.float32), device="cpu1")
    assert R.normal(size=2, device="cpu1").device == "cpu1"
    assert R.dropout(x, 0.5).device == "cpu1"


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=0, max_size=3),
       dtype=st.sampled_from(["float32", "float16"]), p=st.floats(0.0, 0.95),
       seed=st.integers(0, 2**16))
def test_dropout_in_one_op_gives_the_composites_bits_and_gradient(shape, dtype, p, seed):
    """DropoutApply against `x * mask / (1 - p)` with the mask of the same seed: the same
    bits forward and backward (signed zeros, infinities and NaNs included), and under a
    GradManager recording the backward too (its gradient is the op itself)."""
    from imperative.autodiff import GradManager
    rng = np.random.default_rng(seed)
    x0 = (rng.standard_normal(shape) * 3).astype(dtype)
    if x0.size >= 4:
        x0.flat[:4] = [-0.0, np.inf, -np.inf, np.nan]
    dy = rng.standard_normal(shape).astype(dtype)

    def run(fused):
        x = imp.Parameter(x0)
        gm = GradManager().attach([x])
        R.seed(seed)
        with gm, np.errstate(invalid="ignore"):
            y = R.dropout(x, p) if fused else x * R._mask(x, p, np.dtype(bool)) / (1 - p)
            gm.backward((y * imp.Tensor(dy)).sum())
        return y.numpy().tobytes(), x.grad.numpy().tobytes()
    assert run(True) == run(False)


@pytest.mark.parametrize("shape", [(), (5,), (8,), (3, 7), (2, 4, 8), (0, 3)])
def test_dropout_bits_are_the_boolean_mask_packed(shape):
    """DropoutBitsRNG draws the boolean mask of the same seed and size, packed 8 to a byte
    (little bit order, the last byte's spare bits 0)."""
    x = imp.Tensor(np.zeros(shape, np.float32))
    R.seed(4)
    mask = R._mask(x, 0.4, np.dtype(bool)).numpy()
    size = int(np.prod(shape))
    R.seed(4)
    bits = R._run(lambda s: O.DropoutBitsRNG(s, 0.4, size))
    assert bits.shape == (-(-size // 8),) and bits.dtype == np.uint8
    np.testing.assert_array_equal(bits.numpy(), np.packbits(mask.reshape(-1), bitorder="little"))


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "float16"])
def test_dropout_with_packed_bits_matches_the_boolean_product_on_any_layout(layout):
    """DropoutApply with a packed mask (the C loop on C-contiguous float32, the unpacked
    mask for numpy otherwise) gives numpy's bits for x * mask / keep, x's values read in
    its logical (C) order whatever its layout."""
    from imperative import _core
    from imperative.ops.dropout import DropoutApply
    rng = np.random.default_rng(1)
    base = (rng.standard_normal((40, 30)) * 3).astype(np.float32)
    base.flat[:4] = [-0.0, np.inf, -np.inf, np.nan]
    x = {"contiguous": base[:, :27], "transposed": base.T, "strided": base[::2, ::3],
         "float16": base.astype(np.float16)}[layout]
    if layout == "contiguous":
        x = np.ascontiguousarray(x)
    mask = rng.random(x.shape) >= 0.3
    bits = np.packbits(mask.reshape(-1), bitorder="little")
    with np.errstate(invalid="ignore"):
        want = (x * mask) / x.dtype.type(0.7)
    got, = _core.apply(DropoutApply(0.7), imp.Tensor(x), imp.Tensor(bits))
    assert got.numpy().tobytes() == want.tobytes()


def test_dropout_keeps_one_bit_a_value_for_its_backward():
    """Under a GradManager, a dropout leaves its output and its mask allocated: the mask
    ceil(size / 8) bytes."""
    from imperative.autodiff import GradManager
    x = imp.Parameter(np.ones((64, 100), np.float32))
    gm = GradManager().attach([x])
    with gm:
        imp.sync()
        before = imp.memory_stats()["allocated"]
        y = R.dropout(x, 0.5)
        imp.sync()
        assert imp.memory_stats()["allocated"] - before == 64 * 100 * 4 + 64 * 100 // 8
        gm.backward(y.sum())
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())   # 2 where kept, 0 elsewhere


def test_dropout_apply_names_its_bad_inputs():
    from imperative import _core
    from imperative.ops.dropout import DropoutApply
    x = imp.Tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="keep must be in"):
        DropoutApply(0.0)
    with pytest.raises(TypeError, match="mask boolean of its shape"):
        _core.apply(DropoutApply(0.5), x, x)
    with pytest.raises(TypeError, match="mask boolean of its shape"):
        _core.apply(DropoutApply(0.5), x, imp.Tensor(np.ones((3, 2), bool)))
    with pytest.raises(TypeError, match=r"packed 8 to a byte, uint8 \(1,\)\), got .* uint8 \(2,\)"):
        _core.apply(DropoutApply(0.5), x, imp.Tensor(np.ones(2, np.uint8)))
    y = _core.apply(DropoutApply(0.5), x, imp.Tensor(np.ones((2, 3), bool)))[0]
    np.testing.assert_array_equal(y.numpy(), np.full((2, 3), 2.0, np.float32))
