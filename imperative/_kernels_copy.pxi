# Included by _kernels.pyx: concatenation by plain copies.

from libc.string cimport memcpy

cdef object _np_concatenate = np.concatenate


cdef bint _joins_plainly(tuple arrays, int axis) except -1:
    """All of `arrays` are C-contiguous ndarrays of the first one's dtype (a native
    numeric one), with its number of axes and its extents outside `axis`."""
    cdef cnp.ndarray first = arrays[0], a
    cdef int ndim = first.ndim, j
    dtype = first.dtype
    if not dtype.isbuiltin or dtype.hasobject:
        return False
    for item in arrays:
        if type(item) is not np.ndarray:
            return False
        a = item
        if (a.dtype is not dtype or a.ndim != ndim
                or not cnp.PyArray_IS_C_CONTIGUOUS(a)):
            return False
        for j in range(ndim):
            if j != axis and a.shape[j] != first.shape[j]:
                return False
    return True


def concatenate(tuple arrays, Py_ssize_t axis=0):
    """numpy.concatenate(arrays, axis) (bit for bit: a copy) where the arrays are
    C-contiguous, of one native dtype and agree outside `axis`, as a layer's inputs do:
    the result made and each array's blocks copied with memcpy, without numpy's iterator
    set-up (0.7 us of F.concat's 1.5 us for two (4, 16) arrays). Anything else, errors
    included, is numpy's."""
    cdef Py_ssize_t n = len(arrays), i, o, outer = 1, total = 0
    if n == 0 or type(arrays[0]) is not np.ndarray:
        return _np_concatenate(arrays, axis)
    cdef cnp.ndarray first = arrays[0], a, out
    cdef int ndim = first.ndim
    if ndim == 0 or ndim > 32 or axis < -ndim or axis >= ndim:
        return _np_concatenate(arrays, axis)
    if axis < 0:
        axis += ndim
    if not _joins_plainly(arrays, <int>axis):
        return _np_concatenate(arrays, axis)
    cdef cnp.npy_intp dims[32]
    for i in range(ndim):
        dims[i] = first.shape[i]
    for i in range(n):
        total += (<cnp.ndarray>arrays[i]).shape[axis]
    dims[axis] = total
    for i in range(axis):
        outer *= dims[i]
    out = cnp.PyArray_EMPTY(ndim, dims, cnp.PyArray_TYPE(first), 0)
    cdef char *dst = <char *>cnp.PyArray_DATA(out)
    cdef Py_ssize_t block
    for o in range(outer):
        for i in range(n):
            a = arrays[i]
            block = cnp.PyArray_NBYTES(a) // outer
            memcpy(dst, <char *>cnp.PyArray_DATA(a) + o * block, block)
            dst += block
    return out
