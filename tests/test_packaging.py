"""Packaging (issue 13, item 7): the sdist carries the license and says which it is."""
import os
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    """(member names without the top folder, PKG-INFO text) of a fresh sdist (~5 s)."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [archive] = out.iterdir()
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
        top = tar.getmembers()[0].name.split("/", 1)[0]
        pkg_info = tar.extractfile(f"{top}/PKG-INFO").read().decode()
    return names, pkg_info


def test_the_sdist_carries_the_license_and_names_it(sdist):
    names, pkg_info = sdist
    assert "LICENSE" in names
    assert "License-Expression: Apache-2.0" in pkg_info
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert text.startswith("Copyright 2026 The imperative authors")
    assert "Apache License\n                           Version 2.0, January 2004" in text


def test_the_sdist_carries_the_kernel_sources_and_headers(sdist):
    """A build from the sdist compiles _sgemm.c, which includes _sgemm_kernels.h once per
    instruction set: a header missing from MANIFEST.in breaks only that build."""
    names, _ = sdist
    assert {"imperative/_sgemm.c", "imperative/_sgemm.h", "imperative/_sgemm_kernels.h",
            "imperative/_pool.c", "imperative/_pool.h", "imperative/_loops.c",
            "imperative/_loops.h", "imperative/_rows.c", "imperative/_rows.h",
            "imperative/_vec8.h", "imperative/_activations.c", "imperative/_activations.h"} <= names
