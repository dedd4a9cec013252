# cython: language_level=3
"""The interpreter core: handle table, command buffer and queue, worker thread,
options, async errors and memory accounting.

One `Channel` per process. The caller's thread infers every output's shape, dtype and
device at dispatch (so errors surface at the call site), allocates handles and either
runs the op at once (async level 0, or a tiny op whose inputs are resident) or hands a
command to the worker thread through a short buffer that folds `Del`s into the last
reader of the dying tensor.
"""
import atexit
import os
import sys
import threading
import time
import warnings

import numpy as np

from . import _kernels

cimport cython
from libc.limits cimport LLONG_MAX
from libcpp.vector cimport vector
from cpython.object cimport PyTypeObject
from cpython.ref cimport PyObject
from cpython.exc cimport PyErr_CheckSignals
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

cdef extern from "pthread.h" nogil:
    int pthread_cond_timedwait(pthread_cond_t*, pthread_mutex_t*, const timespec*)

# how often a waiting caller looks for Ctrl-C (it must answer within 0.1 s of a kernel's end)
cdef long _SIGNAL_POLL_NS = 50 * 1000 * 1000


cdef extern from "Python.h":
    ctypedef struct PyFrameObject:
        pass
    ctypedef struct PyCodeObject:
        pass
    PyFrameObject* PyEval_GetFrame()            # borrowed
    PyCodeObject* PyFrame_GetCode(PyFrameObject*)   # new reference
    PyFrameObject* PyFrame_GetBack(PyFrameObject*)  # new reference
    int PyFrame_GetLasti(PyFrameObject*)
    int PyCode_Addr2Line(PyCodeObject*, int)
    int PyUnicode_Tailmatch(object, object, Py_ssize_t, Py_ssize_t, int) except -1
    void Py_XDECREF(PyObject*)
    void Py_DECREF(PyObject*)

cdef object _ndarray = np.ndarray
cdef object _np_asarray = np.asarray
cdef object _np_ascontiguousarray = np.ascontiguousarray


cdef inline object _c_ordered(object array):
    """`array` as the runtime keeps a value it owns: C-contiguous. numpy gives a result the
    layout of its inputs (a Fortran-ordered input makes a Fortran-ordered sum), while a
    result written into a dying input's buffer is C-ordered; without one rule for both, the
    layout, and so the rounding of later products and reductions, would depend on whether
    a buffer was reused, that is on the async level."""
    return array if array.flags.c_contiguous else _np_ascontiguousarray(array)
cdef object _PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# Small ops whose inputs are resident run on the caller's thread: handing one to the
# worker costs more than running it (PERF_NOTES: a wake-up is 10-100 us, a tiny add 0.5 us,
# and ops under ~1 ms never overlap with the caller because of the GIL). The limit counts
# the elements of the inputs and outputs together.
HOST_COMPUTE_MAX_ELEMENTS = 4096
cdef Py_ssize_t _host_max_elements = HOST_COMPUTE_MAX_ELEMENTS


class AsyncError(RuntimeError):
    """An op failed on the worker; raised at the next sync point. `__cause__` is the
    original exception."""


# --------------------------------------------------------------------------- options

OPTION_DEFAULTS = {
    "async_level": 2,
    "buffer_length": 3,
    "enable_host_compute": 1,
    "catch_worker_exception": 1,
    "enable_drop": 0,
    "enable_swap": 0,
    "enable_dtr_auto_drop": 0,
    "enable_dtr_sqrt_sampling": 0,
    "dtr_eviction_threshold": 0,
    "dtr_evictee_minimum_size": 1048576,
    "record_computing_path": 0,
    "worker_queue_size": 10000,
}
# Inclusive ranges; None means unbounded above.
cdef dict _OPTION_RANGES = {
    "async_level": (0, 2),
    "buffer_length": (0, 99),
    "dtr_eviction_threshold": (0, None),
    "dtr_evictee_minimum_size": (0, None),
    "worker_queue_size": (1, None),
}
cdef list _OPTION_NAMES = list(OPTION_DEFAULTS)
cdef dict _OPTION_INDEX = {name: i for i, name in enumerate(_OPTION_NAMES)}
cdef enum:  # option indices into Channel._opts
    OPT_ASYNC_LEVEL = 0
    OPT_BUFFER_LENGTH = 1
    OPT_HOST_COMPUTE = 2
    OPT_CATCH = 3
    OPT_ENABLE_DROP = 4
    OPT_ENABLE_SWAP = 5
    OPT_DTR_AUTO = 6
    OPT_SQRT_SAMPLING = 7
    OPT_DTR_THRESHOLD = 8
    OPT_MIN_EVICTEE = 9
    OPT_RECORD_PATH = 10
    OPT_QUEUE_SIZE = 11



cdef long long _validate_option(str name, object value) except? -1:
    if name not in _OPTION_INDEX:
        raise ValueError(f"unknown option {name!r}; valid options: {', '.join(_OPTION_NAMES)}")
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"option {name!r} takes an int, got {type(value).__name__} {value!r}")
    lo, hi = _OPTION_RANGES.get(name, (0, 1))
    if value < lo or value > (LLONG_MAX if hi is None else hi):
        expected = f"in [{lo}, {LLONG_MAX}]" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"option {name!r} must be {expected}, got {value}")
    return int(value)


cdef object _decimal_int(str text):
    """An environment value as an int: ASCII decimal digits with an optional sign (int()
    alone would also take "1_0" or non-ASCII digits)."""
    digits = text.strip()
    if digits[:1] in ("+", "-"):
        digits = digits[1:]
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError("expected a decimal integer")
    return int(text)


cdef dict _options_from_environment():
    values = dict(OPTION_DEFAULTS)
    for name in _OPTION_NAMES:
        var = "IMPERATIVE_" + name.upper()
        text = os.environ.get(var)
        if text is None:
            continue
        try:
            values[name] = _validate_option(name, _decimal_int(text))
        except (TypeError, ValueError) as e:
            warnings.warn(f"ignoring environment variable {var}={text!r}: {e}; using the "
                          f"default {values[name]}", RuntimeWarning)
    return values


# --------------------------------------------------------------------------- devices

cdef class DeviceStats:
    """Memory counters of one device, kept by the channel."""
    cdef public long long allocated, peak_allocated, swapped
    cdef public long long evictions, recomputes, swap_outs, swap_ins, inplace_reuses
    cdef public double recompute_seconds

    cdef inline void add(self, long long nbytes):
        self.allocated += nbytes
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated

    def as_dict(self):
        return {
            "allocated": self.allocated, "peak_allocated": self.peak_allocated,
            "swapped": self.swapped, "evictions": self.evictions,
            "recomputes": self.recomputes, "swap_outs": self.swap_outs,
            "swap_ins": self.swap_ins, "recompute_seconds": self.recompute_seconds,
            "inplace_reuses": self.inplace_reuses,
        }


MAX_CPU_DEVICES = 64

cdef class Device:
    """A compute device (`cpu0`, `cpu1`, ...). One object per name, so identity compares."""
    cdef readonly str name
    cdef readonly str kind
    cdef readonly int index
    cdef readonly DeviceStats stats

    def __init__(self, *args):
        raise TypeError("use imperative.device.get(name) or a device name string")

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Device({self.name!r})"

    def __eq__(self, other):
        if isinstance(other, Device):
            return self is other
        if isinstance(other, str):
            return other == self.name
        return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (as_device, (self.name,))


cdef dict _devices = {}


cpdef Device as_device(object name):
    """The Device for a name or Device; ValueError for an unknown name."""
    if isinstance(name, Device):
        return <Device>name
    cdef Device d = _devices.get(name)
    if d is not None:
        return d
    if not isinstance(name, str):
        raise TypeError(f"device must be a str such as 'cpu0' or a Device, got {type(name).__name__}")
    text = name.strip().lower()
    if text == "cpu":
        text = "cpu0"
    if text.startswith("cpu") and text[3:].isdigit() and int(text[3:]) < MAX_CPU_DEVICES:
        d = Device.__new__(Device)
        d.name = "cpu" + str(int(text[3:]))
        d.kind = "cpu"
        d.index = int(text[3:])
        d.stats = DeviceStats()
        d = _devices.setdefault(d.name, d)
        _devices[name] = d
        return d
    raise ValueError(f"unknown device {name!r}: expected 'cpu0' ... 'cpu{MAX_CPU_DEVICES - 1}' "
                     "(no GPU backend is installed)")


def known_devices():
    """Devices that have been used in this process, in index order."""
    return sorted(set(_devices.values()), key=lambda d: (d.kind, d.index))


