"""The Python modules setup.py compiles (imperative/_sources.py): the compiled form is the one
imported, and it computes what the Python source computes, bit for bit (a training step of
a small MLP with Adam, in a process that imports every one of them as Python)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import imperative  # noqa: F401  (installs the finder)
from imperative import _sources

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STEPS = textwrap.dedent("""
    import sys
    import numpy as np
    import imperative as imp
    from imperative import F, nn, optim
    from imperative.autodiff import GradManager
    imp.random.seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.LayerNorm(32), nn.Linear(32, 4))
    opt = optim.Adam(net.parameters(), 1e-2)
    gm = GradManager().attach(net.parameters())
    rng = np.random.default_rng(0)
    x = imp.Tensor(rng.standard_normal((8, 16)).astype(np.float32))
    y = imp.Tensor(rng.integers(0, 4, 8).astype(np.int32))
    for _ in range(3):
        with gm:
            loss = F.cross_entropy(net(x), y)
            gm.backward(loss)
        opt.step()
        opt.clear_grad()
    forms = {m.__file__.endswith(".py") for name, m in sys.modules.items()
             if name.startswith("imperative.") and getattr(m, "__file__", None)
             and name.replace(".", "/") + ".py" in {p for p in COMPILED}}
    np.save(sys.argv[1], np.concatenate([p.numpy().ravel() for p in net.parameters()]))
    print(sorted(forms))
""")


def _module_name(path):
    return path[:-3].replace("/", ".")


def _run_steps(tmp_path, name, pure):
    out = tmp_path / f"{name}.npy"
    env = dict(os.environ, IMPERATIVE_PURE_PYTHON="1" if pure else "0")
    script = f"COMPILED = {list(_sources.COMPILED_MODULES)!r}\n" + STEPS
    done = subprocess.run([sys.executable, "-c", script, str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return np.load(out), done.stdout.strip()


def test_every_listed_module_is_imported_compiled_where_built():
    """Each module of COMPILED_MODULES exists, and where its compiled twin was built (and
    the source has not changed since) that twin is what `import` gave."""
    if _sources.pure_python():
        pytest.skip("IMPERATIVE_PURE_PYTHON=1 imports the sources")
    for path in _sources.COMPILED_MODULES:
        assert os.path.exists(os.path.join(ROOT, path)), path
        name = _module_name(path)
        __import__(name)
        module = sys.modules[name]
        source = os.path.join(ROOT, path)
        if module.__file__.endswith(".py"):
            compiled = [f for f in os.listdir(os.path.dirname(source))
                        if f.startswith(os.path.basename(path)[:-3] + ".") and f.endswith(".so")]
            assert not compiled or (os.stat(source).st_mtime_ns
                                    > os.stat(os.path.join(os.path.dirname(source),
                                                           compiled[0])).st_mtime_ns), name


def test_the_python_sources_compute_what_the_compiled_modules_compute(tmp_path):
    compiled, compiled_forms = _run_steps(tmp_path, "compiled", pure=False)
    python, python_forms = _run_steps(tmp_path, "python", pure=True)
    assert python_forms == "[True]"         # every listed module imported as Python
    np.testing.assert_array_equal(python, compiled)
    assert np.isfinite(compiled).all()
