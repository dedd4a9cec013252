"""Reshaping a broadcast (a view whose stride-0 axes repeat values): where numpy must copy,
the copy is made by repeating the distinct values (ops/shape.py: _repeated); where a view
will do, it stays a view. Values against numpy's reshape of the same view, for random
shapes, repeated axes and target shapes, eagerly and through the ops' kernels."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import imperative as imp
from imperative import F
from imperative.ops import shape as shape_ops


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.data())
def test_reshaping_a_broadcast_gives_numpys_values(dims, data):
    repeats = data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=len(dims),
                                 max_size=len(dims)))
    base = np.random.default_rng(len(dims)).standard_normal(dims).astype(np.float32)
    compact = base.reshape([x for d in dims for x in (d, 1)])    # a size-1 axis after each
    wide = [x for d, r in zip(dims, repeats) for x in (d, r)]
    view = np.broadcast_to(compact, wide)
    target = data.draw(st.sampled_from([(-1,), (view.size // wide[0], wide[0]),
                                        tuple(d * r for d, r in zip(dims, repeats))]))
    want = view.reshape(target)
    got = shape_ops._reshape(view, tuple(want.shape))
    np.testing.assert_array_equal(got, want)
    if not np.shares_memory(want, view):
        assert got.flags.c_contiguous
    else:
        assert np.shares_memory(got, view)          # a view stays a view
    tensor = F.broadcast_to(imp.Tensor(compact), tuple(wide)).reshape(want.shape)
    np.testing.assert_array_equal(tensor.numpy(), want)


def test_an_upsampling_by_broadcast_and_reshape_repeats_each_pixel():
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 7)).astype(np.float32)
    t = F.broadcast_to(imp.Tensor(x)[:, :, :, None, :, None], (2, 3, 5, 2, 7, 2))
    got = t.reshape(2, 3, 10, 14).numpy()
    np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 2, axis=2), 2, axis=3))
