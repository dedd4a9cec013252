# Included by _core.pyx: the interpreter's options (imp.set_option), their defaults,
# ranges and environment variables (IMPERATIVE_<NAME>). The Channel keeps the values in
# `_opts`, indexed by the OPT_* constants (declared in imperative/_core.pxd, since the
# Channel's declaration there sizes `_opts` by them).
#
# Adding an option: one OPT_* constant in _core.pxd and one row of _OPTIONS below, at the
# same place in both (checked at import), and its line in docs/contract.md.


# The option table: (index, name, default, lowest, highest or None for unbounded, what it
# does). Ranges are inclusive; a switch ranges over 0 and 1.
cdef tuple _OPTIONS = (
    (OPT_ASYNC_LEVEL, "async_level", 2, 0, 2,
     "2: every op returns at once, worker errors surface at the next sync point; 1: an op "
     "whose output shape could not be inferred at dispatch is waited for; 0: every op is "
     "waited for"),
    (OPT_BUFFER_LENGTH, "buffer_length", 3, 0, 99,
     "commands held back before the worker sees them, so that a Del folds into the op that "
     "last reads the tensor (which may then write in place); 0 turns it off"),
    (OPT_HOST_COMPUTE, "enable_host_compute", 1, 0, 1,
     "tiny ops whose inputs are resident run at once on the caller's thread"),
    (OPT_CATCH, "catch_worker_exception", 1, 0, 1,
     "0 lets a worker exception escape (for debugging)"),
    (OPT_ENABLE_DROP, "enable_drop", 0, 0, 1,
     "allow Tensor._drop(); records each output's producer"),
    (OPT_ENABLE_SWAP, "enable_swap", 0, 0, 1, "allow Tensor._swap_out() / _swap_in()"),
    (OPT_DTR_AUTO, "enable_dtr_auto_drop", 0, 0, 1, "automatic eviction (DTR)"),
    (OPT_SQRT_SAMPLING, "enable_dtr_sqrt_sampling", 0, 0, 1,
     "score only about sqrt(N) eviction candidates"),
    (OPT_DTR_THRESHOLD, "dtr_eviction_threshold", 0, 0, None,
     "bytes; > 0: evict until tensor memory on the device is at or below it"),
    (OPT_MIN_EVICTEE, "dtr_evictee_minimum_size", 1048576, 0, None,
     "bytes; smaller tensors are never evicted"),
    (OPT_RECORD_PATH, "record_computing_path", 0, 0, 1,
     "record producers for regeneration (set by imperative.dtr.enable)"),
    (OPT_QUEUE_SIZE, "worker_queue_size", 10000, 1, None,
     "commands pending before a caller blocks"),
)
if tuple(row[0] for row in _OPTIONS) != tuple(range(N_OPTIONS)):
    raise ImportError("imperative._core: the OPT_* constants and the rows of _OPTIONS differ")

OPTION_DEFAULTS = {row[1]: row[2] for row in _OPTIONS}
cdef dict _OPTION_RANGES = {row[1]: (row[3], row[4]) for row in _OPTIONS}
cdef list _OPTION_NAMES = list(OPTION_DEFAULTS)
cdef dict _OPTION_INDEX = {name: i for i, name in enumerate(_OPTION_NAMES)}


cdef long long _validate_option(str name, object value) except? -1:
    if name not in _OPTION_INDEX:
        raise ValueError(f"unknown option {name!r}; valid options: {', '.join(_OPTION_NAMES)}")
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"option {name!r} takes an int, got {type(value).__name__} {value!r}")
    lo, hi = _OPTION_RANGES[name]
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
