"""`GenericPyOp`: an op written in Python as a composition of other imperative ops.

    class AddMul(imp.GenericPyOp):
        def __init__(self, k):
            self.k = k
        def _default_rule(self, x, y):
            return x + y, x * self.k

    s, p = AddMul(3)(x, y)                 # the rule runs now, on the caller's thread
    s, p = imp.apply(AddMul(3), x, y)      # the same values, through the core

Calling the op runs `_default_rule` directly: its ops are issued like any others (async,
differentiable op by op), and an exception it raises reaches the caller unchanged.

`imp.apply` is the core's, which only takes an `OpDef` and runs `infer` at dispatch on the
caller's thread and `kernel` later, possibly on the worker, where no op may be issued. So a
GenericPyOp is an Op whose `infer` runs the rule (on the caller's thread), waits for its
results and keeps their arrays; `kernel` hands copies of those arrays out as the op's
outputs. What that costs, and why each flag is set:

* `imp.apply` of a GenericPyOp waits for the rule's results at the call (a sync point for
  them, so worker errors inside the rule surface there); `op(*tensors)` does not wait.
* VALUE_DEPENDENT: the core memoises `infer` per input shapes unless an op is value
  dependent, and this infer must run the rule on every call. (Its shapes are known at
  dispatch all the same: `.shape` never waits.)
* RECOMPUTABLE = False: the kernel cannot rebuild its outputs from its inputs alone.
* The results are copied at dispatch: the outputs get storage of their own, so nothing can
  later write into an array that the rule's tensors still hold.

Inside a traced call (imp.jit) `imp.apply` runs the rule as calling the op does, and the
trace records the rule's ops (`_apply_traced`): a replay cannot run this op's kernel.
"""
import threading

import numpy as np

from . import _core
from .ops.base import Op
from .autodiff.registry import get_rule
from .ops.shape import FastpathCopy


_pending_lock = threading.Lock()   # guards every op's results between infer and kernel
_HANDLE = FastpathCopy()        # a new record on a value: _apply_traced's outputs


class GenericPyOp(Op):
    """Subclass and define `_default_rule(self, *inputs)` returning a Tensor or a tuple of
    Tensors built with other imperative ops. Instances are equal by identity unless the
    subclass lists parameter names in `_fields` (then by type and those parameters, which
    it should treat as immutable)."""

    VALUE_DEPENDENT = True
    RECOMPUTABLE = False

    def __setattr__(self, name, value):
        # Unlike built-in ops, user ops keep their parameters as plain attributes.
        object.__setattr__(self, name, value)

    def _default_rule(self, *inputs):
        raise NotImplementedError(f"{type(self).__name__} must define _default_rule(self, *inputs)")

    def __eq__(self, other):
        return self is other if not self._fields else Op.__eq__(self, other)

    def __hash__(self):
        return id(self) >> 4 if not self._fields else Op.__hash__(self)

    def __repr__(self):
        if self._fields:
            return Op.__repr__(self)
        params = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())})"

    def __call__(self, *inputs):
        """Run the rule on `inputs` now; returns what it returns (a Tensor or a tuple)."""
        self._check_inputs(inputs)
        result = self._default_rule(*inputs)
        self._outputs_of(result)
        return tuple(result) if isinstance(result, list) else result

    def _check_inputs(self, inputs):
        for t in inputs:
            if not isinstance(t, _core.TensorBase):
                raise TypeError(f"op {self.name} expects Tensor inputs, got {type(t).__name__}")

    def _apply_traced(self, inputs):
        """`imp.apply(self, *inputs)` inside a traced call (imp.jit; the core sends it here):
        the rule runs as `self(*inputs)` does, so the trace records the ops it issues, which
        a replay runs; the op itself is not dispatched (its kernel could only hand out what
        its dispatch computed, and a replay dispatches nothing). Each output is a new handle
        on the rule's result, as the op's own outputs are new tensors; a FastpathCopy, which
        gradients do not pass, as they do not pass the op (it has no gradient rule)."""
        self._check_inputs(inputs)
        if _core.get_grad_hook() is not None and get_rule(self) is not None:
            raise NotImplementedError(
                f"imp.jit.trace: imp.apply({self!r}) inside a traced call that records "
                "gradients: a replay runs the ops of its rule, not the op, so its own gradient "
                "rule would not apply; call the op outside the trace, or record without it")
        outputs = self._outputs_of(self._default_rule(*inputs))
        return tuple(_core.apply(_HANDLE, out)[0] for out in outputs)

    def _outputs_of(self, result):
        """The rule's result as a tuple of Tensors (TypeError for anything else)."""
        outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        for out in outputs:
            if not isinstance(out, _core.TensorBase):
                raise TypeError(f"{self.name}._default_rule must return a Tensor or a tuple of "
                                f"Tensors, got {type(out).__name__}")
        return outputs

    # ---- the core's protocol, for imp.apply

    def infer(self, inputs):
        """Run the rule on the inputs now and give its outputs' (shape, dtype)."""
        channel = _core.channel()
        outputs = self._outputs_of(self._default_rule(*map(_core.wrap_info, inputs)))
        values = [np.array(channel.get_value(o._record), copy=True) for o in outputs]
        # The kernel sees only its input arrays: remember them to find these results again.
        # Commands may run out of dispatch order (a small op whose inputs are ready runs at
        # once), so the match is by identity, not by position. 4-bit inputs reach kernels as
        # fresh unpacked arrays and match anything (None).
        for info in inputs:
            channel.get_value(info)
        keys = tuple(None if info.packed else info.value for info in inputs)
        with _pending_lock:
            self.__dict__.setdefault("_pending_results", []).append((keys, values))
        return tuple((v.shape, o.dtype) for v, o in zip(values, outputs))

    def kernel(self, *arrays):
        """The values `infer` computed for these input arrays."""
        with _pending_lock:
            pending = self.__dict__.get("_pending_results", [])
            for i, (keys, values) in enumerate(pending):
                if all(k is None or k is a for k, a in zip(keys, arrays)):
                    del pending[i]
                    return tuple(values)
        raise RuntimeError(f"{self.name}: no result was computed at dispatch for these inputs")


_core.register_rule_op_type(GenericPyOp)
