"""Every INPLACE_CAPABLE op's kernel writes its result into the `out=` buffer it is given
(a dying input's storage, which the memory manager counted as no new bytes) and returns
that buffer, with the bits it returns without one. A kernel that returned a new array
instead allocated behind the manager's back: under a budget, a highway network's
sigmoid, written over `t(x) - 1` in the manager's plan, held every later step one
output above its floor."""
import numpy as np
import pytest

from imperative.ops.elemwise import _ACTIVATION_GRADS, _MODES, ActivationGrad, Elemwise, ScaledAdd
from imperative.ops.select import Clip
from imperative.ops.softmax import SoftmaxGrad


class _Desc:
    def __init__(self, a):
        self.shape, self.dtype = a.shape, a.dtype


def _arrays(n, dtype, layout):
    rng = np.random.default_rng(3)
    made = []
    for _ in range(n):
        a = (rng.standard_normal((24, 40)) + 0.25).astype(dtype)
        a.flat[:3] = [0.0, -0.0, 2.5]
        made.append(np.ascontiguousarray(a.T).T if layout == "transposed" else a)
    return made


def _cases():
    for mode, (_, nin, _) in _MODES.items():
        yield f"Elemwise.{mode}", Elemwise(mode), nin
    for mode in _ACTIVATION_GRADS:
        yield f"ActivationGrad.{mode}", ActivationGrad(mode), 2
    yield "ScaledAdd", ScaledAdd(-0.5), 2
    yield "Clip", Clip(-0.5, 1.0), 1
    yield "SoftmaxGrad", SoftmaxGrad(), 2


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name,op,nin", list(_cases()), ids=[c[0] for c in _cases()])
def test_an_inplace_kernel_returns_the_buffer_it_is_given(name, op, nin, dtype, layout):
    assert op.INPLACE_CAPABLE
    arrays = _arrays(nin, np.dtype(dtype), layout)
    try:
        (shape, out_dtype), = op.infer([_Desc(a) for a in arrays])
    except (TypeError, ValueError):
        pytest.skip(f"{name} takes no {dtype} inputs")
    with np.errstate(all="ignore"):
        want = np.asarray(op.kernel(*arrays))
        out = np.full(shape, 7, out_dtype)
        got = op.kernel(*arrays, out=out)
    assert got is out
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()
