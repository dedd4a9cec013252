"""Errors at the edges (issue 13): bad shapes, oversized integers, garbage environment, a bad
profile folder, Ctrl-C while waiting, exit with a long queue, close() from another thread."""
import _thread
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


def test_oversized_option_values_name_the_option():
    with pytest.raises(ValueError, match=r"option 'dtr_eviction_threshold' must be at most \d+, "
                                         r"got 1180591620717411303424"):
        imp.set_option("dtr_eviction_threshold", 2 ** 70)


def test_a_garbage_environment_value_never_breaks_the_import():
    done = run_python("import imperative as imp; print(imp.get_option('dtr_eviction_threshold'))",
                      env={"IMPERATIVE_DTR_EVICTION_THRESHOLD": "99999999999999999999"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
    assert "IMPERATIVE_DTR_EVICTION_THRESHOLD" in done.stderr and "using the default 0" in done.stderr


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


def test_a_profile_folder_that_cannot_be_made_fails_before_the_work(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    ran = []
    with pytest.raises(OSError, match=r"Profiler: cannot create the profile folder '.*file/sub'"):
        with imp.Profiler(path=str(blocker / "sub")):
            ran.append(True)
    assert ran == []
    assert (imp.Tensor([1.0]) + 1).tolist() == [2.0]          # the runtime is still usable


def test_a_failing_profile_write_never_replaces_the_users_exception(tmp_path):
    prof = imp.Profiler(path=str(tmp_path / "p"))
    with pytest.raises(KeyError, match="the user's own"), \
            pytest.warns(RuntimeWarning, match="cannot write the profile into"):
        with prof:
            (tmp_path / "p").rmdir()
            (tmp_path / "p").write_text("the folder became a file")
            raise KeyError("the user's own")
    with pytest.raises(OSError, match="cannot write the profile into"):
        with imp.Profiler(path=str(tmp_path / "q")):
            (tmp_path / "q").rmdir()
            (tmp_path / "q").write_text("the folder became a file")


def test_ctrl_c_during_sync_interrupts_the_wait_not_the_queue():
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