# --------------------------------------------------------------------------- records

cdef class Storage:
    pass


cdef inline Storage _new_storage(Py_ssize_t nbytes, Device device):
    cdef Storage st = Storage.__new__(Storage)
    st.nbytes = nbytes
    st.device = device
    device.stats.add(nbytes)
    return st


cdef class ErrorRecord:
    def __cinit__(self, exc, str message):
        self.exc = exc
        self.message = message
        self.raised = False


cdef class TensorInfo:
    def __dealloc__(self):
        # A record kept alive only by producers that read it (a leaf whose tensors are
        # gone) still held its value: release the accounting (and any swap file) now.
        cdef Storage st = self.storage
        if st is not None:
            st.refs -= 1
            if st.refs == 0:
                (<Device>st.device).stats.allocated -= st.nbytes
        if self.swap_path is not None:
            try:
                os.remove(self.swap_path)
            except OSError:
                pass
            (<Device>self.device).stats.swapped -= self.size
        if self.uf_class is not None:       # DTR: its class no longer waits on it
            _leave_evicted_class(self.uf_class, self.cost)

    @property
    def id(self):
        return self.handle & 0xFFFFFFFF

    @property
    def generation(self):
        return self.handle >> 32

    def __repr__(self):
        return (f"<TensorInfo {self.handle & 0xFFFFFFFF} status={Status(self.status).name} "
                f"shape={self.shape} dtype={self.dtype} device={self.device}>")


cdef class Command:
    def __cinit__(self):
        self.dels = None


# A command worth handing the GIL to the worker for when it wakes (about 0.3 ms of sgemm):
# see Channel._hand_gil_to_worker.
cdef double _HEAVY_FLOPS = 5e7


cdef bint _is_heavy(Command cmd):
    """A product or convolution of _HEAVY_FLOPS or more (ops that estimate their work)."""
    cdef TensorInfo info
    estimate = getattr(cmd.op, "estimate_flops", None)
    if estimate is None:
        return False
    for info in cmd.outputs:
        if info.shape is None:
            return False
    return estimate([info.shape for info in cmd.inputs],
                    [info.shape for info in cmd.outputs]) >= _HEAVY_FLOPS


cdef object _epilogue_module = None

cdef object _epilogues():
    """imperative.ops.epilogue, imported on first use (the ops import this module)."""
    global _epilogue_module
    if _epilogue_module is None:
        from .ops import epilogue
        _epilogue_module = epilogue
    return _epilogue_module


cdef class OpDef:
    """Subclasses (see imperative.ops) set the class attributes RECOMPUTABLE,
    INPLACE_CAPABLE, ALIASES_INPUT, VALUE_DEPENDENT and implement `infer` and `kernel`."""

    def __cinit__(self, *args, **kwargs):
        cls = type(self)
        self.recomputable = getattr(cls, "RECOMPUTABLE", True)
        self.inplace_capable = getattr(cls, "INPLACE_CAPABLE", False)
        self.aliases_input = getattr(cls, "ALIASES_INPUT", False)
        self.value_dependent = getattr(cls, "VALUE_DEPENDENT", False)
        self.epilogue_capable = getattr(cls, "EPILOGUE_CAPABLE", False)
        self.ufunc = None
        self._same_dtype_out = {}
        self._infer_cache = {}

    def infer(self, inputs):
        """inputs: tuple of TensorInfo (.shape, .dtype, .device).
        Returns a tuple of (shape, dtype) or (shape, dtype, device) per output."""
        raise NotImplementedError(f"{type(self).__name__}.infer")

    def kernel(self, *arrays):
        """numpy arrays in, an array or a tuple of arrays out."""
        raise NotImplementedError(f"{type(self).__name__}.kernel")


cdef inline Py_ssize_t _num_elements(tuple shape):
    cdef Py_ssize_t n = 1
    for s in shape:
        n *= <Py_ssize_t>s
    return n


# 4-bit quantized values are stored packed two per byte; kernels see them unpacked.
# The helpers come from imperative.dtype at its import (no import cycle).
cdef object _is_4bit = None
cdef object _pack_4bit = None
cdef object _unpack_4bit = None


def set_packing(is_4bit, pack, unpack):
    global _is_4bit, _pack_4bit, _unpack_4bit
    _is_4bit, _pack_4bit, _unpack_4bit = is_4bit, pack, unpack


cdef inline bint _dtype_is_packed(object dtype):
    return dtype.metadata is not None and _is_4bit is not None and _is_4bit(dtype)


cdef inline Py_ssize_t _nbytes_of(Py_ssize_t numel, object dtype, bint packed):
    """Bytes of storage for `numel` elements (4-bit values: two per byte)."""
    if packed:
        return (numel + 1) // 2
    return numel * dtype.itemsize


cdef inline object _unpacked_value(TensorInfo info):
    """The value as kernels and users see it (4-bit storage unpacked)."""
    if info.packed:
        return _unpack_4bit(info.value, info.shape, info.dtype)
    return info.value


include "_record.pxi"


# Called as hook(op, input_infos, output_infos) after every op is issued, while any
# gradient recording is active (imperative.autodiff); None costs one pointer check per op.
cdef object _grad_hook = None


def set_grad_hook(hook):
    global _grad_hook
    _grad_hook = hook


def get_grad_hook():
    return _grad_hook


# --------------------------------------------------------------------------- the channel

cdef class MemoryManager


