"""Errors at the edges (issue 13): bad shapes, oversized integers, garbage environment, a bad
profile folder, Ctrl-C while waiting, exit with a long queue, close() from another thread."""
import _thread
import signal
import subprocess
import sys
import re
import threading
import time

import numpy as np
import pytest

import imperative as imp
from imperative import F
from test_core import run_python


@pytest.mark.parametrize("call", [lambda t: t.reshape(3.7, 2), lambda t: t.reshape((3.0, 2)),
                                  lambda t: F.reshape(t, (3.5, 2)), lambda t: t.transpose(1.0, 0),
                                  lambda t: t.broadcast_to((2, 2.0, 3)), lambda t: F.zeros((2.5,))])
def test_float_shapes_raise_instead_of_truncating(call):
    t = imp.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(TypeError, match=r"expected integers, got \d\.\d \(float\) at position"):
        call(t)


def test_integer_like_shapes_still_work():
    t = imp.Tensor(np.arange(6, dtype=np.float32))
    assert t.reshape(np.int64(3), 2).shape == (3, 2)
    assert t.reshape(imp.Tensor([2, 3])).shape == (2, 3)
    assert t.reshape(imp.Tensor(3), -1).shape == (3, 2)
    assert F.reshape(t, [1, 6]).shape == (1, 6)


BIG = 2 ** 70


@pytest.mark.parametrize("call, error, message", [
    (lambda t: t.reshape(BIG, 2), ValueError, f"reshape: shape \\({BIG}, 2\\) has"),
    (lambda t: F.reshape(t, (2, BIG)), ValueError, f"reshape: shape \\(2, {BIG}\\) has"),
    (lambda t: t.broadcast_to((BIG, 2, 3)), ValueError, f"broadcast_to: shape \\({BIG}, 2, 3\\)"),
    (lambda t: F.zeros((BIG,)), ValueError, f"zeros: shape \\({BIG},\\)"),
    (lambda t: F.ones(BIG), ValueError, f"ones: shape \\({BIG},\\)"),
    (lambda t: F.full((2, BIG), 1.0), ValueError, f"full: shape \\(2, {BIG}\\)"),
    (lambda t: F.full((2,), BIG), OverflowError, f"full: the fill value {BIG} does not fit int32"),
    (lambda t: F.arange(BIG), ValueError, f"arange\\(0, {BIG}, 1\\): shape"),
    (lambda t: F.arange(0, 10 ** 400), ValueError, "arange\\(0, 1000+, 1\\): too many elements"),
    (lambda t: F.arange(0.0, 1e300, 1e-300), ValueError,
     "arange\\(0.0, 1e\\+300, 1e-300\\): too many"),
    (lambda t: F.linspace(0, 1, BIG), ValueError, f"linspace: shape \\({BIG},\\)"),
    (lambda t: imp.random.normal(size=(BIG,)), ValueError, f"normal: shape \\({BIG},\\)"),
    (lambda t: imp.nn.Linear(BIG, 2), ValueError, f"uniform: shape \\(2, {BIG}\\)"),
    (lambda t: t.sum(axis=BIG), IndexError, f"axis {BIG} is out of range"),
    (lambda t: t[BIG], IndexError, f"index {BIG} is out of bounds"),
    (lambda t: t[0, BIG], IndexError, f"index {BIG} is out of bounds"),
    (lambda t: t[[0, BIG]], IndexError, f"index {BIG} is out of bounds"),
    (lambda t: t.__setitem__(BIG, 1.0), IndexError, f"index {BIG} is out of bounds"),
    (lambda t: imp.Tensor([1, BIG]), ValueError, f"integer data in \\[1, {BIG}\\] does not fit"),
    (lambda t: imp.Tensor([1, 2]) + BIG, OverflowError, f"the scalar operand {BIG} does not fit"),
])
def test_oversized_integers_raise_naming_the_argument(call, error, message):
    t = imp.Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(error, match=message):       # not "too large to convert to C long"
        call(t)


