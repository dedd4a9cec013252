"""Off x86-64 (issue 13, item 12): the native products are unavailable and numpy runs them.

On this machine the fallback is exercised two ways: here, by making the native kernels
unavailable for a test (as `_kernels.supported()` is False off x86-64), and by building
with `IMPERATIVE_NO_NATIVE=1` (setup.py), which compiles only the portable branch of the C
code, and running the whole suite on that build. Where an aarch64 cross compiler is
installed, the C sources are also compiled for aarch64 (syntax only).
"""
import os
import shutil
import subprocess
import sysconfig

import numpy as np
import pytest

import imperative as imp
from imperative import F
from imperative.backend import native

_kernels = native._kernels
PACKAGE = os.path.dirname(imp.__file__)


@pytest.fixture
def no_native(monkeypatch):
    """The kernels as a build without x86-64 code offers them (whatever the mode)."""
    monkeypatch.setattr(native, "_SUPPORTED", False)
    monkeypatch.setattr(native, "_MODE", "always")


def _conv2d_reference(x, w, padding):
    """A float64 stride-1 cross-correlation, loop by loop over the kernel taps."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    ho, wo = h + 2 * padding - kh + 1, wd + 2 * padding - kw + 1
    y = np.zeros((n, o, ho, wo))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
    return y


def test_the_products_fall_back_to_numpy(no_native):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 80)).astype(np.float32)
    b = rng.standard_normal((80, 64)).astype(np.float32)
    assert native.matmul(a, b) is None and not native.active()
    assert np.array_equal(F.matmul(imp.Tensor(a), imp.Tensor(b)).numpy(), a @ b)  # numpy's own
    x = rng.standard_normal((2, 8, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    assert native.conv2d(x, w, (1, 1), (1, 1), (1, 1), 1) is None
    got = F.conv2d(imp.Tensor(x), imp.Tensor(w), padding=1).numpy()
    np.testing.assert_allclose(got, _conv2d_reference(x, w, 1), rtol=1e-4, atol=1e-4)
    dy = rng.standard_normal((2, 300)).astype(np.float32)
    y = rng.standard_normal((2, 300)).astype(np.float32)
    assert native.relu_grad(dy, y, None) is None


def test_a_training_step_without_native_products_matches_numpy(no_native):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    w0 = (rng.standard_normal((32, 48)) * 0.1).astype(np.float32)
    w = imp.Parameter(w0)
    gm = imp.autodiff.GradManager().attach([w])
    with gm:
        loss = F.relu(F.linear(imp.Tensor(x), w)).sum()
        gm.backward(loss)
    h = x @ w0.T
    np.testing.assert_allclose(loss.numpy(), np.maximum(h, 0).sum(), rtol=1e-5)
    np.testing.assert_array_equal(w.grad.numpy(), (h > 0).astype(np.float32).T @ x)


def test_the_build_says_whether_it_has_native_code():
    assert not _kernels.supported() or _kernels.NATIVE_BUILD
    if not _kernels.NATIVE_BUILD:
        with pytest.raises(RuntimeError, match="needs an x86-64 build"):
            _kernels.sgemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32),
                           np.empty((2, 2), np.float32))


CROSS = {"c": "aarch64-linux-gnu-gcc", "cpp": "aarch64-linux-gnu-g++"}


@pytest.mark.parametrize("source", ["_sgemm.c", "_pool.c", "_kernels.c", "_core.cpp"])
def test_the_c_sources_compile_for_aarch64(source):
    compiler = shutil.which(CROSS[source.rsplit(".", 1)[1]])
    path = os.path.join(PACKAGE, source)
    if compiler is None or not os.path.exists(path):   # generated sources exist after a build
        pytest.skip(f"no {CROSS[source.rsplit('.', 1)[1]]} or no {source} here")
    done = subprocess.run(
        [compiler, "-fsyntax-only", "-Wall", "-DNPY_NO_DEPRECATED_API=NPY_1_7_API_VERSION",
         "-I", sysconfig.get_paths()["include"], "-I", np.get_include(), "-I", PACKAGE, path],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
