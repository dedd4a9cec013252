"""Compiling a recorded program (program.py) into a plan, once per signature: everything
eager dispatch resolves per call is resolved here.

* Liveness: after which step each value is dead (the interpreted runner frees it there;
  the compiled plan reuses its block buffer).
* Order: an optimizer's update moves up to the product making its gradient, which does the
  update in its stores (schedule.py).
* Fusion: runs of elementwise steps whose ufunc numpy runs on equal dtypes, over operands
  of one shape (or 0-d), become one pass over cache-sized blocks that calls numpy's own
  inner loops, chosen now, in the recorded order: the same kernels on the same elements,
  so the bits are those of the eager run (imperative/_plan.pxi).
* Every other step keeps its op's kernel, called with arrays.
* The plan is one op (PlanOp) whose inputs are the call's arguments and external values
  and whose outputs are what the call hands back (results, new values of effects)."""
from __future__ import annotations

import math

import numpy as np

from .. import _core
from .._core import TensorBase
from ..ops.base import Op
from ..ops.rng import is_seeded
from .bindings import ArgumentBinding, FixedBinding, GradBinding, TensorBinding
from .program import ARGUMENT, CONSTANT, EXTERNAL, INTERNAL
from .replay import constant_tensors, kept_values
from .schedule import liveness, order, update_moves
from .tree import TENSOR, sharing

# dtype kinds numpy's inner loops handle without Python objects (the plan releases the GIL)
_PLAIN_KINDS = "biuf"


class Plan:
    """What every later call of one signature reuses."""

    def __init__(self, recording, also_kept=()):
        program = recording.program
        # (also_kept: values a checked call's ops are served with: replay.served_values)
        self.kept = kept_values(recording) | set(also_kept)
        self.dies_after = liveness(program, self.kept, range(len(program.steps)))
        self._program = program
        self._constants = None
        self.constant_ids = {vid for vid, v in program.values.items() if v.kind == CONSTANT}
        # the values bound at each call, in the order the plan op takes them
        self.inputs = [vid for vid, v in program.values.items() if v.kind in (ARGUMENT, EXTERNAL)]
        self.outputs = [vid for vid in sorted(self.kept)
                        if program.values[vid].kind == INTERNAL]
        # the RNG steps and their ops in recorded order: each call runs them with the seeds
        # it draws
        self.rng_steps = [i for i, step in enumerate(program.steps) if is_seeded(step.op)]
        self.rng_ops = tuple(program.steps[i].op for i in self.rng_steps)
        self.compiled = _compile(program, self) if _compilable(program) else None
        # (a plan whose values all fit the host-compute size runs on the caller's thread)
        self.largest = max((_numel(v.shape) for v in program.values.values()), default=0)
        self.op = None if self.compiled is None else PlanOp(self.compiled, program, self.outputs)


    @property
    def constants(self):
        """value id -> a Tensor of each constant, made when a replay first needs them (one
        run step by step, or results that are constants)."""
        if self._constants is None:
            self._constants = constant_tensors(self._program)
        return self._constants


def _numel(shape):
    return 1 << 62 if shape is None else math.prod(shape)


def _compilable(program):
    """A plan needs every shape and dtype now: no value-dependent shape, no 4-bit packed
    value (those run step by step)."""
    for value in program.values.values():
        if value.shape is None or value.dtype.metadata is not None:
            return False
    return bool(program.steps)


def fusable(step, values):
    """An elementwise step the fused pass can run: the ufunc the core's own fast path calls
    (equal dtypes, same shape or 0-d operands), on plain numeric dtypes, with a loop numpy
    has for exactly those dtypes."""
    op = step.op
    ufunc = op.ufunc
    if ufunc is None or len(step.outputs) != 1:
        return None
    out = values[step.outputs[0]]
    ins = [values[v] for v in step.inputs]
    dtype = ins[0].dtype
    if dtype.kind not in _PLAIN_KINDS or (op.ufunc_floats_only and dtype.kind != "f"):
        return None
    for v in ins:
        if v.dtype != dtype or (v.shape != out.shape and v.shape != ()):
            return None
    key = (ufunc, len(ins), dtype, out.dtype)
    loop = _LOOPS.get(key, False)
    if loop is False:                # (probed once per process: see _core.ufunc_loop)
        loop = _LOOPS[key] = _core.ufunc_loop(ufunc, [dtype] * len(ins) + [out.dtype])
    return loop


