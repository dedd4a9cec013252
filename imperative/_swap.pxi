# Included by _core.pyx: the swap side of the memory manager.
#
#   * a value leaves as the bytes its strides span and comes back with the same shape,
#     strides, dtype and writeability (so every later op reads it in the same order and
#     rounds the same; a 0-d value stays 0-d);
#   * files live in a private folder the runtime makes (mode 0700) in the swap folder, are
#     created exclusively without following links (mode 0600) and are the only things
#     removed: at close (so at exit), and on SIGTERM/SIGHUP, which would otherwise end the
#     process without running exit handlers;
#   * write and read bandwidth are measured (a small calibration, then every swap), so that
#     DTR swaps only where reading back is cheaper than recomputing on this machine.
#
# Swap runs under the GIL on the caller's thread or the worker; making the private folder
# and calibrating take locks, as the file system calls between check and act release it.
#
# SwapRate's and SwapSpace's fields and cdef methods are declared in imperative/_core.pxd
# (the memory manager holds a SwapSpace), each field with its owning thread.

import signal as _signal
import stat as _stat
import tempfile as _tempfile

_SWAP_SUFFIX = ".swap"
_CALIBRATION_BYTES = 4 << 20          # one write and one read, once per process
_CALIBRATION_SMALL_BYTES = 4096      # its time is taken as the fixed cost per file
cdef double _RATE_MIN_BYTES = 64 << 10  # smaller swaps are mostly fixed cost: not bandwidth
cdef double _RATE_DECAY = 0.8         # weight of the past in the bandwidth estimates
cdef int _O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
cdef int _O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


# ------------------------------------------------------------------ layout


@cython.final
cdef class SwapLayout:
    """How a swapped-out value is laid out: the byte span its strides cover (gaps
    included) and where its first element sits in that span."""
    cdef readonly tuple shape
    cdef readonly tuple strides
    cdef readonly object dtype
    cdef readonly Py_ssize_t offset     # bytes from the span's start to element [0, ..., 0]
    cdef readonly Py_ssize_t nbytes     # the span: the file's size
    cdef readonly bint writeable


cdef SwapLayout _layout_of(object value):
    cdef SwapLayout layout = SwapLayout.__new__(SwapLayout)
    cdef Py_ssize_t low = 0, high = 0, extent
    layout.shape = value.shape
    layout.strides = value.strides
    layout.dtype = value.dtype
    layout.writeable = value.flags.writeable
    if value.size:
        for n, stride in zip(value.shape, value.strides):
            extent = stride * (n - 1)
            if extent < 0:
                low += extent
            else:
                high += extent
        high += value.itemsize
    layout.offset = -low
    layout.nbytes = high - low
    return layout


class _SpanBytes:
    """The bytes a value's strides span, as an array interface numpy can view: lets a
    strided value (gaps, negative strides, an offset into a larger buffer) be written
    without copying it into another layout."""

    def __init__(self, value, SwapLayout layout):
        start = value.__array_interface__["data"][0] - layout.offset
        self.__array_interface__ = {"data": (start, True), "shape": (layout.nbytes,),
                                    "typestr": "|u1", "version": 3}
        self.base = value           # keeps the memory alive while it is viewed


cdef object _span_of(object value, SwapLayout layout):
    if layout.nbytes == 0:
        return np.empty(0, np.uint8)
    return np.asarray(_SpanBytes(value, layout))


cdef object _value_from_span(object span, SwapLayout layout):
    value = np.ndarray(layout.shape, layout.dtype, buffer=span, offset=layout.offset,
                       strides=layout.strides)
    if not layout.writeable:
        value.flags.writeable = False
    return value


# ------------------------------------------------------------------ files


cdef object _swap_error(object e, str what):
    """`what` failed because of OSError `e`: the same kind of error (FileExistsError, ...),
    saying what failed and why. Some OSErrors (ours, numpy's short writes) carry no errno
    or strerror: their message is the reason."""
    if e.errno and e.strerror:
        return type(e)(e.errno, f"{what}: {e.strerror}")
    return OSError(f"{what}: {e}")


