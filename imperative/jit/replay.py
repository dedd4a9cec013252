"""Running a recorded program again without its Python body (a symbolic trace's later
calls): binding its arguments and external values, running its steps, applying its
effects and rebuilding its results.

Two runners share the binding and the effects. `run_steps` issues each recorded op through
the core's dispatch, as eager code would: the memory manager (DTR budget), the profiler
(each op a slice under its recorded scope) and a gradient recording around the call see
every op. The compiled plan (compiler.py, imperative/_plan.pxi) runs the whole program as
one op, when none of those needs to see the ops one by one."""
from __future__ import annotations

from .. import _core
from .._core import apply
from ..ops.rng import is_seeded
from ..random import reseeded
from .program import CONSTANT
from .tree import unflatten


class StaleBinding(Exception):
    """An external value's holder is gone (its Tensor was freed) or its `.grad` is empty:
    the call records afresh."""


def bound_inputs(recording, args):
    """value id -> TensorInfo for the arguments and external values of this call."""
    program = recording.program
    found = {}
    for vid, binding in recording.bindings.items():
        info = binding.record(args) if binding is not None else None
        if info is None:
            raise StaleBinding(vid)
        found[vid] = info
    for position, vid in enumerate(program.arguments):
        found.setdefault(vid, args[position]._record)
    return found


def constant_tensors(program):
    """value id -> a Tensor of each constant (made once, when the program is compiled)."""
    from ..tensor import Tensor      # (jit sits above the facade; imported when first used)
    return {vid: Tensor(v.data, dtype=v.data.dtype) for vid, v in program.values.items()
            if v.kind == CONSTANT}


def run_steps(recording, args):
    """The program's ops issued one by one; returns value id -> Tensor for the values the
    effects and results need."""
    program = recording.program
    plan = recording.plan
    wrap = _core.wrap_info
    values = {vid: wrap(info) for vid, info in bound_inputs(recording, args).items()}
    values.update(plan.constants)
    dies_after = plan.dies_after
    for index, step in enumerate(program.steps):
        op = step.op
        if is_seeded(op):          # the next seed, as the eager call draws it: new numbers
            op = reseeded(op)      # each call, the eager loop's (the recorded ones repeated)
        _core.set_scope(step.scope_node)
        try:
            outs = apply(op, *[values[v] for v in step.inputs])
        finally:
            _core.set_scope(None)
        for vid, t in zip(step.outputs, outs):
            values[vid] = t
        for vid in dies_after[index]:
            del values[vid]
    return values


def finish_call(recording, values, args):
    """Apply the effects (rebinding, `.grad`) and rebuild the results from `values`
    (value id -> Tensor)."""
    program = recording.program
    for target, vid in program.effects:
        holder = recording.bindings[target].holder(args)
        if holder is not None:
            holder._set_info_from(values[vid])
    for binding, vid in recording.grad_effects:
        holder = binding.holder(args)
        if holder is not None:
            holder._grad_slot = None if vid is None else _core.persistent(values[vid])
    return unflatten(recording.results_structure,
                     iter([values[vid] for vid in program.results]))


def served_values(recording, args, plan_of):
    """value id -> array of the values a checked call (symbolic=False) serves its ops'
    outputs with: the compiled plan run on the call's bound inputs, keeping what the
    recorded call read in Python or let outlive it (the others no Python code can see
    without a TraceReadError). None where the ops must run as issued: the memory manager,
    the profiler or a gradient recording around the call must see them, an input is made
    by excluded code during the call, a holder is gone, the plan cannot be compiled or
    raised (the ops then report the error as eager code would)."""
    if not _core.plan_may_run() or None in recording.bindings.values():
        return None
    plan = recording.serving_plan
    if plan is None:
        values = recording.program.values
        read = {vid for vid, v in values.items() if v.value_read or v.data_read}
        plan = recording.serving_plan = plan_of(recording, recording.outliving | read)
    if plan.compiled is None or plan.rng_ops:   # (the call's seeds are drawn as it runs)
        return None
    try:
        bound = bound_inputs(recording, args)
    except StaleBinding:
        return None
    channel = _core.channel()
    arrays = [channel.get_value(bound[vid]) for vid in plan.inputs]
    try:
        outputs = plan.compiled.run(arrays)
    except Exception:
        return None
    return dict(zip(plan.outputs, outputs))


def kept_values(recording):
    """The value ids a call hands back: results and the effects' new values (never freed
    while the steps run)."""
    program = recording.program
    kept = set(program.results)
    kept.update(vid for _, vid in program.effects)
    kept.update(vid for _, vid in recording.grad_effects if vid is not None)
    return kept
