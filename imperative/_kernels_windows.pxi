# Included by _kernels.pyx: sliding-window loops (_windows.c).

cdef extern from "_windows.h":
    void imp_max_pool_grad(long planes, long h, long w, long ho, long wo, int kh, int kw,
                           int sh, int sw, int ph, int pw, const float *x, const float *out,
                           const float *dy, float *dx, unsigned char *first) noexcept nogil
    void imp_max_pool_2x2_forward(long rows, long w, long wo, const float *x,
                                  float *out) noexcept nogil


def max_pool_grad(x, out, dy, window, stride, padding):
    """The input gradient of a max pooling (ops/pool.py:MaxPoolGrad) of float32 x (n, c, h,
    w) whose output is `out` and the output's gradient dy (n, c, ho, wo), as a new array of
    x's shape: the bits of the composite rule (autodiff/rules_nn.py). Arrays that are not
    C-contiguous are copied first."""
    cdef int kh = window[0], kw = window[1], sh = stride[0], sw = stride[1]
    cdef int ph = padding[0], pw = padding[1]
    if kh * kw > 254:
        raise ValueError(f"max_pool_grad: a window of {kh * kw} taps (at most 254)")
    xa, oa, ga = (np.ascontiguousarray(a, np.float32) for a in (x, out, dy))
    if xa.ndim != 4 or oa.shape != ga.shape or oa.shape[:2] != xa.shape[:2]:
        raise ValueError(f"max_pool_grad: x {xa.shape}, out {oa.shape} and dy {ga.shape} "
                         "must be (N, C, H, W) with one N and C")
    cdef long planes = xa.shape[0] * xa.shape[1], h = xa.shape[2], w = xa.shape[3]
    cdef long ho = oa.shape[2], wo = oa.shape[3]
    dx = np.empty(xa.shape, np.float32)      # (zeroed in C: the pool's pages, no faults)
    first = np.empty(ho * wo, np.uint8)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>xa)
    cdef const float *po = <const float *>cnp.PyArray_DATA(<cnp.ndarray>oa)
    cdef const float *pg = <const float *>cnp.PyArray_DATA(<cnp.ndarray>ga)
    cdef float *pd = <float *>cnp.PyArray_DATA(<cnp.ndarray>dx)
    cdef unsigned char *pf = <unsigned char *>cnp.PyArray_DATA(<cnp.ndarray>first)
    with nogil:
        imp_max_pool_grad(planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, px, po, pg, pd, pf)
    return dx


def max_pool_2x2(x):
    """The 2x2, stride 2, unpadded max pooling of a C-contiguous float32 array (n, c, h, w)
    as a new (n, c, h // 2, w // 2) array, each window's taps combined in order by
    np.maximum's rule (ops/pool.py's numpy loop gives the same values)."""
    cdef cnp.ndarray a = _float32_c_array("max_pool_2x2", "x", x)
    if a.ndim != 4 or a.shape[2] < 2 or a.shape[3] < 2:
        raise ValueError(f"max_pool_2x2: x must be (N, C, H, W) with H, W >= 2, got {x.shape}")
    cdef long planes = a.shape[0] * a.shape[1], h = a.shape[2], w = a.shape[3]
    cdef long ho = h // 2, wo = w // 2, p
    out = np.empty((a.shape[0], a.shape[1], ho, wo), np.float32)
    cdef const float *px = <const float *>cnp.PyArray_DATA(a)
    cdef float *po = <float *>cnp.PyArray_DATA(<cnp.ndarray>out)
    with nogil:
        for p in range(planes):
            imp_max_pool_2x2_forward(ho, w, wo, px + p * h * w, po + p * ho * wo)
    return out
