"""PyTorch tensor functions that ported models reach for (graph networks, mixture-of-experts
routing, beam search, attention written with einsum), one small module each; the functional
API re-exports them (docs/api.md, "Tensor functions added in session 49").

  gathering.py       gather, scatter, scatter_add, index_select, index_add
  sorting.py         sort, argsort, topk (on the Argsort op)
  cumulative.py      cumsum, cumprod (on the Cumulative op)
  flip_triangle.py   flip, tril, triu
  contraction.py     einsum, outer
  norms.py           norm (vector norms)
"""
from .cumulative import cumprod, cumsum
from .contraction import einsum, outer
from .flip_triangle import flip, tril, triu
from .gathering import gather, index_add, index_select, scatter, scatter_add
from .norms import norm
from .sorting import argsort, sort, topk

__all__ = ["gather", "scatter", "scatter_add", "index_select", "index_add", "sort", "argsort",
           "topk", "cumsum", "cumprod", "flip", "tril", "triu", "einsum", "outer", "norm"]
