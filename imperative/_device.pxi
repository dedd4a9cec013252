# Included by _core.pyx: devices (`cpu0` ... `cpu63`), one object per name, each with the
# memory counters the channel keeps for it. Both classes are declared in imperative/_core.pxd
# (their fields, and DeviceStats.add, inline, with its body).

cdef class DeviceStats:
    """Memory counters of one device, kept by the channel."""

    def as_dict(self):
        return {
            "allocated": self.allocated, "peak_allocated": self.peak_allocated,
            "swapped": self.swapped, "evictions": self.evictions,
            "recomputes": self.recomputes, "swap_outs": self.swap_outs,
            "swap_ins": self.swap_ins, "recompute_seconds": self.recompute_seconds,
            "inplace_reuses": self.inplace_reuses,
            "recomputes_repeated": self.recomputes_repeated,
        }


MAX_CPU_DEVICES = 64

cdef class Device:
    """A compute device (`cpu0`, `cpu1`, ...). One object per name, so identity compares."""

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
