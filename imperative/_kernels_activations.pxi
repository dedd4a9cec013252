# Included by _kernels.pyx: the float32 activations of _activations.c.

cdef extern from "_activations.h":
    void imp_relu(long n, const float *x, float *y) noexcept nogil
    void imp_sigmoid(long n, const float *x, float *y) noexcept nogil
    void imp_gelu(long n, const float *x, float *y, const float *c, int degree) noexcept nogil
    void imp_gelu_grad(long n, const float *dy, const float *x, float *out, const float *c,
                       int degree) noexcept nogil
    void imp_silu(long n, const float *x, float *y) noexcept nogil
    void imp_silu_grad(long n, const float *dy, const float *x, float *out) noexcept nogil
    void imp_leaky_relu(long n, const float *x, float *y, float slope) noexcept nogil
    void imp_hardswish(long n, const float *x, float *y) noexcept nogil
    void imp_hardsigmoid(long n, const float *x, float *y) noexcept nogil
    void imp_erf(long n, const float *x, float *y, const float *cs, int ds, const float *cl,
                 int dl) noexcept nogil

ctypedef void (*_unary_loop)(long n, const float *x, float *y) noexcept nogil


cdef cnp.ndarray _like(str fn, object x):
    """A new C-contiguous float32 array of x's shape, x a C-contiguous float32 array."""
    cdef cnp.ndarray a = _float32_c_array(fn, "x", x)
    return cnp.PyArray_EMPTY(a.ndim, cnp.PyArray_DIMS(a), cnp.NPY_FLOAT32, 0)


cdef cnp.ndarray _output(str fn, object x, object out):
    """`out` (a C-contiguous float32 array of x's size, which may be x) for a result like
    x, x a C-contiguous float32 array; with out None, a new array."""
    if out is None:
        return _like(fn, x)
    _check_same_size(fn, out, ("x",), (x,))
    return <cnp.ndarray>out


cdef cnp.ndarray _map(str fn, object x, object out, _unary_loop loop):
    """loop(x) of a C-contiguous float32 array into `out` (_output)."""
    cdef cnp.ndarray y = _output(fn, x, out)
    cdef long n = cnp.PyArray_SIZE(y)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    if n < _NOGIL_ELEMENTS:
        loop(n, px, py)
    else:
        with nogil:
            loop(n, px, py)
    return y


def relu(x, out=None):
    """max(x, 0) of a C-contiguous float32 array, bit for bit numpy's maximum(x, 0) (a NaN
    kept, -0 made +0), into `out` (a C-contiguous float32 array of x's size, which may be x)
    or a new array."""
    return _map("relu", x, out, imp_relu)


def sigmoid(x, out=None):
    """1 / (1 + exp(-x)) of a C-contiguous float32 array (into `out` as relu's, or a new
    array), computed from exp(-|x|), which never overflows."""
    return _map("sigmoid", x, out, imp_sigmoid)


def silu(x, out=None):
    """x * sigmoid(x) of a C-contiguous float32 array (into `out` or a new array), sigmoid
    as above."""
    return _map("silu", x, out, imp_silu)


def hardswish(x, out=None):
    """x * clip(x + 3, 0, 6) / 6 of a C-contiguous float32 array (into `out` or a new
    array), bit for bit numpy's passes in that order."""
    return _map("hardswish", x, out, imp_hardswish)


def hardsigmoid(x, out=None):
    """clip(x + 3, 0, 6) / 6 of a C-contiguous float32 array (into `out` or a new array),
    bit for bit numpy's passes."""
    return _map("hardsigmoid", x, out, imp_hardsigmoid)


def leaky_relu(x, float slope):
    """x where x >= 0, else x * slope, of a C-contiguous float32 array (a new array), bit
    for bit numpy's where(x >= 0, x, x * float32(slope))."""
    cdef cnp.ndarray y = _like("leaky_relu", x)
    cdef long n = cnp.PyArray_SIZE(y)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    with nogil:
        imp_leaky_relu(n, px, py, slope)
    return y


cdef cnp.ndarray _polynomial(str fn, object coefficients):
    cdef cnp.ndarray c = _float32_c_array(fn, "coefficients", coefficients)
    if c.size < 1:
        raise ValueError(f"{fn}: coefficients must hold at least one value")
    return c


def gelu(x, coefficients, out=None):
    """x * Phi(x) of a C-contiguous float32 array (into `out` or a new array), Phi from
    erfc through the polynomial `coefficients` (float32, lowest degree first; see
    _activations.h)."""
    cdef cnp.ndarray y = _output("gelu", x, out)
    cdef cnp.ndarray c = _polynomial("gelu", coefficients)
    cdef long n = cnp.PyArray_SIZE(y)
    cdef int degree = c.size - 1
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef const float *pc = <const float *>cnp.PyArray_DATA(c)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    if n < _NOGIL_ELEMENTS:
        imp_gelu(n, px, py, pc, degree)
    else:
        with nogil:
            imp_gelu(n, px, py, pc, degree)
    return y


def erf(x, small, tail, out=None):
    """erf of a C-contiguous float32 array (into `out` or a new array) from the two
    expansions' float32 coefficients (lowest degree first; see _activations.h)."""
    cdef cnp.ndarray y = _output("erf", x, out)
    cdef cnp.ndarray cs = _polynomial("erf", small), cl = _polynomial("erf", tail)
    cdef long n = cnp.PyArray_SIZE(y)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    with nogil:
        imp_erf(n, px, py, <const float *>cnp.PyArray_DATA(cs), cs.size - 1,
                <const float *>cnp.PyArray_DATA(cl), cl.size - 1)
    return y


def gelu_grad(dy, x, coefficients, out):
    """out = dy * (Phi(x) + x phi(x)), GELU's gradient, for C-contiguous float32 arrays of one
    size (`out` may be dy or x), Phi as for gelu."""
    _check_same_size("gelu_grad", out, ("dy", "x"), (dy, x))
    cdef cnp.ndarray c = _polynomial("gelu_grad", coefficients)
    cdef long n = cnp.PyArray_SIZE(<cnp.ndarray>out)
    cdef int degree = c.size - 1
    cdef const float *pd = <const float *>cnp.PyArray_DATA(<cnp.ndarray>dy)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef const float *pc = <const float *>cnp.PyArray_DATA(c)
    cdef float *po = <float *>cnp.PyArray_DATA(<cnp.ndarray>out)
    with nogil:
        imp_gelu_grad(n, pd, px, po, pc, degree)
    return out


def silu_grad(dy, x, out):
    """out = dy * s * (1 + x * (1 - s)), s = sigmoid(x), SiLU's gradient, for C-contiguous
    float32 arrays of one size (`out` may be dy or x)."""
    _check_same_size("silu_grad", out, ("dy", "x"), (dy, x))
    cdef long n = cnp.PyArray_SIZE(<cnp.ndarray>out)
    cdef const float *pd = <const float *>cnp.PyArray_DATA(<cnp.ndarray>dy)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef float *po = <float *>cnp.PyArray_DATA(<cnp.ndarray>out)
    with nogil:
        imp_silu_grad(n, pd, px, po)
    return out
