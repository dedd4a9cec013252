# cython: language_level=3
"""The interpreter core: handle table, command buffer and queue, worker thread,
options, async errors and memory accounting.

One `Channel` per process. The caller's thread infers every output's shape, dtype and
device at dispatch (so errors surface at the call site), allocates handles and either
runs the op at once (async level 0, or a tiny op whose inputs are resident) or hands a
command to the worker thread through a short buffer that folds `Del`s into the last
reader of the dying tensor.

This file is the compile unit: it includes one file per role, in the order below (a later
file may use an earlier one's cdef classes), and holds the process's Channel and the
module-level verbs. docs/design.md follows one op through them.
"""
import atexit
import os
import sys
import threading
import time
import warnings

import numpy as np

from . import _kernels
from . import dtype as _dtypes      # the dtype rules (imports only numpy: no cycle)

cimport cython
cimport numpy as cnp
from libc.limits cimport LLONG_MAX
from libcpp.vector cimport vector
from libcpp.algorithm cimport sort as _sort, binary_search as _binary_search
from libcpp.queue cimport priority_queue
from libcpp.utility cimport pair
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF, Py_REFCNT
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.dict cimport PyDict_Next
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.math cimport INFINITY, exp
from cpython.exc cimport PyErr_CheckSignals
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

cnp.import_array()
cdef object _ndarray = np.ndarray
cdef object _np_asarray = np.asarray
cdef object _np_ascontiguousarray = np.ascontiguousarray

include "_options.pxi"        # the option table
include "_device.pxi"         # Device, DeviceStats
include "_records.pxi"        # Storage, ErrorRecord, TensorInfo, Command, OpDef
include "_trace.pxi"          # the profiler's and scopes' recording
include "_errors.pxi"         # AsyncError, where ops were issued
include "_recording.pxi"      # imp.jit.trace's recording log, op by op in C
include "_tracing.pxi"        # imp.jit.trace's hooks: ops, constants, rebinding, reads
include "_checking.pxi"       # imp.jit.trace's checked calls, op by op in C
include "_channel.pxi"        # the Channel, caller side
include "_tiny.pxi"           # host-compute decisions, the tiny-op path without a Command
include "_worker.pxi"         # the worker thread and the queue to it
include "_execute.pxi"        # running one command
include "_recipes.pxi"        # the memory manager's recipes: Producer, the walks over them
include "_policies.pxi"       # eviction policies, one a file, and their table
include "_swap.pxi"           # swap files: layout, private folders, bandwidth
include "_memory_options.pxi" # the options it decides by, one snapshot
include "_memory.pxi"         # the memory manager: drop, swap, DTR, behind its hooks
include "_restore_reads.pxi"  # what one restore's recipes will still read
include "_restore.pxi"        # bringing evicted values back: swap in, revive, recompute
include "_keeping.pxi"        # dead values kept resident under a budget
include "_choosing.pxi"       # the victim: the lowest score, cheap bounds first
include "_sharing.pxi"        # views of one storage: evicted together
include "_swapping.pxi"       # an evicted value to its swap file and back



# --------------------------------------------------------------------------- the process's channel

cdef Channel _channel = Channel()
_channel.attach_memory_manager(MemoryManager(_channel))


# ---- memory management verbs (Tensor._drop/_swap_out/_swap_in, imperative.dtr)

cdef int _require(int index, str name, str what) except -1:
    if not _channel._opts[index]:
        raise RuntimeError(f"Tensor.{what}() needs the option {name}=1 "
                           f"(imperative.set_option({name!r}, 1))")
    return 0


def drop_tensor(TensorBase t):
    """Free `t`'s value, keeping how to recompute it (Tensor._drop)."""
    _require(OPT_ENABLE_DROP, "enable_drop", "_drop")
    cdef TensorInfo info = t._info
    _channel.wait_produced(info)
    _channel.sync_quietly()          # no queued op is reading it now (and deaths are settled)
    if info.producer is None:
        warnings.warn(f"cannot drop a tensor {info.shape} {info.dtype} that has no producer "
                      "(made from data, an RNG op, or created before enable_drop was set; or its "
                      "recipe was let go when a value it reads was freed): nothing was dropped",
                      UserWarning, stacklevel=3)
        return
    if info.status == PRODUCED:
        _channel.mm.drop(info, "_drop()")