@cython.final
cdef class Channel:
    cdef long long _opts[12]
    cdef MemoryManager mm            # drop, swap, DTR (imperative/_memory.pxi)
    cdef bint _memory_on             # any of enable_drop/swap, record_computing_path, DTR
    # handle table [C]
    cdef list _table
    cdef vector[long long] _free_handles   # whole handles: a free slot's id and next generation
    cdef Py_ssize_t _live
    # command flow: [C] appends to _buffer and _pending; [W] takes _pending whole
    cdef list _buffer
    cdef list _pending
    cdef long long _seq            # [C] last sequence number queued
    cdef long long _processed      # [W] commands run by the worker (read by waiters under _mutex)
    # worker thread and its wake-up; the "nogil" fields live under _mutex
    cdef object _thread
    cdef pthread_mutex_t _mutex
    cdef pthread_cond_t _wake_cond
    cdef pthread_cond_t _done_cond
    cdef int _wake                 # nogil
    cdef long long _notify_at      # nogil: smallest sequence number a waiter waits for
    cdef int _worker_sleeping      # [C/W]
    cdef int _worker_awake         # nogil: set by the worker once it holds the GIL again
    cdef int _n_waiters            # [C]
    cdef int _stopping             # [C]
    cdef int _discarding           # [C] at exit: the worker drops the commands left
    cdef str _closed_by            # who called close(), for the errors after it
    cdef int _worker_dead          # [W]
    # errors
    cdef list _errors              # [C/W] ErrorRecords not yet raised
    # lifecycle: 0 usable, 1 closed, 2 forked child
    cdef int _state
    cdef public Device default_device
    cdef object _pid

    def __cinit__(self):
        pthread_mutex_init(&self._mutex, NULL)
        pthread_cond_init(&self._wake_cond, NULL)
        pthread_cond_init(&self._done_cond, NULL)
        self._table = []
        self._buffer = []
        self._pending = []
        self._errors = []
        self._notify_at = LLONG_MAX
        self.default_device = as_device("cpu0")
        self._pid = os.getpid()
        values = _options_from_environment()
        for i, name in enumerate(_OPTION_NAMES):
            self._opts[i] = values[name]
        self._update_memory_flag()

    # ---- options

    def set_option(self, str name, value):
        cdef long long v = _validate_option(name, value)
        self._opts[<int>_OPTION_INDEX[name]] = v
        if name == "buffer_length":
            self._flush_buffer(v)
        if name == "enable_swap" and v:
            # (from the main thread, where signal handlers can be installed: the first
            # swap may happen on the worker)
            guard_signals(self.mm.swap)
        self._update_memory_flag()

    cdef void _update_memory_flag(self):
        self._memory_on = (self._opts[OPT_ENABLE_DROP] or self._opts[OPT_ENABLE_SWAP]
                           or self._opts[OPT_RECORD_PATH] or self._opts[OPT_DTR_AUTO])
        if not self._memory_on and self.mm is not None:
            self.mm.candidates.clear()    # nothing is evicted while off; hold no records
            self.mm.sweep_kept()
            self.mm.size_pool(0)

    def get_option(self, str name):
        if name not in _OPTION_INDEX:
            _validate_option(name, 0)
        return self._opts[<int>_OPTION_INDEX[name]]

    def options(self):
        return {name: self._opts[i] for i, name in enumerate(_OPTION_NAMES)}

    # ---- lifecycle checks

    cdef inline int check_usable(self) except -1:
        if self._state != 0:
            self._raise_unusable()
        return 0

    cdef int _raise_unusable(self) except -1:
        if self._state == 1:
            raise RuntimeError(f"interpreter closed by {self._closed_by}: no tensor can be "
                               "used or made after that")
        raise RuntimeError(
            f"this process (pid {os.getpid()}) was forked from pid {self._pid} after imperative "
            "started; the parent's interpreter cannot be used in a child: use the 'spawn' start "
            "method or import imperative only in the children")

    # ---- handle table

    cdef TensorInfo new_info(self, tuple shape, object dtype, Device device,
                             bint maybe_packed=True):
        cdef TensorInfo info = TensorInfo.__new__(TensorInfo)
        info.shape = shape
        info.dtype = dtype
        info.device = device
        info.status = ALLOCATED
        if maybe_packed and dtype.metadata is not None:
            # quantized dtypes: numpy ignores their metadata in == and hash, so every
            # dtype-keyed cache must step around them
            info.quantized = True
            info.packed = _dtype_is_packed(dtype)
        if shape is not None:
            info.numel = _num_elements(shape)
            info.size = _nbytes_of(info.numel, dtype, info.packed)
        self._add_handle(info)
        return info

    cdef inline void _add_handle(self, TensorInfo info):
        # The free list holds whole handles: a slot's id with its next generation.
        if self._free_handles.size():
            info.handle = self._free_handles.back()
            self._free_handles.pop_back()
            self._table[info.handle & 0xFFFFFFFF] = info
        else:
            info.handle = len(self._table)
            self._table.append(info)
        self._live += 1

    cdef void _retire_handle(self, TensorInfo info):
        cdef long long idx = info.handle & 0xFFFFFFFF
        cdef long long gen = (info.handle >> 32) + 1
        if info.handle < 0 or self._table[idx] is not info:
            return
        self._table[idx] = None
        self._free_handles.push_back(idx | ((gen & 0x7FFFFFFF) << 32))
        self._live -= 1

    cpdef TensorInfo lookup(self, long long handle):
        """The live record for a handle, or None if it was deleted (stale generation)."""
        cdef Py_ssize_t idx = handle & 0xFFFFFFFF
        if handle < 0 or idx >= len(self._table):
            return None
        info = self._table[idx]
        if info is None or (<TensorInfo>info).handle != handle:
            return None
        return info

    # ---- values that arrive from the host

    cdef TensorInfo put(self, object array, tuple shape, object dtype, Device device):
        """A tensor whose value the caller already has (the array is owned by the runtime)."""
        cdef TensorInfo info = self.new_info(shape, dtype, device)
        info.scope = _current_scope
        if self._memory_on and self._processed == self._seq:
            # under a DTR budget, data is budgeted like an op's output (the 0-d constant
            # F.multiply(0.5, x) makes too): room first, when no op of the worker's runs
            # beside (at async level 0, always)
            self.mm.make_room(info.size, device)
        self._set_value(info, array, None)
        return info

    cdef int _set_value(self, TensorInfo info, object array, Storage shared) except -1:
        """Make `array` the value of `info`: in `shared` (a view of an input's storage), or
        in a storage of its own, C-ordered."""
        return self._adopt(info, array if shared is not None else _c_ordered(array), shared)

    cdef int _adopt(self, TensorInfo info, object array, Storage shared) except -1:
        """Make `array` the value of `info` as it is laid out (a swapped value coming back
        must keep the strides it left with, so that later ops round the same)."""
        cdef Storage storage = shared
        if storage is None:
            root = array
            while isinstance(root.base, _ndarray):
                root = root.base
            storage = _new_storage(root.nbytes, info.device)
        storage.refs += 1
        info.storage = storage
        info.value = array
        info.status = PRODUCED
        if self._memory_on:
            self.mm.on_produced(info)

    cdef void _free_value(self, TensorInfo info):
        cdef Storage storage = info.storage
        if self._memory_on:
            self.mm.forget(info)
        info.value = None
        info.storage = None
        if storage is not None:
            storage.refs -= 1
            if storage.refs == 0:
                (<Device>storage.device).stats.allocated -= storage.nbytes

    # ---- dispatch

    cdef list dispatch(self, OpDef op, list inputs):
        """Infer outputs, allocate handles and run or queue the op. Returns the output infos."""
        cdef TensorInfo first, info
        cdef Py_ssize_t i, n = len(inputs)
        cdef bint fast = False
        cdef long long t0 = _now_ns() if _profiling else 0
        self.check_usable()
        if _deferred: _place_waits(inputs)     # collectives: their waits (_collective.pxi)
        for i in range(n):
            info = inputs[i]
            if info.status >= DELETED:
                self._raise_unusable_input(op, info)
            if info.shape is None:      # value-dependent shape: inference needs it
                self.wait_produced(info, "shape")
        if n:
            first = inputs[0]
            device = first.device
            for i in range(1, n):
                if (<TensorInfo>inputs[i]).device is not device:
                    raise ValueError(
                        f"op {op!r} got inputs on different devices: "
                        + ", ".join(str((<TensorInfo>x).device) for x in inputs)
                        + "; copy them to one device first (Tensor.to / functional.copy)")
        else:
            first = None
            device = self.default_device
        # Elementwise fast path: equal shapes and dtypes need no broadcasting or promotion.
        if op.ufunc is not None and n:
            fast = True
            for i in range(1, n):
                info = inputs[i]
                if info.dtype is not first.dtype or (info.shape is not first.shape
                                                     and info.shape != first.shape):
                    fast = False
                    break
            if fast and first.shape is not None and not first.quantized:
                out_dtype = op._same_dtype_out.get(first.dtype)
                if out_dtype is None:
                    descs = op.infer(tuple(inputs))
                    out_dtype = descs[0][1]
                    op._same_dtype_out[first.dtype] = out_dtype
                outputs = [self.new_info(first.shape, out_dtype, device)]
            else:
                fast = False
        if not fast:
            descs = _infer_cached(op, inputs)
            outputs = []
            for desc in descs:
                outputs.append(self.new_info(
                    None if desc[0] is None else tuple(desc[0]), desc[1],
                    as_device(desc[2]) if len(desc) > 2 else device))
        cdef Command cmd = Command.__new__(Command)
        cmd.kind = CMD_APPLY
        cmd.op = op
        cmd.inputs = inputs
        cmd.outputs = outputs
        cmd.fast = fast
        cmd.scope = _current_scope
        cmd.blame = _blame
        if self._memory_on and op.recomputable:
            self.mm.record(op, inputs, outputs)
        for i in range(len(outputs)):
            info = outputs[i]
            info.op = op
            info.scope = _current_scope
            info.out_index = i
        _capture_site(cmd)
        self._submit(cmd)
        if _profiling and t0:
            _record_dispatch(t0, cmd)
        if _grad_hook is not None:
            _grad_hook(op, inputs, outputs)
        return outputs

    cdef int _raise_unusable_input(self, op, TensorInfo info) except -1:
        if info.status == DELETED:
            raise RuntimeError(f"op {op!r} got a deleted tensor")
        rec = info.error
        if not rec.raised:
            self._errors.remove(rec) if rec in self._errors else None
            rec.raised = True
            raise AsyncError(rec.message) from rec.exc
        raise RuntimeError(
            f"tensor {info.shape} {info.dtype} is unusable because of "
            f"an earlier error: {rec.message}") from rec.exc

    cdef int _submit(self, Command cmd) except -1:
        cdef TensorInfo info
        cdef bint ready = True
        cdef int level = self._opts[OPT_ASYNC_LEVEL]
        for info in cmd.inputs:
            if info.status != PRODUCED:
                ready = False
                break
        if ready and (level == 0 or (self._opts[OPT_HOST_COMPUTE] and self._is_tiny(cmd)
                                     and not self._worker_busy_under_budget())):
            self._run_inline(cmd, level == 0)
            return 0
        for info in cmd.inputs:
            info.pending_uses += 1
        for info in cmd.outputs:
            info.pending_uses += 1
        self._push(cmd)
        if level == 0 or (level == 1 and (<OpDef>cmd.op).value_dependent):
            self._flush_buffer(0)
            self._wait_seq(cmd.seq)
            self._raise_error_of(cmd, level == 0)
        return 0

    cdef bint _worker_busy_under_budget(self):
        """DTR has a budget and the worker has commands still to run: an op run here now
        would run beside the worker's, each having made room without the other's output,
        and the peak could pass the budget by both (issue 12, rule 1)."""
        return (self._opts[OPT_DTR_AUTO] and self._opts[OPT_DTR_THRESHOLD] > 0
                and self._processed != self._seq)

    cdef bint _is_tiny(self, Command cmd):
        cdef TensorInfo info
        cdef Py_ssize_t n = 0
        for info in cmd.outputs:
            if info.shape is None:
                return False
            n += info.numel
        for info in cmd.inputs:
            n += info.numel
        return n <= _host_max_elements

    cdef TensorInfo host_ufunc(self, OpDef op, TensorInfo a, TensorInfo b):
        """The fast path of elementwise operators: equal shapes and dtypes, resident inputs
        and a small size (any size at async level 0) run now on the caller's thread.
        Returns None when it does not apply or the kernel raised; the general path then
        runs the op (again) and reports any error by the usual protocol."""
        cdef Py_ssize_t limit
        cdef long long t0 = _now_ns() if _profiling else 0
        if self._state != 0 or a.status != PRODUCED or a.quantized or self._memory_on:
            return None
        if b is not None and (b.status != PRODUCED or b.dtype is not a.dtype
                              or b.device is not a.device
                              or (b.shape is not a.shape and b.shape != a.shape)):
            return None
        out_dtype = op._same_dtype_out.get(a.dtype)
        if out_dtype is None:
            return None
        if self._opts[OPT_ASYNC_LEVEL] != 0:
            limit = _host_max_elements if self._opts[OPT_HOST_COMPUTE] else -1
            if a.numel * (2 if b is None else 3) > limit:
                return None
        try:
            r = op.ufunc(a.value) if b is None else op.ufunc(a.value, b.value)
        except Exception:
            return None
        if type(r) is not _ndarray or r.dtype is not out_dtype:
            r = _np_asarray(r, dtype=out_dtype)
        r = _c_ordered(r)
        cdef TensorInfo info = self.new_info(a.shape, out_dtype, a.device, False)
        cdef Storage st = _new_storage(info.size, info.device)
        st.refs = 1
        info.storage = st
        info.value = r
        info.status = PRODUCED
        info.op = op
        info.scope = _current_scope
        if _profiling and t0:
            _record_host_op(t0, op, a, b, info)
        if _grad_hook is not None:
            _grad_hook(op, [a] if b is None else [a, b], [info])
        return info

    cdef int _run_inline(self, Command cmd, bint raise_original) except -1:
        """Host compute: run the op on the caller's thread, now."""
        cdef TensorInfo info
        for info in cmd.inputs:
            info.pins += 1
        try:
            self._execute_apply(cmd)
        finally:
            for info in cmd.inputs:
                info.pins -= 1
        self._raise_error_of(cmd, raise_original)
        return 0

    cdef int _raise_error_of(self, Command cmd, bint raise_original) except -1:
        """At level 0 a failed op raises its original exception at the call."""
        cdef TensorInfo info
        if not raise_original or not cmd.outputs:
            return 0
        cdef TensorInfo out = cmd.outputs[0]
        if out.status != INVALID:
            return 0
        for info in cmd.outputs:      # no Tensor will ever hold them
            self._retire_handle(info)
        rec = out.error
        if rec in self._errors:
            self._errors.remove(rec)
        rec.raised = True
        exc = rec.exc
        if isinstance(exc, BaseException) and hasattr(exc, "add_note"):
            exc.add_note(rec.message)
        raise exc

    # ---- the buffer that folds Del into the last reader

    cdef void _push(self, Command cmd):
        self._buffer.append(cmd)
        if len(self._buffer) > self._opts[OPT_BUFFER_LENGTH]:
            self._enqueue(self._buffer.pop(0))

    cdef void _flush_buffer(self, long long keep):
        while len(self._buffer) > keep:
            self._enqueue(self._buffer.pop(0))

    cdef void release(self, TensorInfo info):
        """The last Tensor sharing `info` is gone."""
        cdef Command cmd
        cdef Py_ssize_t i
        if self._state != 0:
            return
        self._retire_handle(info)
        if info.pending_uses == 0:
            # Nothing queued touches it: free it here instead of queueing a Del.
            self._delete(info)
            return
        for i in range(len(self._buffer) - 1, -1, -1):
            cmd = self._buffer[i]
            if cmd.kind == CMD_APPLY:
                if _contains(cmd.inputs, info):
                    if cmd.dels is None:
                        cmd.dels = []
                    cmd.dels.append(info)
                    return
                if _contains(cmd.outputs, info):
                    break
        cmd = Command.__new__(Command)
        cmd.kind = CMD_DEL
        cmd.target = info
        info.pending_uses += 1
        self._push(cmd)

    # ---- the queue to the worker

    cdef void _enqueue(self, Command cmd):
        cdef TensorInfo info
        self._seq += 1
        cmd.seq = self._seq
        if cmd.kind == CMD_APPLY:
            for info in cmd.outputs:
                info.ready_seq = self._seq
        self._pending.append(cmd)
        if self._thread is None:
            self._start_worker()
        if self._worker_sleeping:
            self._worker_sleeping = 0
            self._worker_awake = 0
            pthread_mutex_lock(&self._mutex)
            self._wake = 1
            pthread_cond_signal(&self._wake_cond)
            pthread_mutex_unlock(&self._mutex)
            if cmd.kind == CMD_APPLY and _is_heavy(cmd):
                self._hand_gil_to_worker()
        if self._seq - self._processed > self._opts[OPT_QUEUE_SIZE]:
            # Backpressure: let the worker catch up before issuing more.
            self._wait_seq(self._seq - self._opts[OPT_QUEUE_SIZE], "queue full")

    cdef void _hand_gil_to_worker(self):
        """Let the worker, just woken for a long op, take the GIL now. Otherwise it waits
        for it until this thread blocks or a switch interval (5 ms) passes, while this
        thread issues the rest of a training step: the step's first product started 1-2 ms
        late (2% of an MLP step). The wake-up round trip (~100 us) is paid only for ops that
        take milliseconds."""
        with nogil:
            while not self._worker_awake and not self._worker_dead:
                sched_yield()

    cdef void _start_worker(self):
        self._thread = threading.Thread(target=self._worker_main, name="imperative-worker",
                                        daemon=True)
        self._thread.start()

    cdef int _wait_seq(self, long long target, str why="sync") except -1:
        """Block (GIL released) until the worker has run command `target`."""
        if self._processed >= target:
            return 0
        cdef long long t0 = _now_ns() if _profiling else 0
        if self._worker_dead:
            raise RuntimeError("the imperative worker thread died (catch_worker_exception=0?)")
        cdef bint done = False
        cdef timespec deadline
        self._n_waiters += 1
        try:
            # Wake every _SIGNAL_POLL_NS to let Ctrl-C through: a plain wait would hold it
            # back until the whole queue had run.
            while not done:
                with nogil:
                    pthread_mutex_lock(&self._mutex)
                    clock_gettime(CLOCK_REALTIME, &deadline)
                    deadline.tv_nsec += _SIGNAL_POLL_NS
                    if deadline.tv_nsec >= 1000000000:
                        deadline.tv_sec += 1
                        deadline.tv_nsec -= 1000000000
                    while self._processed < target and not self._worker_dead:
                        if target < self._notify_at:
                            self._notify_at = target
                        if pthread_cond_timedwait(&self._done_cond, &self._mutex, &deadline):
                            break                      # timed out: look for a signal
                    done = self._processed >= target or self._worker_dead
                    pthread_mutex_unlock(&self._mutex)
                if not done:
                    PyErr_CheckSignals()               # raises KeyboardInterrupt
        finally:
            self._n_waiters -= 1
        if _profiling and t0:
            _record_wait(t0, why)
        if self._processed < target:
            raise RuntimeError("the imperative worker thread died (catch_worker_exception=0?)")
        return 0

    # ---- the worker

    def _worker_main(self):
        cdef Command cmd
        cdef list batch
        cdef Py_ssize_t i
        # Floating-point warnings on the worker would print from a foreign thread.
        np.seterr(all="ignore")
        # Arrays the kernels make here come from a caching pool (numpy's allocator is set per
        # thread context): a step's buffers are reused instead of faulted in afresh.
        _kernels.install_pool()
        try:
            while True:
                if self._pending:
                    batch = self._pending
                    self._pending = []
                    for i in range(len(batch)):
                        if self._discarding:
                            break
                        cmd = batch[i]
                        # a finished command must not keep records alive while the rest of
                        # its batch runs (they would pin a whole earlier step in memory)
                        batch[i] = None
                        if i + 1 < len(batch) and cmd.kind == CMD_APPLY and cmd.op.epilogue_capable:
                            self._plan_epilogue(cmd, batch[i + 1])
                        self._execute(cmd)
                        cmd.epilogue = None
                        cmd = None
                        self._processed += 1
                        if self._n_waiters:
                            self._notify_waiters()
                    batch = None
                elif self._stopping:
                    break
                else:
                    self._worker_sleeping = 1
                    with nogil:
                        pthread_mutex_lock(&self._mutex)
                        while not self._wake:
                            pthread_cond_wait(&self._wake_cond, &self._mutex)
                        self._wake = 0
                        pthread_mutex_unlock(&self._mutex)
                    self._worker_awake = 1
        finally:
            self._worker_dead = 1
            pthread_mutex_lock(&self._mutex)
            pthread_cond_broadcast(&self._done_cond)
            pthread_mutex_unlock(&self._mutex)

    cdef void _plan_epilogue(self, Command cmd, Command nxt):
        """Let `cmd` (a product) do `nxt`'s work in its kernel (ops/epilogue.py) when `nxt`
        is ReLU or ReLU's gradient of cmd's one output, that output dies at `nxt` (nothing
        else can read it), and `nxt` can take over its buffer. Not under the memory manager,
        whose recomputation and eviction see each op's own output."""
        if self._memory_on or nxt.kind != CMD_APPLY or nxt.dels is None:
            return
        if len(cmd.outputs) != 1 or len(nxt.outputs) != 1 or not nxt.inputs:
            return
        cdef TensorInfo product = cmd.outputs[0], out = nxt.outputs[0]
        if nxt.inputs[0] is not product or _epilogues().kind_after(nxt.op) is None:
            return
        if out.dtype is not product.dtype or out.shape != product.shape:
            return
        # (its other input: a separate array of the product's own shape)
        if any(info is product or info.shape != product.shape for info in nxt.inputs[1:]):
            return
        if not any(info is product for info in nxt.dels):
            return
        cmd.epilogue = nxt
        nxt.prefused = True

    cdef object _epilogue_of(self, Command cmd):
        """The Epilogue to hand cmd's kernel, or None (then the follower runs by itself)."""
        cdef Command nxt = cmd.epilogue
        cdef TensorInfo info
        arrays = []
        for info in nxt.inputs[1:]:
            if info.status != PRODUCED:
                nxt.prefused = False
                return None
            arrays.append(_unpacked_value(info))
        return _epilogues().Epilogue(nxt.op, *arrays)

    cdef void _notify_waiters(self):
        pthread_mutex_lock(&self._mutex)
        if self._processed >= self._notify_at:
            self._notify_at = LLONG_MAX
            pthread_cond_broadcast(&self._done_cond)
        pthread_mutex_unlock(&self._mutex)

    cdef int _execute(self, Command cmd) except -1:
        cdef TensorInfo info
        cdef long long t0
        if cmd.kind == CMD_APPLY:
            t0 = _now_ns() if _profiling else 0
            try:
                self._execute_apply(cmd)
                if _profiling and t0:    # recording started while it ran: skip it
                    _record_exec(t0, cmd)
            finally:
                for info in cmd.inputs:
                    info.pending_uses -= 1
                for info in cmd.outputs:
                    info.pending_uses -= 1
            # after the counts: a dying input must not look held by its own last reader to
            # the memory manager deciding what may go
            self._free_dels(cmd)
        elif cmd.kind == CMD_DEL:
            info = cmd.target
            info.pending_uses -= 1
            self._delete(info)
        return 0

    cdef void _delete(self, TensorInfo info):
        """No Tensor refers to `info` any more. While producers are recorded, a tensor that
        can be recomputed is dropped (its record stays for whoever needs it again) and a
        leaf that a recorded producer reads keeps its value while an evicted tensor needs
        it (imperative/_memory.pxi, release_leaf)."""
        # (records made while recording keep these rules after it is turned off: what was
        # dropped then can still be recomputed)
        if ((self._memory_on or info.producer is not None or info.users is not None)
                and info.status in (PRODUCED, DROPPED, SWAPPED)):
            self.mm.note_death()
            if info.producer is not None:
                if info.status == PRODUCED:
                    self.mm.drop_dead(info, "deleted")
                elif info.uf_class is not None:     # evicted earlier, and now dead
                    _member_dies(info.uf_class)
                return
            if _read_by_a_recipe(info):
                self.mm.forget(info)
                if not self.mm.release_leaf(info):
                    return
        self._finish_delete(info)

    cdef void _finish_delete(self, TensorInfo info):
        """Free the value (and any swap file) of a record nothing needs any more."""
        self._free_value(info)
        if info.swap_path is not None:
            _remove_swap_file(info)
            (<Device>info.device).stats.swapped -= info.size
        info.status = DELETED

    cdef int _execute_apply(self, Command cmd) except -1:
        """Run one op's kernel (worker, or caller for host compute); never raises
        unless catch_worker_exception is 0."""
        cdef TensorInfo info
        cdef OpDef op = cmd.op
        cdef bint gone = False           # an input dropped or swapped out: restore first
        for info in cmd.inputs:
            if info.status == INVALID:
                for out in cmd.outputs:
                    self._mark_invalid(out, info.error)
                return 0
            if info.status == DROPPED or info.status == SWAPPED:
                gone = True
        try:
            if self._memory_on or gone:
                self._run_managed(cmd)
            elif cmd.fast:
                self._run_ufunc(cmd)
            else:
                self._run_kernel(cmd)
        except BaseException as exc:
            if not self._opts[OPT_CATCH] and threading.current_thread() is self._thread:
                raise
            rec = ErrorRecord(exc, _describe_failure(cmd, exc))
            for out in cmd.outputs:
                self._mark_invalid(out, rec)
            self._errors.append(rec)
        return 0

    cdef int _run_managed(self, Command cmd) except -1:
        """Run an op under the memory manager: its inputs pinned and resident (recomputed or
        swapped in), room made for its outputs under the budget."""
        cdef TensorInfo info
        cdef Py_ssize_t needed = 0
        cdef long long t0
        for info in cmd.inputs:
            info.pins += 1
        try:
            for info in cmd.inputs:
                if info.status == DROPPED or info.status == SWAPPED:
                    self.mm.restore(info)
            for info in cmd.outputs:
                needed += info.size
            if cmd.outputs:
                self.mm.make_room(needed, (<TensorInfo>cmd.outputs[0]).device)
            t0 = _now_ns()
            if cmd.fast:
                self._run_ufunc(cmd)
            else:
                self._run_kernel(cmd)
            self.mm.measured(cmd.outputs, _now_ns() - t0)
        finally:
            self.mm.clock += 1
            for info in cmd.inputs:
                info.pins -= 1
                info.last_use = self.mm.clock
                info.read_since_produced = True
        return 0

    cdef void _mark_invalid(self, TensorInfo out, ErrorRecord rec):
        if out.status == PRODUCED:
            self._free_value(out)
        out.status = INVALID
        out.error = rec

    cdef void _free_dels(self, Command cmd):
        cdef TensorInfo info
        if cmd.dels is None:
            return
        for info in cmd.dels:
            self._delete(info)
        cmd.dels = None

    cdef int _run_ufunc(self, Command cmd) except -1:
        cdef OpDef op = cmd.op
        cdef TensorInfo out = cmd.outputs[0]
        cdef TensorInfo reuse = self._inplace_candidate(cmd, out)
        cdef list inputs = cmd.inputs
        cdef Py_ssize_t n = len(inputs)
        a = (<TensorInfo>inputs[0]).value
        if reuse is not None:
            target = reuse.value
            if cmd.prefused and reuse is inputs[0]:
                pass                # the product before it wrote this result (its epilogue)
            elif n == 1:
                op.ufunc(a, out=target)
            else:
                op.ufunc(a, (<TensorInfo>inputs[1]).value, out=target)
            self._take_over(reuse, out, target)
            return 0
        if n == 1:
            r = op.ufunc(a)
        else:
            r = op.ufunc(a, (<TensorInfo>inputs[1]).value)
        if type(r) is not _ndarray or r.dtype is not out.dtype:
            r = _np_asarray(r, dtype=out.dtype)
        self._set_value(out, r, None)
        return 0

    cdef void _take_over(self, TensorInfo dying, TensorInfo out, object value):
        """`out`'s value was written over the dying input's: the storage passes to `out`,
        and the input, whose value is gone, no longer holds it (nothing may take it for a
        value another tensor shares)."""
        self._set_value(out, value, dying.storage)
        self._free_value(dying)
        (<Device>out.device).stats.inplace_reuses += 1

    cdef TensorInfo _inplace_candidate(self, Command cmd, TensorInfo out):
        """A dying input whose storage the output may overwrite; first the product whose
        epilogue wrote this op's result (prefused), if it qualifies."""
        cdef TensorInfo info
        if cmd.dels is None or cmd.outputs is None:
            return None
        if cmd.prefused:
            for info in cmd.dels:
                if info is cmd.inputs[0] and self._overwritable(info, out):
                    return info
        for info in cmd.dels:
            if self._overwritable(info, out):
                return info
        return None

    cdef bint _overwritable(self, TensorInfo info, TensorInfo out):
        """A dying input's storage can hold `out`: same shape and dtype, contiguous, owning
        its whole storage, and no view of it anywhere."""
        cdef Storage st = info.storage
        if self._memory_on and not _may_overwrite_dying(info):
            return False
        return (st is not None and st.refs == 1 and not st.exported
                and info.dtype is out.dtype and info.shape == out.shape
                and info.value.flags.c_contiguous and info.value.nbytes == st.nbytes
                and info.value.flags.writeable)

    cdef int _run_kernel(self, Command cmd) except -1:
        cdef OpDef op = cmd.op
        cdef TensorInfo info, out
        cdef Py_ssize_t i
        arrays = [_unpacked_value(info) for info in cmd.inputs]
        cdef TensorInfo reuse = None
        if op.inplace_capable and len(cmd.outputs) == 1:
            reuse = self._inplace_candidate(cmd, cmd.outputs[0])
        if reuse is not None:
            # The op may write into the dying input's buffer (INPLACE_CAPABLE ops take `out=`),
            # where the product before it may have written its result already (its epilogue).
            if cmd.prefused and reuse is cmd.inputs[0]:
                result = reuse.value
            else:
                result = op.kernel(*arrays, out=reuse.value)
            if result is reuse.value:
                self._take_over(reuse, cmd.outputs[0], result)
                return 0
        elif cmd.epilogue is not None:
            epilogue = self._epilogue_of(cmd)
            result = op.kernel(*arrays) if epilogue is None else op.kernel(*arrays, epilogue=epilogue)
        else:
            result = op.kernel(*arrays)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(cmd.outputs):
            raise RuntimeError(f"kernel of {op!r} returned {len(result)} arrays, "
                               f"infer declared {len(cmd.outputs)}")
        for i in range(len(result)):
            out = cmd.outputs[i]
            r = result[i]
            if type(r) is not _ndarray:
                r = _np_asarray(r)
            if out.shape is None:       # value-dependent shape: known now
                out.shape = r.shape
                out.numel = _num_elements(out.shape)
                out.size = _nbytes_of(out.numel, out.dtype, out.packed)
            elif r.shape != out.shape:
                raise RuntimeError(f"kernel of {op!r} produced shape {r.shape}, "
                                   f"infer declared {out.shape}")
            if out.packed:
                r = _pack_4bit(r)
            if op.aliases_input:
                self._set_value(out, r, _shared_storage(r, cmd.inputs))
            else:
                self._set_value(out, r, None)
        return 0

    # ---- waiting for values

    cdef int wait_produced(self, TensorInfo info, str why="value") except -1:
        """Wait until `info` has a value or has failed; raise pending async errors."""
        self.check_usable()
        if _deferred: _place_waits([info])
        if info.status == ALLOCATED:
            if info.ready_seq == 0:       # its producer still sits in the buffer
                self._flush_buffer(0)
            self._wait_seq(info.ready_seq, why)
        self.raise_pending_errors()
        if info.status == INVALID:
            self._raise_unusable_input("read", info)
        if info.status == DELETED:
            raise RuntimeError("tensor was deleted")
        if info.status == DROPPED or info.status == SWAPPED:
            self.sync_quietly()           # the worker is idle now: restore on this thread
            self.mm.restore(info)
        return 0

    cpdef object get_value(self, TensorInfo info):
        """The value as users see it (4-bit unpacked); waits for the worker."""
        self.wait_produced(info)
        return _unpacked_value(info)

    cpdef object get_readonly_view(self, TensorInfo info):
        """A zero-copy read-only view of the value (a copy for packed 4-bit storage)."""
        self.wait_produced(info, "numpy()")
        if info.packed:
            return _unpacked_value(info)
        view = info.value.view()
        view.flags.writeable = False
        info.storage.exported = True   # never overwrite it in place from now on
        return view

    cpdef int sync(self) except -1:
        if self._state != 0:
            return 0
        if _deferred: _place_all_waits()
        self._flush_buffer(0)
        self._wait_seq(self._seq)
        self.raise_pending_errors()
        return 0

    cpdef int raise_pending_errors(self) except -1:
        cdef ErrorRecord rec
        if not self._errors:
            return 0
        rec = self._errors.pop(0)
        rec.raised = True
        raise AsyncError(rec.message) from rec.exc

    def sync_quietly(self):
        """Wait for every issued command without raising pending errors."""
        if self._state == 0:
            self._flush_buffer(0)
            self._wait_seq(self._seq)

    def close(self, bint quiet=False, bint discard=False):
        """Free every tensor and stop the worker. Idempotent. With `discard` (at exit, when
        nobody can read a result any more) queued commands are dropped, not run."""
        if self._state != 0:
            return
        thread = threading.current_thread()
        self._closed_by = ("the interpreter's exit" if discard else
                           f"imp.close() in thread {thread.name!r}"
                           + ("" if thread is threading.main_thread() else
                              ", not the main thread"))
        errors = None
        if discard:
            self._discarding = 1
            self._buffer = []
            self._pending = []
        else:
            try:
                self._flush_buffer(0)
                self._wait_seq(self._seq)
            except RuntimeError:
                pass
        errors = self._errors
        self._errors = []
        self._stop_worker()
        for info in self._table:
            if info is not None:
                self._free_value(info)
                (<TensorInfo>info).status = DELETED
        self._table = []
        self._free_handles.clear()
        self._live = 0
        self.mm.remove_swap_files()
        self._state = 1
        if errors and not quiet:
            rec = errors[0]
            raise AsyncError(rec.message) from rec.exc

    cdef void _stop_worker(self):
        if self._thread is None:
            return
        self._stopping = 1
        pthread_mutex_lock(&self._mutex)
        self._wake = 1
        pthread_cond_signal(&self._wake_cond)
        pthread_mutex_unlock(&self._mutex)
        if self._thread is not threading.current_thread():
            self._thread.join()

    def mark_forked(self):
        self._state = 2
        self._thread = None

    def stats(self):
        """Debug counters: live handles, queued commands, buffered commands."""
        return {"live_handles": self._live, "queued": self._seq - self._processed,
                "buffered": len(self._buffer), "pending_errors": len(self._errors)}


