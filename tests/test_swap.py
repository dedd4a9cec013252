"""Swap to disk (API.md §4, docs/api.md): a value comes back exactly as it left (bits,
shape, strides, writeability), the runtime removes only its own files (a private 0700
folder of 0600 files, also on SIGTERM/SIGHUP), errors name the file and the reason, and
the bandwidth that decides between swapping and recomputing is measured here."""
import gc
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import imperative as imp

N = 50000      # elements: 200 KB float32


@pytest.fixture
def swap_dir(tmp_path):
    """Swap on, into a fresh folder of the test's own."""
    imp.dtr.swap_dir = tmp_path
    try:
        with imp.option("enable_swap", 1):
            yield tmp_path
    finally:
        gc.collect()
        imp.sync()
        imp.dtr.swap_dir = None


def value_of(t):
    """The array the runtime holds for `t` now (the layout ops will read)."""
    imp.sync()
    return imp._core.channel().lookup(t._handle).value


def private_folder(parent):
    [name] = os.listdir(parent)
    return os.path.join(parent, name)


def run_python(code, **kwargs):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, **kwargs)


# ------------------------------------------------------------------ the value comes back as it left

def _views():
    """(name, make): values laid out every way a tensor's value can be."""
    base = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
    return [
        ("0-d", lambda: imp.Tensor(np.float32(1.5)) * 3),
        ("fortran", lambda: imp.Tensor(base).transpose((1, 0))),
        ("negative strides", lambda: imp.Tensor(base)[::-1]),
        ("offset", lambda: imp.Tensor(base)[5:, 7:]),
        ("gaps", lambda: imp.Tensor(base)[:, ::3]),
        ("empty", lambda: imp.Tensor(base)[3:3]),
        ("int8", lambda: imp.Tensor(np.arange(-50, 50, dtype=np.int8)) * 1),
    ]


@pytest.mark.parametrize("name,make", _views(), ids=[v[0] for v in _views()])
def test_a_swapped_value_comes_back_with_its_bits_shape_and_strides(swap_dir, name, make):
    t = make()
    before = value_of(t)
    layout = (before.shape, before.strides, before.dtype, before.flags.writeable)
    want = before.copy(order="K")
    del before
    t._swap_out()
    assert imp._core.tensor_status(t) == "SWAPPED"
    t._swap_in()
    after = value_of(t)
    assert (after.shape, after.strides, after.dtype, after.flags.writeable) == layout
    assert after.tobytes(order="A") == want.tobytes(order="A")     # bit for bit
    assert t.shape == want.shape


def test_later_reductions_round_the_same_after_a_swap(swap_dir):
    """The issue's symptom: a transposed value came back C-ordered and sum/softmax then
    summed in another order (1 ulp off)."""
    x = imp.Tensor(np.random.default_rng(1).standard_normal((257, 131)).astype(np.float32))
    t = x.transpose((1, 0))
    del x
    want = [imp.F.sum(t, axis=1).numpy().copy(), imp.F.softmax(t, axis=1).numpy().copy()]
    t._swap_out()
    got = [imp.F.sum(t, axis=1).numpy(), imp.F.softmax(t, axis=1).numpy()]
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_dtr_swapping_a_0d_tensor_by_itself_keeps_it_0d(swap_dir):
    """Each sum is a 0-d value that takes milliseconds to recompute: reading 4 bytes
    back is cheaper, so DTR swaps them out."""
    big = imp.Tensor(np.random.default_rng(3).standard_normal(1 << 23).astype(np.float32))

    def run():
        return [imp.F.sum(big) for _ in range(20)]

    want = [c.numpy().copy() for c in run()]
    old = {n: imp.get_option(n) for n in ("dtr_eviction_threshold", "dtr_evictee_minimum_size")}
    imp.sync()
    imp.dtr.enable(eviction_threshold=imp.memory_stats()["allocated"] + 64, evictee_minimum_size=0)
    try:
        swap_outs = imp.memory_stats()["swap_outs"]
        chain = run()
        imp.sync()
        assert imp.memory_stats()["swap_outs"] > swap_outs, "DTR never swapped"
        for c, w in zip(chain, want):
            got = c.numpy()                        # (swapped in, if it was out)
            assert got.shape == () and value_of(c).shape == () and c.shape == ()
            assert got.tobytes() == w.tobytes()
    finally:
        imp.dtr.disable()
        for n, v in old.items():
            imp.set_option(n, v)