cdef double _write_file(str path, object span) except -1:
    """Create `path` (it must not exist; a link there is not followed) and write `span`.
    Returns the seconds it took. On error the partial file is removed."""
    cdef long long t0 = _now_ns()
    cdef bint written = False
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600)
    try:
        view = memoryview(span).cast("B")
        done = 0
        while done < len(view):
            done += os.write(fd, view[done:])
        written = True
    finally:
        os.close(fd)
        if not written:
            _unlink_quietly(path)
    return (_now_ns() - t0) * 1e-9


cdef double _read_file(str path, object span) except -1:
    """Fill `span` from `path`, which must be a regular file of exactly its size.
    Returns the seconds it took."""
    cdef long long t0 = _now_ns()
    fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            raise OSError("not a regular file")
        if st.st_size != len(span):
            raise OSError(f"the file holds {st.st_size} bytes, expected {len(span)}")
        view = memoryview(span).cast("B")
        done = 0
        while done < len(view):
            n = os.readv(fd, [view[done:]])
            if n == 0:
                raise OSError(f"the file ended after {done} bytes, expected {len(view)}")
            done += n
    finally:
        os.close(fd)
    return (_now_ns() - t0) * 1e-9


cdef void _unlink_quietly(str path):
    try:
        os.unlink(path)
    except OSError:
        pass


cdef void _release_swap_file(TensorInfo info):
    """The value in `info`'s swap file is back, or will never be read: remove the file
    and its count on the device."""
    if info.swap_path is not None:
        _unlink_quietly(info.swap_path)
        info.swap_path = None
        (<Device>info.device).stats.swapped -= info.size


# ------------------------------------------------------------------ bandwidth


cdef class SwapRate:
    """One direction's cost: a fixed cost per file (opening, closing: measured once, with
    a small file) plus bytes at a running bandwidth (decayed sums of bytes and of the
    seconds beyond the fixed cost, so that each swap counts by its size)."""

    cdef void add(self, double nbytes, double seconds):
        if nbytes < _RATE_MIN_BYTES:
            return                      # (its time is the fixed cost, and noise)
        self.nbytes = self.nbytes * _RATE_DECAY + nbytes
        self.seconds = self.seconds * _RATE_DECAY + max(seconds - self.overhead, seconds / 2)

    cdef double per_s(self):
        return self.nbytes / self.seconds if self.seconds > 0 else 0.0

    cdef double seconds_for(self, double nbytes):
        return self.overhead + nbytes / self.per_s()


# ------------------------------------------------------------------ the private folders


