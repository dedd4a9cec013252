"""`mypy --strict` accepts a small training script written against the public API (issue 13):
every public name it uses is annotated, so nothing reaches the user as an untyped call."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_training_script_passes_mypy_strict(async_level):
    pytest.importorskip("mypy")
    if async_level != 0:
        pytest.skip("a static check: once is enough")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--no-incremental", str(ROOT / "tests" / "typing" / "train_script.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MYPYPATH=str(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_training_script_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "typing" / "train_script.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    float(done.stdout.split()[0])                    # f"{loss:.4f}" printed a number


def test_the_package_says_it_is_typed():
    assert (ROOT / "imperative" / "py.typed").exists()
    assert (ROOT / "imperative" / "_core.pyi").exists()
