"""PyTorch's recurrent layers (imperative.nn re-exports them): LSTMCell, GRUCell, LSTM and
GRU, with PyTorch's parameter names (weight_ih_l0, bias_hh_l1_reverse, ...), shapes, gate
order (i, f, g, o for the LSTM; r, z, n for the GRU) and initialisation U(-1/sqrt(H),
1/sqrt(H)), so that a PyTorch model's state dict loads into them. Each time step is a few
existing ops (a matmul, a split, sigmoids and tanhs); the input's projection of every step
is one matmul per layer and direction."""
from __future__ import annotations

import math
from typing import Any, Callable

from . import functional as F
from .creation import _as_tensor
from .module import Module, check_positive_int, uniform_parameter
from .nn_elementwise import check_probability
from ._types import TensorLike
from .tensor import Tensor

__all__ = ["LSTMCell", "GRUCell", "LSTM", "GRU"]

State = tuple[Tensor, ...]     # (h,) for a GRU, (h, c) for an LSTM


def lstm_step(x_proj: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    """One LSTM step from x's projection x @ W_ih^T + b_ih (N, 4H) and the state (h, c)."""
    h, c = state
    i, f, g, o = F.split(x_proj + F.linear(h, w_hh, b_hh), 4, axis=-1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    return F.sigmoid(o) * F.tanh(c), c


def gru_step(x_proj: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None) -> State:
    """One GRU step from x's projection (N, 3H) and the state (h,), as PyTorch's:
    n = tanh(x_n + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h."""
    (h,) = state
    xr, xz, xn = F.split(x_proj, 3, axis=-1)
    hr, hz, hn = F.split(F.linear(h, w_hh, b_hh), 3, axis=-1)
    r, z = F.sigmoid(xr + hr), F.sigmoid(xz + hz)
    n = F.tanh(xn + r * hn)
    return (n + z * (h - n),)


def _check_sizes(module, input_size, hidden_size):
    check_positive_int(module, "input_size", input_size)
    check_positive_int(module, "hidden_size", hidden_size)
    return int(input_size), int(hidden_size)


def _check_input(module, x, input_size, batched_ndim):
    x = _as_tensor(x)
    if x.ndim not in (batched_ndim - 1, batched_ndim) or x.shape[-1] != input_size:
        raise ValueError(f"{module}: input must be {batched_ndim}-D (batched) or "
                         f"{batched_ndim - 1}-D (unbatched) with {input_size} features last, "
                         f"got shape {x.shape}")
    return x


def _check_state(module, name, t, shape):
    t = _as_tensor(t)
    if t.shape != shape:
        raise ValueError(f"{module}: {name} must have shape {shape}, got {t.shape}")
    return t


def _gate_parameters(gates, input_size, hidden_size, bias):
    """(weight_ih, weight_hh, bias_ih, bias_hh) of one layer and direction as PyTorch makes
    them, in its drawing order: `gates` blocks of hidden_size rows, U(-1/sqrt(H), 1/sqrt(H));
    the biases None without `bias`."""
    rows, bound = gates * hidden_size, 1.0 / math.sqrt(hidden_size)
    return (uniform_parameter((rows, input_size), bound),
            uniform_parameter((rows, hidden_size), bound),
            uniform_parameter((rows,), bound) if bias else None,
            uniform_parameter((rows,), bound) if bias else None)


class _CellBase(Module):
    gates = 0                       # 4 (LSTM) or 3 (GRU) blocks of hidden_size rows
    step: Callable[..., State]

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size, self.hidden_size = _check_sizes(name, input_size, hidden_size)
        self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh = _gate_parameters(
            self.gates, self.input_size, self.hidden_size, bias)

    def _run(self, input: TensorLike, state: Any, count: int) -> State:
        name = type(self).__name__
        x = _check_input(name, input, self.input_size, 2)
        batched = x.ndim == 2
        shape = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        if state is None:
            state = (F.zeros(shape, x.dtype, x.device),) * count
        elif count == 1:
            state = (state,)
        elif not isinstance(state, (tuple, list)) or len(state) != count:
            raise TypeError(f"{name}: hx must be a tuple (h, c), got {type(state).__name__}")
        state = tuple(_check_state(name, n, s, shape) for n, s in zip(("h", "c"), state))
        if not batched:
            x, state = F.expand_dims(x, 0), tuple(F.expand_dims(s, 0) for s in state)
        new = type(self).step(F.linear(x, self.weight_ih, self.bias_ih), state,
                              self.weight_hh, self.bias_hh)
        return new if batched else tuple(F.squeeze(s, 0) for s in new)


class LSTMCell(_CellBase):
    """One LSTM step: forward(input (N, input_size) or (input_size,), hx=(h, c) or None
    (zeros)) -> (h', c')."""
    gates = 4
    step = staticmethod(lstm_step)

    def forward(self, input: TensorLike,
                hx: tuple[TensorLike, TensorLike] | None = None) -> tuple[Tensor, Tensor]:
        h, c = self._run(input, hx, 2)
        return h, c


class GRUCell(_CellBase):
    """One GRU step: forward(input (N, input_size) or (input_size,), hx=h or None (zeros))
    -> h'."""
    gates = 3
    step = staticmethod(gru_step)

    def forward(self, input: TensorLike, hx: TensorLike | None = None) -> Tensor:
        return self._run(input, hx, 1)[0]


class _RNNBase(Module):
    gates = 0
    step: Callable[..., State]
    state_count = 1                 # 2 for the LSTM: (h, c)

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0) -> None:
        super().__init__()
        name = type(self).__name__
        self.input_size, self.hidden_size = _check_sizes(name, input_size, hidden_size)
        check_positive_int(name, "num_layers", num_layers)
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size is not supported, got {proj_size!r}")
        self.num_layers, self.bias = int(num_layers), bool(bias)
        self.batch_first, self.bidirectional = bool(batch_first), bool(bidirectional)
        self.dropout = check_probability(name, dropout) if dropout else 0.0
        self.directions = 2 if bidirectional else 1
        # in PyTorch's order: each layer's forward direction, then its reverse one
        for layer in range(self.num_layers):
            features = self.input_size if layer == 0 else self.hidden_size * self.directions
            for suffix in self._suffixes(layer):
                made = _gate_parameters(self.gates, features, self.hidden_size, bias)
                for kind, parameter in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                                           made):
                    if parameter is not None:       # (no bias: no attribute, as PyTorch's)
                        setattr(self, f"{kind}{suffix}", parameter)

    def _suffixes(self, layer):
        return [f"_l{layer}", f"_l{layer}_reverse"][:self.directions]

    def _weights(self, suffix):
        return tuple(getattr(self, f"{kind}{suffix}", None)
                     for kind in ("weight_ih", "bias_ih", "weight_hh", "bias_hh"))

    def _initial_state(self, hx, x, batched):
        """The state per layer and direction: a list of tuples of (N, H) tensors."""
        name, count = type(self).__name__, self.state_count
        n = x.shape[1]
        stacked = self.num_layers * self.directions
        shape = (stacked, n, self.hidden_size) if batched else (stacked, self.hidden_size)
        if hx is None:
            return [(F.zeros((n, self.hidden_size), x.dtype, x.device),) * count] * stacked
        if count == 1:
            hx = (hx,)
        elif not isinstance(hx, (tuple, list)) or len(hx) != count:
            raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
        parts = []
        for label, t in zip(("h_0", "c_0"), hx):
            t = _check_state(name, label, t, shape)
            parts.append(F.split(t if batched else F.expand_dims(t, 1), stacked, axis=0)
                         if stacked > 1 else [t if batched else F.expand_dims(t, 1)])
        return [tuple(F.squeeze(p[i], 0) for p in parts) for i in range(stacked)]

    def _direction(self, x, state, suffix, reverse):
        """Run one layer's direction over x (L, N, features): (outputs (L, N, H), state)."""
        w_ih, b_ih, w_hh, b_hh = self._weights(suffix)
        steps = x.shape[0]
        proj = F.linear(x, w_ih, b_ih)                    # every step's projection at once
        projs = [F.squeeze(p, 0) for p in F.split(proj, steps, axis=0)] if steps > 1 \
            else [F.squeeze(proj, 0)]
        outputs = [None] * steps
        for t in (reversed(range(steps)) if reverse else range(steps)):
            state = type(self).step(projs[t], state, w_hh, b_hh)
            outputs[t] = state[0]
        return F.stack(outputs, 0), state

    def _run(self, input, hx):
        name = type(self).__name__
        x = _check_input(name, input, self.input_size, 3)
        batched = x.ndim == 3
        if not batched:
            x = F.expand_dims(x, 1)
        elif self.batch_first:
            x = x.transpose(1, 0, 2)
        if x.shape[0] == 0:
            raise ValueError(f"{name}: input has no time steps (input of shape {x.shape}, "
                             f"time first)")
        states = self._initial_state(hx, x, batched)
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for d, suffix in enumerate(self._suffixes(layer)):
                y, state = self._direction(x, states[layer * self.directions + d], suffix, d)
                outputs.append(y)
                finals.append(state)
            x = outputs[0] if len(outputs) == 1 else F.concat(outputs, axis=2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        if not batched:
            x = F.squeeze(x, 1)
        elif self.batch_first:
            x = x.transpose(1, 0, 2)
        # (h_n, c_n): each (num_layers * directions, N, H), or without N when unbatched
        stacked = tuple(F.stack([s[i] for s in finals], 0) for i in range(self.state_count))
        return x, tuple(s if batched else F.squeeze(s, 1) for s in stacked)


class LSTM(_RNNBase):
    """A multi-layer LSTM as PyTorch's: forward(input (L, N, input_size), or (N, L, ...)
    with batch_first, or (L, input_size) unbatched; hx=(h_0, c_0) or None (zeros)) ->
    (output (L, N, directions * hidden_size), (h_n, c_n)). proj_size is not supported."""
    gates, state_count = 4, 2
    step = staticmethod(lstm_step)

    def forward(self, input: TensorLike, hx: tuple[TensorLike, TensorLike] | None = None
                ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        output, (h_n, c_n) = self._run(input, hx)
        return output, (h_n, c_n)


class GRU(_RNNBase):
    """A multi-layer GRU as PyTorch's: forward(input, hx=h_0 or None) -> (output, h_n),
    shapes as LSTM's."""
    gates = 3
    step = staticmethod(gru_step)

    def forward(self, input: TensorLike, hx: TensorLike | None = None
                ) -> tuple[Tensor, Tensor]:
        output, (h_n,) = self._run(input, hx)
        return output, h_n
