"""Which form of the package's compiled Python modules is imported.

setup.py compiles the Python modules on every op's path (the autodiff engine, functional,
nn, the Tensor facade, ...) with Cython as they are written (COMPILED_MODULES): each .py
stays the source, and its compiled module sits beside it, which Python's import prefers.
In a source checkout that would run a stale module after an edit, so there the finder
below imports the .py instead wherever it changed after its module was compiled, saying
so once; and anywhere, IMPERATIVE_PURE_PYTHON=1 imports every one of them as Python (to
step through them in a debugger, or to compare the two forms). An installed package (no
setup.py beside it) otherwise imports the compiled modules without looking.

This module imports nothing of the package: the package's __init__ imports it first, which
installs the finder.
"""
import importlib.machinery
import importlib.util
import os
import sys
import warnings

# relative to the checkout's root; setup.py reads this list (without importing the package)
COMPILED_MODULES = (
    "imperative/autodiff/engine.py", "imperative/autodiff/manager.py",
    "imperative/autodiff/registry.py", "imperative/autodiff/rules_indexing.py",
    "imperative/autodiff/rules_math.py", "imperative/autodiff/rules_nn.py",
    "imperative/autodiff/rules_shape.py", "imperative/backend/epilogue.py",
    "imperative/backend/native.py", "imperative/creation.py", "imperative/dtype.py",
    "imperative/functional.py", "imperative/module.py", "imperative/nn.py",
    "imperative/ops/base.py",
    "imperative/ops/elemwise.py", "imperative/ops/matmul.py", "imperative/ops/optim.py",
    "imperative/ops/reduce.py", "imperative/ops/shape.py", "imperative/ops/softmax.py",
    "imperative/optim.py", "imperative/scope.py", "imperative/tensor.py",
    "imperative/tensor_index.py",
)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_IN_CHECKOUT = os.path.exists(os.path.join(os.path.dirname(_PACKAGE_DIR), "setup.py"))


def pure_python():
    """Whether IMPERATIVE_PURE_PYTHON=1 asks for every module as Python."""
    return os.environ.get("IMPERATIVE_PURE_PYTHON", "").strip() == "1"


class SourceWhereNewer:
    """A meta path finder for the package's modules: the spec of a module's .py where its
    compiled twin is older than it (or pure_python()), else None (the usual finders)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if not name.startswith("imperative."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return None
        source = os.path.join(os.path.dirname(spec.origin), name.rpartition(".")[2] + ".py")
        if not os.path.exists(source):
            return None          # an extension with no Python source (_core, _kernels)
        if not pure_python():
            if os.stat(source).st_mtime_ns <= os.stat(spec.origin).st_mtime_ns:
                return None
            warnings.warn(f"{source} changed after it was compiled: imported as Python (slower)"
                          f" until `pip install -e .` or `python setup.py build_ext --inplace`"
                          f" compiles it again", stacklevel=2)
        return importlib.util.spec_from_file_location(name, source)


# the finder goes first where it can matter: in a checkout, or when asked for Python
if (_IN_CHECKOUT or pure_python()) and SourceWhereNewer not in sys.meta_path:
    sys.meta_path.insert(0, SourceWhereNewer)