_LOOPS = {}          # (ufunc, inputs, dtype, output dtype) -> its UfuncLoop, or None


def _compile(program, plan):
    """The plan's steps for imperative/_plan.pxi: fused groups and kernel calls, in the
    schedule's order (schedule.py), values freed by its liveness."""
    values = program.values
    moves = update_moves(program, plan.kept)
    run_order = order(program, moves)
    dies = liveness(program, plan.kept, run_order)
    position = {index: k for k, index in enumerate(run_order)}
    readers = {}                    # value id -> positions of the steps reading it
    for index, step in enumerate(program.steps):
        for vid in step.inputs:
            readers.setdefault(vid, []).append(position[index])
    steps = []
    group = []                      # (position, step, loop) of the run being fused
    owned = _owned_values(program, plan)
    skip = None                     # a step whose work the product before it did
    rng_place = {index: k for k, index in enumerate(plan.rng_steps)}
    for k, index in enumerate(run_order):
        step = program.steps[index]
        if index == skip:
            continue
        loop = fusable(step, values)
        if loop is not None and (not group or (
                len(group) < _core.FUSED_MAX_OPS     # (a longer chain: several groups)
                and values[step.outputs[0]].shape == values[group[0][1].outputs[0]].shape)):
            group.append((index, step, loop))
            continue
        if group:
            steps.append(_fused(group, values, readers, plan, dies, position))
            group = []
        if loop is not None:
            group.append((index, step, loop))
            continue
        if index in rng_place:      # (the op with the call's seed: no direct call, epilogue)
            steps.append(_core.KernelStep(step.op, list(step.inputs), list(step.outputs),
                                          dies[index], step.where, rng=rng_place[index]))
            continue
        following = run_order[k + 1] if k + 1 < len(run_order) else None
        nxt = None if following is None else program.steps[following]
        # an op with a direct kernel for these inputs (a small product: numpy's) would
        # apply an epilogue by calling its follower's kernel afterwards, through three more
        # Python frames: the two steps apart cost half as much (a small MLP's product and
        # ReLU: 4.1-4.9 us together, 2.0 us and 0.5 us apart)
        direct = _direct_kernel(step, values)
        if direct is None and index in moves and moves[index] == following:
            # (the update of the weight gradient this product makes: its other input, the
            # weight, is the epilogue's)
            kind, others = nxt.op.UPDATE_EPILOGUE, [nxt.inputs[0]]
        elif direct is None and _epilogue_fits(step, nxt, values, dies, index, following):
            kind, others = None, list(nxt.inputs[1:])
        else:
            # (a small output: the direct call, not the kernel into a dying input's buffer)
            reuse = -1 if direct is not None and _small(step, values) else _reusable_input(
                step, values, dies, index, owned)
            steps.append(_core.KernelStep(step.op, list(step.inputs), list(step.outputs),
                                          dies[index], step.where, reuse, direct=direct))
            continue
        skip = following
        steps.append(_core.KernelStep(step.op, list(step.inputs), list(nxt.outputs),
                                      dies[index] + dies[following], step.where, -1, nxt.op,
                                      others, kind))
    if group:
        steps.append(_fused(group, values, readers, plan, dies, position))
    slots = max(values) + 1
    const_arrays = {vid: _readonly(v.data) for vid, v in values.items() if v.kind == CONSTANT}
    fused = {vid for step in steps if isinstance(step, _core.FusedGroup)
             for vid in step.writes}
    return _core.CompiledPlan(steps, slots, plan.inputs, plan.outputs, const_arrays,
                              [values[vid].device for vid in plan.outputs],
                              [vid in fused for vid in plan.outputs])


def _direct_kernel(step, values):
    """The op's direct kernel for the step's inputs (OpDef.direct_kernel), or the host
    fast path's function of a one-argument op on float32 (OpDef.host_fn: the kernel's
    bits, without its dtype bookkeeping), or None."""
    ins = tuple(values[vid] for vid in step.inputs)
    direct = step.op.direct_kernel(ins)
    if direct is None and step.op.host_fn is not None and len(ins) == 1 \
            and ins[0].dtype == np.float32:
        direct = step.op.host_fn, ()
    return direct


