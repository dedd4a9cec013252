"""`imperative.nn.init` (reached as `nn.init`): PyTorch's `torch.nn.init`, for a ported
model's `model.apply(init_weights)`. Each function writes its tensor in place
(`tensor[...] = value`: a Parameter stays the same object, so an optimizer built before still
updates it) with values drawn from `imperative.random` (reproducible with
`imp.random.seed`), and returns the tensor. Fans are PyTorch's: a weight `(out, in, *k)` has
fan_in `in * prod(k)` and fan_out `out * prod(k)`.

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    model.apply(init_weights)
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import random as R
from .tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "trunc_normal_", "orthogonal_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain of a nonlinearity, as PyTorch's: 1 for linear, convolutions and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for leaky_relu (slope
    `param`, 0.01 by default), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Real) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: param (the negative slope) must be a number, "
                             f"got {param!r}")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; expected "
                     f"one of {', '.join(_LINEAR)}, tanh, relu, leaky_relu, selu")


def _calculate_fan_in_and_fan_out(tensor: Tensor, where: str = "init") -> tuple[int, int]:
    """(fan_in, fan_out) as PyTorch computes them (receptive field included)."""
    _check_tensor(tensor, where)
    if tensor.ndim < 2:
        raise ValueError(f"{where}: fan in and fan out need a tensor of at least 2 "
                         f"dimensions, got shape {tensor.shape}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode, where):
    if not isinstance(mode, str) or mode.lower() not in ("fan_in", "fan_out"):
        raise ValueError(f"{where}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, where)
    return fan_in if mode.lower() == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill `tensor` from U(a, b)."""
    a, b = _real("uniform_", "a", a), _real("uniform_", "b", b)
    if not a <= b:
        raise ValueError(f"uniform_: expected a <= b, got a={a}, b={b}")
    return _write(tensor, lambda: R.uniform(a, b, size=tensor.shape), "uniform_")


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill `tensor` from N(mean, std**2)."""
    mean, std = _real("normal_", "mean", mean), _std("normal_", std)
    return _write(tensor, lambda: R.normal(mean, std, size=tensor.shape), "normal_")


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill `tensor` with `val`."""
    val = _real("constant_", "val", val)
    _check_tensor(tensor, "constant_")
    tensor[...] = Tensor(np.full(tensor.shape, val, dtype=tensor.dtype), device=tensor.device)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with 0."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill `tensor` with 1."""
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_uniform_")
    std = _real("xavier_uniform_", "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return _write(tensor, lambda: R.uniform(-bound, bound, size=tensor.shape),
                  "xavier_uniform_")


def xavier_normal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Glorot: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor, "xavier_normal_")
    std = _real("xavier_normal_", "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out))
    return _write(tensor, lambda: R.normal(0.0, std, size=tensor.shape), "xavier_normal_")


def _kaiming_std(tensor, a, mode, nonlinearity, where):
    fan = _fan(tensor, mode, where)
    if fan == 0:
        raise ValueError(f"{where}: the tensor of shape {tensor.shape} has a {mode} of 0")
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """He: U(-bound, bound) with bound = gain * sqrt(3 / fan); `a` is leaky_relu's slope."""
    if 0 in _shape(tensor, "kaiming_uniform_"):
        return tensor                       # PyTorch warns and leaves an empty tensor alone
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_uniform_")
    return _write(tensor, lambda: R.uniform(-bound, bound, size=tensor.shape),
                  "kaiming_uniform_")


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu") -> Tensor:
    """He: N(0, std**2) with std = gain / sqrt(fan)."""
    if 0 in _shape(tensor, "kaiming_normal_"):
        return tensor
    std = _kaiming_std(tensor, a, mode, nonlinearity, "kaiming_normal_")
    return _write(tensor, lambda: R.normal(0.0, std, size=tensor.shape), "kaiming_normal_")


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0) -> Tensor:
    """N(mean, std**2) restricted to [a, b] (absolute bounds, as PyTorch's), by PyTorch's
    method: a uniform draw between the normal CDF at a and at b, through the inverse CDF."""
    mean, std = _real("trunc_normal_", "mean", mean), _std("trunc_normal_", std)
    a, b = _real("trunc_normal_", "a", a), _real("trunc_normal_", "b", b)
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    _check_tensor(tensor, "trunc_normal_")
    if std == 0:
        return constant_(tensor, min(max(mean, a), b))
    low, high = (_normal_cdf((x - mean) / std) for x in (a, b))

    def draw():
        u = R.uniform(low, high, size=tensor.shape, device=tensor.device).numpy()
        values = np.clip(mean + std * _ndtri(u.astype(np.float64)), a, b)
        return Tensor(values.astype(np.float32), device=tensor.device)
    return _write(tensor, draw, "trunc_normal_")


def orthogonal_(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix, as PyTorch's: the Q of the QR decomposition of a normal
    draw of shape (rows, numel / rows), signs fixed by R's diagonal, times `gain`."""
    shape = _shape(tensor, "orthogonal_")
    gain = _real("orthogonal_", "gain", gain)
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: needs a tensor of at least 2 dimensions, got shape "
                         f"{shape}")
    if 0 in shape:
        return tensor
    rows = shape[0]
    cols = math.prod(shape) // rows

    def draw():
        flat = R.normal(0.0, 1.0, size=(rows, cols), device=tensor.device).numpy()
        flat = flat.astype(np.float64)
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return Tensor((gain * q).reshape(shape).astype(np.float32), device=tensor.device)
    return _write(tensor, draw, "orthogonal_")


# ---- helpers

def _check_tensor(tensor, where):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{where}: expected an imperative Tensor (a Parameter), got "
                        f"{type(tensor).__name__}")


def _shape(tensor, where):
    _check_tensor(tensor, where)
    return tensor.shape


def _write(tensor, draw, where):
    """tensor[...] = draw() (float32, converted to the tensor's dtype); returns tensor."""
    _check_tensor(tensor, where)
    if np.dtype(tensor.dtype).kind != "f":
        raise TypeError(f"{where}: expected a floating-point tensor, got dtype "
                        f"{np.dtype(tensor.dtype).name}")
    value = draw()
    if value.dtype != tensor.dtype:
        value = value.astype(tensor.dtype)
    if value.device != tensor.device:
        value = value.to(tensor.device)
    tensor[...] = value
    return tensor


def _real(where, name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise TypeError(f"{where}: {name} must be a real number, got {value!r}")
    return float(value)


def _std(where, std):
    std = _real(where, "std", std)
    if std < 0:
        raise ValueError(f"{where}: std must be >= 0, got {std}")
    return std


def _normal_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


# Acklam's rational approximation of the normal quantile (relative error below 1.2e-9)
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
      1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
      6.680131188771972e+01, -1.328068155288572e+01, 1.0)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
      -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
      3.754408661907416e+00, 1.0)


def _ndtri(p):
    """The standard normal quantile of each p in [0, 1] (float64; +-inf at 1 and 0)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        mid = (p >= 0.02425) & (p <= 1 - 0.02425)
        q = p[mid] - 0.5
        r = q * q
        out[mid] = q * np.polyval(_A, r) / np.polyval(_B, r)
        tail = ~mid
        t = np.minimum(p[tail], 1 - p[tail])
        s = np.sqrt(-2 * np.log(t))
        z = np.polyval(_C, s) / np.polyval(_D, s)           # the lower tail's quantile
        out[tail] = np.where(p[tail] < 0.5, z, -z)
    return out
