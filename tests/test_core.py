"""The interpreter core: options, async errors, the Del-folding buffer, the handle table,
lifecycle (close, exit, fork) and several calling threads."""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import imperative as imp
from imperative import _core
from imperative import functional as F

BIG = _core.HOST_COMPUTE_MEDIUM_ELEMENTS + 1   # elements: past the host-compute limit, so ops
                                            # go through the worker


def live_handles():
    gc.collect()
    imp.sync()
    return _core._channel_stats()["live_handles"]


# ---------------------------------------------------------------- options


def test_options_table_has_every_option_with_its_default():
    expected = {
        "async_level": 2, "buffer_length": 3, "enable_host_compute": 1,
        "catch_worker_exception": 1, "enable_drop": 0, "enable_swap": 0,
        "enable_dtr_auto_drop": 0, "enable_dtr_sqrt_sampling": 0,
        "dtr_eviction_threshold": 0, "dtr_evictee_minimum_size": 1048576,
        "record_computing_path": 0, "worker_queue_size": 10000,
    }
    assert set(imp.options()) == set(expected)
    # defaults as the process started (the suite's own fixture may have changed async_level)
    assert _core.OPTION_DEFAULTS == expected


def test_unknown_option_lists_valid_names():
    with pytest.raises(ValueError, match="unknown option 'no_such'.*async_level"):
        imp.set_option("no_such", 1)
    with pytest.raises(ValueError, match="unknown option"):
        imp.get_option("no_such")


@pytest.mark.parametrize("name, value", [("async_level", 3), ("async_level", -1),
                                         ("buffer_length", 100), ("enable_drop", 2),
                                         ("worker_queue_size", 0), ("dtr_eviction_threshold", -5)])
def test_out_of_range_option_value(name, value):
    before = imp.get_option(name)
    with pytest.raises(ValueError, match=name):
        imp.set_option(name, value)
    assert imp.get_option(name) == before


def test_option_values_are_ints_and_bools_count():
    with pytest.raises(TypeError, match="takes an int, got str"):
        imp.set_option("enable_drop", "1")
    with imp.option("enable_drop", True):
        assert imp.get_option("enable_drop") == 1
    assert imp.get_option("enable_drop") == 0


def test_option_context_manager_restores_on_exception():
    with pytest.raises(KeyError):
        with imp.option("buffer_length", 7):
            assert imp.get_option("buffer_length") == 7
            raise KeyError("boom")
    assert imp.get_option("buffer_length") == 3


def test_async_level_and_buffer_length_helpers():
    with imp.option("async_level", imp.get_async_level()):
        imp.config_async_level(1)
        assert imp.get_async_level() == 1 == imp.get_option("async_level")
    with imp.option("buffer_length", 3):
        imp.set_buffer_length(0)
        assert imp.get_option("buffer_length") == 0


def run_python(code, env=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=120)


