"""Random number ops. Each carries its own 64-bit `seed`, drawn at dispatch by
`imperative.random` from a host generator: the kernel's numbers depend only on the op, never
on when or on which thread it runs, so results match at every async level.

They are flagged RECOMPUTABLE = False (API.md §4): the memory manager never drops their
outputs to regenerate them.
"""
import math
import operator

import numpy as np

from .. import _core
from .. import dtype as D
from .base import Op, check_arity
from .shape import check_size

__all__ = ["GaussianRNG", "UniformRNG", "RandIntRNG", "PermutationRNG", "ShuffleRNG",
           "DropoutMaskRNG", "DropoutBitsRNG", "is_seeded", "same_but_seed", "packed_bytes"]

_SEED_LIMIT = 2 ** 64


def _shape(size, what):
    """numpy's `size`: None (a scalar), an int or a sequence of ints, none negative."""
    if size is None:
        return ()
    try:
        if isinstance(size, (list, tuple, np.ndarray)):
            shape = tuple(operator.index(s) for s in size)
        else:
            shape = (operator.index(size),)
    except TypeError:
        raise TypeError(f"{what}: size must be None, an int or a tuple of ints, "
                        f"got {size!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"{what}: negative dimensions are not allowed, got size {shape}")
    check_size(shape, what)
    return shape


def _real(value, name, what):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: {name} must be a real number, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {value}")
    return value


def _probability(p, what):
    p = _real(p, "p", what)
    if not 0 <= p < 1:
        raise ValueError(f"{what}: p must be in [0, 1), got {p}")
    return p


def is_seeded(op):
    """`op` draws random numbers from its own seed (an RNG op)."""
    return isinstance(op, _RNG)


def same_but_seed(a, b):
    """Two RNG ops of one class with the same parameters but perhaps their seeds: the same
    call of a traced function, made again (each call draws its next seed)."""
    return type(a) is type(b) and is_seeded(a) and all(
        getattr(a, f) == getattr(b, f) for f in a._fields if f != "seed")


def _dtype(dtype, kinds, what):
    dt = D.canonical_dtype(dtype)
    if D.is_quantize(dt) or dt.kind not in kinds:
        raise TypeError(f"{what}: unsupported dtype {D.dtype_name(dt)}")
    return dt


class _RNG(Op):
    """Base of the RNG ops: `seed` (an int in [0, 2**64)), and for ops without inputs the
    output `shape`, `dtype` and `device` (None: the default device at dispatch)."""

    RECOMPUTABLE = False

    def _check_seed(self, seed):
        seed = operator.index(seed)
        if not 0 <= seed < _SEED_LIMIT:
            raise ValueError(f"{type(self).__name__}: seed must be in [0, 2**64), got {seed}")
        return seed

    def _check_device(self, device):
        return None if device is None else str(_core.as_device(device))

    def reseeded(self, seed):
        """This op with another seed (a traced program's replay gives each of its RNG ops
        the next seed, as the eager call did: imperative.random.reseeded)."""
        return type(self)(*(seed if f == "seed" else getattr(self, f) for f in self._fields))

    def generator(self):
        return np.random.default_rng(self.seed)

    def infer(self, inputs):
        check_arity(self, inputs, 0)
        if self.device is None:
            return ((self.shape, self.dtype),)
        return ((self.shape, self.dtype, self.device),)


class GaussianRNG(_RNG):
    """Normal samples with mean `mean` and standard deviation `std`."""

    _fields = ("seed", "mean", "std", "shape", "dtype", "device")

    def __init__(self, seed, mean=0.0, std=1.0, shape=(), dtype="float32", device=None):
        what = "normal"
        mean, std = _real(mean, "mean", what), _real(std, "std", what)
        if std < 0:
            raise ValueError(f"{what}: std must be non-negative, got {std}")
        self._set(seed=self._check_seed(seed), mean=mean, std=std, shape=_shape(shape, what),
                  dtype=_dtype(dtype, "f", what), device=self._check_device(device))

    def kernel(self):
        return self.generator().normal(self.mean, self.std, self.shape).astype(self.dtype)


class UniformRNG(_RNG):
    """Uniform samples in [low, high)."""

    _fields = ("seed", "low", "high", "shape", "dtype", "device")

    def __init__(self, seed, low=0.0, high=1.0, shape=(), dtype="float32", device=None):
        what = "uniform"
        low, high = _real(low, "low", what), _real(high, "high", what)
        if not low < high:
            raise ValueError(f"{what}: high must be greater than low, got low={low}, high={high}")
        self._set(seed=self._check_seed(seed), low=low, high=high, shape=_shape(shape, what),
                  dtype=_dtype(dtype, "f", what), device=self._check_device(device))

    def kernel(self):
        out = self.generator().uniform(self.low, self.high, self.shape).astype(self.dtype)
        # Rounding to a narrower float can reach `high`; the interval is half-open.
        top = np.nextafter(self.dtype.type(self.high), self.dtype.type(self.low))
        return np.minimum(out, top, out=out)


class RandIntRNG(_RNG):
    """Integers uniform in [low, high)."""

    _fields = ("seed", "low", "high", "shape", "dtype", "device")

    def __init__(self, seed, low, high, shape=(), dtype="int32", device=None):
        what = "randint"
        low, high = operator.index(low), operator.index(high)
        dt = _dtype(dtype, "iu", what)
        if not low < high:
            raise ValueError(f"{what}: high must be greater than low, got low={low}, high={high}")
        info = np.iinfo(dt)
        if low < info.min or high - 1 > info.max:
            raise ValueError(f"{what}: [{low}, {high}) does not fit {D.dtype_name(dt)}")
        self._set(seed=self._check_seed(seed), low=low, high=high, shape=_shape(shape, what),
                  dtype=dt, device=self._check_device(device))

    def kernel(self):
        return self.generator().integers(self.low, self.high, self.shape, dtype=self.dtype)


class PermutationRNG(_RNG):
    """A random permutation of `arange(n)`."""

    _fields = ("seed", "n", "dtype", "device")

    def __init__(self, seed, n, dtype="int32", device=None):
        what = "permutation"
        n = operator.index(n)
        dt = _dtype(dtype, "iu", what)
        if n < 0 or n - 1 > np.iinfo(dt).max:
            raise ValueError(f"{what}: n must be in [0, {np.iinfo(dt).max + 1}], got {n}")
        self._set(seed=self._check_seed(seed), n=n, dtype=dt, device=self._check_device(device))

    @property
    def shape(self):
        return (self.n,)

    def kernel(self):
        return self.generator().permutation(self.n).astype(self.dtype)


class ShuffleRNG(_RNG):
    """Its input with the entries along axis 0 in a random order (a copy)."""

    _fields = ("seed",)

    def __init__(self, seed):
        self._set(seed=self._check_seed(seed))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        x = inputs[0]
        if not x.shape:
            raise ValueError("permutation: x must be an integer or at least 1-dimensional")
        return ((x.shape, x.dtype),)

    def kernel(self, x):
        return self.generator().permutation(x, axis=0)


class DropoutMaskRNG(_RNG):
    """A mask of 0s and 1s (of `dtype`): each element is 1 with probability 1 - p."""

    _fields = ("seed", "p", "shape", "dtype", "device")

    def __init__(self, seed, p, shape, dtype="float32", device=None):
        what = "dropout"
        self._set(seed=self._check_seed(seed), p=_probability(p, what), shape=_shape(shape, what),
                  dtype=_dtype(dtype, "fiub", what), device=self._check_device(device))

    def kernel(self):
        return _kept(self, self.shape).astype(self.dtype)


class DropoutBitsRNG(_RNG):
    """DropoutMaskRNG's boolean mask of `size` values (the same seed, the same draws as any
    mask of that size), packed 8 to a byte in little bit order (np.packbits): a uint8
    vector of ceil(size / 8) bytes. A dropout keeps its mask, which nothing may recompute,
    for the backward: one bit a value instead of a boolean's byte (a dropout MLP's six
    masks were 1.5 of the 8.5 MiB that a budget could not evict)."""

    _fields = ("seed", "p", "size", "device")
    dtype = np.dtype(np.uint8)

    def __init__(self, seed, p, size, device=None):
        self._set(seed=self._check_seed(seed), p=_probability(p, "dropout"),
                  size=_shape(size, "dropout")[0], device=self._check_device(device))

    @property
    def shape(self):
        return (packed_bytes(self.size),)

    def kernel(self):
        return np.packbits(_kept(self, self.size), bitorder="little")


def _kept(op, shape):
    """The dropout masks' one draw: True where a value is kept (probability 1 - p), from
    the op's seed (the boolean and the packed mask of one seed and size hold the same
    bits)."""
    return op.generator().random(shape) >= op.p


def packed_bytes(size):
    """The bytes of a mask of `size` values packed 8 to a byte."""
    return -(-size // 8)
