"""Reverse-mode autodiff: gradient keys that record ops, and the GradManager on top of them.

  engine.py          the tape: the grad hook, GradKey, backward
  manager.py         GradManager, GradManagerGroup
  registry.py        the rule interface (GradContext, GradRule, defgrad, get_rule) and the
                     helpers rules share
  rules_math.py      Elemwise, ActivationGrad, ScaledAdd, Reduce, the matrix products
  rules_shape.py     shapes, conversions, Concat/Split, Where, Clip
  rules_indexing.py  Subtensor and the indexing ops
  rules_nn.py        convolution, pooling, the softmax family, the norms, Embedding, LeakyRelu
  rules_scan.py      the cumulative sums and products

Importing the package registers every rule (the rule files mirror imperative/ops).
"""
from . import (rules_indexing, rules_math, rules_nn, rules_scan,  # noqa: F401 (register the rules)
               rules_shape)
from .engine import GradKey, NoGradientWarning, backward, set_allow_higher_order_directive
from .manager import GradManager, GradManagerGroup

__all__ = ["GradKey", "backward", "set_allow_higher_order_directive", "GradManager",
           "GradManagerGroup", "NoGradientWarning"]
