"""Build the Cython interpreter core; everything else is in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

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
        ["imperative/_kernels.pyx", "imperative/_sgemm.c", "imperative/_pool.c"],
        depends=["imperative/_sgemm.h", "imperative/_pool.h"],
        include_dirs=[numpy.get_include(), "imperative"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    ),
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={"boundscheck": False, "wraparound": False, "embedsignature": True},
    )
)
