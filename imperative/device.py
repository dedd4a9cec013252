"""Devices: `cpu0`, `cpu1`, ... Each is its own memory pool for accounting; one worker
thread serves them all (numpy kernels hold the GIL, so more workers would not overlap)."""
from ._core import (Device, TensorBase, as_device, get_default_device, known_devices,
                    set_default_device)

__all__ = ["Device", "as_device", "get_device", "get_default_device", "set_default_device",
           "known_devices"]


def get_device(*args):
    """The device shared by the Tensor arguments; the default device when none is a Tensor."""
    if not args:
        raise TypeError("get_device() needs at least one argument")
    devices = []
    for a in args:
        if isinstance(a, TensorBase) and a.device not in devices:
            devices.append(a.device)
    if not devices:
        return as_device(get_default_device())
    if len(devices) > 1:
        raise ValueError("ambiguous device: tensors are on " + ", ".join(str(d) for d in devices))
    return devices[0]