def test_sizes_that_fit_still_work():
    assert F.arange(0, 2 ** 31, 2 ** 30).tolist() == [0, 2 ** 30]
    assert imp.Tensor(np.zeros((2, 3), np.float32))[2 ** 62:].shape == (0, 3)  # slices clip
    assert (imp.Tensor([1, 2]) + (2 ** 31 - 3)).tolist() == [2 ** 31 - 2, 2 ** 31 - 1]


def test_oversized_option_values_name_the_option():
    with pytest.raises(ValueError, match=r"option 'dtr_eviction_threshold' must be in \[0, \d+\], "
                                         r"got 1180591620717411303424"):
        imp.set_option("dtr_eviction_threshold", 2 ** 70)


ENVIRONMENT_DEFAULTS = dict({f"IMPERATIVE_{name.upper()}": str(value)
                             for name, value in imp._core.OPTION_DEFAULTS.items()},
                            IMPERATIVE_NATIVE_KERNELS="auto")


@pytest.mark.parametrize("garbage", ["99999999999999999999", "abc", "-1", "1.5", "1_0", "\u0661"])
def test_garbage_in_every_environment_variable_warns_and_uses_the_defaults(garbage):
    env = {var: garbage for var in ENVIRONMENT_DEFAULTS}
    done = run_python("import imperative as imp; import imperative.backend.native as n; "
                      "print(imp.options() == imp._core.OPTION_DEFAULTS, n._MODE)", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "auto"]
    for var, default in ENVIRONMENT_DEFAULTS.items():
        assert re.search(f"ignoring environment variable {var}=.*using the default {default}\\b",
                         done.stderr), (var, done.stderr)


