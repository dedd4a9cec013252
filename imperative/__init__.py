"""imperative: an eager tensor runtime with a Cython interpreter core.

    import imperative as imp
    x = imp.Tensor([1.0, 2.0, 3.0])
    y = (x * 2 + 1).sum()
    print(y.numpy())
"""
from contextlib import contextmanager

# installs its import finder: before any compiled module is imported (imperative/_sources.py)
from . import _sources  # noqa: F401

try:
    from . import _core  # noqa: F401  (the build's first import: a missing build fails here)
except ImportError as _error:   # a source tree that was not built: say what to run
    from ._core_missing import core_import_error
    raise core_import_error(_error) from None
from . import (autodiff, data, dtr, dtype, functional, lr_scheduler, nn, ops, optim, random)
# imported for what importing does: numpy_protocol installs the Tensor's numpy hooks, and
# distributed and jit become the attributes imp.distributed and imp.jit
from . import distributed, jit, numpy_protocol  # noqa: F401
from .autodiff import GradKey, backward, set_allow_higher_order_directive
from ._core import (AsyncError, apply, close, full_sync, get_default_device, get_option,
                    memory_stats, options, reset_peak_memory_stats, set_default_device,
                    set_option, sync)
from .device import Device, get_device
from .dtype import dtype_promotion
from .generic import GenericPyOp
from .scope import pop_scope, push_scope, scope
from .serialization import load, save
from .tensor import Parameter, Tensor, TensorWeakRef, from_dlpack
from .backend import blas_threads as _blas_threads

# OpenBLAS keeps a core for the caller's thread, which issues ops while the worker computes
# (unless the environment chose a thread count): imperative/backend/blas_threads.py
_blas_threads.leave_a_core_to_the_caller()

F = functional

__version__ = "0.1.0"


def __getattr__(name):
    # The profiler is imported on first use: it keeps `import imperative` small, and
    # `python -m imperative.profiler` then runs it as a fresh module.
    if name in ("Profiler", "start_profile", "stop_profile"):
        from . import profiler
        return getattr(profiler, name)
    from .torch_hints import package_attribute_error    # imp.cat: name imp.F.concat
    raise package_attribute_error(name)


@contextmanager
def option(name, value):
    """`with imp.option("async_level", 0): ...` sets an option and restores it on exit."""
    old = get_option(name)
    set_option(name, value)
    try:
        yield
    finally:
        set_option(name, old)


def config_async_level(level):
    """2: ops return at once; 1: ops with value-dependent shapes wait; 0: every op waits."""
    set_option("async_level", level)


def get_async_level():
    """The async level in use (see `config_async_level`)."""
    return get_option("async_level")


def _set_swap_flag(flag):
    """The seed's name for `set_option("enable_swap", flag)`."""
    set_option("enable_swap", bool(flag))


def _set_drop_flag(flag):
    """The seed's name for `set_option("enable_drop", flag)`."""
    set_option("enable_drop", bool(flag))


def set_buffer_length(n):
    """Commands held back so that a Del can fold into the last reader (0 turns it off)."""
    set_option("buffer_length", n)


__all__ = [
    "Tensor", "Parameter", "TensorWeakRef", "AsyncError", "apply", "ops", "dtype",
    "dtype_promotion", "sync", "full_sync", "close", "set_option", "get_option", "options",
    "option", "config_async_level", "get_async_level", "set_buffer_length", "memory_stats",
    "reset_peak_memory_stats", "get_device", "get_default_device", "set_default_device",
    "Device", "functional", "F", "random", "GenericPyOp", "push_scope", "pop_scope", "scope",
    "Profiler", "start_profile", "stop_profile", "autodiff", "GradKey", "backward",
    "set_allow_higher_order_directive", "nn", "optim", "dtr", "from_dlpack", "save", "load",
    "data", "lr_scheduler",
]
