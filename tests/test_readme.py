"""Every ```python block of README.md runs as written, on its own (issue 13).

Each block runs in a fresh interpreter (it may change options, such as `imp.dtr.enable`, and
write files, such as a profile) in a temporary folder, at the async level of the test.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(path):
    """(line number, code) of each ```python block of the Markdown file at `path`."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def _cases():
    return [pytest.param(code, id=f"README.md:{line}") for line, code in python_blocks(README)]


def test_readme_has_python_blocks():
    assert len(python_blocks(README)) >= 2


@pytest.mark.parametrize("code", _cases())
def test_readme_block_runs(code, tmp_path, async_level):
    prelude = f"import imperative\nimperative.config_async_level({async_level})\n"
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", prelude + code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"block failed:\n{code}\n--- stderr:\n{done.stderr[-3000:]}"
