# Included by _kernels.pyx: small float32 reductions (_reduce.c), Reduce's direct kernel
# on the tiny-op path; batch norm's gradients, per-channel sums first (_loops.c).

cdef extern from "_reduce.h":
    void imp_reduce_rows(int mode, long rows, long n, const float *x, float *out,
                         int *unsure) noexcept nogil

cdef enum:                  # _reduce.h's modes
    _SUM = 0
    _MEAN = 1
    _MAX = 2
    _MIN = 3
REDUCE_SUM, REDUCE_MEAN, REDUCE_MAX, REDUCE_MIN = _SUM, _MEAN, _MAX, _MIN
cdef enum:
    _MAX_DIMS = 32          # results of more axes (numpy 2 allows 64) go to the fallback
# past this many values numpy's maxima and minima are faster (its loops keep several
# vectors of running extremes; ours one): they go to the fallback
cdef long _EXTREMES_UP_TO = 8192


def reduce_rows_or(x, int mode, bint last_axis, tuple out_shape, fallback, tuple args):
    """The reduction `mode` (REDUCE_SUM, _MEAN, _MAX, _MIN) of a non-empty C-contiguous
    float32 ndarray, over all of it or (last_axis) along its last axis, as a new array of
    `out_shape` (whose size must be the number of results), with numpy's bits; for any
    other x, fallback(x, *args), and so where a result is a NaN or infinite, or a maximum
    or minimum is a zero (numpy's NaN or zero then depends on its vector loops' lane order;
    it warns of an overflow)."""
    if not _rows_take(x, -1):
        return fallback(x, *args)
    cdef cnp.ndarray a = <cnp.ndarray>x
    cdef long size = cnp.PyArray_SIZE(a)
    cdef long n = cnp.PyArray_DIM(a, a.ndim - 1) if last_axis else size
    cdef Py_ssize_t k, ndim = len(out_shape)
    cdef cnp.npy_intp dims[_MAX_DIMS]
    cdef long results = 1
    if (n == 0 or ndim > _MAX_DIMS or not _SUM <= mode <= _MIN
            or mode >= _MAX and size > _EXTREMES_UP_TO):
        return fallback(x, *args)
    for k in range(ndim):
        dims[k] = out_shape[k]
        results *= dims[k]
    if results * n != size:
        raise ValueError(f"reduce_rows_or: {results} results of rows of {n} do not make "
                         f"x's {size} values")
    cdef cnp.ndarray y = cnp.PyArray_EMPTY(ndim, dims, cnp.NPY_FLOAT32, 0)
    cdef const float *px = <const float *>cnp.PyArray_DATA(a)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef int unsure
    if size < _NOGIL_ELEMENTS:
        imp_reduce_rows(mode, results, n, px, py, &unsure)
    else:
        with nogil:
            imp_reduce_rows(mode, results, n, px, py, &unsure)
    return fallback(x, *args) if unsure else y


# ---- cross entropy's direct kernel: the rows' losses (_rows.c), then their mean or sum

cdef enum:
    _LABELS_ON_STACK = 256      # rows whose int32 labels are widened in a local buffer


