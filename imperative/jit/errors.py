"""The errors of imp.jit (API.md section 9)."""


class TraceMismatchError(RuntimeError):
    """A later call of a `symbolic=False` trace issued an op that differs from the record (a
    different op or parameters, other inputs, a missing or an extra op). The trace of that
    signature is discarded: the next call records afresh."""


class TraceReadError(RuntimeError):
    """A later call read a tensor's shape, value or raw data that the recorded call did not
    read (the replayed program does not keep what was never read)."""


class TraceValueReadWarning(UserWarning):
    """A symbolic trace's recorded call read a value it computed: its replays will not."""


READ_MESSAGES = ("shape of this tensor is not read in trace",
                 "value of this tensor is not read in trace",
                 "raw data of this tensor is not read in trace")