def test_a_garbage_environment_value_never_breaks_the_import():
    done = run_python("import imperative as imp; print(imp.get_option('dtr_eviction_threshold'))",
                      env={"IMPERATIVE_DTR_EVICTION_THRESHOLD": "99999999999999999999"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
    assert "IMPERATIVE_DTR_EVICTION_THRESHOLD" in done.stderr
    assert "using the default 0" in done.stderr


@pytest.mark.parametrize("alias, option", [(imp._set_swap_flag, "enable_swap"),
                                           (imp._set_drop_flag, "enable_drop")])
def test_seed_flag_setters_are_aliases_of_the_options(alias, option):
    before = imp.get_option(option)
    try:
        alias(True)
        assert imp.get_option(option) == 1
        alias(False)
        assert imp.get_option(option) == 0
    finally:
        imp.set_option(option, before)


def _unmakeable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    return str(blocker / "sub")


def test_a_bad_profile_folder_never_replaces_the_users_exception(tmp_path):
    path = _unmakeable_folder(tmp_path)
    with pytest.raises(ValueError, match="mine") as info, \
            pytest.warns(RuntimeWarning, match=f"cannot create the profile folder '{path}'"):
        with imp.Profiler(path=path):            # warned at once: the body still runs
            raise ValueError("mine")
    assert any(f"cannot write the profile into '{path}'" in note
               for note in info.value.__notes__)  # the lost profile is told with the error
    assert (imp.Tensor([1.0]) + 1).tolist() == [2.0]          # the runtime is still usable


def test_a_bad_profile_folder_raises_naming_it_after_a_body_that_succeeded(tmp_path):
    path = _unmakeable_folder(tmp_path)
    ran = []
    with pytest.raises(OSError, match=f"Profiler: cannot write the profile into '{path}'"), \
            pytest.warns(RuntimeWarning, match="the profile will not be written"):
        with imp.Profiler(path=path):
            ran.append(True)
    assert ran == [True]


def test_a_failing_profile_write_never_replaces_the_users_exception(tmp_path):
    prof = imp.Profiler(path=str(tmp_path / "p"))
    with pytest.raises(KeyError, match="the user's own") as info:
        with prof:
            (tmp_path / "p").rmdir()
            (tmp_path / "p").write_text("the folder became a file")
            raise KeyError("the user's own")
    assert "cannot write the profile into" in info.value.__notes__[-1]
    with pytest.raises(OSError, match="cannot write the profile into"):
        with imp.Profiler(path=str(tmp_path / "q")):
            (tmp_path / "q").rmdir()
            (tmp_path / "q").write_text("the folder became a file")


@pytest.fixture
def python_sigint_handler():
    """Python's own Ctrl-C handler for the test: a process started in the background by a
    non-interactive shell inherits SIGINT ignored, and then nothing raises KeyboardInterrupt."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_during_sync_interrupts_the_wait_not_the_queue(python_sigint_handler):
    a = imp.Tensor(np.random.default_rng(0).standard_normal((768, 768)))
    with imp.option("async_level", 2):
        start = time.perf_counter()
        (a @ a).numpy()
        one_product = time.perf_counter() - start
        results = [a @ a for _ in range(max(8, int(2.0 / max(one_product, 1e-3))))]  # ~2 s
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            imp.sync()
        waited = time.perf_counter() - start
        left = imp._core._channel_stats()["queued"]
        timer.join()
        imp.sync()                                   # the queued work still completes
    assert left > 0, "the interrupt came only after the whole queue had run"
    assert waited < 0.2 + one_product + 0.5
    np.testing.assert_allclose(results[-1].numpy(), (a @ a).numpy())


SIGINT_DURING_A_WAIT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # even if started with SIGINT ignored
import numpy as np
import imperative as imp
imp.config_async_level(2)
a = imp.Tensor(np.random.default_rng(0).standard_normal((1024, 1024)))
start = time.perf_counter()
(a @ a).numpy()
one = time.perf_counter() - start
results = [a @ a for _ in range(200)]
print(one, flush=True)
try:
    imp.sync() if sys.argv[1] == "sync" else results[-1].numpy()
    print("finished", time.time(), flush=True)
except KeyboardInterrupt:
    print("interrupted", time.time(), imp._core._channel_stats()["queued"], flush=True)
"""


@pytest.mark.parametrize("wait", ["sync", "numpy"])
def test_a_real_sigint_during_a_wait_raises_within_a_kernel_and_a_poll(wait):
    child = subprocess.Popen([sys.executable, "-c", SIGINT_DURING_A_WAIT, wait],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        one_product = float(child.stdout.readline())
        time.sleep(0.3)                                 # the main thread is waiting now
        sent = time.time()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    what, at, *left = out.split()
    assert what == "interrupted", err
    assert int(left[0]) > 100, "the interrupt came only after most of the queue had run"
    # the kernel running when the signal came ends, then the 50 ms poll notices (margin for
    # a loaded machine)
    assert float(at) - sent < one_product + 0.1 + 0.5


EXIT_WITH_A_LONG_QUEUE = """
import time
import numpy as np
import imperative as imp
imp.config_async_level(2)
a = imp.Tensor(np.random.default_rng(0).standard_normal((768, 768)))
start = time.perf_counter()
(a @ a).numpy()
one = time.perf_counter() - start
results = [a @ a for _ in range(int(8.0 / one) + 4)]
print(one * len(results), time.time(), flush=True)
"""


def test_exit_drops_the_queued_work_nobody_can_read():
    done = run_python(EXIT_WITH_A_LONG_QUEUE)
    ended = time.time()
    assert done.returncode == 0, done.stderr
    queued_seconds, queued_at = map(float, done.stdout.split())
    assert queued_seconds >= 8.0
    assert ended - queued_at < 2.0, f"exit took {ended - queued_at:.1f} s after queueing " \
                                    f"{queued_seconds:.1f} s of work"


CLOSE_FROM_A_THREAD = """
import threading
import imperative as imp
t = imp.Tensor([1.0])
closer = threading.Thread(target=imp.close, name="loader")
closer.start()
closer.join()
try:
    t + 1
except RuntimeError as e:
    print(e)
"""


def test_close_from_another_thread_says_who_closed():
    done = run_python(CLOSE_FROM_A_THREAD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("interpreter closed by imp.close() in thread 'loader', not the "
                                   "main thread: no tensor can be used or made after that")
