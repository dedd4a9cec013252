"""The backward-rule registry: one rule per differentiable op class, each declaring what it
saves. The rules themselves are in rules_*.py, one file per family of ops.

A rule is registered with `@defgrad(OpClass, ..., inputs=..., outputs=...)` where `inputs` /
`outputs` are the indices of the op's inputs / outputs the rule needs (a tuple, or a
function `op -> tuple` when it depends on the op's parameters). The autodiff engine keeps
exactly those alive after the forward pass and frees the rest at once. `needed_by=` (a dict,
or a function `op -> dict`) narrows `inputs`: {saved input: the inputs whose gradients alone
read it}. Such a saved input is kept only where one of those is tracked when the op runs, as
PyTorch saves `x` of `x * y` only for `y`'s gradient: `h * 0.1`, a dropout's `h * mask`,
keep their mask or constant, not `h`. (An input tracked only after the op ran then gets no
gradient through it, as in PyTorch: the rule sees `ctx.needs` False for it.)

The rule is called as `rule(op, ctx, grads)`:
  * `ctx.inputs` / `ctx.outputs`: tuples with a Tensor at each saved index, None elsewhere
  * `ctx.in_shapes`, `ctx.in_dtypes`, `ctx.out_shapes`, `ctx.out_dtypes`: always available
  * `ctx.needs`: one bool per input, True when the engine will use that input's gradient
    (the input is tracked by the recording key); a rule may return None where it is False
    and should skip computing it when that is costly (a matmul, a convolution)
  * `grads`: one Tensor per output (None where that output got no gradient)
and returns one gradient per input (a Tensor of that input's shape, or None for inputs that
get none: integer inputs, indices, masks). Rules compute with ordinary imperative ops, so
backward runs through the interpreter like any other work (and is itself differentiable
for higher-order gradients). A rule issues a single op as `apply(cached_op(Op, *params),
*tensors)` and a composite through `imperative.functional` (F).

The helpers below (`unbroadcast`, `as_input_grad`, `wants`, `single_output`, ...) are what the
rule files share; a rule for a user's own op may use them too.
"""
from typing import Callable, NamedTuple

from .. import functional as F

__all__ = ["GradContext", "GradRule", "defgrad", "get_rule", "RULES", "is_float", "unbroadcast",
           "as_input_grad", "wants", "zeros_for_input", "no_grads", "single_output"]


class GradContext(NamedTuple):
    inputs: tuple
    outputs: tuple
    in_shapes: tuple
    in_dtypes: tuple
    out_shapes: tuple
    out_dtypes: tuple
    needs: tuple


class GradRule(NamedTuple):
    backward: Callable
    save_inputs: Callable      # op -> tuple of input indices to keep
    save_outputs: Callable     # op -> tuple of output indices to keep
    needed_by: Callable = None     # op -> {saved input: inputs whose gradients alone read it}


RULES = {}


def _as_selector(spec):
    return spec if callable(spec) else (lambda op, _spec=tuple(spec): _spec)


def _needers_selector(spec):
    if spec is None or callable(spec):
        return spec
    needers = {i: tuple(js) for i, js in spec.items()}
    return lambda op: needers


def defgrad(*op_classes, inputs=(), outputs=(), needed_by=None):
    """Register the decorated function as the backward rule of `op_classes`."""
    def register(fn):
        rule = GradRule(fn, _as_selector(inputs), _as_selector(outputs),
                        _needers_selector(needed_by))
        for cls in op_classes:
            RULES[cls] = rule
        return fn
    return register


def get_rule(op):
    """The rule for `op`, or None when the op is not differentiable."""
    return RULES.get(type(op))


# ---------------------------------------------------------------------------------------
# Helpers of the rules (public: every rule file, and a user's own rules, use them)


def is_float(dtype):
    """Only plain float inputs get gradients (not ints, bools, masks or quantized values).
    The kind says it all: quantized dtypes are stored as ints (quantized.QSPECS), and a
    float dtype is never one (an engine hot spot: asked for every input of every op)."""
    return dtype.kind == "f"


def unbroadcast(grad, shape):
    """Sum `grad` down to `shape`, undoing numpy broadcasting: the leading axes broadcasting
    added, then the axes where `shape` has size 1. A `shape` with extra leading 1s (a
    setitem value may have them) is restored by the final reshape."""
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    offset = len(shape) - grad.ndim
    axes = tuple(i for i, n in enumerate(grad.shape) if n != 1 and shape[i + offset] == 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad if grad.shape == shape else grad.reshape(shape)


def as_input_grad(grad, ctx, i):
    """`grad` as the gradient of input i: None for non-float inputs, else in its dtype."""
    if grad is None or not is_float(ctx.in_dtypes[i]):
        return None
    return grad if grad.dtype == ctx.in_dtypes[i] else grad.astype(ctx.in_dtypes[i])


def wants(ctx, i):
    """Whether input i gets a gradient: a float input whose gradient the engine uses."""
    return ctx.needs[i] and is_float(ctx.in_dtypes[i])


def zeros_for_input(ctx, i):
    return F.zeros(ctx.in_shapes[i], ctx.in_dtypes[i])


def no_grads(ctx):
    return (None,) * len(ctx.in_shapes)


def single_output(fn):
    """Wrap a rule of a one-output op: an output without gradient gives inputs none."""
    def backward(op, ctx, grads):
        if grads[0] is None:
            return no_grads(ctx)
        return fn(op, ctx, grads[0])
    backward.__name__ = fn.__name__
    backward.__doc__ = fn.__doc__
    return backward