cdef object _infer_cached(OpDef op, list inputs):
    """op.infer, memoised on the inputs' descriptions (infer never looks at values)."""
    cdef TensorInfo info
    if op.value_dependent:
        return op.infer(tuple(inputs))
    key = []
    for info in inputs:
        if info.quantized:      # numpy ignores metadata in == and hash
            return op.infer(tuple(inputs))
        key.append(info.shape)
        key.append(info.dtype)
        key.append(info.device)
    key = tuple(key)
    descs = op._infer_cache.get(key)
    if descs is None:
        descs = op.infer(tuple(inputs))
        if len(op._infer_cache) >= 256:
            op._infer_cache.clear()
        op._infer_cache[key] = descs
    return descs


cdef inline bint _contains(list infos, object info):
    for x in infos:
        if x is info:
            return True
    return False


cdef Storage _shared_storage(object array, list inputs):
    """The input Storage that `array` is a view of, or None for a fresh array."""
    cdef TensorInfo info
    root = array
    while isinstance(root.base, _ndarray):
        root = root.base
    for info in inputs:
        if info.value is None:
            continue
        base = info.value
        while isinstance(base.base, _ndarray):
            base = base.base
        if base is root:
            return info.storage
    return None


cdef inline object _user_code(int* lasti):
    """The code object of the first frame outside this package (where the user's code
    issued an op), with its instruction offset in `*lasti`; the line is looked up only for
    a message. None when no such frame is near."""
    cdef PyFrameObject* frame = PyEval_GetFrame()
    cdef PyFrameObject* back
    cdef PyCodeObject* code
    cdef object found = None
    cdef int depth = 0
    while frame != NULL and depth < 16:
        code = PyFrame_GetCode(frame)
        if not PyUnicode_Tailmatch((<object>code).co_filename, _PACKAGE_DIR, 0, 1 << 30, -1):
            found = <object>code
            lasti[0] = PyFrame_GetLasti(frame)
            Py_DECREF(<PyObject*>code)
            break
        Py_DECREF(<PyObject*>code)
        back = PyFrame_GetBack(frame)
        if depth:
            Py_XDECREF(<PyObject*>frame)
        frame = back
        depth += 1
    if depth:
        Py_XDECREF(<PyObject*>frame)
    return found


