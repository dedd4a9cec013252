# Included by _kernels.pyx: numpy's where as one branch-free pass of _loops.c.
from libc.stdint cimport uint32_t

cdef extern from "_loops.h":
    void imp_where32(long n, long cond_n, const unsigned char *cond, const uint32_t *x,
                     int x_full, const uint32_t *y, int y_full, uint32_t *out) nogil


_np_where = getattr(np.where, "_implementation", np.where)     # (no dispatcher: plain arrays)


cdef inline bint _c_array(object a):
    return type(a) is np.ndarray and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)


cdef int _where_operand(object a):
    """1: a C-contiguous array of values; 0: one value (0-d, or broadcast with all strides
    0, as a sum's gradient); -1: neither (numpy's where takes it)."""
    if type(a) is not np.ndarray:
        return -1
    if cnp.PyArray_NDIM(<cnp.ndarray>a) == 0:
        return 0
    if cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a):
        return 1
    return 0 if not any(a.strides) else -1


def where_or_numpy(cond, x, y):
    """numpy's where(cond, x, y), in one branch-free pass where it applies: a C-contiguous
    bool cond, x and y of one 4-byte dtype, each C-contiguous of the result's shape or one
    value (0-d or broadcast), cond of that shape or of its trailing axes (a mask repeated,
    as an attention mask over its batch); numpy's own where otherwise. The bits are numpy's
    either way."""
    cdef int x_kind = _where_operand(x), y_kind = _where_operand(y)
    if not (x_kind >= 0 and y_kind >= 0 and _c_array(cond)
            and cnp.PyArray_TYPE(<cnp.ndarray>cond) == cnp.NPY_BOOL
            and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.PyArray_TYPE(<cnp.ndarray>y)
            and cnp.PyArray_ITEMSIZE(<cnp.ndarray>x) == 4):
        return _np_where(cond, x, y)
    shape = (x.shape if cnp.PyArray_NDIM(<cnp.ndarray>x) else
             y.shape if cnp.PyArray_NDIM(<cnp.ndarray>y) else cond.shape)
    cdef tuple cs = cond.shape
    if ((cnp.PyArray_NDIM(<cnp.ndarray>y) and y.shape != shape) or len(cs) > len(shape)
            or shape[len(shape) - len(cs):] != cs):
        return _np_where(cond, x, y)
    cdef cnp.ndarray out = np.empty(shape, x.dtype)
    cdef long n = cnp.PyArray_SIZE(out), cond_n = cnp.PyArray_SIZE(<cnp.ndarray>cond)
    if n == 0:
        return out
    cdef const unsigned char *pc = <const unsigned char *>cnp.PyArray_DATA(<cnp.ndarray>cond)
    cdef const uint32_t *px = <const uint32_t *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef const uint32_t *py = <const uint32_t *>cnp.PyArray_DATA(<cnp.ndarray>y)
    cdef uint32_t *po = <uint32_t *>cnp.PyArray_DATA(out)
    if n < _NOGIL_ELEMENTS:
        imp_where32(n, cond_n, pc, px, x_kind, py, y_kind, po)
    else:
        with nogil:
            imp_where32(n, cond_n, pc, px, x_kind, py, y_kind, po)
    return out
