"""`ruff check` over the package, the tests and the tools, with the rules pyproject.toml
selects (issue 14): the README's test command is what CI runs, so the lint runs with it.
Skips where ruff is not installed (`pip install -e '.[test]'` installs it) or where the
checkout is not here (tests run against an installed wheel)."""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ["imperative", "tests", "tools"]


def _ruff():
    """The command that runs ruff: its Python module where installed, else the binary."""
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    if shutil.which("ruff"):
        return [shutil.which("ruff")]
    pytest.skip("ruff is not installed (pip install -e '.[test]')")


def _check(*args):
    if not (ROOT / "pyproject.toml").is_file() or not (ROOT / "tools").is_dir():
        pytest.skip("the checkout (pyproject.toml, tools/) is not here")
    return subprocess.run([*_ruff(), "check", "--no-cache", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_the_package_tests_and_tools_are_clean():
    out = _check(*CHECKED)
    assert out.returncode == 0, f"ruff check {' '.join(CHECKED)}:\n{out.stdout}{out.stderr}"


def test_the_configured_rules_catch_what_they_are_chosen_for(tmp_path):
    """The configuration is in force: each chosen group reports its kind of bug in a file
    written to have one of each (a clean run over the repository proves nothing if the
    configuration had selected nothing)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\n"                                          # F401 unused import
        "\n"
        "\n"
        "def f(items=[]):\n"                                   # B006 mutable default
        "    return [lambda: i for i in items] + [nope]\n"     # B023 late binding, F821
        "\n"
        "\n"
        f"LONG = '{'x' * 100}'\n")                             # E501 past 100 characters
    out = _check("--config", str(ROOT / "pyproject.toml"), "--output-format", "json", str(bad))
    found = {d["code"] for d in json.loads(out.stdout)}
    assert out.returncode == 1
    assert {"F401", "B006", "B023", "F821", "E501"} <= found, found
