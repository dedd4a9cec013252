# Included by _core.pyx: the async-error protocol's words. AsyncError; where an op was
# issued (the user's file:line, its scope path, the forward op a backward op is for) captured
# at dispatch; the message of an op that failed on the worker.

cdef extern from "Python.h":
    ctypedef struct PyFrameObject:
        pass
    ctypedef struct PyCodeObject:
        pass
    PyFrameObject* PyEval_GetFrame()            # borrowed
    PyCodeObject* PyFrame_GetCode(PyFrameObject*)   # new reference
    PyFrameObject* PyFrame_GetBack(PyFrameObject*)  # new reference
    int PyFrame_GetLasti(PyFrameObject*)
    int PyCode_Addr2Line(PyCodeObject*, int)
    int PyUnicode_Tailmatch(object, object, Py_ssize_t, Py_ssize_t, int) except -1
    void Py_XDECREF(PyObject*)
    void Py_DECREF(PyObject*)

cdef object _PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class AsyncError(RuntimeError):
    """An op failed on the worker; raised at the next sync point. `__cause__` is the
    original exception."""


cdef inline object _user_code(int* lasti):
    """The code object of the first frame outside this package (where the user's code
    issued an op), with its instruction offset in `*lasti`; the line is looked up only for
    a message. None when no such frame is near."""
    cdef PyFrameObject* frame = PyEval_GetFrame()
    cdef PyFrameObject* back
    cdef PyCodeObject* code
    cdef object found = None
    cdef int depth = 0
    while frame != NULL and depth < 16:
        code = PyFrame_GetCode(frame)
        if not PyUnicode_Tailmatch((<object>code).co_filename, _PACKAGE_DIR, 0, 1 << 30, -1):
            found = <object>code
            lasti[0] = PyFrame_GetLasti(frame)
            Py_DECREF(<PyObject*>code)
            break
        Py_DECREF(<PyObject*>code)
        back = PyFrame_GetBack(frame)
        if depth:
            Py_XDECREF(<PyObject*>frame)
        frame = back
        depth += 1
    if depth:
        Py_XDECREF(<PyObject*>frame)
    return found


cdef inline void _capture_site(Command cmd):
    cdef int lasti = 0
    cmd.site_code = _user_code(&lasti)
    cmd.site_line = lasti


cdef str _where(object code, int lasti):
    """`file:line` of an instruction offset in a code object."""
    if code is None:
        return "<unknown>"
    return f"{code.co_filename}:{PyCode_Addr2Line(<PyCodeObject*>code, lasti)}"


cdef str _op_path(object scope, object op):
    """`block.linear.MatrixMul:0`: the scope path the op's first output is named by
    (imperative.scope imports this module, so it is found when needed)."""
    try:
        return sys.modules["imperative.scope"].op_path(scope, op)
    except Exception:               # a message must never fail the worker
        return repr(op)


@cython.final
cdef class OpSite:
    """Where an op was issued (its scope and file:line), captured at dispatch for a message
    about it later: an op of a backward rule that fails names the forward op it
    differentiates by this (`set_blame`)."""
    cdef readonly object op, scope, code
    cdef readonly int lasti

    def __str__(self):
        return f"{_op_path(self.scope, self.op)} issued at {_where(self.code, self.lasti)}"

    def __repr__(self):
        return f"<OpSite {self}>"


def op_site(op):
    """The OpSite of `op` being dispatched now (call it from the gradient hook)."""
    cdef OpSite site = OpSite.__new__(OpSite)
    site.op = op
    site.scope = _current_scope
    site.code = _user_code(&site.lasti)
    return site


cdef object _blame = None   # the OpSite a backward rule differentiates, while it dispatches


def set_blame(site):
    """Ops dispatched from now on are blamed on `site` (an OpSite, or None) in their error
    messages; returns the previous one, to restore."""
    global _blame
    previous, _blame = _blame, site
    return previous


cdef str _describe_failure(Command cmd, exc):
    cdef TensorInfo info
    inputs = ", ".join(f"{info.shape} {info.dtype}" for info in cmd.inputs)
    text = (f"op {cmd.op!r} ({_op_path(cmd.scope, cmd.op)}) failed on the worker: "
            f"{type(exc).__name__}: {exc} (inputs: [{inputs}]; issued at "
            f"{_where(cmd.site_code, cmd.site_line)}")
    if cmd.blame is not None:
        text += f"; in the backward of {cmd.blame}"
    return text + ")"
