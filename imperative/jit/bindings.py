"""Where a traced program finds, at each call, a tensor it did not make: an argument by
position, a tensor held by a Python object (a Parameter, rebound by the optimizer between
calls), the `.grad` of such a tensor, or a value that never changes."""
import weakref


class ArgumentBinding:
    """The call's `position`-th Tensor argument (flattened args, then kwargs)."""
    __slots__ = ("position",)

    def __init__(self, position):
        self.position = position

    def holder(self, args):
        return args[self.position]

    def record(self, args):
        return args[self.position]._record


class TensorBinding:
    """The value a Tensor object holds now (Parameters, optimizer state, running
    statistics: rebound in place from call to call)."""
    __slots__ = ("ref",)

    def __init__(self, tensor):
        self.ref = weakref.ref(tensor)

    def holder(self, args):
        return self.ref()

    def record(self, args):
        tensor = self.ref()
        return None if tensor is None else tensor._record


class GradBinding(TensorBinding):
    """The `.grad` a tensor holds now (a gradient the traced call adds to)."""
    __slots__ = ()

    def record(self, args):
        tensor = self.ref()
        grad = None if tensor is None else tensor._grad_slot
        return None if grad is None else grad._record


class FixedBinding:
    """A record no Tensor object was seen holding: its value never changes."""
    __slots__ = ("info",)

    def __init__(self, info):
        self.info = info

    def holder(self, args):
        return None

    def record(self, args):
        return self.info