cdef class SwapSpace:
    """Where swap files go: a private folder made in the chosen swap folder (or a fresh
    temporary folder when none is chosen), and the measured bandwidth to it."""

    def __cinit__(self):
        self.folders = {}
        self.lock = threading.Lock()
        self.calibration_lock = threading.Lock()
        self.pid = os.getpid()
        self.write_rate = SwapRate()
        self.read_rate = SwapRate()

    def choose(self, path):
        """The swap folder from now on (None: a fresh temporary folder). Values swapped
        out earlier stay where they are."""
        if path is not None:
            if not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"swap_dir must be a path (str or os.PathLike) or None, got "
                                f"{type(path).__name__} {path!r}")
            path = os.fspath(path)
            if not isinstance(path, str) or not path:
                raise ValueError(f"swap_dir must be a non-empty folder path, got {path!r}")
            path = os.path.abspath(path)
        self.chosen = path
        self.calibration_error = None

    def shown(self):
        """What `imp.dtr.swap_dir` reads: the chosen folder, else the temporary one."""
        return self.chosen if self.chosen is not None else self.folder()

    def folder(self):
        """The private folder for the chosen swap folder, made once (several threads may
        swap out for the first time at once)."""
        parent = self.chosen
        made = self.folders.get(parent)
        if made is not None:
            return made
        with self.lock:
            made = self.folders.get(parent)
            if made is None:
                if parent is not None:
                    os.makedirs(parent, exist_ok=True)
                made = _tempfile.mkdtemp(prefix=f"imperative-swap-{os.getpid()}-", dir=parent)
                self.folders[parent] = made
        guard_signals(self)
        return made

    def new_path(self):
        self.serial += 1
        cdef long long mine = self.serial      # (before folder() lets another thread run)
        return os.path.join(self.folder(), f"{mine}{_SWAP_SUFFIX}")

    def remove_all(self):
        """Remove the swap files and the private folders (never anything else). Runs at
        close and from signal handlers: takes no lock."""
        if os.getpid() != self.pid:
            return
        for folder in list(self.folders.values()):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if name.endswith(_SWAP_SUFFIX):
                    _unlink_quietly(os.path.join(folder, name))
            try:
                os.rmdir(folder)
            except OSError:
                pass
        self.folders.clear()

    cdef int calibrate(self) except -1:
        """Seed the bandwidth estimates with one small write and read in the private folder
        (once per process). False when swapping cannot work here."""
        if self.calibrated:
            return True
        with self.calibration_lock:          # (several threads may swap first at once)
            if not self.calibrated and self.calibration_error is None:
                self.calibrate_now()
        return self.calibrated

    cdef int calibrate_now(self) except -1:
        """Time a small file (the fixed cost per file) and a few MiB (the bandwidth)."""
        small = large = None
        try:
            small, large = self.new_path(), self.new_path()
            data = np.zeros(_CALIBRATION_SMALL_BYTES, dtype=np.uint8)
            self.write_rate.overhead = _write_file(small, data)
            self.read_rate.overhead = _read_file(small, data)
            data = np.arange(_CALIBRATION_BYTES, dtype=np.uint8)
            self.write_rate.add(_CALIBRATION_BYTES, _write_file(large, data))
            self.read_rate.add(_CALIBRATION_BYTES, _read_file(large, data))
        except OSError as e:
            self.calibration_error = e
            return 0
        finally:
            for path in (small, large):
                if path is not None:
                    _unlink_quietly(path)
        self.calibrated = True
        return 0

    cdef double seconds_to_swap(self, Py_ssize_t nbytes):
        """Estimated seconds to write `nbytes` out and read them back."""
        return self.write_rate.seconds_for(nbytes) + self.read_rate.seconds_for(nbytes)

    def rates(self):
        return {"swap_write_bytes_per_s": self.write_rate.per_s(),
                "swap_read_bytes_per_s": self.read_rate.per_s(),
                "swap_write_seconds_per_file": self.write_rate.overhead,
                "swap_read_seconds_per_file": self.read_rate.overhead}


# ------------------------------------------------------------------ signals


_SIGNALS_TO_GUARD = tuple(getattr(_signal, name) for name in ("SIGTERM", "SIGHUP")
                          if hasattr(_signal, name))
cdef set _guarded = set()              # the signals whose default action we took over
cdef SwapSpace _guarded_space = None   # whose files the handler removes


def guard_signals(SwapSpace space):
    """SIGTERM and SIGHUP end a process without exit handlers, which would leave the swap
    files behind: clean up first. Only from the main thread (Python's rule), once per
    signal, and only over the default action: an ignored signal ends nothing, and a
    handler of the user's decides itself (if it exits, close() at exit removes the files;
    if the process goes on, its swapped values still need their files). A handler the
    user installs later and that calls the one it replaced reaches ours."""
    global _guarded_space
    if threading.current_thread() is not threading.main_thread():
        return
    _guarded_space = space
    for signum in _SIGNALS_TO_GUARD:
        if signum not in _guarded and _signal.getsignal(signum) is _signal.SIG_DFL:
            _guarded.add(signum)
            _signal.signal(signum, _clean_up_and_die)


def _clean_up_and_die(signum, frame):
    """Remove the swap files, then let the signal take its default course."""
    if _guarded_space is not None:
        _guarded_space.remove_all()
    _guarded.discard(signum)
    _signal.signal(signum, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)
