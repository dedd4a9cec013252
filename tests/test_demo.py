"""The demo ships in the package: `python -m imperative.demo` runs a few steps of a small
model under a budget and prints its summary."""
import os
import subprocess
import sys

import pytest

import imperative as imp


def run_demo(*flags, cwd):
    # the package these tests import, wherever it is installed
    root = os.path.dirname(os.path.dirname(os.path.abspath(imp.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "imperative.demo", *flags], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def test_the_demo_runs_as_a_module_and_prints_its_summary(tmp_path, async_level):
    if async_level == 0:
        pytest.skip("the demo's process runs at its own async level: one run is enough")
    r = run_demo("--model", "cnn", "--batch", "2", "--steps", "4", "--profile", "trace", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("ResNet 8 blocks x 32 channels, batch 2")
    assert "training under a budget of" in out and "policy dtr_eq" in out
    summary = out[out.index("\nsummary\n"):]
    assert "(bit-identical to the unconstrained run)" in summary
    for line in ("  loss ", "  step time ", "  peak memory ", "  evictions ", "  profile "):
        assert line in summary, summary
    assert len(os.listdir(tmp_path / "trace")) == 1


def test_the_demo_rejects_an_unknown_model(tmp_path):
    r = run_demo("--model", "nope", cwd=tmp_path)
    assert r.returncode == 2 and "invalid choice" in r.stderr
