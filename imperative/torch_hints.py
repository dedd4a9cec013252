"""PyTorch spellings a user types by habit, and what they are called here.

Where imperative has the same thing under another name, the error names it (a hint), rather
than leaving the user with Python's bare "unexpected keyword argument" or "no attribute".
Only failing calls and missing attributes pay for this: nothing is looked up on success.
The table is documented in docs/api.md ("PyTorch habits").
"""
import functools
import inspect

__all__ = ["KEYWORD_HINTS", "TENSOR_ATTRIBUTE_HINTS", "MODULE_HINTS", "keyword_hints",
           "keyword_error", "tensor_attribute_error", "package_attribute_error",
           "module_attribute_error", "NN_MODULE_HINTS", "PyTorchName", "PyTorchFlag",
           "add_pytorch_names"]

# keyword → the keyword here (F functions and Tensor methods)
KEYWORD_HINTS = {
    "dim": "axis",
    "keepdim": "keepdims",
    "start_dim": "start_axis",
    "end_dim": "end_axis",
    "dims": "axis",            # torch.flip(x, dims=...)
    "diagonal": "k",           # torch.tril / torch.triu
    "p": "ord",                # torch.norm(x, p=...)
    "requires_grad": None,     # no keyword here: a GradManager attaches (_ATTACH)
}

_ATTACH = ("imp.autodiff.GradManager().attach(x): ops reading attached tensors are recorded "
           "inside `with gm:`, and gm.backward(loss) puts gradients in x.grad")

# Tensor attribute → what to write instead
TENSOR_ATTRIBUTE_HINTS = {
    "view": "x.reshape(*shape) (values are immutable, so a reshape never copies needlessly)",
    "backward": "gm.backward(loss) inside `with gm:` (gm = imp.autodiff.GradManager()"
                ".attach(model.parameters()))",
    "requires_grad": _ATTACH,
    "requires_grad_": _ATTACH,
    "dim": "x.ndim",
    "numel": "x.size",
    "permute": "x.transpose(*axes)",
    "unsqueeze": "F.expand_dims(x, axis)",
    "squeeze": "F.squeeze(x, axis)",
    "clone": "imp.Tensor(x) (it shares the immutable value) or F.copy(x)",
    "contiguous": "nothing: every value is stored contiguously",
    "float": 'x.astype("float32")',
    "half": 'x.astype("float16")',
    "long": 'x.astype("int32") (the widest integer dtype here)',
    "int": 'x.astype("int32")',
    "cuda": "imperative runs on CPU devices only; x.to('cpu1') copies between them",
    "cpu": "x (every device is a CPU device); x.to('cpu0') copies to another one",
    "data": "x.detach()",
    "zero_": "p.grad = None for gradients, or F.zeros_like(x)",
    "expand": "x.broadcast_to(*shape)",
    "softmax": "F.softmax(x, axis)",
    "roll": "F.roll(x, shifts, axis)",
    "logsumexp": "F.logsumexp(x, axis, keepdims)",
    "gather": "F.gather(x, axis, index)",
    "scatter": "F.scatter(x, axis, index, src) (out of place)",
    "scatter_add": "F.scatter_add(x, axis, index, src) (out of place)",
    "index_select": "F.index_select(x, axis, index)",
    "index_add": "F.index_add(x, axis, index, src) (out of place)",
    "sort": "F.sort(x, axis, descending) (values, indices)",
    "argsort": "F.argsort(x, axis, descending)",
    "topk": "F.topk(x, k, axis, largest) (values, indices)",
    "cumsum": "F.cumsum(x, axis)",
    "cumprod": "F.cumprod(x, axis)",
    "flip": "F.flip(x, axis)",
    "tril": "F.tril(x, k)",
    "triu": "F.triu(x, k)",
    "norm": "F.norm(x, ord, axis, keepdims)",
}

# nn.Module attribute → what to write instead
NN_MODULE_HINTS = {
    "zero_grad": "opt.clear_grad() (the optimizer's; or p.grad = None for each parameter)",
    "to": "nothing: parameters are made on the default device (imp.set_default_device)",
    "cuda": "nothing: imperative runs on CPU devices only",
    "cpu": "nothing: every device is a CPU device",
    "register_buffer": "an attribute assignment: a Tensor attribute that is not a Parameter "
                       "is a buffer (saved by state_dict)",
    "register_parameter": "an attribute assignment of an imp.Parameter",
}