def _small(step, values):
    """The step is small enough that eager runs such an op on the caller's thread (its
    inputs' and outputs' elements together, _core.HOST_COMPUTE_MAX_ELEMENTS): a call's
    overhead outweighs a buffer's reuse (a small MLP's ReLU: 1.05-1.26 us into the dying
    product's buffer through the kernel, about 0.6 us less called directly)."""
    return sum(math.prod(values[vid].shape) for vid in (*step.inputs, *step.outputs)) \
        <= _core.HOST_COMPUTE_MAX_ELEMENTS


def _owned_values(program, plan):
    """Values the plan alone holds, whose buffer an op may overwrite once they die: made by
    a step (a fresh array, not a view: no ALIASES_INPUT op made it), never read by an op
    that may return a view of them, never handed back."""
    owned = set()
    for step in program.steps:
        if not step.op.aliases_input:
            owned.update(step.outputs)
    for step in program.steps:
        if step.op.aliases_input:
            owned.difference_update(step.inputs)
    return owned - plan.kept


def _reusable_input(step, values, dies, index, owned):
    """The slot of an input whose buffer the op's output may take (the executor's
    _overwritable: dying here, same shape and dtype, the plan's own), else -1."""
    op = step.op
    if not op.inplace_capable or len(step.outputs) != 1:
        return -1
    out = values[step.outputs[0]]
    dying = dies[index]
    for vid in step.inputs:
        v = values[vid]
        if vid in owned and vid in dying and v.shape == out.shape and v.dtype == out.dtype \
                and step.inputs.count(vid) == 1:
            return vid
    return -1


def _epilogue_fits(step, nxt, values, dies, index, following):
    """The executor's epilogue rule (_execute.pxi: _plan_epilogue): a product whose one
    output the next op reads first and nowhere else, dying there, of the follower's output
    shape and dtype, with the follower's other inputs of the product's shape."""
    op = step.op
    if nxt is None or not op.epilogue_capable or nxt.op.epilogue_kind is None:
        return False
    if len(step.outputs) != 1 or len(nxt.outputs) != 1 or not nxt.inputs:
        return False
    product = step.outputs[0]
    p, out = values[product], values[nxt.outputs[0]]
    if nxt.inputs[0] != product or product not in dies[following]:
        return False
    if out.dtype != p.dtype or out.shape != p.shape:
        return False
    return all(v != product and values[v].shape == p.shape for v in nxt.inputs[1:])


def _readonly(array):
    # constants are shared by every call: a result viewing one must never be written in
    # place by a later op (the core only overwrites writeable values). (Not
    # np.ascontiguousarray: it makes a 0-d constant (1,), which a kernel then broadcasts
    # or stacks as a vector.)
    array = np.asarray(array, order="C")
    array.flags.writeable = False
    return array


def _fused(group, values, readers, plan, dies, position):
    """One FusedGroup: operands are full arrays (inputs from outside, outputs needed after
    the group), 0-d inputs read with stride 0, or block buffers for the values that live
    only inside the group, reused once dead (a dying input's buffer takes the output)."""
    last = position[group[-1][0]]
    shape = values[group[0][1].outputs[0]].shape
    made_here = {step.outputs[0] for _, step, _ in group}
    last_read = {}
    for k, (_, step, _) in enumerate(group):
        for vid in step.inputs:
            last_read[vid] = k
    operands = {}                  # value id -> operand index
    layout = []                    # per operand: (kind, value id, itemsize, temp slot)
    free_slots, n_slots = [], 0
    ops = []
    for k, (_, step, loop) in enumerate(group):
        args = []
        for vid in step.inputs:
            if vid not in operands:
                v = values[vid]
                kind = "full_in" if v.shape == shape else "scalar"
                operands[vid] = len(layout)
                layout.append((kind, vid, v.dtype.itemsize, -1))
            args.append(operands[vid])
        # buffers that die here can take the output (each once: an op may read a value
        # twice, x + x, and a buffer freed twice would be handed to two live values)
        for vid in dict.fromkeys(step.inputs):
            o = operands[vid]
            if layout[o][0] == "temp" and last_read.get(vid) == k:
                free_slots.append(layout[o][3])
        out = step.outputs[0]
        escapes = out in plan.kept or any(r > last for r in readers.get(out, ()))
        if escapes:
            entry = ("full_out", out, values[out].dtype.itemsize, -1)
        else:
            if free_slots:
                slot = free_slots.pop()
            else:
                slot, n_slots = n_slots, n_slots + 1
            entry = ("temp", out, values[out].dtype.itemsize, slot)
            if out not in last_read:       # never read: its buffer is free at once
                free_slots.append(slot)
        operands[out] = len(layout)
        layout.append(entry)
        args.append(operands[out])
        ops.append((loop, args, step.op.ufunc.__name__))
    dying = [vid for index, _, _ in group for vid in dies[index]
             if vid not in made_here or layout[operands[vid]][0] == "full_out"]
    return _core.FusedGroup(math.prod(shape), tuple(shape), layout, ops,
                            n_slots, [values[vid].dtype for _, vid, _, _ in layout], dying)


