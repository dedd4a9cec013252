"""`imperative.random`: random tensors, reproducible with `seed(n)`.

The runtime is asynchronous, so the numbers must not depend on when the worker runs an op.
Each call therefore draws a fresh 64-bit seed from a host-side numpy Generator at dispatch
and stores it in the op (imperative.ops.rng); the kernel seeds its own generator with it.
After `seed(n)` the same calls give the same tensors at every async level, in whatever
order their values are read. Without a call to `seed`, the host generator starts from
fresh OS entropy.

    imp.random.seed(0)
    w = imp.random.normal(0.0, 0.02, size=(256, 128))
"""
import math
import operator
import threading

import numpy as np

from . import _core
from .ops.base import cached_op
from .ops.dropout import DropoutApply
from .ops.rng import (DropoutBitsRNG, DropoutMaskRNG, GaussianRNG, PermutationRNG,
                      RandIntRNG, ShuffleRNG, UniformRNG)

__all__ = ["seed", "normal", "uniform", "randint", "permutation", "dropout_mask", "dropout"]

_lock = threading.Lock()        # several Python threads may draw seeds
_host = np.random.default_rng()


def seed(n):
    """Restart the host generator from `n` (a non-negative int)."""
    global _host
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"seed must be a non-negative integer, got {n}")
    with _lock:
        _host = np.random.default_rng(n)


def _run(make_op, *inputs):
    """Build the op with the next seed and run it."""
    return _core.apply(_with_next_seed(make_op), *inputs)[0]


def _with_next_seed(make_op):
    """make_op(the next seed). A call whose arguments are rejected does not consume a seed,
    so it cannot shift the numbers of the calls after it."""
    with _lock:
        state = _host.bit_generator.state
        try:
            return make_op(int(_host.integers(0, 2 ** 64, dtype=np.uint64)))
        except BaseException:
            _host.bit_generator.state = state
            raise


def reseeded(op):
    """The RNG op `op` with the next seed: what a traced function's later call runs, so
    that it draws the numbers the eager call would have (imperative.jit)."""
    return _with_next_seed(op.reseeded)


def normal(mean=0.0, std=1.0, size=None, *, dtype="float32", device=None):
    """Samples of N(mean, std**2); `size=None` gives a 0-d tensor."""
    return _run(lambda s: GaussianRNG(s, mean, std, size, dtype, device))


def uniform(low=0.0, high=1.0, size=None, *, dtype="float32", device=None):
    """Samples uniform in [low, high)."""
    return _run(lambda s: UniformRNG(s, low, high, size, dtype, device))


def randint(low, high=None, size=None, *, dtype="int32", device=None):
    """Integers uniform in [low, high), or in [0, low) when `high` is None (as numpy)."""
    if high is None:
        low, high = 0, low
    return _run(lambda s: RandIntRNG(s, low, high, size, dtype, device))


def permutation(n, *, dtype="int32", device=None):
    """A random permutation of `arange(n)` for an int `n`; for a Tensor (or array), a copy
    with its entries along axis 0 shuffled."""
    if isinstance(n, (int, np.integer)):
        return _run(lambda s: PermutationRNG(s, n, dtype, device))
    if not isinstance(n, _core.TensorBase):
        from .tensor import Tensor
        n = Tensor(n, device=device)
    return _run(ShuffleRNG, n)


def dropout_mask(x, p):
    """A mask shaped like `x` (on its device) holding 1 with probability 1 - p and 0
    otherwise; of x's dtype when x is floating point, float32 otherwise."""
    return _mask(x, p, x.dtype if x.dtype.kind == "f" else np.dtype(np.float32))


def _mask(x, p, dtype):
    return _run(lambda s: DropoutMaskRNG(s, p, x.shape, dtype, x.device))


def dropout(x, p=0.5, training=True):
    """Inverted dropout: zero each element with probability p and scale the rest by
    1 / (1 - p), so the expectation is unchanged; `x` itself when not training. p = 1
    zeroes everything, as PyTorch's (x * 0: its nans and infs give nan there too)."""
    if not 0 <= p <= 1:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training:
        return x
    if p == 1:
        return x * 0.0          # (float32 for an integer x, as the general path gives)
    # A float x takes a boolean mask packed 8 to a byte, applied by one op (DropoutApply:
    # the product and quotient below in one pass), so that one bit an element must stay
    # for the backward (the mask is an RNG value: nothing may recompute it; PyTorch keeps a
    # byte an element). Any other x takes dropout_mask's float32 one.
    if x.dtype.kind == "f":
        mask = _run(lambda s: DropoutBitsRNG(s, p, math.prod(x.shape), x.device))
        return _core.apply(cached_op(DropoutApply, 1 - p), x, mask)[0]
    return x * _mask(x, p, np.dtype(np.float32)) / (1 - p)
