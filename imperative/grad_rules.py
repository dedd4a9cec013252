"""The backward-rule registry under its earlier name: imperative.autodiff.registry holds it
(the rules themselves are in imperative/autodiff/rules_*.py). `RULES` is the same dict, so
registering here registers there."""
from .autodiff.registry import RULES, GradContext, GradRule, defgrad, get_rule
from .ops.indexing import IndexingIncrMultiAxisVec

__all__ = ["GradContext", "GradRule", "defgrad", "get_rule", "RULES", "IndexingIncrMultiAxisVec"]