cdef inline void _capture_site(Command cmd):
    cdef int lasti = 0
    cmd.site_code = _user_code(&lasti)
    cmd.site_line = lasti


cdef str _where(object code, int lasti):
    """`file:line` of an instruction offset in a code object."""
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{PyCode_Addr2Line(<PyCodeObject*>code, lasti)}"


cdef str _op_path(object scope, object op):
    """`block.linear.MatrixMul:0`: the scope path the op's first output is named by
    (imperative.scope imports this module, so it is found when needed)."""
    try:
        return sys.modules["imperative.scope"].op_path(scope, op)
    except Exception:               # a message must never fail the worker
        return repr(op)


@cython.final
cdef class OpSite:
    """Where an op was issued (its scope and file:line), captured at dispatch for a message
    about it later: an op of a backward rule that fails names the forward op it
    differentiates by this (`set_blame`)."""
    cdef readonly object op, scope, code
    cdef readonly int lasti

    def __str__(self):
        return f"{_op_path(self.scope, self.op)} issued at {_where(self.code, self.lasti)}"

    def __repr__(self):
        return f"<OpSite {self}>"


def op_site(op):
    """The OpSite of `op` being dispatched now (call it from the gradient hook)."""
    cdef OpSite site = OpSite.__new__(OpSite)
    site.op = op
    site.scope = _current_scope
    site.code = _user_code(&site.lasti)
    return site


