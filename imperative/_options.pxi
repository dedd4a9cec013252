# Included by _core.pyx: the interpreter's options (imp.set_option), their defaults,
# ranges and environment variables (IMPERATIVE_<NAME>). The Channel keeps the values in
# `_opts`, indexed by the OPT_* constants.

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
