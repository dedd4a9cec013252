"""Data-parallel training over MPI (API.md §10): `init`, rank and size, collectives as
interpreter commands, `make_allreduce_cb` for `GradManager`, `shard`.

    mpiexec -n 2 python train.py

A collective is two commands on the worker thread. The start command (issued at the call)
copies its input into a send/receive buffer and hands it to this process's MPI thread, which
starts the non-blocking MPI collective (`Iallreduce`, `Ibcast`, `Iallgather`, `Ibarrier`)
in issue order and drives it to completion, sleeping between tests (MPICH's blocking waits
would spin a core that the computation needs). The wait command, which produces the result,
is issued only when something first reads the result (an op, `numpy()`, `sync()`): until
then the worker goes on computing. The wait blocks the worker with the GIL released.

Before its data, every collective exchanges a small descriptor (kind, shape, dtype, op,
root) so that mismatched calls across ranks are an error naming both sides, never a hang or
silently wrong values. Heartbeats and failure notices travel on a separate communicator: a
rank that dies of an uncaught exception tells the others, which raise a RuntimeError naming
it; a rank killed or hung is named after IMPERATIVE_DIST_TIMEOUT seconds (default 300) at
most, sooner when it ran on this host and its process is gone.
"""
from __future__ import annotations

import atexit
import sys
import weakref

import numpy as np

from . import _core
from ._mpi_engine import (_DEFAULT_BUCKET, _DTYPES, _OPS, _TOKEN, _Engine, _dtype_code,
                          _excepthook)
from .ops.base import Op
from .tensor import Tensor

__all__ = ["init", "is_initialized", "get_rank", "get_world_size", "all_reduce", "broadcast",
           "all_gather", "barrier", "make_allreduce_cb", "shard", "broadcast_parameters",
           "comm_stats"]

_engine = None


# --------------------------------------------------------------------------- public API

def init():
    """Start MPI (COMM_WORLD) and this process's MPI thread; idempotent."""
    global _engine
    if _engine is not None:
        return
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("imperative.distributed needs mpi4py and an MPI library: "
                           "pip install 'imperative[mpi]'") from e
    _engine = _Engine(MPI)
    sys.excepthook = _excepthook(sys.excepthook, lambda: _engine)
    atexit.register(_shutdown)


def _shutdown():
    engine = _engine
    if engine is None:
        return
    try:
        _core.sync()
    except Exception:
        pass
    with engine.lock:
        engine.stop = True
        engine.lock.notify()
    engine.thread.join(5)


def is_initialized():
    return _engine is not None


def get_rank():
    """This process's rank in COMM_WORLD (0 before init)."""
    return _engine.rank if _engine is not None else 0


def get_world_size():
    """The number of processes (1 before init)."""
    return _engine.size if _engine is not None else 1


def _require():
    if _engine is None:
        raise RuntimeError("imperative.distributed: call imperative.distributed.init() first "
                           "(and start the program with mpiexec -n N)")
    return _engine


def _check_tensor(t, fn):
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: t must be a Tensor, got {type(t).__name__}")
    if _dtype_code(t.dtype) == 99 or t.dtype.metadata is not None:
        raise TypeError(f"{fn}: t has dtype {t.dtype}, which MPI collectives here do not "
                        f"support (use one of {[d.name for d in _DTYPES]})")


class _CollectiveOp(Op):
    """One of the two commands of collective number `seq` (identity-hashed: never merged
    with another's in the op cache)."""
    RECOMPUTABLE = False
    _fields = ("kind", "seq")
    _part = ""

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    @property
    def name(self):
        return f"{self.kind}.{self._part}"


class _Start(_CollectiveOp):
    """Copies the inputs into the job's buffer and hands it to the MPI thread."""
    _part = "start"

    def __init__(self, job, pack):
        self._set(kind=job.kind, seq=job.seq, job=job, pack=pack)

    def infer(self, inputs):
        return ((_TOKEN, np.dtype(np.int64)),)

    def kernel(self, *arrays):
        _engine.ready(self.job, self.pack(*arrays))
        return np.full(_TOKEN, self.seq, np.int64)


class _Wait(_CollectiveOp):
    """Waits for the job; its outputs are views of the buffer."""
    _part = "wait"

    def __init__(self, job, unpack, outs):
        self._set(kind=job.kind, seq=job.seq, job=job, unpack=unpack, outs=outs)

    def infer(self, inputs):
        raise RuntimeError("a collective's wait is issued by imperative.distributed only")

    def kernel(self, token):
        buf = _engine.wait(self.job)
        return tuple(self.unpack(buf)[i] for i in self.outs)


