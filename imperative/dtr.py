"""Dynamic tensor rematerialization: train in less memory than the activations need.

    imp.dtr.enable(eviction_threshold="512MB")   # evict so tensor memory stays <= 512 MiB
    ...                                          # results are bit for bit the same
    imp.dtr.disable()

While enabled, every op records how to recompute its outputs. Before an op runs, if tensor
memory on its device plus the op's outputs would pass the threshold, the runtime evicts the
candidate with the lowest score (drop, or swap out when reading back is cheaper) and
recomputes evicted tensors when they are used again. Options live in the interpreter
(`imp.get_option("dtr_eviction_threshold")`): the getters here read them, there is no copy.
"""
import re
import sys
import types

from . import _core

__all__ = ["enable", "disable", "is_enabled", "parse_size", "set_policy", "get_policy",
           "policies", "eviction_threshold", "evictee_minimum_size", "swap_dir"]

_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2,
          "MIB": 1024 ** 2, "G": 1024 ** 3, "GB": 1024 ** 3, "GIB": 1024 ** 3,
          "T": 1024 ** 4, "TB": 1024 ** 4, "TIB": 1024 ** 4}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*$")


def parse_size(value, what="size"):
    """Bytes from an int or a string such as "512MB" or "1.5GB" (units of 1024)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number of bytes or a string like '512MB', "
                         f"got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{what} must not be negative, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m and m.group(2).upper() in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    raise ValueError(f"{what} must be a number of bytes or a string like '512MB' or '1.5GB', "
                     f"got {value!r}")


def enable(eviction_threshold=None, evictee_minimum_size=None):
    """Turn DTR on; `None` keeps an option's current value. A failing call changes nothing:
    every value is checked before any is set."""
    changes = {}
    if eviction_threshold is not None:
        changes["dtr_eviction_threshold"] = parse_size(eviction_threshold, "eviction_threshold")
    if evictee_minimum_size is not None:
        changes["dtr_evictee_minimum_size"] = parse_size(evictee_minimum_size,
                                                         "evictee_minimum_size")
    changes["record_computing_path"] = 1
    changes["enable_dtr_auto_drop"] = 1
    for name, value in changes.items():
        _core.validate_option(name, value)
    for name, value in changes.items():
        _core.set_option(name, value)


def disable():
    """Stop evicting (tensors evicted so far are still recomputed when used)."""
    _core.set_option("enable_dtr_auto_drop", 0)
    _core.set_option("record_computing_path", 0)


def is_enabled():
    """Whether automatic eviction under a budget is on (`enable()` turned it on)."""
    return bool(_core.get_option("enable_dtr_auto_drop"))


def policies():
    """The eviction policies `set_policy` takes, sorted."""
    return sorted(_core.POLICIES)


def set_policy(name):
    """"dtr_eq" (the default: h_DTR^eq), "lru" or "size"."""
    _core.set_eviction_policy(name)


def get_policy():
    """The eviction policy in use ("dtr_eq" unless `set_policy` chose another)."""
    return _core.get_eviction_policy()


class _DTRModule(types.ModuleType):
    """Module attributes that read (and set) the interpreter's live values."""

    @property
    def eviction_threshold(self):
        return _core.get_option("dtr_eviction_threshold")

    @property
    def evictee_minimum_size(self):
        return _core.get_option("dtr_evictee_minimum_size")

    @property
    def swap_dir(self):
        """Folder for swapped-out values (a fresh temporary folder unless set)."""
        return _core.get_swap_dir()

    @swap_dir.setter
    def swap_dir(self, path):
        _core.set_swap_dir(path)


sys.modules[__name__].__class__ = _DTRModule