class PlanOp(Op):
    """A compiled plan as one op: inputs the call's bound values, outputs what it hands
    back. Runs as any op does: on the caller's thread when small and resident (or at
    async level 0), else on the worker as one command."""

    _fields = ("plan_id",)
    ALIASES_INPUT = True          # a result may be a view of an argument (reshape, slices)

    def __init__(self, compiled, program, outputs):
        self._set(plan_id=id(compiled), compiled=compiled, rng=None,
                  descs=tuple((values.shape, values.dtype, values.device)
                              for values in (program.values[vid] for vid in outputs)))

    def drawing(self, rng_ops):
        """This plan run with `rng_ops`: the program's RNG ops with one call's seeds."""
        op = PlanOp.__new__(PlanOp)
        op._set(plan_id=self.plan_id, compiled=self.compiled, rng=rng_ops, descs=self.descs)
        return op

    @property
    def name(self):
        return "jit.plan"

    def infer(self, inputs):
        return self.descs

    def kernel(self, *arrays):
        return self.compiled.run(arrays, self.rng)


def fast_replay(recording, args, kwargs):
    """The recording's call in C (_core.FastReplay) when it fits: flat positional
    arguments, results and effects the plan makes; None otherwise (the Python path)."""
    plan = recording.plan
    if (plan.op is None or plan.rng_ops or kwargs        # (seeds: drawn in Python, _run)
            or any(isinstance(a, (tuple, list, dict)) for a in args)):
        return None
    outputs = {vid: k for k, vid in enumerate(plan.outputs)}
    tensor_args = [i for i, a in enumerate(args) if isinstance(a, TensorBase)]
    spec = [(True, a._record.shape, a._record.dtype, a._record.device)
            if isinstance(a, TensorBase) else (False, type(a), a, None) for a in args]
    inputs = [_fast_binding(recording.bindings[vid], tensor_args) for vid in plan.inputs]
    structure = recording.results_structure
    if structure == TENSOR:
        as_tuple, leaves = False, 1
    elif structure[0] == "tuple" and all(x == TENSOR for x in structure[1]):
        as_tuple, leaves = True, len(structure[1])
    else:
        return None
    results = [outputs.get(vid) for vid in recording.program.results]
    effects = [_fast_binding(recording.bindings[target], tensor_args) + (outputs.get(vid),)
               for target, vid in recording.program.effects]
    grads = [_fast_binding(binding, tensor_args) + (-1 if vid is None else outputs.get(vid), empty)
             for (binding, vid), empty in zip(recording.grad_effects, recording.pattern)]
    if (None in inputs or None in results or len(results) != leaves
            or any(e[2] is None for e in effects) or any(g[2] is None for g in grads)):
        return None
    shared = sharing([a for a in args if isinstance(a, TensorBase)])
    return _core.FastReplay(plan.op, plan.compiled, plan.largest, spec, inputs, results,
                            as_tuple, effects, grads, [tensor_args[k] for k in shared])


def _fast_binding(binding, tensor_args):
    """(kind, reference) of a binding for _core.FastReplay (BIND_* in _replay.pxi)."""
    if isinstance(binding, ArgumentBinding):
        return (0, tensor_args[binding.position])
    if isinstance(binding, TensorBinding):
        return (1, binding.ref)
    if isinstance(binding, FixedBinding):
        return (2, binding.info)
    if isinstance(binding, GradBinding):
        return (3, binding.ref)
    return None