def _collective(kind, inputs, op, root, shape, dtype, pack, unpack, out_descs):
    """Issue the start now; return the results, whose wait is issued on first need."""
    engine = _require()
    job = engine.issue(kind, op, root, shape, dtype)
    (token,) = _core.apply(_Start(job, pack), *inputs) if inputs else \
        _core.apply(_Start(job, pack), Tensor(np.zeros(_TOKEN, np.int64)))
    results, records = [], []
    device = inputs[0].device if inputs else _core.get_default_device()
    for (shape_, dtype_) in out_descs:
        t, rec = _core.deferred_result(tuple(shape_), dtype_, device, lambda: place())
        results.append(t)
        records.append(weakref.ref(rec))

    def place():
        live = _live(records)
        if live:
            _core.issue_into(_Wait(job, unpack, [i for i, _ in live]), [token],
                             [r for _, r in live])
    return results


def _live(refs):
    """(index, record) of the records still needed (alive, not deleted)."""
    out = []
    for i, ref in enumerate(refs):
        rec = ref()
        if rec is not None and _core.tensor_status_of(rec) != "DELETED":
            out.append((i, rec))
    return out


def all_reduce(t, op="sum"):
    """The elementwise sum (mean, max, min) of `t` over all ranks, as a new Tensor."""
    _check_tensor(t, "all_reduce")
    if op not in _OPS:
        raise ValueError(f"all_reduce: op must be one of {list(_OPS)}, got {op!r}")
    if op == "mean" and t.dtype.kind != "f":
        raise TypeError(f"all_reduce: op='mean' needs a float tensor, got dtype {t.dtype}")
    shape, dtype = t.shape, t.dtype

    def pack(a):
        buf = np.empty(shape, dtype)
        _pack_into(buf, a, op)
        return buf
    (r,) = _collective("all_reduce", [t], op, 0, shape, dtype, pack, lambda buf: (buf,),
                       [(shape, dtype)])
    return r


def _pack_into(dst, a, op):
    """Copy `a` into the all-reduce buffer `dst`, scaled already for a mean over a
    power-of-two number of ranks (see _Engine.mean_scale)."""
    scale = _engine.mean_scale if op == "mean" else None
    if scale is None or scale == 1.0:
        dst[...] = a
    else:
        np.multiply(a, dst.dtype.type(scale), out=dst)


def broadcast(t, root=0):
    """Rank `root`'s value of `t`, on every rank, as a new Tensor."""
    _check_tensor(t, "broadcast")
    size = get_world_size()
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ValueError(f"broadcast: root must be a rank in [0, {size}), got {root!r}")
    shape, dtype = t.shape, t.dtype
    (r,) = _collective("broadcast", [t], None, int(root), shape, dtype,
                       lambda a: np.array(a, dtype=dtype, order="C", copy=True),
                       lambda buf: (buf,), [(shape, dtype)])
    return r


def all_gather(t):
    """Every rank's `t`, stacked on a new axis 0 (rank order)."""
    _check_tensor(t, "all_gather")
    engine = _require()
    shape, dtype, n, me = t.shape, t.dtype, engine.size, engine.rank

    def pack(a):
        buf = np.empty((n,) + tuple(shape), dtype)
        buf[me] = a
        return buf
    (r,) = _collective("all_gather", [t], None, 0, shape, dtype, pack, lambda buf: (buf,),
                       [((n,) + tuple(shape), dtype)])
    return r


def barrier():
    """Wait until every rank has reached its barrier (this rank's issued work included)."""
    engine = _require()
    job = engine.issue("barrier", None, 0, (), np.dtype(np.int32))
    _core.apply(_Start(job, lambda *a: None), Tensor(np.zeros(_TOKEN, np.int64)))
    _core.sync()
    engine.wait(job)


