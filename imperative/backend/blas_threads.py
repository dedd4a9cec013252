"""How many threads numpy's OpenBLAS runs, and the runtime's choice of it.

The worker thread computes while the caller's thread keeps issuing ops in Python, so the
runtime keeps one core busy besides its products. OpenBLAS starts as many threads as there
are cores; a product of ordinary size then needs every core at once, and the caller's
thread (or any other busy process) holds one of them: each call waits for a thread that is
not running. Measured on the 2-core project machine while it was busy, numpy's
(192, 384) @ (384, 384) took 30 ms on two BLAS threads and 1.1 ms on one (PyTorch's two
intra-op threads: 4.6-31 ms); a spiking network's training step (tests/seventh_models.py's
`lif`) took 1.1-3.7 s against 0.27 s. So, at import, the runtime leaves OpenBLAS one
thread fewer than the cores this process may use (at least one), unless the environment
chose a count itself (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS), which
then stands; threadpoolctl can change it afterwards. On an idle 2-core machine this gives
up the second core for the products: the zoo's product-bound steps took 1.2-1.5x as long
as on two threads (tools/bench_blas_threads.py; the CNN 0.86x), a loss bounded by
cores / (cores - 1), against steps 1.5-3.6x faster beside one other busy process and
4-14x faster on a loaded machine. The count is fixed for the process, never chosen per
call by the load: OpenBLAS's sums over long rows differ in their last bits between one
and two threads, and a recomputation must give the bits of the first run.

This module imports nothing of the package but numpy's location.
"""
import ctypes
import glob
import os

import numpy as np

# variables by which a user (or a launcher such as mpiexec's wrappers) chose the count
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _openblas_functions():
    """numpy's OpenBLAS (get_num_threads, set_num_threads), the library already loaded by
    numpy (numpy.libs' scipy-openblas prefixes the names), or Nones where it is not found
    (another BLAS, a source build)."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*")):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""),
                               ("openblas_", "64_"), ("openblas_", "")):
            getter = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            if getter is not None:
                getter.restype = ctypes.c_int
                setter = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
                if setter is not None:
                    setter.restype = None
                return getter, setter
    return None, None


get_num_threads, _set_num_threads = _openblas_functions()


def usable_cores():
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                  # (macOS, Windows)
        return os.cpu_count() or 1


def runtime_choice():
    """The BLAS threads the runtime asks for: a core left to the caller's thread."""
    return max(1, usable_cores() - 1)


def leave_a_core_to_the_caller(environ=os.environ):
    """At import: lower OpenBLAS's thread count to `runtime_choice()` unless `environ` set
    one. Returns the count set, or None where nothing changed."""
    if get_num_threads is None or _set_num_threads is None:
        return None
    if any(environ.get(name, "").strip() for name in THREAD_VARIABLES):
        return None
    wanted = runtime_choice()
    if get_num_threads() <= wanted:
        return None
    _set_num_threads(wanted)
    return wanted
