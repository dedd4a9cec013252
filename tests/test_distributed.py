"""imp.distributed (API.md §10) under `mpiexec -n 2`: the programs are in
tests/distributed_progs/dp_programs.py. Skipped when mpi4py or mpiexec is missing
(`pip install 'imperative[mpi]'`)."""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import imperative as imp
from imperative import distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = os.path.join(ROOT, "tests", "distributed_progs", "dp_programs.py")


def _mpi_missing():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install 'imperative[mpi]')"
    if shutil.which("mpiexec") is None:
        return "mpiexec is not on PATH (pip install 'imperative[mpi]' brings MPICH's)"
    return None


needs_mpi = pytest.mark.skipif(_mpi_missing() is not None, reason=str(_mpi_missing()))


def run(name, tmp_path, *args, n=2, timeout_s="20", limit=60, launcher_wraps=False):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               IMPERATIVE_DIST_TIMEOUT=timeout_s, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               # the ranks run at this test's async level (conftest: 0 and 2)
               IMPERATIVE_ASYNC_LEVEL=str(imp.get_option("async_level")))
    cmd = [sys.executable, PROG, name, str(tmp_path), *map(str, args)]
    if launcher_wraps:     # the launcher sees a shell that exits 0 when python is killed:
        # it does not clean the other ranks up, which must find out by themselves
        cmd = ["sh", "-c", " ".join(f"'{c}'" for c in cmd) + "; sleep 4"]
    return subprocess.run(["mpiexec", "-n", str(n), *cmd], env=env, capture_output=True,
                          text=True, timeout=limit)


@needs_mpi
def test_collectives(tmp_path):
    p = run("collectives", tmp_path)
    assert p.returncode == 0, p.stderr
    base = np.arange(6, dtype=np.float32).reshape(2, 3)
    results = [json.load(open(tmp_path / f"coll{rank}.json")) for rank in (0, 1)]
    values = [np.array(r["values_bits"], np.uint32).view(np.float32) for r in results]
    for rank, res in enumerate(results):
        np.testing.assert_array_equal(res["sum"], base * 3)
        np.testing.assert_array_equal(res["mean"], base * 1.5)
        # (a mean scaled before the sum: the bits of the sum divided after it)
        want = (values[0] + values[1]) / np.float32(2)
        assert res["mean_bits"] == want.view(np.uint32).tolist()
        np.testing.assert_array_equal(res["max"], base * 2)
        np.testing.assert_array_equal(res["min"], base)
        assert res["bcast"] == [1, 1, 1]
        assert res["gather"] == [[0, 10], [1, 11]]
        assert res["scalar"] == 3.0
        assert res["shard"] == [list(range(5 * rank, 5 * rank + 5)),
                                list(range(4 * rank, 4 * rank + 4))]


@needs_mpi
def test_two_ranks_equal_one_process_with_the_whole_batch(tmp_path):
    """N ranks x batch B == one process x batch N*B; bit-identical across ranks; rank 0's
    initial parameters win (each rank seeds its model differently)."""
    two, one = tmp_path / "two", tmp_path / "one"
    two.mkdir()
    one.mkdir()
    p = run("train", two, 8)
    assert p.returncode == 0, p.stderr
    p = run("train", one, 16, n=1)
    assert p.returncode == 0, p.stderr
    r0, r1 = np.load(two / "params0.npz"), np.load(two / "params1.npz")
    ref = np.load(one / "params0.npz")
    assert len(r0.files) == 6
    for k in r0.files:
        np.testing.assert_array_equal(r0[k], r1[k])
        np.testing.assert_allclose(r0[k], ref[k], rtol=2e-5, atol=2e-6)


@needs_mpi
def test_dtr_under_mpi(tmp_path):
    p = run("train_dtr", tmp_path)
    assert p.returncode == 0, p.stderr
    r0, r1 = np.load(tmp_path / "params0.npz"), np.load(tmp_path / "params1.npz")
    for k in r0.files:
        np.testing.assert_array_equal(r0[k], r1[k])
    assert json.load(open(tmp_path / "dtr0.json"))["evictions"] > 0


@needs_mpi
def test_profiler_under_mpi(tmp_path):
    p = run("profile", tmp_path)
    assert p.returncode == 0, p.stderr
    files = sorted(tmp_path.glob("*.chrome_timeline.json"))
    assert len(files) == 2              # one per rank (by pid)
    for f in files:
        events = json.load(open(f))["traceEvents"]
        names = {e.get("name") for e in events if e.get("ph") == "X"}
        assert "all_reduce.start" in names and "all_reduce.wait" in names, names
        assert any(n.startswith("wait MPI all_reduce") for n in names), names


@needs_mpi
def test_a_rank_that_raises_is_named(tmp_path):
    p = run("raise", tmp_path, timeout_s="60")
    assert p.returncode != 0
    assert "rank 1 gives up" in p.stderr
    seconds, *text = open(tmp_path / "error.txt").read().split("\n")
    text = "\n".join(text)
    assert "rank 1" in text and "ValueError: rank 1 gives up" in text, text
    assert float(seconds) < 10        # told, not timed out


@needs_mpi
def test_a_rank_that_raises_lets_the_others_raise_before_the_launcher_ends_them(tmp_path):
    """mpiexec kills every rank once one exits with an error: the failing rank waits for
    the others to be gone (at most 10 s), so that one still handling the error it was
    given (here for a second) gets to the end of it."""
    if imp.get_option("async_level") == 0:
        pytest.skip("once is enough (the failure path is the MPI thread's)")
    t0 = time.monotonic()
    p = run("raise_handled_slowly", tmp_path, timeout_s="60")
    assert p.returncode != 0
    assert (tmp_path / "error.txt").exists(), p.stderr
    text = open(tmp_path / "error.txt").read()
    assert "ValueError: rank 1 gives up" in text, text
    assert time.monotonic() - t0 < 9      # not the whole linger: rank 0's exit ended it


@needs_mpi
def test_a_killed_rank_is_named_within_the_timeout(tmp_path):
    if imp.get_option("async_level") == 0:
        pytest.skip("once is enough (the same path as at level 2)")
    p = run("kill", tmp_path, timeout_s="8", launcher_wraps=True)   # (the shells exit 0)
    assert (tmp_path / "error.txt").exists(), p.stderr
    seconds, *text = open(tmp_path / "error.txt").read().split("\n")
    text = "\n".join(text)
    assert "rank 1" in text and ("no longer running" in text or "no sign of life" in text), text
    assert float(seconds) < 8 + 2


@needs_mpi
def test_mismatched_shapes_name_both(tmp_path):
    p = run("shapes", tmp_path)
    assert p.returncode == 0, p.stderr
    for rank in (0, 1):
        text = open(tmp_path / f"error{rank}.txt").read()
        assert "(3, 4)" in text and "(4, 3)" in text, text
        assert open(tmp_path / f"after{rank}.txt").read() == "3.0"


# ---- one process, no mpiexec

def test_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match="op"):
        dist.make_allreduce_cb("avg")
    with pytest.raises(ValueError, match="bucket_bytes"):
        dist.make_allreduce_cb(bucket_bytes=-1)
    with pytest.raises(ValueError, match="n must"):
        dist.shard(-1)
    with pytest.raises(ValueError, match="batch"):
        dist.shard(10, 0)


def test_before_init():
    if dist.is_initialized():
        pytest.skip("initialised by another test in this process")
    assert dist.get_rank() == 0 and dist.get_world_size() == 1
    assert list(dist.shard(5)) == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="init"):
        dist.all_reduce(imp.Tensor([1.0]))