def shard(n, batch=None):
    """This rank's share of `n` samples: a `range` of indices (contiguous, sizes differing
    by at most one). With `batch`, the share of each global batch of `batch` samples is
    `batch // world_size` and the range covers whole per-rank batches only."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"shard: n must be a non-negative int, got {n!r}")
    size, rank = get_world_size(), get_rank()
    if batch is None:
        base, extra = divmod(int(n), size)
        start = rank * base + min(rank, extra)
        return range(start, start + base + (1 if rank < extra else 0))
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch <= 0:
        raise ValueError(f"shard: batch must be a positive int, got {batch!r}")
    if batch % size:
        raise ValueError(f"shard: batch {batch} is not a multiple of the world size {size}")
    per = batch // size
    steps = int(n) // batch
    start = rank * steps * per
    return range(start, start + steps * per)


def broadcast_parameters(params, root=0):
    """Overwrite each parameter (a Module's, or a list) with rank `root`'s value, in place;
    what `DistributedDataParallel` does at construction."""
    if hasattr(params, "parameters"):
        params = params.parameters()
    params = list(params)
    if get_world_size() == 1:
        return params
    for p in params:
        p._set_info_from(broadcast(p, root))
    return params


def make_allreduce_cb(op="mean", bucket_bytes=_DEFAULT_BUCKET):
    """A `GradManager` callback all-reducing each gradient (`op` "mean" or "sum") across
    ranks. Gradients are packed into buckets of about `bucket_bytes`; a bucket's all-reduce
    starts as soon as backward has filled it, so communication overlaps the rest of the
    backward pass. The gradients it returns are produced when first read (the optimizer)."""
    if op not in _OPS:
        raise ValueError(f"make_allreduce_cb: op must be one of {list(_OPS)}, got {op!r}")
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, (int, np.integer)) \
            or bucket_bytes < 0:
        raise ValueError(f"make_allreduce_cb: bucket_bytes must be a non-negative int, got "
                         f"{bucket_bytes!r}")
    return _AllreduceCallback(op, int(bucket_bytes))


class _AllreduceCallback:
    def __init__(self, op, bucket_bytes):
        self.op = op
        self.bucket_bytes = bucket_bytes
        self.bucket = None

    def __call__(self, param, grad):
        if get_world_size() == 1:
            return grad            # the sum or mean over one rank
        _require()
        b = self.bucket
        if b is not None and (b.dtype != grad.dtype or b.device != grad.device):
            b.flush()
            b = None
        if b is None:
            b = self.bucket = _Bucket(self, grad.dtype, grad.device)
        result = b.add(grad)
        if b.nbytes >= self.bucket_bytes:
            b.flush()
        return result


class _Bucket:
    """Gradients all-reduced together: one start (packing them into one flat buffer) and one
    wait (its outputs are views of that buffer)."""

    def __init__(self, owner, dtype, device):
        self.owner, self.dtype, self.device = owner, dtype, device
        self.grads, self.shapes, self.results = [], [], []
        self.nbytes = 0
        self.token = self.job = None
        self.flushed = False

    def add(self, grad):
        self.grads.append(grad)
        self.shapes.append(grad.shape)
        self.nbytes += grad.size * grad.dtype.itemsize
        t, rec = _core.deferred_result(tuple(grad.shape), grad.dtype, grad.device, self.place)
        self.results.append(weakref.ref(rec))
        return t

    def flush(self):
        if self.flushed:
            return
        self.flushed = True
        if self.owner.bucket is self:
            self.owner.bucket = None
        sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = int(offsets[-1])
        dtype, shapes = self.dtype, self.shapes
        self.job = _require().issue("all_reduce", self.owner.op, 0, (total,), dtype)

        op = self.owner.op

        def pack(*arrays):
            buf = np.empty(total, dtype)
            for a, o, n in zip(arrays, offsets, sizes):
                _pack_into(buf[o:o + n], a.reshape(-1), op)
            return buf

        def unpack(buf):
            return [buf[o:o + n].reshape(s) for o, n, s in zip(offsets, sizes, shapes)]
        self.unpack = unpack
        (self.token,) = _core.apply(_Start(self.job, pack), *self.grads)
        self.grads = None

    def place(self):
        self.flush()
        live = _live(self.results)
        if live:
            _core.issue_into(_Wait(self.job, self.unpack, [i for i, _ in live]), [self.token],
                             [r for _, r in live])
        self.token = None
        self.results = []


def comm_stats():
    """{"bytes", "comm_seconds" (start to completion of the data transfers, summed),
    "blocked_seconds" (worker time waiting for them), "collectives"} since init."""
    e = _require()
    return {"bytes": e.bytes, "comm_seconds": e.comm_seconds,
            "blocked_seconds": e.blocked_seconds, "collectives": e.seq}