cdef object _blame = None   # the OpSite a backward rule differentiates, while it dispatches


def set_blame(site):
    """Ops dispatched from now on are blamed on `site` (an OpSite, or None) in their error
    messages; returns the previous one, to restore."""
    global _blame
    previous, _blame = _blame, site
    return previous


cdef str _describe_failure(Command cmd, exc):
    cdef TensorInfo info
    inputs = ", ".join(f"{info.shape} {info.dtype}" for info in cmd.inputs)
    text = (f"op {cmd.op!r} ({_op_path(cmd.scope, cmd.op)}) failed on the worker: "
            f"{type(exc).__name__}: {exc} (inputs: [{inputs}]; issued at "
            f"{_where(cmd.site_code, cmd.site_line)}")
    if cmd.blame is not None:
        text += f"; in the backward of {cmd.blame}"
    return text + ")"


include "_memory.pxi"


# --------------------------------------------------------------------------- the process's channel

cdef Channel _channel = Channel()
_channel.mm = MemoryManager(_channel)


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
        _channel.mm.swap_out(info, "_swap_out()")


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
            "candidates": len(_channel.mm.candidates)}
cdef object _tensor_cls = None   # imperative.tensor.Tensor, set at its import


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


def set_tensor_class(cls):
    global _tensor_cls
    if not issubclass(cls, TensorBase):
        raise TypeError("the tensor class must derive from TensorBase")
    _tensor_cls = cls


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
    _channel.mm.peak_floor = 0