def swap_out_tensor(TensorBase t):
    _require(OPT_ENABLE_SWAP, "enable_swap", "_swap_out")
    cdef TensorInfo info = t._info
    _channel.wait_produced(info)
    _channel.sync_quietly()
    if info.status == PRODUCED:
        _swap_out(_channel.mm, info, "_swap_out()")


def swap_in_tensor(TensorBase t):
    _require(OPT_ENABLE_SWAP, "enable_swap", "_swap_in")
    _channel.wait_produced(t._info)      # restores a swapped (or dropped) value


def persistent(TensorBase t):
    """Mark `t`'s value as long-lived state (optimizer buffers): the memory manager never
    evicts it and forgets its recipe once it exists, so state does not chain one training
    step to the next. Returns `t`."""
    if _channel._memory_on:
        _channel.mm.make_persistent(t._info)
    return t


def tensor_status(TensorBase t):
    """The record's status name: PRODUCED, DROPPED, SWAPPED, ..."""
    return Status(t._info.status).name


def set_eviction_policy(str name):
    if name not in POLICIES:
        raise ValueError(f"unknown eviction policy {name!r}; choose one of {sorted(POLICIES)}")
    _channel.mm.policy = POLICIES[name]()


def get_eviction_policy():
    return _channel.mm.policy.name


def set_swap_dir(path):
    """The folder in which swap files go, each process's in a private folder of its own
    (None: a fresh temporary folder, itself private)."""
    _channel.mm.swap.choose(path)


def get_swap_dir():
    return _channel.mm.swap.shown()


def swap_space():
    """The SwapSpace: private folders, measured bandwidth (for tests and tools)."""
    return _channel.mm.swap


def memory_manager_stats():
    return {"eviction_seconds": _channel.mm.eviction_seconds,
            "budget_overshoots": _channel.mm.overshoots, "clock": _channel.mm.clock,
            "recipe_cuts": _channel.mm.cuts, "kept_leaves": len(_channel.mm.kept),
            "candidates": len(_channel.mm.candidates),
            "queued_ops": _channel.mm.queued_ops.size(),
            "reserved_bytes": _channel.mm.reserved}


def _after_fork_in_child():
    _channel.mark_forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _close_at_exit():
    # atexit runs this after the user's own handlers: no result can be read any more, so
    # the work still queued is dropped instead of run (it could take minutes)
    _channel.close(quiet=True, discard=True)


atexit.register(_close_at_exit)


def channel():
    return _channel


def sync():
    """Wait until every issued command has run; raise the first pending worker error."""
    _channel.sync()


def full_sync():
    """Like sync(), and also wait for every device (CPU devices finish with the worker)."""
    _channel.sync()


def close():
    """Free every tensor and stop the worker; later ops raise RuntimeError."""
    _channel.close()


def set_option(name, value):
    _channel.set_option(name, value)


def validate_option(name, value):
    """The int that set_option(name, value) would store; raises as it would, sets nothing
    (so that a call setting several options can check them all first)."""
    return _validate_option(name, value)


def get_option(name):
    return _channel.get_option(name)


def options():
    return _channel.options()


def get_default_device():
    return _channel.default_device.name


def set_default_device(name):
    _channel.default_device = as_device(name)


def memory_stats(device=None):
    """Memory counters of a device (default: the default device)."""
    cdef Device d = _channel.default_device if device is None else as_device(device)
    stats = d.stats.as_dict()
    stats["eviction_seconds"] = _channel.mm.eviction_seconds
    stats["budget_overshoots"] = _channel.mm.overshoots
    stats["peak_floor"] = _channel.mm.peak_floor
    stats.update(_channel.mm.swap.rates())
    return stats


def reset_peak_memory_stats():
    for d in set(_devices.values()):
        (<Device>d).stats.peak_allocated = (<Device>d).stats.allocated
    _channel.mm.new_window()


def _channel_stats():
    return _channel.stats()


include "_tensor_base.pxi"    # TensorBase, apply, operator dispatch
include "_methods.pxi"        # Tensor methods that issue one op, without Python frames
include "_collective.pxi"     # MPI collectives as commands (imperative.distributed)
include "_plan.pxi"           # imp.jit's compiled plans: fused elementwise passes, kernels
include "_replay.pxi"         # imp.jit's per-call path of a symbolic trace