# ------------------------------------------------------------------ only the runtime's own files

def test_swap_files_live_in_a_private_folder_made_for_them(swap_dir):
    x = imp.Tensor(np.ones(N, np.float32)) * 2
    x._swap_out()
    folder = private_folder(swap_dir)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    [name] = os.listdir(folder)
    assert stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode) == 0o600
    assert imp.dtr.swap_dir == str(swap_dir)


def test_a_link_where_a_swap_file_goes_is_not_followed(swap_dir, tmp_path_factory):
    x = imp.Tensor(np.ones(N, np.float32)) * 2
    x._swap_out()                                   # makes the folder (and calibrates)
    x._swap_in()
    space = imp._core.swap_space()
    target = tmp_path_factory.mktemp("elsewhere") / "precious"
    target.write_text("keep me")
    next_file = os.path.join(private_folder(swap_dir), f"{space.serial + 1}.swap")
    os.symlink(target, next_file)
    with pytest.raises(OSError, match=f"could not write {N * 4} bytes to {next_file}: File exists"):
        x._swap_out()
    assert target.read_text() == "keep me"
    assert imp._core.tensor_status(x) == "PRODUCED"
    np.testing.assert_array_equal(x.numpy(), 2)


def test_close_removes_only_the_runtime_s_own_files(tmp_path):
    r = run_python(f"""
        import os, numpy as np, imperative as imp
        imp.dtr.swap_dir = {str(tmp_path)!r}
        imp.set_option("enable_swap", 1)
        open(os.path.join({str(tmp_path)!r}, f"{{os.getpid()}}-mine.bin"), "w").write("mine")
        x = imp.Tensor(np.ones(50000, np.float32)) * 2
        x._swap_out()
        print(os.getpid())
    """)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert os.listdir(tmp_path) == [f"{r.stdout.strip()}-mine.bin"]


def test_several_threads_swapping_out_first_make_one_folder(swap_dir):
    tensors = [imp.Tensor(np.full(N, i, np.float32)) * 1 for i in range(8)]
    imp.sync()
    start, errors = threading.Barrier(len(tensors)), []

    def swap(t):
        try:
            start.wait()
            t._swap_out()
        except BaseException as e:     # (re-raised below, on the test's thread)
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=swap, args=(t,)) for t in tensors]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    assert len(os.listdir(swap_dir)) == 1
    assert len(os.listdir(private_folder(swap_dir))) == len(tensors)
    for i, t in enumerate(tensors):
        np.testing.assert_array_equal(t.numpy(), i)


# The child starts from the default dispositions whatever the test runner inherited (under
# `nohup` SIGHUP is ignored, and the runtime rightly leaves an ignored signal alone).
_SWAP_THEN_WAIT = """
    import os, sys, time, signal
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    import numpy as np, imperative as imp
    {setup}
    imp.set_option("enable_swap", 1)
    x = imp.Tensor(np.ones(50000, np.float32)) * 2
    x._swap_out()
    print(imp.dtr.swap_dir, flush=True)
    time.sleep(60)
"""