def test_options_read_from_environment_at_import():
    r = run_python("import imperative as imp; print(imp.get_option('buffer_length'), "
                   "imp.get_option('async_level'))",
                   env={"IMPERATIVE_BUFFER_LENGTH": "7", "IMPERATIVE_ASYNC_LEVEL": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["7", "1"]


def test_unparsable_environment_variable_is_ignored_with_a_warning():
    r = run_python("import imperative as imp; print(imp.get_option('async_level'))",
                   env={"IMPERATIVE_ASYNC_LEVEL": "fast"})
    assert r.returncode == 0
    assert r.stdout.strip() == "2"
    assert "IMPERATIVE_ASYNC_LEVEL" in r.stderr


def test_import_stays_light():
    """Importing the package pulls in numpy and the core, not optional heavy libraries
    (a timing check would fail on a loaded machine; what makes imports slow is this)."""
    r = run_python("import sys, imperative; print(' '.join(sorted(sys.modules)))")
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    heavy = {"torch", "jax", "matplotlib", "scipy", "pandas", "onnx", "onnxruntime", "mpi4py"}
    assert not loaded & heavy, f"import imperative loads {sorted(loaded & heavy)}"


# ---------------------------------------------------------------- errors


def failing_pow():
    """int ** negative int: numpy raises ValueError inside the kernel (not at inference)."""
    x = imp.Tensor(np.arange(BIG, dtype=np.int32))
    return x ** imp.Tensor(np.full(BIG, -1, np.int32))


def test_worker_error_surfaces_once_as_async_error_at_the_next_sync():
    with imp.option("async_level", 2):
        y = failing_pow()                          # returns at once
        with pytest.raises(imp.AsyncError) as info:
            imp.sync()
        err = info.value
        assert isinstance(err, RuntimeError)
        assert isinstance(err.__cause__, ValueError)
        assert err.__cause__.__traceback__ is not None
        msg = str(err)
        assert "Elemwise(mode='POW')" in msg and f"({BIG},) int32" in msg
        assert "test_core.py:" in msg           # the file:line that issued the op
        imp.sync()                               # raised once only
        with pytest.raises(RuntimeError, match="unusable because of an earlier error"):
            y.numpy()
        with pytest.raises(RuntimeError, match="unusable"):
            y + 1
    # the runtime stays usable
    np.testing.assert_array_equal((imp.Tensor([1, 2]) + 1).numpy(), [2, 3])


def test_error_at_level_0_raises_the_original_exception_at_the_call():
    with imp.option("async_level", 0):
        with pytest.raises(ValueError, match="negative integer powers") as info:
            failing_pow()
        assert any("Elemwise(mode='POW')" in n for n in getattr(info.value, "__notes__", []))
    imp.sync()   # nothing left pending


def test_numpy_is_a_sync_point_for_errors_of_other_ops():
    with imp.option("async_level", 2):
        failing_pow()
        ok = imp.Tensor(np.ones(BIG, np.float32)) * 2
        with pytest.raises(imp.AsyncError):
            ok.numpy()
        assert ok.numpy()[0] == 2     # the error was raised once; this value is fine


def test_ops_issued_on_a_failed_tensor_become_unusable_silently():
    with imp.option("async_level", 2):
        y = failing_pow()
        z = y + 1                     # issued before the error is known
        with pytest.raises(imp.AsyncError):
            imp.sync()
        with pytest.raises(RuntimeError, match="unusable"):
            z.numpy()


def test_dispatch_errors_are_raised_at_the_call_at_every_level():
    a = imp.Tensor(np.ones((2, 3), np.float32))
    b = imp.Tensor(np.ones((4,), np.float32))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4,\)"):
        a + b
    with pytest.raises(ValueError, match="matmul|do not match"):
        a @ a
    with pytest.raises(TypeError, match="quantized|Elemwise"):
        q = imp.Tensor([1.0]).astype(imp.dtype.qint8(0.5))
        q + q
    with pytest.raises(TypeError, match="expects Tensor inputs, got int"):
        imp.apply(imp.ops.Elemwise("ADD"), a, 3)
    assert live_handles() == live_handles()    # nothing half-made is left in the table


@pytest.mark.parametrize("level", [0, 1, 2])
@pytest.mark.parametrize("dtype, exponent", [(np.int32, -1), (np.int8, -2), (np.bool_, -1),
                                             (np.int32, np.int64(-3))], ids=repr)
def test_an_integer_to_a_negative_python_power_raises_at_the_call(level, dtype, exponent):
    # known at the call, as in numpy; at level 2 it was an AsyncError at the next sync
    a = (np.arange(BIG) % 5 + 1).astype(dtype)
    with imp.option("async_level", level):
        with pytest.raises(ValueError) as theirs:
            a ** exponent
        for x in (imp.Tensor(a), imp.Tensor(a[:3])):
            with pytest.raises(ValueError, match=str(theirs.value)):
                x ** exponent
            with pytest.raises(ValueError, match=str(theirs.value)):
                imp.F.pow(x, exponent)
        imp.sync()                                # nothing was issued
        x = imp.Tensor(a[:3])
        np.testing.assert_array_equal((x ** 2).numpy(), a[:3] ** 2)       # still usable
        np.testing.assert_allclose((x ** -1.0).numpy(), a[:3] ** -1.0, rtol=1e-6)


def test_catch_worker_exception_0_lets_the_exception_escape_the_worker():
    code = """
        import numpy as np, imperative as imp
        imp.set_option("catch_worker_exception", 0)
        x = imp.Tensor(np.arange(100000, dtype=np.int32))     # (past the host-compute limit)
        y = x ** imp.Tensor(np.full(100000, -1, np.int32))
        try:
            imp.sync()
        except RuntimeError as e:
            print("sync:", e)
    """
    r = run_python(code)
    assert r.returncode == 0
    assert "negative integer powers" in r.stderr      # the worker's traceback, printed
    assert "worker thread died" in r.stdout


# ---------------------------------------------------------------- the Del-folding buffer


def test_del_folds_into_the_last_reader_which_writes_in_place():
    with imp.option("async_level", 2), imp.option("buffer_length", 3):
        base = imp.memory_stats()["inplace_reuses"]
        a = imp.Tensor(np.arange(BIG, dtype=np.float32))
        b = a * 2            # queued (held in the buffer)
        c = b + 1            # reads b
        del b                # b's last reader is c's op: it may write into b's storage
        imp.sync()
        assert imp.memory_stats()["inplace_reuses"] == base + 1
        np.testing.assert_array_equal(c.numpy(), np.arange(BIG, dtype=np.float32) * 2 + 1)


def test_no_in_place_without_the_buffer_or_when_a_view_was_exported():
    with imp.option("async_level", 2):
        for length, export in [(0, False), (3, True)]:
            with imp.option("buffer_length", length):
                base = imp.memory_stats()["inplace_reuses"]
                a = imp.Tensor(np.arange(BIG, dtype=np.float32))
                b = a * 2
                imp.sync() if export else None
                view = b.numpy() if export else None
                c = b + 1
                del b
                imp.sync()
                assert imp.memory_stats()["inplace_reuses"] == base
                np.testing.assert_array_equal(c.numpy(), np.arange(BIG) * 2 + 1)
                if export:
                    np.testing.assert_array_equal(view, np.arange(BIG) * 2)


def test_in_place_keeps_peak_memory_down():
    with imp.option("async_level", 2), imp.option("buffer_length", 3):
        x = imp.Tensor(np.ones(BIG, np.float32))
        imp.sync()
        imp.reset_peak_memory_stats()
        start = imp.memory_stats()["allocated"]
        y = x * 2
        for _ in range(10):
            y = y + 1        # each old y dies while its reader is still buffered
        imp.sync()
        peak = imp.memory_stats()["peak_allocated"] - start
        assert peak <= 3 * BIG * 4
        assert y.numpy()[0] == 12


# ---------------------------------------------------------------- handle table and memory


def test_handles_have_generations_and_live_count_returns_to_zero():
    before = live_handles()
    ts = [imp.Tensor(np.ones(BIG, np.float32)) * i for i in range(5)]
    handles = [t._handle for t in ts]
    assert live_handles() == before + 5
    del ts
    assert live_handles() == before
    t = imp.Tensor([1.0])
    # a reused slot gets a new generation: the old handle never aliases the new tensor
    assert t._handle not in handles
    assert _core.channel().lookup(handles[0]) is None


def test_memory_accounting_counts_views_once():
    x = imp.Tensor(np.ones((100, 100), np.float32))
    imp.sync()
    start = imp.memory_stats()["allocated"]
    v1 = x.reshape(-1)
    v2 = x.T
    imp.sync()
    assert imp.memory_stats()["allocated"] == start          # views share x's storage
    del x, v1
    gc.collect()
    imp.sync()
    assert imp.memory_stats()["allocated"] == start          # v2 still holds the storage
    del v2
    gc.collect()
    imp.sync()
    assert imp.memory_stats()["allocated"] == start - 40000


def test_shape_does_not_wait_for_the_worker():
    a = imp.Tensor(np.ones((300, 300), np.float32))
    with imp.option("async_level", 2):
        b = a @ a @ a
        assert b.shape == (300, 300) and b.dtype == np.float32 and b.ndim == 2
    imp.sync()


# ---------------------------------------------------------------- lifecycle


def test_script_that_exits_without_sync_is_clean():
    code = """
        import numpy as np, imperative as imp
        a = imp.Tensor(np.ones((256, 256), np.float32))
        for _ in range(30):
            a = a @ a * 0.001
        b = [imp.Tensor(np.ones(10000, np.float32)) * i for i in range(50)]
    """
    r = run_python(code)
    assert r.returncode == 0
    assert r.stderr == ""


def test_forked_child_gets_a_clear_error():
    code = """
        import os, numpy as np, imperative as imp
        a = imp.Tensor(np.ones(10000, np.float32)) + 1
        pid = os.fork()
        if pid == 0:
            try:
                (a + 1).numpy()
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "forked" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), float(a.numpy()[0]))
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "2.0"]


def test_close_frees_everything_and_later_calls_raise():
    code = """
        import numpy as np, imperative as imp
        a = imp.Tensor(np.ones(10000, np.float32)) * 3
        imp.close()
        imp.close(); imp.sync(); imp.full_sync()  # no-ops (docs/api.md §3)
        for f in (lambda: a.numpy(), lambda: a + 1, lambda: imp.Tensor([1.0])):
            try:
                f()
                print("no error")
            except RuntimeError as e:
                print("closed" in str(e))
        print(imp.memory_stats()["allocated"])
    """
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True", "0"]


# ---------------------------------------------------------------- several calling threads


def test_several_python_threads_issue_ops_safely():
    results = {}
    errors = []

    def work(k):
        try:
            x = imp.Tensor(np.full(BIG, k, np.float32))
            small = imp.Tensor(np.full(4, k, np.float32))
            for _ in range(200):
                x = x + 1
                small = small * 1
            results[k] = (x.numpy()[0], small.numpy()[0])
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {k: (k + 200.0, float(k)) for k in range(4)}


def test_long_ops_waking_the_worker_from_several_threads():
    """A product long enough that the caller hands the GIL to the worker it wakes, issued
    from several threads after syncs (the worker asleep each time): right results, no hang."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    b = rng.standard_normal((512, 256)).astype(np.float32)   # 6.7e7 flops a product
    want = a.astype(np.float64) @ b
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                c = imp.functional.matmul(imp.Tensor(a), imp.Tensor(b))
                results.append(np.abs(c.numpy() - want).max())
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads) and not errors
    assert len(results) == 15 and max(results) < 1e-2


