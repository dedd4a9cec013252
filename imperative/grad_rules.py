"""Backward rules: one per differentiable op class, each declaring what it saves.

A rule is registered with `@defgrad(OpClass, ..., inputs=..., outputs=...)` where `inputs` /
`outputs` are the indices of the op's inputs / outputs the rule needs (a tuple, or a
function `op -> tuple` when it depends on the op's parameters). The autodiff engine keeps
exactly those alive after the forward pass and frees the rest at once.

The rule is called as `rule(op, ctx, grads)`:
  * `ctx.inputs` / `ctx.outputs`: tuples with a Tensor at each saved index, None elsewhere
  * `ctx.in_shapes`, `ctx.in_dtypes`, `ctx.out_shapes`, `ctx.out_dtypes`: always available
  * `grads`: one Tensor per output (None where that output got no gradient)
and returns one gradient per input (a Tensor of that input's shape, or None for inputs that
get none: integer inputs, indices, masks). Rules compute with ordinary imperative ops, so
backward runs through the interpreter like any other work (and is itself differentiable
for higher-order gradients).
"""
from typing import Callable, NamedTuple

__all__ = ["GradContext", "GradRule", "defgrad", "get_rule", "RULES"]


class GradContext(NamedTuple):
    inputs: tuple
    outputs: tuple
    in_shapes: tuple
    in_dtypes: tuple
    out_shapes: tuple
    out_dtypes: tuple


class GradRule(NamedTuple):
    backward: Callable
    save_inputs: Callable      # op -> tuple of input indices to keep
    save_outputs: Callable     # op -> tuple of output indices to keep


RULES = {}


def _as_selector(spec):
    return spec if callable(spec) else (lambda op, _spec=tuple(spec): _spec)


def defgrad(*op_classes, inputs=(), outputs=()):
    """Register the decorated function as the backward rule of `op_classes`."""
    def register(fn):
        rule = GradRule(fn, _as_selector(inputs), _as_selector(outputs))
        for cls in op_classes:
            RULES[cls] = rule
        return fn
    return register


def get_rule(op):
    """The rule for `op`, or None when the op is not differentiable."""
    return RULES.get(type(op))
