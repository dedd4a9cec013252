"""PyTorch's attention layers (imperative.nn re-exports them): MultiheadAttention and
TransformerEncoderLayer, with PyTorch's parameters (in_proj_weight, in_proj_bias, out_proj,
linear1, norm1, ...) and initialisation, so that a PyTorch model's state dict loads into
them. Composed of existing ops: matmuls, a softmax, reshapes and transposes."""
from __future__ import annotations

import math
from typing import Callable

from . import functional as F
from . import random as R
from .creation import _as_tensor
from .module import Module, check_divisible
from .nn_basic import Dropout, LayerNorm, Linear
from .nn_elementwise import check_probability
from ._types import TensorLike
from .tensor import Parameter, Tensor

__all__ = ["MultiheadAttention", "TransformerEncoderLayer"]


def _additive_mask(mask, shape, name, dtype):
    """A bool mask (True: may not attend) as -inf/0, or a float mask as given, checked
    to have `shape`."""
    mask = _as_tensor(mask)
    if mask.shape != shape:
        raise ValueError(f"MultiheadAttention: {name} must have shape {shape}, got {mask.shape}")
    if mask.dtype.kind == "b":
        return F.where(mask, F.full(shape, float("-inf"), dtype, mask.device),
                       F.zeros(shape, dtype, mask.device))
    if mask.dtype.kind != "f":
        raise TypeError(f"MultiheadAttention: {name} must be a bool or float tensor, got "
                        f"dtype {mask.dtype}")
    return mask


class MultiheadAttention(Module):
    """Scaled dot-product attention over num_heads heads as PyTorch's: forward(query (L, N,
    E), key and value (S, N, E); (N, L, E) with batch_first; unbatched (L, E)) ->
    (output like query, weights (N, L, S) averaged over the heads, or (N, num_heads, L, S),
    or None without need_weights). Masks: key_padding_mask (N, S) and attn_mask (L, S) or
    (N * num_heads, L, S), bool (True: may not attend) or float (added to the scores).
    kdim/vdim other than embed_dim, add_bias_kv and add_zero_attn are not supported."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None,
                 batch_first: bool = False) -> None:
        super().__init__()
        check_divisible("MultiheadAttention", "embed_dim", embed_dim, "num_heads", num_heads)
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) \
                or vdim not in (None, embed_dim):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and "
                                      "kdim/vdim other than embed_dim are not supported")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.dropout = check_probability("MultiheadAttention", dropout) if dropout else 0.0
        self.batch_first = bool(batch_first)
        # PyTorch's init: in_proj_weight xavier-uniform, the biases zero, out_proj.weight
        # as any Linear's
        bound = math.sqrt(6.0 / (4 * self.embed_dim))
        self.in_proj_weight = Parameter(R.uniform(-bound, bound, size=(3 * embed_dim, embed_dim)))
        self.in_proj_bias = Parameter(F.zeros((3 * embed_dim,))) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Parameter(F.zeros((embed_dim,)))

    def _heads(self, x, n):
        """(T, N, E) -> (N * num_heads, T, head_dim)."""
        return x.reshape((x.shape[0], n * self.num_heads, self.head_dim)).transpose(1, 0, 2)

    def forward(self, query: TensorLike, key: TensorLike, value: TensorLike,
                key_padding_mask: TensorLike | None = None, need_weights: bool = True,
                attn_mask: TensorLike | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        q, k, v = (_as_tensor(t) for t in (query, key, value))
        batched = q.ndim == 3
        for name, t in (("query", q), ("key", k), ("value", v)):
            if t.ndim != q.ndim or t.ndim not in (2, 3) or t.shape[-1] != self.embed_dim:
                raise ValueError(f"MultiheadAttention: query, key and value must all be 3-D "
                                 f"(batched) or 2-D (unbatched) with embed_dim "
                                 f"{self.embed_dim} last, got {name} of shape {t.shape}")
        if not batched:
            q, k, v = (F.expand_dims(t, 1) for t in (q, k, v))
        elif self.batch_first:
            q, k, v = (t.transpose(1, 0, 2) for t in (q, k, v))
        (length, n, e), s = q.shape, k.shape[0]
        if k.shape != v.shape or k.shape[1] != n:
            raise ValueError(f"MultiheadAttention: key {k.shape} and value {v.shape} must have "
                             f"one shape, with the batch size of query {q.shape}")
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal needs attn_mask (PyTorch's rule)")
        w = F.split(self.in_proj_weight, 3, axis=0)
        b = F.split(self.in_proj_bias, 3) if self.in_proj_bias is not None else [None] * 3
        q, k, v = (self._heads(F.linear(t, wi, bi), n) for t, wi, bi in zip((q, k, v), w, b))
        scores = F.matmul(q * (1.0 / math.sqrt(self.head_dim)), k, transpose_b=True)
        if attn_mask is not None:
            mask_shape = _as_tensor(attn_mask).shape
            shape = (length, s) if len(mask_shape) == 2 else (n * self.num_heads, length, s)
            scores = scores + _additive_mask(attn_mask, shape, "attn_mask", scores.dtype)
        if key_padding_mask is not None:
            padding = _additive_mask(key_padding_mask, (n, s) if batched else (s,),
                                     "key_padding_mask", scores.dtype)
            scores = (scores.reshape((n, self.num_heads, length, s))
                      + padding.reshape((n, 1, 1, s))).reshape(scores.shape)
        weights = F.softmax(scores, -1)
        if self.dropout and self.training:
            weights = F.dropout(weights, self.dropout)
        out = F.matmul(weights, v).transpose(1, 0, 2).reshape((length, n, e))
        out = self.out_proj(out)
        out = (F.squeeze(out, 1) if not batched else
               out.transpose(1, 0, 2) if self.batch_first else out)
        if not need_weights:
            return out, None
        weights = weights.reshape((n, self.num_heads, length, s))
        if average_attn_weights:
            weights = F.mean(weights, axis=1)
        return out, weights if batched else F.squeeze(weights, 0)


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """PyTorch's encoder layer: self-attention then a feed-forward block (linear1,
    activation, linear2), each added to its input through dropout and layer-normalised
    after (or before, norm_first). forward(src, src_mask=None, src_key_padding_mask=None,
    is_causal=False)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable[[Tensor], Tensor] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True) -> None:
        super().__init__()
        if isinstance(activation, str) and activation not in _ACTIVATIONS:
            raise ValueError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or "
                             f"a callable, got {activation!r}")
        if not isinstance(activation, str) and not callable(activation):
            raise TypeError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or "
                            f"a callable, got {type(activation).__name__}")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = (_ACTIVATIONS[activation] if isinstance(activation, str)
                           else activation)

    def _self_attention(self, x, mask, padding_mask, is_causal):
        y = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(y)

    def _feed_forward(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src: TensorLike, src_mask: TensorLike | None = None,
                src_key_padding_mask: TensorLike | None = None,
                is_causal: bool = False) -> Tensor:
        x = _as_tensor(src)
        masks = (src_mask, src_key_padding_mask, is_causal)
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), *masks)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._self_attention(x, *masks))
        return self.norm2(x + self._feed_forward(x))
