# Included by _core.pyx: the worker thread. The queue hand-off (_enqueue), waking the
# worker and handing it the GIL for a long op, callers' waits for a sequence number (with
# Ctrl-C polling), the worker's loop, and stopping it. Each function takes the Channel as
# `self` (see imperative/_channel.pxi).

cdef extern from "pthread.h" nogil:
    int pthread_cond_timedwait(pthread_cond_t*, pthread_mutex_t*, const timespec*)

# how often a waiting caller looks for Ctrl-C (it must answer within 0.1 s of a kernel's end)
cdef long _SIGNAL_POLL_NS = 50 * 1000 * 1000


# A command worth handing the GIL to the worker for when it wakes (about 0.3 ms of sgemm):
# see Channel._hand_gil_to_worker.
cdef double _HEAVY_FLOPS = 5e7


cdef inline bint _is_heavy(Command cmd):
    """A product or convolution of _HEAVY_FLOPS or more."""
    return _op_flops(cmd.op, cmd.inputs, cmd.outputs) >= _HEAVY_FLOPS


cdef void _enqueue(Channel self, Command cmd):
    cdef TensorInfo info
    self._seq += 1
    cmd.seq = self._seq
    if cmd.kind == CMD_APPLY:
        for info in cmd.outputs:
            info.ready_seq = self._seq
    self._pending.append(cmd)
    if self._memory_on:
        self.mm.on_queued(cmd)
    if self._thread is None:
        _start_worker(self)
    if _wake_worker(self) and cmd.kind == CMD_APPLY and _is_heavy(cmd):
        _hand_gil_to_worker(self)
    if self._seq - self._processed > self._opts[OPT_QUEUE_SIZE]:
        # Backpressure: let the worker catch up before issuing more.
        _wait_seq(self, self._seq - self._opts[OPT_QUEUE_SIZE], "queue full")


cdef bint _wake_worker(Channel self):
    """Wake the worker if it sleeps; True when it did."""
    if not self._worker_sleeping:
        return False
    self._worker_sleeping = 0
    self._worker_awake = 0
    pthread_mutex_lock(&self._mutex)
    self._wake = 1
    pthread_cond_signal(&self._wake_cond)
    pthread_mutex_unlock(&self._mutex)
    return True


cdef void _hand_gil_to_worker(Channel self):
    """Let the worker, just woken for a long op, take the GIL now. Otherwise it waits
    for it until this thread blocks or a switch interval (5 ms) passes, while this
    thread issues the rest of a training step: the step's first product started 1-2 ms
    late (2% of an MLP step). The wake-up round trip (~100 us) is paid only for ops that
    take milliseconds."""
    with nogil:
        while not self._worker_awake and not self._worker_dead:
            sched_yield()


cdef void _start_worker(Channel self):
    self._thread = threading.Thread(target=_worker_main, args=(self,),
                                    name="imperative-worker", daemon=True)
    self._thread.start()


cdef int _wait_seq(Channel self, long long target, str why="sync") except -1:
    """Block (GIL released) until the worker has run command `target`."""
    if self._processed >= target:
        return 0
    if why != "queue full" and _worker_not_started(self):
        _run_queue_here(self)
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


cdef inline bint _worker_not_started(Channel self):
    """Commands are queued and the worker has run everything before them: it sleeps, or
    has woken and waits for the GIL this thread holds."""
    return (self._pending and not self._caller_running
            and self._processed + len(self._pending) == self._seq
            and self._opts[OPT_CATCH] and not _profiling
            and not self._stopping and not self._worker_dead)


cdef int _run_queue_here(Channel self) except -1:
    """A caller about to wait for queued commands the worker has not started runs them
    itself, in order, as the worker would (their arrays from the worker's pool). Handing
    them over costs a wake-up and a hand-back, 50-200 us here (PERF_NOTES), while this
    thread would only wait: an op followed by a read of its result (`F.softmax(x).numpy()`,
    a step's final `float(loss)` when nothing else is queued). The worker meanwhile takes
    nothing from the queue (`_caller_running`) and is woken for what others queue. Ctrl-C
    between two commands stops here and leaves the rest to the worker, as a wait would."""
    cdef list batch = self._pending
    self._pending = []
    self._caller_running = 1
    previous = _kernels.pool_enter()
    try:
        _run_batch(self, batch, True)
    finally:
        _kernels.pool_leave(previous)
        self._caller_running = 0
        left = [cmd for cmd in batch if cmd is not None]     # (not run: Ctrl-C)
        self._run_by_caller += len(batch) - len(left)
        if left:
            self._pending = left + self._pending
        if self._pending:
            _wake_worker(self)
    return 0


cdef int _run_batch(Channel self, list batch, bint check_signals=False) except -1:
    """Run queued commands in order (the worker's loop, or _run_queue_here, which looks
    for Ctrl-C after each: `check_signals`)."""
    cdef Command cmd
    cdef Py_ssize_t i
    for i in range(len(batch)):
        if check_signals and i:
            PyErr_CheckSignals()               # raises KeyboardInterrupt
        if self._discarding:
            break
        cmd = batch[i]
        # a finished command must not keep records alive while the rest of its batch
        # runs (they would pin a whole earlier step in memory)
        batch[i] = None
        if i + 1 < len(batch) and cmd.kind == CMD_APPLY and cmd.op.epilogue_capable:
            _plan_epilogue(self, cmd, batch[i + 1])
        _execute(self, cmd)
        cmd.epilogue = None
        cmd = None
        self._processed += 1
        if self._n_waiters:
            _notify_waiters(self)
    return 0


def _worker_main(Channel self):
    cdef list batch
    # Floating-point warnings on the worker would print from a foreign thread.
    np.seterr(all="ignore")
    # Arrays the kernels make here come from a caching pool (numpy's allocator is set per
    # thread context): a step's buffers are reused instead of faulted in afresh.
    _kernels.install_pool()
    try:
        while True:
            if self._pending and not self._caller_running:
                batch = self._pending
                self._pending = []
                _run_batch(self, batch)
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


cdef void _notify_waiters(Channel self):
    pthread_mutex_lock(&self._mutex)
    if self._processed >= self._notify_at:
        self._notify_at = LLONG_MAX
        pthread_cond_broadcast(&self._done_cond)
    pthread_mutex_unlock(&self._mutex)


cdef void _stop_worker(Channel self):
    if self._thread is None:
        return
    self._stopping = 1
    pthread_mutex_lock(&self._mutex)
    self._wake = 1
    pthread_cond_signal(&self._wake_cond)
    pthread_mutex_unlock(&self._mutex)
    if self._thread is not threading.current_thread():
        self._thread.join()
