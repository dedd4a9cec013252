"""Build the Cython interpreter core; everything else is in pyproject.toml.

`IMPERATIVE_NO_NATIVE=1 python setup.py build_ext --inplace --force` builds the kernels
without their x86-64 code, as on other CPUs (numpy then runs the products), so that the
portable build can be tested on x86-64 too (--force: the sources did not change)."""
import ast
import os
import shutil
import subprocess

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class StrippedBuildExt(build_ext):
    """Extensions built for a wheel (not `--inplace`, the developer's build) lose their
    symbol tables: 6 MB of the 12 MB an install took. Where there is no `strip` (or it
    refuses the file), the module stays as built. The extensions compile in parallel, one
    job a CPU (about twenty of them)."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def build_extension(self, ext):
        super().build_extension(ext)
        strip = shutil.which("strip")
        if self.inplace or strip is None:
            return
        subprocess.run([strip, "--strip-unneeded", self.get_ext_fullpath(ext.name)], check=False)


def _no_native():
    value = os.environ.get("IMPERATIVE_NO_NATIVE", "").strip().lower()
    if value not in ("", "0", "1"):
        raise SystemExit(f"IMPERATIVE_NO_NATIVE={value!r}: expected 1 (portable kernels) or 0")
    return value == "1"


# the kernels' x86-64 code, or only their portable branch (see _sgemm.h)
KERNEL_MACROS = [("IMP_NO_NATIVE", "1")] if _no_native() else []

extensions = [
    Extension(
        "imperative._core",
        ["imperative/_core.pyx"],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        language="c++",
        extra_compile_args=["-O2"],
    ),
    # float32 GEMM and convolution kernels; AVX-512 code is compiled per function (target
    # attributes) and chosen at run time, so the build needs no -march flag
    Extension(
        "imperative._kernels",
        ["imperative/_kernels.pyx", "imperative/_sgemm.c", "imperative/_pool.c",
         "imperative/_loops.c", "imperative/_rows.c", "imperative/_activations.c",
         "imperative/_reduce.c", "imperative/_windows.c"],
        depends=["imperative/_sgemm.h", "imperative/_sgemm_kernels.h", "imperative/_pool.h",
                 "imperative/_loops.h", "imperative/_rows.h", "imperative/_vec8.h",
                 "imperative/_activations.h", "imperative/_reduce.h", "imperative/_windows.h",
                 "imperative/_kernels_activations.pxi", "imperative/_kernels_reduce.pxi",
                 "imperative/_kernels_windows.pxi", "imperative/_kernels_optim.pxi",
                 "imperative/_kernels_copy.pxi", "imperative/_kernels_select.pxi"],
        include_dirs=[numpy.get_include(), "imperative"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")] + KERNEL_MACROS,
        # (no errno from sqrtf: the loops' square roots vectorise)
        extra_compile_args=["-O3", "-fno-math-errno"],
    ),
]


def _compiled_modules():
    """imperative/_sources.py's COMPILED_MODULES (read, not imported: the package needs its
    build to import); none with IMPERATIVE_PURE_PYTHON=1."""
    if os.environ.get("IMPERATIVE_PURE_PYTHON", "").strip() == "1":
        return []
    with open(os.path.join("imperative", "_sources.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "COMPILED_MODULES":
            return list(ast.literal_eval(node.value))
    raise SystemExit("imperative/_sources.py has no COMPILED_MODULES")


# The Python modules on every op's path, compiled as they are written (Python's semantics:
# annotations are not C types, indexes wrap and are checked): the dispatch-bound training
# step of a small MLP spent 0.23 of its 0.32 ms in them. imperative/_sources.py imports the
# .py instead where it is newer than its compiled module.
python_extensions = [Extension(path[:-3].replace("/", "."), [path])
                     for path in _compiled_modules()]

setup(
    cmdclass={"build_ext": StrippedBuildExt},
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "embedsignature": True},
    ) + cythonize(
        python_extensions,
        language_level=3,
        compiler_directives={"annotation_typing": False, "embedsignature": True},
    ),
)