# `imp.<name>` → what to write instead
MODULE_HINTS = {
    "tensor": "imp.Tensor(data, dtype=None, device=None)",
    "from_numpy": "imp.Tensor(array) (it copies)",
    "no_grad": "nothing to do: ops are recorded only inside `with gm:` for a GradManager; "
               "x.detach() takes a value out of a recording",
    "cat": "imp.F.concat(tensors, axis)",
    "randn": "imp.random.normal(size=shape)",
    "rand": "imp.random.uniform(size=shape)",
    "manual_seed": "imp.random.seed(n)",
    "zeros": "imp.F.zeros(shape)",
    "ones": "imp.F.ones(shape)",
    "arange": "imp.F.arange(...)",
    "device": "imp.Device / imp.get_device('cpu0')",
    "cumprod": "imp.F.cumprod(x, axis)",
    "logaddexp": "imp.F.logaddexp(x1, x2)",
    "cdist": "imp.F.cdist(x1, x2, p)",
    "einsum": "imp.F.einsum(equation, *operands)",
    "gather": "imp.F.gather(x, axis, index)",
    "topk": "imp.F.topk(x, k, axis)",
    "sort": "imp.F.sort(x, axis)",
    "cumsum": "imp.F.cumsum(x, axis)",
    "outer": "imp.F.outer(a, b)",
}


class PyTorchName:
    """A class attribute standing for a PyTorch name this class does not have: reading it
    raises AttributeError naming ours. Attributes, not `__getattr__`: a `__getattr__` would
    slow down every failed lookup (numpy probes several on each conversion of a Tensor).
    Not a data descriptor, so an instance or subclass may still use the name for its own."""

    def __init__(self, error):
        self.error = error                     # (name, class name) -> AttributeError

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        raise self.error(self.name, (owner or type(obj)).__name__)


class PyTorchFlag(PyTorchName):
    """A PyTorchName that also refuses assignment (`x.requires_grad = True`)."""

    def __set__(self, obj, value):
        raise self.error(self.name, type(obj).__name__)


def add_pytorch_names(cls, names, error):
    """Give `cls` a PyTorchName for each of `names` it does not define."""
    for name in names:
        # not hasattr(): it would call a PyTorchName already there, which raises
        if not any(name in vars(klass) for klass in cls.__mro__):
            attribute = PyTorchName(error)
            attribute.__set_name__(cls, name)
            setattr(cls, name, attribute)


def tensor_attribute_error(name, class_name="Tensor"):
    return _with_hint(f"{class_name!r} object has no attribute {name!r}",
                      f"x.{name}", TENSOR_ATTRIBUTE_HINTS.get(name))


def package_attribute_error(name):
    return _with_hint(f"module 'imperative' has no attribute {name!r}",
                      f"torch.{name}", MODULE_HINTS.get(name))


def module_attribute_error(name, class_name="Module"):
    return _with_hint(f"{class_name!r} object has no attribute {name!r}",
                      f"nn.Module.{name}", NN_MODULE_HINTS.get(name))


def _with_hint(message, torch_spelling, hint):
    return AttributeError(message if hint is None else
                          f"{message}; for PyTorch's {torch_spelling}, use {hint}")


def keyword_error(fn_name, given):
    """The TypeError for PyTorch's keyword `given` passed to `fn_name`, or None."""
    if given not in KEYWORD_HINTS:
        return None
    ours = KEYWORD_HINTS[given]
    use = f"for PyTorch's requires_grad=, use {_ATTACH}" if ours is None else \
        f"imperative spells PyTorch's {given}= as {ours}="
    return TypeError(f"{fn_name}() got an unexpected keyword argument {given!r}; {use}")


def keyword_hints(fn):
    """Wrap `fn` so that a PyTorch keyword it does not take (`dim=`) raises a TypeError naming
    the keyword to use (`axis=`). The check runs only after the call failed."""
    accepted = set(inspect.signature(fn).parameters)
    name = getattr(fn, "__qualname__", fn.__name__)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError:
            for given in kwargs:
                error = None if given in accepted else keyword_error(name, given)
                if error is not None:
                    raise error from None
            raise
    return wrapper