def _channel_stats():
    return _channel.stats()


# --------------------------------------------------------------------------- tensors

cdef tuple _EMPTY_TUPLE = ()


cdef inline TensorBase _wrap(TensorInfo info):
    """A new Tensor object for a record (every result goes through here)."""
    # Call the type's tp_new directly: `TensorBase.__new__(cls)` would look `__new__` up by name.
    cdef TensorBase t = <TensorBase>(<PyTypeObject*>_tensor_cls).tp_new(
        _tensor_cls, <PyObject*>_EMPTY_TUPLE, NULL)
    t._info = info
    t.name = ""
    info.tensor_refs += 1
    return t


def wrap_info(TensorInfo info):
    return _wrap(info)


cpdef tuple apply_infos(OpDef op, list infos):
    """Run `op` on records; returns new Tensors for its outputs."""
    cdef list outs = _channel.dispatch(op, infos)
    if len(outs) == 1:
        return (_wrap(outs[0]),)
    return tuple([_wrap(o) for o in outs])


def apply(op, *tensors):
    """Run one op on Tensors; returns a tuple of Tensors."""
    if not isinstance(op, OpDef):
        raise TypeError(f"apply expects an op (imperative.ops.*) first, got {type(op).__name__}")
    cdef list infos = []
    for t in tensors:
        if not isinstance(t, TensorBase):
            raise TypeError(f"op {type(op).__name__} expects Tensor inputs, got {type(t).__name__}")
        infos.append((<TensorBase>t)._info)
    return apply_infos(<OpDef>op, infos)


cdef object _promote = None       # imperative.dtype.dtype_promotion
cdef object _promote_pair = None  # imperative.dtype.promote_pair
cdef object _as_tensor_data = None  # tensor.py: converts user data to (array, dtype)


def set_dtype_rules(promote, promote_pair, as_tensor_data):
    global _promote, _promote_pair, _as_tensor_data
    _promote = promote
    _promote_pair = promote_pair
    _as_tensor_data = as_tensor_data


cdef object _BOOL = np.dtype(np.bool_)
cdef object _INT32 = np.dtype(np.int32)
cdef object _FLOAT32 = np.dtype(np.float32)


cdef inline int _category(object dtype):
    k = dtype.kind
    if k == "f":
        return 3
    if k == "i" or k == "u":
        return 2
    if k == "b":
        return 1
    return 0


cdef TensorInfo _scalar_info(object value, object dtype, Device device):
    """A resident 0-d constant for a Python scalar operand (no handle, never freed by Del)."""
    cdef TensorInfo info = TensorInfo.__new__(TensorInfo)
    info.handle = -1
    info.shape = ()
    info.dtype = dtype
    info.device = device
    info.size = dtype.itemsize
    try:
        info.value = np.array(value, dtype=dtype)
    except OverflowError:      # numpy's words for a Python int past 64 bits name no operand
        raise OverflowError(f"the scalar operand {value} does not fit {dtype}, the "
                            f"tensor's dtype") from None
    info.status = PRODUCED
    return info


cdef TensorInfo _cast_info(TensorInfo info, object dtype):
    """`info` converted to `dtype` through a TypeCvt op (used when operands' dtypes differ)."""
    if info.dtype is dtype or info.dtype == dtype:
        return info
    return _channel.dispatch(_typecvt_op(dtype), [info])[0]


cdef object _typecvt_op = None


def set_typecvt_factory(factory):
    global _typecvt_op
    _typecvt_op = factory


cdef list _binary_infos(object x, object y):
    """Operands of a binary operator as records of one promoted dtype."""
    cdef TensorInfo a, b
    if isinstance(x, TensorBase) and isinstance(y, TensorBase):
        a = (<TensorBase>x)._info
        b = (<TensorBase>y)._info
        if a.dtype is b.dtype:
            return [a, b]
        dt = _promote_pair(a.dtype, b.dtype)
        return [_cast_info(a, dt), _cast_info(b, dt)]
    if isinstance(x, TensorBase):
        return _tensor_and_other((<TensorBase>x)._info, y, False)
    return _tensor_and_other((<TensorBase>y)._info, x, True)


cdef list _tensor_and_other(TensorInfo a, object other, bint other_first):
    cdef TensorInfo b
    cdef int cat_scalar
    tp = type(other)
    if tp is float or tp is int or tp is bool:
        # Python scalars: the tensor's dtype wins unless the scalar's category is higher.
        cat_scalar = 3 if tp is float else (2 if tp is int else 1)
        if cat_scalar > _category(a.dtype):
            dt = _FLOAT32 if tp is float else (_INT32 if tp is int else _BOOL)
            a = _cast_info(a, dt)
        else:
            dt = a.dtype
        b = _scalar_info(other, dt, a.device)
    else:
        # numpy arrays/scalars and lists count as tensors in promotion (API.md section 5)
        arr, arr_dtype = _as_tensor_data(other, None)
        dt = _promote((a, arr))
        a = _cast_info(a, dt)
        b = _channel.put(arr.astype(dt, copy=False), tuple(arr.shape), dt, a.device)
    return [b, a] if other_first else [a, b]


