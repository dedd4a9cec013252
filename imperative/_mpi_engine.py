"""The MPI side of imperative.distributed: one thread per process that starts the
non-blocking collectives in issue order and drives them to completion, the descriptors that
catch mismatched calls, and the heartbeats and failure notices that name a failed rank."""
from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections import deque

import numpy as np

from . import _core

_OPS = ("sum", "mean", "max", "min")
_KINDS = ("all_reduce", "broadcast", "all_gather", "barrier")
_DESC_LEN = 16                    # kind, op, root, dtype code, ndim, dims...
_MAX_DIMS = _DESC_LEN - 6
_TOKEN = (8,)                     # the start's output: 8 elements, so never "tiny" (the core
                                  # runs ops of <= 7 elements on the caller's thread)
_TAG_FAIL, _TAG_BEAT = 11, 12
_LINGER_S = 10.0       # the most a failing rank waits for the others to raise (linger_for_peers)
_DEFAULT_BUCKET = 25 << 20


# How long the MPI thread polls without naps while a worker waits: the end of a step's
# all-reduce takes milliseconds here; past that a peer is behind, and naps leave the cores
# to it (with more ranks than cores, a spinning thread would slow the rank it waits for).
_SPIN_S = 0.01


def _timeout():
    text = os.environ.get("IMPERATIVE_DIST_TIMEOUT", "300")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"IMPERATIVE_DIST_TIMEOUT must be a number of seconds, "
                         f"got {text!r}") from None
    if not value > 0:
        raise ValueError(f"IMPERATIVE_DIST_TIMEOUT must be > 0, got {text!r}")
    return value


class _Job:
    __slots__ = ("seq", "kind", "op", "root", "desc", "shape", "dtype", "buf", "ready", "done",
                 "error", "stage", "req", "descs", "issued", "t_ready", "t_start", "t_data",
                 "t_end", "nbytes", "__weakref__")

    def __init__(self, seq, kind, op, root, shape, dtype):
        self.seq, self.kind, self.op, self.root = seq, kind, op, root
        self.shape, self.dtype = shape, dtype
        self.buf = None
        self.ready = False          # the worker ran the start (buf is filled)
        self.t_ready = None
        self.done = threading.Event()
        self.error = None
        self.stage = 0
        self.req = None
        self.issued = time.monotonic()
        self.t_start = self.t_data = self.t_end = None
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        d = np.zeros(_DESC_LEN, np.int64)
        d[0] = _KINDS.index(kind)
        d[1] = _OPS.index(op) if op in _OPS else -1
        d[2] = root
        d[3] = _dtype_code(dtype)
        d[4] = len(shape)
        if len(shape) <= _MAX_DIMS:
            d[5:5 + len(shape)] = shape
        else:                       # fold the rest: the element count still has to agree
            d[5:5 + _MAX_DIMS - 1] = shape[:_MAX_DIMS - 1]
            d[4 + _MAX_DIMS] = int(np.prod(shape[_MAX_DIMS - 1:]))
        d[_DESC_LEN - 1] = seq
        self.desc = d

    @property
    def name(self):
        return f"{self.kind} #{self.seq}"


_DTYPES = [np.dtype(t) for t in ("float32", "float16", "int32", "int8", "uint8", "int16",
                                  "uint16", "bool")]


def _dtype_code(dtype):
    dtype = np.dtype(dtype)
    for i, d in enumerate(_DTYPES):
        if d == dtype:
            return i
    return 99


def _describe(desc):
    kind = _KINDS[int(desc[0])] if 0 <= desc[0] < len(_KINDS) else f"kind {desc[0]}"
    ndim = int(desc[4])
    dims = tuple(int(x) for x in desc[5:5 + min(ndim, _MAX_DIMS)])
    dtype = _DTYPES[int(desc[3])].name if 0 <= desc[3] < len(_DTYPES) else "?"
    text = f"{kind} of shape {dims} {dtype}"
    if kind == "all_reduce":
        text += f" op={_OPS[int(desc[1])]!r}"
    elif kind == "broadcast":
        text += f" root={int(desc[2])}"
    return text


