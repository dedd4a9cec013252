"""The demo ships in the package: `python -m imperative.demo` runs a few steps of a small
model under a budget and prints its summary."""
import importlib.util
import os
import subprocess
import sys
import time
import types

import pytest

import imperative as imp
from imperative import demo

SMALL = ("--model", "cnn", "--batch", "2")      # a step takes well under a second


def run_demo(*flags, cwd, **popen):
    # the package these tests import, wherever it is installed
    root = os.path.dirname(os.path.dirname(os.path.abspath(imp.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "imperative.demo", *flags], text=True,
                          timeout=120, cwd=cwd, env=env, **(popen or dict(capture_output=True)))


@pytest.fixture
def once(async_level):
    """The demo's processes run at their own async level: one run of a test is enough."""
    if async_level == 0:
        pytest.skip("the demo's processes run at their own async level: one run is enough")


def summary_of(out):
    return out[out.index("\nsummary\n"):]


def test_the_demo_runs_as_a_module_and_prints_its_summary(tmp_path, once):
    r = run_demo(*SMALL, "--steps", "4", "--profile", "trace", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("ResNet 8 blocks x 32 channels, batch 2")
    assert "training under a budget of" in out and "policy dtr_eq" in out
    # not a terminal: plain lines, no bar
    assert "  step   1/4  loss " in out and "  step   4/4  loss " in out and "\r" not in out
    summary = summary_of(out)
    assert "(bit-identical to the unconstrained run)" in summary
    assert "the median over 3 alternated step pairs" in summary
    for line in ("  loss ", "  step time ", "  peak memory ", "  evictions ", "  profile "):
        assert line in summary, summary
    assert len(os.listdir(tmp_path / "trace")) == 1


@pytest.mark.parametrize("steps", [1, 2])
def test_one_or_two_steps_compare_as_many_losses(tmp_path, steps, once):
    """It compared the first 3 unconstrained losses with the 1 or 2 it trained."""
    r = run_demo(*SMALL, "--steps", str(steps), "--profile", "", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = summary_of(r.stdout)
    assert "(bit-identical to the unconstrained run)" in summary
    if steps == 1:
        assert "not measured: the first step warms up" in summary
    else:
        assert "the median over 1 alternated step pair\n" in summary


def test_the_demo_rejects_an_unknown_model(tmp_path):
    r = run_demo("--model", "nope", cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice" in r.stderr


@pytest.mark.parametrize("flags,message", [
    (("--steps", "0"), "argument --steps: must be at least 1, got 0"),
    (("--budget", "abc"), "argument --budget: expected a fraction of the unconstrained peak"),
])
def test_bad_values_are_usage_errors_not_tracebacks(tmp_path, flags, message):
    r = run_demo(*flags, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""                        # nothing ran


@pytest.mark.parametrize("flags,message", [
    (("--steps", "-3"), "--steps: must be at least 1"),
    (("--steps", "2.5"), "--steps: expected a whole number"),
    (("--budget", "0"), "--budget: a fraction of the peak must be above 0"),   # 0: no budget
    (("--budget", "-0.5"), "--budget: a fraction of the peak must be above 0"),
    (("--budget", "nan"), "--budget: a fraction of the peak must be above 0"),
    (("--budget", "0MB"), "--budget: must be more than 0 bytes"),
    (("--batch", "0"), "--batch: must be at least 1"),
    (("--min-evictee", "big"), "--min-evictee: size must be a number of bytes"),
])
def test_more_bad_values_are_usage_errors(flags, message, capsys):
    with pytest.raises(SystemExit) as e:
        demo.main(list(flags))
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_budget_values_in_bytes():
    assert demo.budget_arg("0.5")(1000) == 500
    assert demo.budget_arg("2")(1000) == 2000                  # a fraction may pass 1
    assert demo.budget_arg("1e-9")(1000) == 1                  # never 0 bytes: 0 is no budget
    assert demo.budget_arg("60MB")(1000) == 60 * 2 ** 20       # a size ignores the peak


def test_a_budget_below_what_the_model_runs_in_is_said_at_once(tmp_path, once):
    """It printed nothing for minutes while every op recomputed what the last evicted."""
    start = time.perf_counter()
    r = run_demo(*SMALL, "--budget", "1MB", "--steps", "20", "--profile", "", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "training under a budget of 1.0 MiB" in r.stdout
    assert "  step   1/" not in r.stdout                   # stopped in the first step
    err = r.stderr
    assert "error: the budget of 1.00 MiB is below what cnn can run in: in step 1" in err, err
    assert "could not be evicted" in err and "The budget must be above" in err
    assert "Traceback" not in err
    assert time.perf_counter() - start < 60


class FakeRun:
    """Stands in for demo.Run: logs the order of the steps of both runs."""
    log = []

    def __init__(self, name, budget, **settings):
        self.name, self.records = name, []

    def step(self, profile=False, patience=None, on_slow=None):
        i = len(self.records)
        self.log.append((self.name, i))
        self.records.append(dict(loss=1.0 / (i + 1), seconds=0.1, peak=1000, allocated=100,
                                 floor=100, evictions=0, recomputes=0,
                                 recompute_seconds=0.0, budget_overshoots=0, swap_outs=0,
                                 eviction_seconds=0.0))
        return self.records[-1]

    def finish(self):
        return None


def test_the_runs_alternate_step_by_step(monkeypatch, capsys):
    """Unconstrained steps 1 and 2 measure the peak; from then on unconstrained step i
    runs right before budgeted step i."""
    monkeypatch.setattr(demo, "Run", FakeRun)
    monkeypatch.setattr(FakeRun, "log", [])
    args = types.SimpleNamespace(model="cnn", lr=None, batch=None, profile="", min_evictee=0,
                                 policy="dtr_eq", steps=4, budget=demo.budget_arg("0.5"))
    runs = []
    budget, trace = demo.train(args, runs)
    assert budget == 500 and trace is None
    assert FakeRun.log == [("unconstrained", 0), ("unconstrained", 1), ("budgeted", 0),
                           ("budgeted", 1), ("unconstrained", 2), ("budgeted", 2),
                           ("unconstrained", 3), ("budgeted", 3)]
    assert [r.name for r in runs] == ["unconstrained", "budgeted"]


def test_the_time_ratio_is_the_median_of_the_step_pairs():
    def records(*seconds):
        return [dict(seconds=s) for s in seconds]
    # the first (warm-up) pair is left out; a noisy pair does not move the median
    assert demo.median_ratio(records(9, 2, 2, 2, 2), records(1, 1, 1, 1, 0.2)) == 2
    assert demo.median_ratio(records(9), records(1)) is None


def test_a_slow_step_is_reported_while_it_runs(once):
    """`patience` seconds without an answer: the caller hears of it (the demo warns of a
    recomputation storm) and the step still completes."""
    run = demo.Run("unconstrained", model="cnn", lr=None, batch=2, profile="", budget=None,
                   min_evictee=0, policy="dtr_eq")
    try:
        heard = []
        record = run.step(patience=0.001, on_slow=heard.append)
        assert heard == [0.001] and record["loss"] > 0 and record["seconds"] > 0
        assert run.finish() is None
    finally:
        run.stop()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                    reason="--plot needs matplotlib (pip install 'imperative[plot]')")
def test_plot_writes_a_picture(tmp_path, once):
    r = run_demo(*SMALL, "--steps", "3", "--profile", "", "--plot", "memory.png", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  plot            memory.png" in r.stdout
    assert (tmp_path / "memory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # as if not installed
    with pytest.raises(SystemExit) as e:
        demo.main(["--plot", "memory.png"])
    assert e.value.code == 2
    assert "--plot needs matplotlib: pip install 'imperative[plot]'" in capsys.readouterr().err


def test_plot_into_a_missing_folder_is_a_usage_error(tmp_path, capsys):
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("without matplotlib --plot stops at that first")
    with pytest.raises(SystemExit) as e:
        demo.main(["--plot", str(tmp_path / "nope" / "memory.png")])
    assert e.value.code == 2 and "--plot: no folder" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("tqdm") is None,
                    reason="the progress bar needs tqdm (pip install 'imperative[progress]')")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal, as Linux has")
def test_a_terminal_gets_a_progress_bar(tmp_path, once):
    import fcntl
    import pty
    import struct
    import termios
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # rows, cols
    try:
        r = run_demo(*SMALL, "--steps", "3", "--profile", "", cwd=tmp_path,
                     stdout=terminal, stderr=subprocess.PIPE)
    finally:
        os.close(terminal)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:           # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    out = out.decode()
    assert r.returncode == 0, out + r.stderr
    assert "under the budget: 100%" in out and "3/3" in out, out
    assert "  step   1/3" not in out               # the bar instead of the lines
    assert "bit-identical" in out
