"""The order a compiled plan runs a recorded program's steps in, and what dies after each.

The recorded order is the Python body's. One change pays in a training step: an optimizer's
update of a weight by its gradient, `w + alpha * g` (ScaledAdd, reading g as its second
input), recorded after the whole backward pass, moves up to just after the product that
makes g, which then does the update in its stores (the AXPY epilogue, backend/epilogue.py):
g is never written out and read back, and the update needs no pass of its own (eager code
cannot do this: when the product runs, the update has not been issued yet). Moving a step
earlier is safe when every value it reads exists before the product runs and nothing before
its recorded place reads what it makes (nothing can: it makes a new value, and the weight it
reads is never overwritten, its buffer being an input of the plan), so the results are
those of the recorded order, bit for bit.

The compiled plan (compiler.py) frees values by this order's liveness; a replay that issues
the ops one by one keeps the recorded order (Plan.dies_after)."""
from __future__ import annotations

import numpy as np

from .program import INTERNAL

# the native sgemm does the update in its stores for float32 (elsewhere a moved update gains
# nothing, and a kernel computing in float32 for a float16 output would apply it before
# rounding to float16, not after as the recorded order does)
_FLOAT32 = np.dtype(np.float32)


def update_moves(program, kept):
    """{product step index: update step index} for each update that can ride on the product
    making its g: an epilogue-capable step with that one output, read by the update alone and
    never handed back (so it need not exist), w of g's shape and dtype (float32) existing
    before the product runs."""
    values, steps = program.values, program.steps
    producer, readers = {}, {}
    for index, step in enumerate(steps):
        for vid in step.outputs:
            producer[vid] = index
        for vid in step.inputs:
            readers.setdefault(vid, []).append(index)
    moves = {}
    for index, step in enumerate(steps):
        if getattr(step.op, "UPDATE_EPILOGUE", None) is None or len(step.inputs) != 2 \
                or len(step.outputs) != 1:
            continue
        w, g = step.inputs
        p = producer.get(g)
        if p is None or w == g or p in moves or g in kept or readers[g] != [index]:
            continue
        product = steps[p]
        if not product.op.epilogue_capable or len(product.outputs) != 1:
            continue
        out, vw, vg = values[step.outputs[0]], values[w], values[g]
        if not (vw.shape == vg.shape == out.shape and vw.dtype == vg.dtype == out.dtype
                == _FLOAT32):
            continue
        if producer.get(w, -1) < p:
            moves[p] = index
    return moves


def order(program, moves):
    """The step indices in the order the plan runs them: each moved update right after its
    product, the rest as recorded."""
    moved = set(moves.values())
    result = []
    for index in range(len(program.steps)):
        if index in moved:
            continue
        result.append(index)
        if index in moves:
            result.append(moves[index])
    return result


def liveness(program, kept, run_order):
    """{step index: internal values that die after it} in `run_order` (read for the last
    time, or never read), keeping those the call hands back."""
    last = {}
    for index in run_order:
        step = program.steps[index]
        for vid in step.outputs:
            last[vid] = index
        for vid in step.inputs:
            last[vid] = index
    dies = {index: [] for index in run_order}
    for vid, index in last.items():
        if program.values[vid].kind == INTERNAL and vid not in kept:
            dies[index].append(vid)
    return dies
