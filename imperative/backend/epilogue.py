"""Work a product does on its output on the way out, in place of the op after it.

The interpreter's worker runs an op that declares EPILOGUE_CAPABLE (a matrix product, a
convolution) with an epilogue when the very next command in its batch declares an
`epilogue_kind` (ReLU, ReLU's gradient: the op sets the flag, see ops/elemwise.py), reads
the product as its first input, and nothing else will read the product (it dies at that
command). The follower then finds its result already in the product's buffer, which it
takes over as it would for any in-place op. That saves the follower's pass over the
product: in a training step of a ReLU MLP, 3% of the step.

The worker plans an epilogue only when the follower's other input (ReLU's output, for its
gradient) has the product's shape, so a native kernel can read it beside each output.

A native kernel applies the epilogue in its stores (backend/native.py) where it can; every
other path ends in `finish`, which runs the follower's own kernel on the product. Both
followers are idempotent (applying one twice gives the same bits), so a follower that
computes anyway (its input was not reusable after all) still gives the right result.

This module imports nothing of the package: the interpreter core imports it.
"""

RELU, RELU_GRAD = "relu", "relu_grad"      # the kinds the native kernels know
# an optimizer's update y + alpha * product (ScaledAdd reading the product as its second
# input): only a compiled plan (imperative/jit/schedule.py) plans it, since the update comes
# long after the weight gradient's product in a recorded step; not idempotent
AXPY = "axpy"


class Epilogue:
    """`op` (its `epilogue_kind`, or `kind`, says which) applied to a product; `y` the
    follower's other input (ReLU's output for its gradient, the updated value for AXPY) as
    an array; `alpha` AXPY's scale (the op's)."""

    __slots__ = ("op", "kind", "y", "alpha")

    def __init__(self, op, y=None, kind=None):
        self.op, self.y = op, y
        self.kind = op.epilogue_kind if kind is None else kind
        self.alpha = op.alpha if self.kind == AXPY else 0.0


def finish(product, epilogue):
    """`product` with `epilogue` (an Epilogue, or None) applied by the follower's own kernel,
    in place where its dtype allows: exactly what the follower would compute. The one
    fallback of every path whose stores did not apply it."""
    if epilogue is None:
        return product
    if epilogue.kind == AXPY:
        return epilogue.op.kernel(epilogue.y, product, out=product)
    inputs = (product,) if epilogue.kind == RELU else (product, epilogue.y)
    return epilogue.op.kernel(*inputs, out=product)