def _run_by_caller():
    return _core._channel_stats()["run_by_caller"]


def test_a_read_runs_the_queued_ops_on_the_caller_while_the_worker_has_not_started():
    """An op on the worker's queue whose result is read at once: the reading thread runs
    it itself (no wake-up round trip) when the worker has not started on the queue, with
    the results the worker would give."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((512, 640)).astype(np.float32)     # past host compute's sizes
    b = rng.standard_normal((512, 640)).astype(np.float32)
    x, y = imp.Tensor(a), imp.Tensor(b)
    before = _run_by_caller()
    with imp.option("async_level", 2):
        for _ in range(20):
            z = (x * y + x) * 0.5
            np.testing.assert_array_equal(z.numpy(), (a * b + a) * np.float32(0.5))
            assert float(z.sum()) == pytest.approx(float(((a * b + a) * 0.5).sum()), rel=1e-4)
    assert _run_by_caller() > before        # (the worker may win a race now and then)


@pytest.mark.parametrize("budget", [None, 6 << 20])
def test_callers_running_the_queue_from_several_threads(budget):
    """Threads issuing chains of ops and reading them while others do the same, the GIL
    switching all the time, with and without a DTR budget: each thread's values are
    numpy's, no command runs twice or never (no hang), and the worker still serves the
    queue after a caller ran it."""
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((256, 512)).astype(np.float32) for _ in range(4)]
    results, errors = {}, []

    def work(k):
        try:
            a = inputs[k]
            t = imp.Tensor(a)
            want = a
            for i in range(12):
                t = F.relu(t * 1.5 - 0.25) + t
                want = np.maximum(want * np.float32(1.5) - np.float32(0.25), 0) + want
                if i % 3 == 2:
                    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)
            results[k] = float(np.abs(t.numpy() - want).max())
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)

    old_interval = sys.getswitchinterval()
    old_options = {k: imp.get_option(k) for k in ("dtr_eviction_threshold",
                                                   "dtr_evictee_minimum_size")}
    sys.setswitchinterval(1e-6)
    try:
        if budget is not None:
            imp.dtr.enable(eviction_threshold=budget, evictee_minimum_size=0)
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
    finally:
        sys.setswitchinterval(old_interval)
        if budget is not None:
            imp.dtr.disable()
            for k, v in old_options.items():
                imp.set_option(k, v)
    assert not errors
    assert results.keys() == {0, 1, 2, 3} and max(results.values()) == 0.0
    w = imp.Tensor(inputs[0]) * 2.0                      # the worker takes the next ones
    imp.sync()
    np.testing.assert_array_equal(w.numpy(), inputs[0] * 2)
