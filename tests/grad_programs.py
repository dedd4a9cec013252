"""Random training programs for fuzzing the memory manager under autodiff.

tests/memory_programs.py's programs run ops on plain tensors; here the same random ops (its
generator, drops, swaps, deletions and reads included, no in-place update) make one forward
pass over trained parameters and constant inputs, a loss sums the means of some of its
results, and the program trains: the forward pass, `GradManager.backward` and an SGD step
with momentum, a few times. The backward pass reads what the forward pass saved, the
gradients and the momenta are new values the budget must hold, and each step's forward
pass frees the last one's: none of which the plain programs do.

`run_grad_program` runs one with everything off (the reference) or under a `Setting`; the
reads (losses, gradients, parameters, what the forward pass reads) go through
memory_programs' invariants: bit for bit, and the peak rule under DTR.
"""
import dataclasses

import numpy as np

import imperative as imp
import memory_programs as mp
from imperative import optim
from imperative.autodiff import GradManager

LR = 0.01


@dataclasses.dataclass(frozen=True)
class GradProgram:
    params: tuple            # mp.Leaf each: trained
    inputs: tuple            # mp.Leaf each: constants of the forward pass
    steps: tuple             # mp.Step each: one forward pass (slots: params, inputs, values)
    loss: tuple              # the slots whose means the loss sums
    train_steps: int
    momentum: float
    largest_output: int      # bytes: the largest value, parameter or input

    @property
    def leaves(self):
        return self.params + self.inputs

    @property
    def op_count(self):
        return self.train_steps * sum(step.kind == "op" for step in self.steps)


def draw_grad_program(ch, min_ops=4, max_ops=30):
    params = tuple(mp.draw_leaf(ch) for _ in range(ch.integer(1, 3)))
    inputs = tuple(mp.draw_leaf(ch) for _ in range(ch.integer(0, 2)))
    leaves = params + inputs
    shapes = {i: leaf.shape for i, leaf in enumerate(leaves)}
    steps, largest = mp.draw_steps(ch, shapes, len(leaves), ch.integer(min_ops, max_ops),
                                   inplace=False)
    trained = _reading_params(steps, len(params))
    reached = sorted(slot for slot in shapes if slot in trained)
    loss = tuple(sorted({ch.choice(reached) for _ in range(ch.integer(1, 3))}))
    return GradProgram(params, inputs, tuple(steps), loss, ch.integer(1, 3),
                       ch.choice((0.0, 0.9)), largest)


def _reading_params(steps, n_params):
    """The slots whose values some parameter flows into (the parameters' own included)."""
    reached = set(range(n_params))
    for step in steps:
        if step.kind == "op" and any(a in reached for a in step.args):
            reached.add(step.out)
    return reached


def execute(program, setting, result):
    """Train `program`; what it reads lands in `result.reads`, and the peak and counts as
    memory_programs.execute leaves them."""
    params = [imp.Parameter(leaf.array()) for leaf in program.params]
    inputs = [imp.Tensor(leaf.array()) for leaf in program.inputs]
    gm = GradManager().attach(params)
    opt = optim.SGD(params, lr=LR, momentum=program.momentum)
    with mp.measured(result):
        for t in range(program.train_steps):
            with gm:
                loss = _forward(program, setting, result, params + inputs, t)
                gm.backward(loss)
            result.reads.append((f"loss {t}", np.array(loss.numpy())))
            del loss
            for i, p in enumerate(params):
                grad = np.zeros(0, np.float32) if p.grad is None else np.array(p.grad.numpy())
                result.reads.append((f"grad {t}.{i}", grad))
            opt.step()
            opt.clear_grad()
        for i, p in enumerate(params):
            result.reads.append((f"param {i}", np.array(p.numpy())))


def _forward(program, setting, result, leaves, t):
    """One forward pass: the loss, the rest of its values dead when it returns."""
    values = dict(enumerate(leaves))
    mp.run_steps(program.steps, values, setting, result, read_prefix=f"{t}.")
    loss = values[program.loss[0]].mean()
    for slot in program.loss[1:]:
        loss = loss + values[slot].mean()
    return loss


def run_grad_program(program, setting=None, budget=0):
    """Train `program` with everything off (setting None) or under `setting` and `budget`."""
    return mp.run_program(program, setting, budget, execute)
