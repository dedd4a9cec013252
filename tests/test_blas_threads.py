"""The runtime's BLAS thread count (imperative/backend/blas_threads.py): at import it leaves
OpenBLAS one thread fewer than the usable cores, for the caller's thread, unless the
environment chose a count; products give the same values either way."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import imperative as imp
from imperative.backend import blas_threads

needs_openblas = pytest.mark.skipif(blas_threads.get_num_threads is None,
                                    reason="numpy's BLAS is not the OpenBLAS it bundles")

# the child reads OpenBLAS's count before and after importing the package (the lookup by
# hand: importing blas_threads imports the package first)
_REPORT = textwrap.dedent("""
    import ctypes, glob, os, numpy
    libs = os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs")
    lib = ctypes.CDLL(glob.glob(os.path.join(libs, "*openblas*"))[0])
    names = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
             "openblas_get_num_threads64_", "openblas_get_num_threads")
    get = next(f for f in (getattr(lib, n, None) for n in names) if f is not None)
    before = get()
    from imperative.backend import blas_threads
    print(before, get(), blas_threads.runtime_choice())
""")


def _threads_around_import(**variables):
    """(count before, count after importing imperative, the runtime's choice) in a child
    with `variables` and none of the others that choose a count."""
    env = {k: v for k, v in os.environ.items() if k not in blas_threads.THREAD_VARIABLES}
    env.update(variables)
    r = subprocess.run([sys.executable, "-c", _REPORT], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return [int(word) for word in r.stdout.split()]


@needs_openblas
def test_import_leaves_a_core_to_the_caller():
    before, after, choice = _threads_around_import()
    assert choice == max(1, blas_threads.usable_cores() - 1)
    assert after == min(before, choice)


@needs_openblas
@pytest.mark.parametrize("variable", blas_threads.THREAD_VARIABLES)
def test_a_count_the_environment_chose_stands(variable):
    before, after, _ = _threads_around_import(**{variable: "2"})
    assert after == before


def test_the_choice_is_skipped_where_a_variable_is_set():
    for variable in blas_threads.THREAD_VARIABLES:
        assert blas_threads.leave_a_core_to_the_caller({variable: "4"}) is None


@needs_openblas
def test_products_are_the_same_on_any_thread_count():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((192, 384)).astype(np.float32)
    b = rng.standard_normal((384, 384)).astype(np.float32)
    before = blas_threads.get_num_threads()
    try:
        results = []
        for threads in (1, max(2, before)):
            blas_threads._set_num_threads(threads)
            results.append((imp.Tensor(a) @ imp.Tensor(b)).numpy())
    finally:
        blas_threads._set_num_threads(before)
    np.testing.assert_array_equal(results[0], results[1])