class _Engine:
    """This process's MPI side: one thread starts and completes every collective, in the
    order the worker hands them over (the issue order, the same on every rank)."""

    def __init__(self, MPI):
        self.MPI = MPI
        world = MPI.COMM_WORLD
        self.rank, self.size = world.Get_rank(), world.Get_size()
        # A mean over a power-of-two number of ranks is scaled as the buffer is packed: x / 2^k
        # is exact (but in a subnormal's last bit), so the sum of the scaled values is the
        # scaled sum, and the pass that divided the reduced buffer goes (29 MB a step for the
        # bench MLP's gradients). None: divide after the sum.
        self.mean_scale = 1.0 / self.size if self.size & (self.size - 1) == 0 else None
        # separate communicators: descriptors, data and control each keep their own order
        self.data = world.Dup()
        self.head = world.Dup()
        self.ctl = world.Dup()
        for c in (self.data, self.head, self.ctl):
            c.Set_errhandler(MPI.ERRORS_RETURN)
        self.timeout = _timeout()
        self.beat = min(1.0, self.timeout / 10)
        me = (socket.gethostname(), os.getpid())
        self.peers = world.allgather(me)
        self.lock = threading.Condition()
        self.jobs = deque()          # issued, not finished, in sequence order
        self.seq = 0                 # [caller] last issued
        self.finished = 0            # [thread] last completed (data) on this rank
        self.failed = {}             # rank -> why it is gone
        self.last_seen = {r: time.monotonic() for r in range(self.size)}
        self.peer_finished = {r: 0 for r in range(self.size)}
        self.sends = []
        self.stop = False
        self.comm_seconds = 0.0      # data phase: from start to completion, summed
        self.blocked_seconds = 0.0   # worker time spent in waits
        self.bytes = 0
        self.waiters = 0             # workers blocked in wait(): poll without naps ...
        self.waiting_since = 0.0     # ... for _SPIN_S from the first one's start
        self.thread = threading.Thread(target=self._main, name="imperative-mpi", daemon=True)
        self.thread.start()

    # ---- caller side

    def issue(self, kind, op, root, shape, dtype):
        with self.lock:
            self.seq += 1
            job = _Job(self.seq, kind, op, root, tuple(shape), dtype)
            self.jobs.append(job)
            return job

    def ready(self, job, buf):
        """Worker: the start command ran; `buf` is the send/receive buffer."""
        with self.lock:
            job.buf = buf
            job.ready = True
            job.t_ready = time.monotonic()
            self.lock.notify()

    def wait(self, job):
        """Worker: block (GIL released) until `job` has completed; raise its error."""
        t0 = time.perf_counter()
        with self.lock:
            if not self.waiters:
                self.waiting_since = time.monotonic()
            self.waiters += 1
            self.lock.notify()
        try:
            while not job.done.wait(0.5):
                if not self.thread.is_alive():
                    raise RuntimeError(f"{job.name}: the MPI thread of rank {self.rank} died")
        finally:
            with self.lock:
                self.waiters -= 1
        self.blocked_seconds += time.perf_counter() - t0
        if job.error is not None:
            raise job.error
        return job.buf

    # ---- the thread

    def _main(self):
        nap = 1e-3
        next_beat = 0.0
        try:
            while True:
                with self.lock:
                    if self.stop:
                        return
                    busy = any(j.ready for j in self.jobs)
                    if not busy:
                        self.lock.wait(self.beat if not self.jobs else min(self.beat, 0.01))
                progressed = self._progress()
                now = time.monotonic()
                if now >= next_beat:
                    self._heartbeat()
                    next_beat = now + self.beat
                self._read_control()
                self._check_timeouts(now)
                if progressed:
                    nap = 2e-5
                elif self.waiters and now - self.waiting_since < _SPIN_S:
                    time.sleep(0)
                elif self.jobs:
                    time.sleep(nap)
                    nap = min(nap * 2, 1e-3)
        except BaseException as exc:     # never leave a waiter hanging
            with self.lock:
                for job in self.jobs:
                    self._fail(job, RuntimeError(f"{job.name}: the MPI thread of rank "
                                                 f"{self.rank} failed: {exc!r}"))

    def _progress(self):
        """Start and test the jobs at the head of the queue, in order; True when something
        moved. Descriptors (on `head`) start as soon as a job is ready; data (on `data`)
        start in sequence order, each after its descriptors matched on every rank."""
        moved = False
        with self.lock:
            jobs = list(self.jobs)
        in_order = True                  # every earlier job's data has started
        for job in jobs:
            if not job.ready:
                break
            if job.done.is_set():
                continue
            if job.stage == 0:
                if self._check_peers_before(job):
                    moved = True
                    continue
                job.descs = np.empty((self.size, _DESC_LEN), np.int64)
                job.req = self.head.Iallgather(job.desc, job.descs)
                job.t_start = time.perf_counter()
                job.stage = 1
                moved = True
            if job.stage == 1 and job.req.Test():
                moved = True
                bad = [r for r in range(self.size)
                       if not np.array_equal(job.descs[r, :-1], job.desc[:-1])]
                if bad:           # every rank sees the same descriptors: all fail it
                    r = bad[0]
                    self._finish(job, ValueError(
                        f"{job.name}: ranks disagree: rank {self.rank} issued "
                        f"{_describe(job.desc)}, rank {r} issued {_describe(job.descs[r])}"),
                        counts=True)
                    continue
                job.stage = 2
            if job.stage == 2 and in_order:
                job.t_data = time.perf_counter()
                job.req = self._start_data(job)
                job.stage = 3
                moved = True
            if job.stage == 3:
                if job.req is None or job.req.Test():
                    moved = True
                    self._complete(job)
            else:
                in_order = False
        return moved

    def _complete(self, job):
        if job.kind == "all_reduce" and job.op == "mean" and self.mean_scale is None:
            np.divide(job.buf, self.size, out=job.buf, casting="unsafe")
        job.t_end = time.perf_counter()
        seconds = job.t_end - job.t_data
        self.comm_seconds += seconds
        self.bytes += job.nbytes
        _core.record_comm_slice(_core.now_ns() - int(seconds * 1e9),
                                f"MPI {job.name} {job.nbytes / 1e6:.2f} MB")
        self._finish(job, None, counts=True)

    def _start_data(self, job):
        MPI = self.MPI
        buf = job.buf
        if job.kind == "all_reduce":
            op = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[job.op]
            return self.data.Iallreduce(MPI.IN_PLACE, buf, op=op)
        if job.kind == "broadcast":
            return self.data.Ibcast(buf, root=job.root)
        if job.kind == "all_gather":
            return self.data.Iallgather(MPI.IN_PLACE, buf)
        return None          # barrier: the descriptor exchange was one

    def _finish(self, job, error, counts=False):
        """`job` is over (`error` None: completed). `counts`: it completed on every rank."""
        with self.lock:
            job.error = error
            if job in self.jobs:
                self.jobs.remove(job)
            if counts:
                self.finished = max(self.finished, job.seq)
        job.done.set()

    def _check_peers_before(self, job):
        """Fail `job` at once when a rank it needs is known to be gone."""
        for r, why in self.failed.items():
            if self.peer_finished[r] < job.seq:
                self._finish(job, RuntimeError(f"{job.name} cannot complete: rank {r} {why}"))
                return True
        return False

    # ---- failures

    def _heartbeat(self):
        MPI = self.MPI
        msg = np.array([self.finished], np.int64).tobytes()
        self.sends = [s for s in self.sends if not s[0].Test()]
        if len(self.sends) > 64 * self.size:
            return                         # a peer is not reading: do not pile up
        for r in range(self.size):
            if r != self.rank and r not in self.failed:
                self.sends.append((self.ctl.Isend([msg, MPI.BYTE], dest=r, tag=_TAG_BEAT), msg))
        host = socket.gethostname()
        for r, (peer_host, pid) in enumerate(self.peers):
            if r != self.rank and r not in self.failed and peer_host == host \
                    and not _process_alive(pid):
                self._peer_failed(r, f"(pid {pid} on {peer_host}) is no longer running "
                                     "(killed?)")

    def _read_control(self):
        MPI = self.MPI
        status = MPI.Status()
        while self.ctl.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
            src, tag, count = status.Get_source(), status.Get_tag(), status.Get_count(MPI.BYTE)
            data = bytearray(count)
            self.ctl.Recv([data, MPI.BYTE], source=src, tag=tag)
            self.last_seen[src] = time.monotonic()
            if tag == _TAG_BEAT:
                self.peer_finished[src] = int(np.frombuffer(bytes(data), np.int64)[0])
            elif tag == _TAG_FAIL:
                done = int(np.frombuffer(bytes(data[:8]), np.int64)[0])
                self.peer_finished[src] = done
                self._peer_failed(src, bytes(data[8:]).decode("utf-8", "replace"))

    def _peer_failed(self, r, why):
        if r in self.failed:
            return
        self.failed[r] = why
        with self.lock:
            jobs = list(self.jobs)
        for job in jobs:           # those rank r had not completed can never complete
            if self.peer_finished[r] < job.seq:
                self._finish(job, RuntimeError(f"{job.name} cannot complete: rank {r} {why}"))

    def _check_timeouts(self, now):
        with self.lock:
            job = self.jobs[0] if self.jobs else None
        if job is None or not job.ready:
            return
        waited = now - job.t_ready
        if waited < self.timeout:
            return
        behind = [r for r in range(self.size)
                  if r != self.rank and self.peer_finished[r] < job.seq]
        parts = []
        for r in behind:
            silent = now - self.last_seen[r]
            if silent > self.timeout / 2:
                parts.append(f"rank {r} (no sign of life for {silent:.0f} s: killed or hung?)")
            else:
                parts.append(f"rank {r} (alive, but it has not joined: still computing, or "
                             "it issued different collectives)")
        who = ", ".join(parts) if parts else "another rank"
        self._finish(job, RuntimeError(
            f"{job.name} did not complete within IMPERATIVE_DIST_TIMEOUT={self.timeout:g} s "
            f"on rank {self.rank}: waiting for {who}"))

    def notify_failure(self, text):
        """Tell every other rank that this one fails (from the excepthook)."""
        MPI = self.MPI
        payload = np.array([self.finished], np.int64).tobytes() + \
            f"failed: {text}"[:2000].encode("utf-8", "replace")
        reqs = []
        for r in range(self.size):
            if r != self.rank and r not in self.failed:
                try:
                    reqs.append(self.ctl.Isend([payload, MPI.BYTE], dest=r, tag=_TAG_FAIL))
                except Exception:
                    pass
        deadline = time.monotonic() + 1.0
        while reqs and time.monotonic() < deadline:
            reqs = [q for q in reqs if not q.Test()]
            time.sleep(1e-3)

    def linger_for_peers(self):
        """After notify_failure, before this process exits: give the other ranks up to
        _LINGER_S to raise their own errors, which name this rank. The launcher (MPICH's
        mpiexec) kills every rank once one exits with an error, and a rank already waiting
        in a collective was killed before it could raise about one time in three (its
        error never written). Peers on this host are watched until their processes are
        gone; the wait for those on other hosts is the whole linger. A rank known to have
        failed is not waited for: it may be lingering for this one."""
        host = socket.gethostname()
        others = [(peer_host, pid) for r, (peer_host, pid) in enumerate(self.peers)
                  if r != self.rank and r not in self.failed]
        deadline = time.monotonic() + min(_LINGER_S, self.timeout)
        while time.monotonic() < deadline:
            if all(peer_host == host and not _process_alive(pid)
                   for peer_host, pid in others):
                return
            time.sleep(0.01)


def _process_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:                           # a zombie (killed, not reaped yet) is gone too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _excepthook(previous, current_engine):
    """sys.excepthook that, after `previous`, tells the other ranks this one failed."""
    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        engine = current_engine()
        if engine is not None and not issubclass(exc_type, SystemExit):
            try:
                engine.notify_failure(f"{exc_type.__name__}: {exc}")
                engine.linger_for_peers()
            except Exception:
                pass
            # MPI_Finalize could wait forever for collectives the failed run left behind
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
    return hook