def cross_entropy_or(logits, labels, int reduction, fallback):
    """CrossEntropy's kernel on float32 logits (rows, classes), C-contiguous, and int32 or
    int64 labels (rows,): the per-row losses cross_entropy_rows computes, then (reduction
    REDUCE_MEAN or REDUCE_SUM; -1 for none) reduced as numpy's add.reduce and a division by
    the count reduce them, in one call; anything else, or a label out of range (whose
    error the fallback raises), is fallback(logits, labels)."""
    if (not _rows_take(logits, -1) or (<cnp.ndarray>logits).ndim != 2
            or type(labels) is not np.ndarray or not -1 <= reduction <= _MEAN):
        return fallback(logits, labels)
    cdef cnp.ndarray x = <cnp.ndarray>logits, y = <cnp.ndarray>labels
    cdef long rows = cnp.PyArray_DIM(x, 0), n = cnp.PyArray_DIM(x, 1), r
    cdef int kind = cnp.PyArray_TYPE(y)
    if (y.ndim != 1 or cnp.PyArray_DIM(y, 0) != rows or not cnp.PyArray_IS_C_CONTIGUOUS(y)
            or not (kind == cnp.NPY_INT64 or kind == cnp.NPY_INT32 and rows <= _LABELS_ON_STACK)):
        return fallback(logits, labels)
    if rows == 0:
        return fallback(logits, labels)
    cdef long long wide[_LABELS_ON_STACK]
    cdef const long long *pl = <const long long *>cnp.PyArray_DATA(y)
    cdef const int *narrow = <const int *>cnp.PyArray_DATA(y)
    if kind == cnp.NPY_INT32:
        for r in range(rows):
            wide[r] = narrow[r]
        pl = wide
    cdef cnp.npy_intp loss_rows = rows
    cdef cnp.ndarray loss = cnp.PyArray_EMPTY(1, &loss_rows, cnp.NPY_FLOAT32, 0)
    cdef float *po = <float *>cnp.PyArray_DATA(loss)
    cdef long bad = -1
    cdef int unsure = 0
    cdef const float *px = <const float *>cnp.PyArray_DATA(x)
    if rows * n < _NOGIL_ELEMENTS:
        imp_cross_entropy_rows(rows, n, px, pl, po, &bad)
    else:
        with nogil:
            imp_cross_entropy_rows(rows, n, px, pl, po, &bad)
    if bad >= 0:
        return fallback(logits, labels)
    if reduction == -1:
        return loss
    cdef cnp.ndarray total = cnp.PyArray_EMPTY(0, NULL, cnp.NPY_FLOAT32, 0)
    imp_reduce_rows(reduction, 1, rows, po, <float *>cnp.PyArray_DATA(total), &unsure)
    return fallback(logits, labels) if unsure else total


cdef extern from "_loops.h":
    void imp_batch_norm_grad(long n, long c, long l, const float *x, const float *dy,
                             const float *mean, const float *var, const float *weight,
                             float eps, float *dx, double *dw, double *db) nogil


def batch_norm_grad(x, dy, mean, var, weight, float eps):
    """Batch norm's gradients in training: (dx, dw, db) of C-contiguous float32 x and dy
    (N, C, ...) of one shape, from the batch's mean and biased variance and the weight
    (float32, (C,) each); dw and db summed in double, returned as float32."""
    cdef long n, c, l
    n, c, l = _channel_dims("batch_norm_grad", x)
    dx = np.empty_like(x)       # (the array written: x and dy are only read, may be read-only)
    _check_same_size("batch_norm_grad", dx, ("dy",), (dy,))
    if dy.shape != x.shape:
        raise ValueError(f"batch_norm_grad: x {x.shape} and dy {dy.shape} must be of one shape")
    mean, var, weight = _as_float32_c(mean), _as_float32_c(var), _as_float32_c(weight)
    if not cnp.PyArray_SIZE(mean) == cnp.PyArray_SIZE(var) == cnp.PyArray_SIZE(weight) == c:
        raise ValueError(f"batch_norm_grad: mean, var and weight must hold {c} values")
    dw, db = np.empty(c, np.float64), np.empty(c, np.float64)
    cdef size_t px = _addr(x), pdy = _addr(dy), pm = _addr(mean), pv = _addr(var)
    cdef size_t pw = _addr(weight), pdx = _addr(dx), pdw = _addr(dw), pdb = _addr(db)
    with nogil:
        imp_batch_norm_grad(n, c, l, <const float *>px, <const float *>pdy, <const float *>pm,
                            <const float *>pv, <const float *>pw, eps, <float *>pdx,
                            <double *>pdw, <double *>pdb)
    return dx, dw.astype(np.float32), db.astype(np.float32)
