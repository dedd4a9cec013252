"""The error `import imperative` raises when the compiled core cannot be imported: in a
source tree that was not built, Python's own message blames a circular import."""
import glob
import importlib.machinery
import importlib.metadata
import os


def core_import_error(error):
    """An ImportError that says what to run when imperative/_core*.so is absent (for this
    Python); `error` itself when the module is there but failed to load."""
    here = os.path.dirname(os.path.abspath(__file__))
    if any(glob.glob(os.path.join(here, "_core" + suffix))
           for suffix in importlib.machinery.EXTENSION_SUFFIXES):
        return error
    message = (f"imperative's compiled core is not built in {here}: build it with "
               f"`pip install -e .` (or `python setup.py build_ext --inplace`) in "
               f"{os.path.dirname(here)}. (A trace's summary needs no core: "
               f"python {os.path.join(here, 'profiler_summary.py')} summary TRACE.json)")
    try:
        installed = importlib.metadata.version("imperative")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed:
        message += (f"; or run from another folder to use the installed imperative {installed} "
                    f"(this source tree shadows it)")
    return ImportError(message)