cdef tuple _OPERAND_TYPES = (int, float, bool, np.ndarray, np.generic, list, tuple)


cdef object _binary(object x, object y, OpDef op, bint reflected):
    """Operator dispatch: `x op y` (or `y op x` when reflected)."""
    tp = type(y)
    if not (isinstance(y, TensorBase) or tp is float or tp is int or tp is bool):
        if y is None:
            raise TypeError(f"unsupported operand for {op!r}: None (expected a Tensor, array or number)")
        if not isinstance(y, _OPERAND_TYPES):
            return NotImplemented
    cdef TensorInfo fast
    if op.ufunc is not None and isinstance(y, TensorBase):
        fast = (_channel.host_ufunc(op, (<TensorBase>y)._info, (<TensorBase>x)._info) if reflected
                else _channel.host_ufunc(op, (<TensorBase>x)._info, (<TensorBase>y)._info))
        if fast is not None:
            return _wrap(fast)
    cdef list infos = _binary_infos(y, x) if reflected else _binary_infos(x, y)
    cdef list outs
    try:
        outs = _channel.dispatch(op, infos)
    finally:
        _release_temporaries(infos)
    return _wrap(outs[0])


cdef void _release_temporaries(list infos):
    """Operands created for this call only (numpy arrays) have no Tensor: release them."""
    cdef TensorInfo info
    for info in infos:
        if info.tensor_refs == 0 and info.handle >= 0 and info.status != DELETED:
            _channel.release(info)


cdef object _unary(object x, OpDef op):
    cdef TensorInfo fast
    if op.ufunc is not None:
        fast = _channel.host_ufunc(op, (<TensorBase>x)._info, None)
        if fast is not None:
            return _wrap(fast)
    cdef list outs = _channel.dispatch(op, [(<TensorBase>x)._info])
    return _wrap(outs[0])


# Ops used by the operators, filled by imperative.tensor at import. Module globals, not a
# dict: an operator call reads one pointer.
cdef OpDef _ADD, _SUB, _MUL, _TRUE_DIV, _FLOOR_DIV, _MOD, _POW, _AND, _OR, _XOR
cdef OpDef _EQ, _NE, _LT, _LEQ, _NEGATE, _ABS, _NOT, _MATMUL


def set_operator_ops(dict ops):
    global _ADD, _SUB, _MUL, _TRUE_DIV, _FLOOR_DIV, _MOD, _POW, _AND, _OR, _XOR
    global _EQ, _NE, _LT, _LEQ, _NEGATE, _ABS, _NOT, _MATMUL
    _ADD, _SUB, _MUL, _TRUE_DIV = ops["ADD"], ops["SUB"], ops["MUL"], ops["TRUE_DIV"]
    _FLOOR_DIV, _MOD, _POW = ops["FLOOR_DIV"], ops["MOD"], ops["POW"]
    _AND, _OR, _XOR = ops["AND"], ops["OR"], ops["XOR"]
    _EQ, _NE, _LT, _LEQ = ops["EQ"], ops["NE"], ops["LT"], ops["LEQ"]
    _NEGATE, _ABS, _NOT, _MATMUL = ops["NEGATE"], ops["ABS"], ops["NOT"], ops["MATMUL"]


cdef class TensorBase:
    """The fast part of imperative.Tensor: its record and its operators."""
    cdef TensorInfo _info
    cdef public object name          # user name
    cdef public object _grad_slot    # used by autodiff
    cdef object __weakref__

    __array_priority__ = 1000        # ndarray <op> Tensor defers to the Tensor

    def __dealloc__(self):
        cdef TensorInfo info = self._info
        if info is None:
            return
        info.tensor_refs -= 1
        if info.tensor_refs == 0 and _channel is not None:
            _channel.release(info)

    # ---- record access

    @property
    def _handle(self):
        return self._info.handle

    @property
    def _record(self):
        return self._info

    @property
    def shape(self):
        """The shape as a tuple; waits only for ops whose output shape depends on values."""
        cdef TensorInfo info = self._info
        if info.shape is None:
            _channel.wait_produced(info, "shape")
        return info.shape

    @property
    def dtype(self):
        return self._info.dtype

    @property
    def device(self):
        return self._info.device

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _num_elements(self.shape)

    def _value(self):
        """The value as a numpy array (waits for the worker; not a copy: do not write)."""
        return _channel.get_value(self._info)

    def numpy(self):
        """The value as a read-only numpy array (zero-copy where the storage allows)."""
        return _channel.get_readonly_view(self._info)

    def _use_cnt(self):
        return self._info.tensor_refs

    def _isscalar(self):
        return self._info.shape == ()

    def _share(self, TensorBase other):
        """Make this (fresh) object share `other`'s value."""
        if self._info is not None:
            raise RuntimeError("tensor already initialised")
        self._info = other._info
        self._info.tensor_refs += 1

    def _set_info_from(self, TensorBase other):
        """Rebind this tensor to `other`'s value (in-place operators, __setitem__, optimizer
        updates). The new value is persistent for the memory manager."""
        cdef TensorInfo old = self._info
        self._info = other._info
        self._info.tensor_refs += 1
        if _channel._memory_on:
            _channel.mm.make_persistent(self._info)
        if old is not None:
            old.tensor_refs -= 1
            if old.tensor_refs == 0:
                _channel.release(old)

    def _init_value(self, array, dtype, device):
        """Initialise from a runtime-owned array (already copied and converted)."""
        if self._info is not None:
            raise RuntimeError("tensor already initialised")
        _channel.check_usable()
        cdef TensorInfo info = _channel.put(array, tuple(array.shape), dtype, as_device(device))
        self._info = info
        info.tensor_refs += 1

    def _init_packed(self, packed, shape, dtype, device):
        """Initialise a 4-bit tensor from its packed bytes and logical shape."""
        _channel.check_usable()
        cdef TensorInfo info = _channel.put(packed, tuple(shape), dtype, as_device(device))
        self._info = info
        info.tensor_refs += 1

    # ---- operators

    def __add__(self, other):
        return _binary(self, other, _ADD, False)

    def __radd__(self, other):
        return _binary(self, other, _ADD, True)

    def __sub__(self, other):
        return _binary(self, other, _SUB, False)

    def __rsub__(self, other):
        return _binary(self, other, _SUB, True)

    def __mul__(self, other):
        return _binary(self, other, _MUL, False)

    def __rmul__(self, other):
        return _binary(self, other, _MUL, True)

    def __truediv__(self, other):
        return _binary(self, other, _TRUE_DIV, False)

    def __rtruediv__(self, other):
        return _binary(self, other, _TRUE_DIV, True)

    def __floordiv__(self, other):
        return _binary(self, other, _FLOOR_DIV, False)

    def __rfloordiv__(self, other):
        return _binary(self, other, _FLOOR_DIV, True)

    def __mod__(self, other):
        return _binary(self, other, _MOD, False)

    def __rmod__(self, other):
        return _binary(self, other, _MOD, True)

    def __pow__(self, other, mod=None):
        return _binary(self, other, _POW, False)

    def __rpow__(self, other, mod=None):
        return _binary(self, other, _POW, True)

    def __and__(self, other):
        return _binary(self, other, _AND, False)

    def __rand__(self, other):
        return _binary(self, other, _AND, True)

    def __or__(self, other):
        return _binary(self, other, _OR, False)

    def __ror__(self, other):
        return _binary(self, other, _OR, True)

    def __xor__(self, other):
        return _binary(self, other, _XOR, False)

    def __rxor__(self, other):
        return _binary(self, other, _XOR, True)

    def __eq__(self, other):
        return _binary(self, other, _EQ, False)

    def __ne__(self, other):
        return _binary(self, other, _NE, False)

    def __lt__(self, other):
        return _binary(self, other, _LT, False)

    def __le__(self, other):
        return _binary(self, other, _LEQ, False)

    def __gt__(self, other):
        return _binary(self, other, _LT, True)

    def __ge__(self, other):
        return _binary(self, other, _LEQ, True)

    def __matmul__(self, other):
        return _binary(self, other, _MATMUL, False)

    def __rmatmul__(self, other):
        return _binary(self, other, _MATMUL, True)

    def __neg__(self):
        return _unary(self, _NEGATE)

    def __pos__(self):
        return self

    def __abs__(self):
        return _unary(self, _ABS)

    def __invert__(self):
        return _unary(self, _NOT)

    def __hash__(self):
        return id(self) >> 4


include "_collective.pxi"