def _signal_a_swapping_process(signum, setup=""):
    program = textwrap.dedent(_SWAP_THEN_WAIT.format(setup=setup))
    p = subprocess.Popen([sys.executable, "-c", program],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        folder = p.stdout.readline().strip()
        assert folder and os.path.isdir(folder), p.stderr.read()
        p.send_signal(signum)
        p.wait(timeout=60)
    finally:
        p.kill()
        p.wait()
    return p.returncode, folder, p.stderr.read()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_terminating_signal_removes_the_swap_folder_and_still_ends_the_process(signum):
    rc, folder, err = _signal_a_swapping_process(signum)
    assert rc == -signum, err
    assert not os.path.exists(folder)


def test_the_user_s_own_signal_handler_is_kept():
    rc, folder, err = _signal_a_swapping_process(
        signal.SIGTERM, setup="signal.signal(signal.SIGTERM, lambda s, f: sys.exit(7))")
    assert rc == 7, err                             # theirs ran; exiting ran close()
    assert not os.path.exists(folder)


def test_an_ignored_signal_stays_ignored_when_swapping():
    # (as under `nohup`: the process must not start dying of SIGHUP because it swapped)
    r = run_python("""
        import signal
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        import numpy as np, imperative as imp
        imp.set_option("enable_swap", 1)
        x = imp.Tensor(np.ones(50000, np.float32)) * 2
        x._swap_out()
        imp.sync()
        print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN,
              signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)
    """)
    assert r.stdout.split() == ["True", "True"], r.stderr


def test_no_signal_handler_is_installed_unless_swap_is_used():
    # (compared with what the process inherited: SIG_IGN for SIGHUP under `nohup`)
    r = run_python("""
        import signal
        before = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)]
        import numpy as np, imperative as imp
        x = imp.Tensor(np.ones(10, np.float32)) * 2
        print([signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)] == before)
    """)
    assert r.stdout.split() == ["True"], r.stderr


# -------------------------------------------------------------- errors name the file and the reason

def test_a_truncated_swap_file_is_named_with_its_size_and_the_runtime_goes_on(swap_dir):
    x = imp.Tensor(np.arange(N, dtype=np.float32)) + 1
    x._swap_out()
    folder = private_folder(swap_dir)
    [name] = os.listdir(folder)
    path = os.path.join(folder, name)
    whole = open(path, "rb").read()
    with open(path, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(OSError, match=f"swap file {path}: the file holds 1000 bytes, "
                                      f"expected {N * 4}"):
        x.numpy()
    assert imp._core.tensor_status(x) == "SWAPPED"
    np.testing.assert_array_equal((imp.Tensor(np.ones(3, np.float32)) + 1).numpy(), 2)
    with open(path, "wb") as f:                     # the file restored: the value comes back
        f.write(whole)
    np.testing.assert_array_equal(x.numpy(), np.arange(N) + 1)


def test_a_failed_write_names_the_file_and_the_reason_and_keeps_the_value(tmp_path):
    """A file size limit makes write() fail half way (EFBIG), as a full disk would."""
    r = run_python(f"""
        import os, resource, signal, numpy as np, imperative as imp
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))
        imp.dtr.swap_dir = {str(tmp_path)!r}
        imp.set_option("enable_swap", 1)
        x = imp.Tensor(np.arange(1 << 19, dtype=np.float32)) + 1
        try:
            x._swap_out()
        except OSError as e:
            print(e)
        print(imp._core.tensor_status(x), bool((x.numpy() == np.arange(1 << 19) + 1).all()))
        [folder] = os.listdir({str(tmp_path)!r})
        print(os.listdir(os.path.join({str(tmp_path)!r}, folder)))
    """)
    assert r.returncode == 0, r.stderr
    message, state, files = r.stdout.strip().split("\n")
    assert "swap out failed, the tensor stays in memory: could not write 2097152 bytes to " \
           f"{tmp_path}" in message and message.endswith(": File too large"), message
    assert state == "PRODUCED True" and files == "[]"


def test_swap_dir_takes_only_a_path(swap_dir):
    for bad, error in ((5, TypeError), ("", ValueError)):
        with pytest.raises(error, match="swap_dir"):
            imp.dtr.swap_dir = bad
        assert imp.dtr.swap_dir == str(swap_dir)


# ------------------------------------------------------------------ measured bandwidth

def test_swap_bandwidth_is_measured_and_follows_each_swap(swap_dir):
    x = imp.Tensor(np.ones(4 * N, np.float32)) * 2
    x._swap_out()
    first = imp.memory_stats()
    assert first["swap_write_bytes_per_s"] > 1e6 and first["swap_read_bytes_per_s"] > 1e6
    x._swap_in()
    x._swap_out()
    x._swap_in()
    later = imp.memory_stats()
    assert later["swap_write_bytes_per_s"] != first["swap_write_bytes_per_s"]
    assert later["swap_read_bytes_per_s"] != first["swap_read_bytes_per_s"]
