"""Elementwise ops: one `Elemwise(mode)` op over a table of modes."""
import math

import numpy as np

from ..dtype import downcast, dtype_promotion
from ..backend import native
from ..backend.epilogue import AXPY, RELU, RELU_GRAD
from .base import (Op, as_buffer, check_arity, float_dtype, reject_quantized, remember,
                   writable_view)

_FLOAT16 = np.dtype(np.float16)
_FLOAT32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------
# Kernels numpy has no ufunc for. The float ones always receive float32 (or wider) arrays:
# `Elemwise._dtypes_for` computes float16 in float32, so their polynomial and exp chains
# never round in float16 between steps.


def _sigmoid(x):
    # exp(-|x|) never overflows, so large negative inputs give 0 without a warning.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _round(x):
    # Half to even, like numpy.round; an integer or bool is already round (numpy's rint
    # would turn it into a float).
    return np.rint(x) if x.dtype.kind == "f" else x


def _softplus(x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x.
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _silu(x):
    return x * _sigmoid(x)


def _hswish(x):
    return x * np.clip(x + 3, 0, 6) / 6


def _hsigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


# erf without scipy: two expansions fitted at import to Python's math.erf/math.erfc (float64
# references, Chebyshev least squares on Chebyshev nodes, converted to power series in a
# variable s in [-1, 1] so that Horner's rule stays well conditioned). Evaluated in float32
# they are within 2 ulp of the correctly rounded erf.
#   |x| < 1:  erf(x)  = x * S(s),            s = 2x^2 - 1
#   a >= 0:   erfc(a) = t * exp(L(s) - a^2),  t = 1 / (1 + a/2), s = 2t - 1
# (the second is the classic "erfc = t exp(-a^2 + P(t))" form, with our own fit of P).


def _chebyshev_nodes(n):
    return np.cos(np.pi * (np.arange(n) + 0.5) / n)


def _erfcx(a):
    """erfc(a) * exp(a^2) in float64, for a >= 0 (asymptotic series where exp overflows)."""
    if a > 20.0:
        v = 1.0 / (a * a)
        return ((1 - v / 2 + 0.75 * v * v - 1.875 * v ** 3 + 6.5625 * v ** 4)
                / (a * math.sqrt(math.pi)))
    return math.erfc(a) * math.exp(a * a)


def _fit_power_series(s, values, degree):
    cheb = np.polynomial.chebyshev
    return tuple(float(c) for c in cheb.cheb2poly(cheb.chebfit(s, values, degree)))


def _fit_erf_small():
    s = _chebyshev_nodes(200)
    x = np.sqrt((s + 1) / 2)
    values = [math.erf(v) / v if v > 0 else 2 / math.sqrt(math.pi) for v in x]
    return _fit_power_series(s, values, 7)


def _fit_erfc():
    s = _chebyshev_nodes(400)
    t = (s + 1) / 2
    values = [math.log(_erfcx(2 / tv - 2) / tv) for tv in t]
    return _fit_power_series(s, values, 12)


_ERF_SMALL = _fit_erf_small()
_ERFC = _fit_erfc()
_ERFC_FLOAT32 = np.array(_ERFC, _FLOAT32)     # as the numpy passes round them
_ERF_SMALL_FLOAT32 = np.array(_ERF_SMALL, _FLOAT32)


def _horner(coefficients, s):
    # in place: each step is two passes over one buffer, not two fresh arrays
    r = s * coefficients[-1]
    r += coefficients[-2]
    for c in coefficients[-3::-1]:
        r *= s
        r += c
    return r


def _erf_series(x):
    """erf(x), accurate for |x| < 1."""
    s = x * x
    s *= 2
    s -= 1
    r = _horner(_ERF_SMALL, s)
    r *= x
    return r


def _erfc_nonneg(a):
    """erfc(a) for a >= 0, with relative accuracy deep into the tail."""
    t = as_buffer(a * 0.5)
    t += 1
    np.reciprocal(t, out=t)
    s = t * 2
    s -= 1
    r = as_buffer(_horner(_ERFC, s))
    r -= np.square(a)
    np.exp(r, out=r)
    r *= t
    return r


def _erf(x):
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        out = as_buffer(_erf_series(x))
        # the tail formula only where it is needed (|x| >= 1): usually a minority. A mask
        # of x's own shape, because x and out may be strided, where no flat view exists
        big = np.abs(x) >= 1
        if big.any():
            xb = x[big]
            out[big] = np.copysign(1 - _erfc_nonneg(np.abs(xb)), xb)
        return out


def _normal_cdf(x):
    """P(N(0, 1) <= x) from erfc alone: erfc(|z|)/2 is the smaller tail, accurate
    relative to itself, and 1 - tail loses nothing that matters near 0.5 or above."""
    z = x * np.asarray(1 / math.sqrt(2), x.dtype)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        tail = _erfc_nonneg(np.abs(z))
        tail *= 0.5
        return np.where(z < 0, tail, 1 - tail)


def _gelu(x):
    r = _normal_cdf(x)
    with np.errstate(invalid="ignore"):     # gelu(-inf) = -inf * 0 is nan, as in PyTorch
        r *= x
    return r


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


# mode -> (function, number of inputs, kind)
#   "arith":   result in the promoted dtype (numpy's own loop decides, then downcast)
#   "float":   float-only math: integer and bool inputs compute in float32
#   "compare": bool result (comparisons and logical ops)
_MODES = {
    # arithmetic
    "ADD": (np.add, 2, "arith"),
    "SUB": (np.subtract, 2, "arith"),
    "MUL": (np.multiply, 2, "arith"),
    "TRUE_DIV": (np.true_divide, 2, "float"),
    "FLOOR_DIV": (np.floor_divide, 2, "arith"),
    "MOD": (np.remainder, 2, "arith"),
    "POW": (np.power, 2, "arith"),
    "MAX": (np.maximum, 2, "arith"),
    "MIN": (np.minimum, 2, "arith"),
    "NEGATE": (np.negative, 1, "arith"),
    "ABS": (np.absolute, 1, "arith"),
    "SIGN": (np.sign, 1, "arith"),
    # bitwise, on integers and bools
    "AND": (np.bitwise_and, 2, "arith"),
    "OR": (np.bitwise_or, 2, "arith"),
    "XOR": (np.bitwise_xor, 2, "arith"),
    "NOT": (np.invert, 1, "arith"),
    "SHL": (np.left_shift, 2, "arith"),
    "SHR": (np.right_shift, 2, "arith"),
    # logical: truth values of any dtype, bool result
    "LOGICAL_AND": (np.logical_and, 2, "compare"),
    "LOGICAL_OR": (np.logical_or, 2, "compare"),
    "LOGICAL_XOR": (np.logical_xor, 2, "compare"),
    "LOGICAL_NOT": (np.logical_not, 1, "compare"),
    # comparisons
    "EQ": (np.equal, 2, "compare"),
    "NE": (np.not_equal, 2, "compare"),
    "LT": (np.less, 2, "compare"),
    "LEQ": (np.less_equal, 2, "compare"),
    "GT": (np.greater, 2, "compare"),
    "GEQ": (np.greater_equal, 2, "compare"),
    # rounding: integers come back unchanged, in their own dtype
    "FLOOR": (np.floor, 1, "arith"),
    "CEIL": (np.ceil, 1, "arith"),
    "TRUNC": (np.trunc, 1, "arith"),
    "ROUND": (_round, 1, "arith"),
    # float math
    "EXP": (np.exp, 1, "float"),
    "EXPM1": (np.expm1, 1, "float"),
    "LOG": (np.log, 1, "float"),
    "LOG1P": (np.log1p, 1, "float"),
    "SQRT": (np.sqrt, 1, "float"),
    "RSQRT": (_rsqrt, 1, "float"),
    "SIN": (np.sin, 1, "float"),
    "COS": (np.cos, 1, "float"),
    "TAN": (np.tan, 1, "float"),
    "TANH": (np.tanh, 1, "float"),
    "ERF": (_erf, 1, "float"),
    # activations
    "RELU": (_relu, 1, "arith"),
    "SIGMOID": (_sigmoid, 1, "float"),
    "GELU": (_gelu, 1, "float"),
    "GELU_TANH": (_gelu_tanh, 1, "float"),
    "SOFTPLUS": (_softplus, 1, "float"),
    "SILU": (_silu, 1, "float"),
    "HSWISH": (_hswish, 1, "float"),
    "HSIGMOID": (_hsigmoid, 1, "float"),
}


# mode -> its native float32 loop (backend/native.py; None where it does not take the array)
_NATIVE = {"RELU": native.relu, "SIGMOID": native.sigmoid, "SILU": native.silu,
           "HSWISH": native.hardswish, "HSIGMOID": native.hardsigmoid,
           "GELU": lambda x, out=None: native.gelu(x, _ERFC_FLOAT32, out),
           "ERF": lambda x, out=None: native.erf(x, _ERF_SMALL_FLOAT32, _ERFC_FLOAT32, out)}


def modes():
    return tuple(_MODES)


def arity(mode):
    """Number of inputs of an Elemwise mode."""
    return _MODES[mode.upper()][1]


_BLOCK = 1 << 14


def _blockwise(fn, *arrays, out=None):
    """`fn(*arrays)` for a composite function (a chain of numpy passes, like gelu's erf
    polynomials), run over blocks of _BLOCK elements so that every pass after the first
    reads cache-resident data: about twice as fast on large tensors. The arrays broadcast
    together; the result goes into `out` (C-contiguous) when one is given."""
    if len(arrays) == 1:    # (our functions are unary: no broadcasting, ~10 us less)
        shape = arrays[0].shape
    else:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        arrays = np.broadcast_arrays(*arrays)
    if out is None and shape != () and arrays[0].size <= _BLOCK:
        return fn(*arrays)
    # (0-d inputs become one element: the passes write in place and need arrays)
    flats = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    result = None if out is None else writable_view(out, -1)
    for start in range(0, flats[0].size, _BLOCK):
        block = fn(*(f[start:start + _BLOCK] for f in flats))
        if result is None:
            result = np.empty(flats[0].shape, block.dtype)
        result[start:start + _BLOCK] = block
    return result.reshape(shape) if out is None else out


def _has_exact_fast_path(fn, kind):
    """The core's fast path calls `fn` directly on equal-dtype inputs. That is right only
    for a real ufunc whose own loop gives the contract's dtype: not for float-only math,
    where numpy computes int8 in float16 and int32 in float64 but the contract says
    float32."""
    return isinstance(fn, np.ufunc) and kind != "float"


class Elemwise(Op):
    """`Elemwise(mode)`: numpy broadcasting; inputs promoted to one dtype first."""

    _fields = ("mode",)
    INPLACE_CAPABLE = True

    def __init__(self, mode):
        if not isinstance(mode, str) or mode.upper() not in _MODES:
            raise ValueError(f"unknown Elemwise mode {mode!r}; valid modes: {', '.join(_MODES)}")
        mode = mode.upper()
        fn, nin, kind = _MODES[mode]
        self._set(mode=mode, _fn=fn, _nin=nin, _kind=kind, _dtypes={}, _native=_NATIVE.get(mode))
        if _has_exact_fast_path(fn, kind):
            self._set(ufunc=fn)   # the core's fast path: equal shapes and dtypes
        elif isinstance(fn, np.ufunc):
            # float-only math: numpy's own loop is exact on float inputs (float16 stays
            # float16, as this kernel computes it), so the core takes it for those only
            self._set(ufunc=fn, ufunc_floats_only=True)
        elif nin == 1:
            # our own one-argument functions (relu, sigmoid, gelu, ...): the host fast path
            # runs _host_function, the kernel's bits (float-only math on float inputs only)
            self._set(host_fn=_host_function(self), ufunc_floats_only=kind == "float")
        if mode == "RELU":        # a product before it may do its work (backend/epilogue.py)
            self._set(epilogue_kind=RELU)

    @property
    def name(self):
        return f"Elemwise.{self.mode}"

    def _dtypes_for(self, in_dtypes):
        """(compute dtype, output dtype) for these input dtypes; TypeError if unsupported."""
        key = in_dtypes
        found = self._dtypes.get(key)
        if found is not None:
            return found
        compute = dtype_promotion(list(in_dtypes))
        if self._kind == "float" and compute.kind in "biu":
            compute = _FLOAT32
        if isinstance(self._fn, np.ufunc):
            try:
                out = self._fn.resolve_dtypes((compute,) * self._nin + (None,))[-1]
            except TypeError as e:
                raise TypeError(f"Elemwise {self.mode} does not support dtype {compute}: "
                                f"{e}") from None
            out = downcast(out)
        else:
            out = compute
            if compute == _FLOAT16 and self._kind == "float":
                # our own float kernels (polynomials, exp chains) would lose too much
                # in float16: compute in float32, round once at the end
                compute = _FLOAT32
        found = (compute, out)
        remember(self._dtypes, key, found, 256)
        return found

    def infer(self, inputs):
        check_arity(self, inputs, self._nin)
        reject_quantized(self, inputs)
        try:
            shape = np.broadcast_shapes(*(t.shape for t in inputs))
        except ValueError:
            raise ValueError(f"Elemwise {self.mode}: shapes "
                             + " and ".join(str(t.shape) for t in inputs)
                             + " cannot be broadcast together") from None
        _, out = self._dtypes_for(tuple(t.dtype for t in inputs))
        return ((shape, out),)

    def kernel(self, *arrays, out=None):
        """`out`: a buffer of the output's shape and dtype (the runtime passes a dying
        input's storage) that the result is written to and returned: the runtime counted
        no new bytes for it. (A kernel that returned a new array instead, as the native
        activations and the blockwise functions did, allocated behind the memory
        manager's back: a highway network's sigmoid, written over `t(x) - 1` in the
        manager's plan, held every later step one output above its floor and budget.)"""
        if len(arrays) == 1:     # (one input: no generator, no list; the same conversion)
            compute, out_dtype = self._dtypes_for((arrays[0].dtype,))
            if arrays[0].dtype != compute:
                arrays = (arrays[0].astype(compute),)
        else:
            compute, out_dtype = self._dtypes_for(tuple(a.dtype for a in arrays))
            arrays = [a if a.dtype == compute else a.astype(compute) for a in arrays]
        dest = out if out is not None and compute == out_dtype else None   # (written directly)
        if self._fn is _relu:
            # one pass (into the donated buffer when there is one), not blocks: the native
            # loop on float32, numpy's maximum on anything else
            x = arrays[0]
            r = native.relu(x, dest)
            if r is None:
                r = np.asarray(np.maximum(x, np.zeros((), x.dtype), out=dest))
        elif not isinstance(self._fn, np.ufunc):
            # our own functions are unary: one native pass, or numpy's in blocks
            r = None if self._native is None else self._native(arrays[0], out=dest)
            if r is None:
                r = np.asarray(_blockwise(self._fn, *arrays, out=dest))
        elif dest is not None:
            return self._fn(*arrays, out=dest)
        else:
            r = np.asarray(self._fn(*arrays))
        if r.dtype != out_dtype:
            r = r.astype(out_dtype)
        if out is not None and r is not out:
            np.copyto(out, r)      # (a float16 result computed in float32, a native
            return out             # kernel that did not take this buffer)
        return r


def _host_function(op):
    """The kernel of a one-argument Elemwise op that is no ufunc (relu, sigmoid, gelu, ...)
    for the host fast path: on float32 input, which the kernel computes and returns in
    float32, the native kernel where it takes the input, without the kernel's per-call
    dtype bookkeeping (two thirds of a tiny relu's time); anything else runs the kernel."""
    kernel, native = op.kernel, op._native
    if native is None:
        return kernel

    def host(x):
        r = native(x) if x.dtype is _FLOAT32 else None
        return kernel(x) if r is None else r
    return host


# ---------------------------------------------------------------------------------------
# Backward kernels of activations, as one op each (autodiff's rules use them): the gradient
# of x from dy and the activation's output y, without Where or a chain of temporaries.


def _relu_grad(dy, y, out):
    # dy where y > 0 (relu's output is positive exactly where its input is), else 0
    r = native.relu_grad(dy, y, out)
    return np.multiply(dy, y > 0, out=out) if r is None else r


def _sigmoid_grad(dy, y, out):
    # dy * y * (1 - y)
    t = as_buffer(np.subtract(1, y, dtype=y.dtype))
    t *= y
    return np.multiply(dy, t, out=out)


def _tanh_grad(dy, y, out):
    # dy * (1 - y * y)
    t = as_buffer(np.multiply(y, y))
    np.subtract(1, t, out=t)
    return np.multiply(dy, t, out=out)


def _gelu_grad_block(dy, x):
    # dy * (Phi(x) + x phi(x)); GELU's gradient needs its input, not its output
    t = as_buffer(np.square(x))
    t *= -0.5
    np.exp(t, out=t)
    t *= x
    t *= 1 / math.sqrt(2 * math.pi)
    t += _normal_cdf(x)
    t *= dy
    return t


def _silu_grad(dy, x, out):
    # dy * s * (1 + x * (1 - s)), s = sigmoid(x); from the input, as GELU's
    r = native.silu_grad(dy, x, out)
    if r is not None:
        return r
    s = _sigmoid(x)
    return np.multiply(dy * s, 1 + x * (1 - s), out=out)


def _gelu_grad(dy, x, out):
    r = native.gelu_grad(dy, x, _ERFC_FLOAT32, out)
    if r is not None:
        return r
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return _blockwise(_gelu_grad_block, dy, x, out=out)


_ACTIVATION_GRADS = {"RELU": _relu_grad, "SIGMOID": _sigmoid_grad, "TANH": _tanh_grad,
                     "GELU": _gelu_grad, "SILU": _silu_grad}


class ActivationGrad(Op):
    """`ActivationGrad(mode)`: inputs (dy, y), y = activation(x) for mode "RELU", "SIGMOID"
    or "TANH", and y = x (the input) for "GELU" and "SILU"; the gradient of x (numpy
    broadcasting, float result)."""

    _fields = ("mode",)
    INPLACE_CAPABLE = True

    def __init__(self, mode):
        if not isinstance(mode, str) or mode.upper() not in _ACTIVATION_GRADS:
            raise ValueError(f"unknown ActivationGrad mode {mode!r}; valid modes: "
                             f"{', '.join(_ACTIVATION_GRADS)}")
        self._set(mode=mode.upper())
        if self.mode == "RELU":   # a product before it may do its work (backend/epilogue.py)
            self._set(epilogue_kind=RELU_GRAD)

    @property
    def name(self):
        return f"ActivationGrad.{self.mode}"

    def _dtypes(self, dtypes):
        compute = float_dtype(dtypes)      # (memoised: the kernel asks at every call)
        return compute, downcast(compute)

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        try:
            shape = np.broadcast_shapes(*(t.shape for t in inputs))
        except ValueError:
            raise ValueError(f"{self!r}: shapes {inputs[0].shape} and {inputs[1].shape} "
                             f"cannot be broadcast together") from None
        return ((shape, self._dtypes(t.dtype for t in inputs)[1]),)

    def kernel(self, dy, y, out=None):
        if dy.dtype is _FLOAT32 is y.dtype:     # (the usual case, without Python calls)
            compute = out_dtype = _FLOAT32
        else:
            compute, out_dtype = self._dtypes((dy.dtype, y.dtype))
            dy, y = dy.astype(compute, copy=False), y.astype(compute, copy=False)
        if out is not None and (out.dtype != compute or out.shape != (
                dy.shape if dy.shape == y.shape else np.broadcast_shapes(dy.shape, y.shape))):
            out = None
        r = _ACTIVATION_GRADS[self.mode](dy, y, out)
        return r if r.dtype == out_dtype else r.astype(out_dtype)


_AXPY_BLOCK = 1 << 15


class ScaledAdd(Op):
    """`ScaledAdd(alpha)`: x + alpha * y for x and y of one shape and float dtype (an
    optimizer's update `param - lr * grad` as one op), computed over cache-sized blocks."""

    _fields = ("alpha",)
    INPLACE_CAPABLE = True
    # the epilogue that does its work on a product read as its SECOND input, y (a weight
    # gradient): a compiled plan's (imperative/jit/schedule.py); eager epilogues read the
    # product as the first input, so this is not an EPILOGUE_KIND
    UPDATE_EPILOGUE = AXPY

    def __init__(self, alpha):
        self._set(alpha=float(alpha))

    def infer(self, inputs):
        check_arity(self, inputs, 2)
        reject_quantized(self, inputs)
        x, y = inputs
        if x.shape != y.shape or x.dtype != y.dtype or x.dtype.kind != "f":
            raise ValueError(f"{self!r}: needs two float inputs of one shape and dtype, got "
                             f"{x.shape} {x.dtype} and {y.shape} {y.dtype}")
        return ((x.shape, x.dtype),)

    def kernel(self, x, y, out=None):
        r = native.axpy(x, self.alpha, y, out)
        if r is not None:
            return r
        if out is None or out.shape != x.shape or out.dtype != x.dtype:
            out = np.empty_like(x)
        alpha = x.dtype.type(self.alpha)
        if x.size <= _AXPY_BLOCK or not (x.flags.c_contiguous and y.flags.c_contiguous
                                    and out.flags.c_contiguous):
            t = np.multiply(y, alpha)        # a temporary: `out` may alias x or y
            return np.add(x, t, out=out)
        fx, fy, fo = x.reshape(-1), y.reshape(-1), out.reshape(-1)
        t = np.empty(_AXPY_BLOCK, x.dtype)
        for start in range(0, fx.size, _AXPY_BLOCK):
            stop = min(fx.size, start + _AXPY_BLOCK)
            tb = t[:stop - start]
            np.multiply(fy[start:stop], alpha, out=tb)
            np.add(fx[start:stop], tb, out=fo[start:stop])
        return out


class LeakyRelu(Op):
    """`LeakyRelu(negative_slope=0.01)`: x where x >= 0, negative_slope * x elsewhere."""

    _fields = ("negative_slope",)

    def __init__(self, negative_slope=0.01):
        self._set(negative_slope=float(negative_slope))

    def infer(self, inputs):
        check_arity(self, inputs, 1)
        reject_quantized(self, inputs)
        return ((inputs[0].shape, float_dtype([inputs[0].dtype])),)

    def kernel(self, x):
        out_dtype = float_dtype([x.dtype])
        x = x.astype(out_dtype, copy=False)
        r = native.leaky_relu(x, self.negative_slope)
        if r is not None:
            return r
        return np.where(x >= 0, x, x * out_dtype.type(self.negative_slope))
