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


cdef extern from "_windows.h":
    void imp_depthwise_forward(long planes, long channels, long hp, long wp, long ho, long wo,
                               int kh, int kw, int sh, int sw, int dh, int dw, const float *xp,
                               const float *w, float *out) noexcept nogil
    void imp_depthwise_grad_input(long planes, long channels, long hp, long wp, long ho,
                                  long wo, int kh, int kw, int sh, int sw, int dh, int dw,
                                  const float *dy, const float *w, float *gxp) noexcept nogil
    void imp_depthwise_grad_weight(long planes, long channels, long hp, long wp, long ho,
                                   long wo, int kh, int kw, int sh, int sw, int dh, int dw,
                                   const float *xp, const float *dy, double *gw) noexcept nogil


cdef tuple _depthwise_dims(str fn, object padded, object outputs, tuple kernel_hw,
                           tuple stride, tuple dilation, object weight=None):
    """(planes, channels, hp, wp, ho, wo) of a padded input (n, c, hp, wp) and an output
    (n, c, ho, wo), both C-contiguous float32, checked to hold every tap's reads (and, when
    given, that the weight is (c, 1, kh, kw))."""
    for name, a in (("padded input", padded), ("output", outputs)):
        if not _is_float32_c(a) or a.ndim != 4:
            raise TypeError(f"{fn}: {name} must be a C-contiguous float32 (n, c, h, w) array")
    n, c, hp, wp = padded.shape
    ho, wo = outputs.shape[2:]
    if (outputs.shape[:2] != (n, c) or (ho and (ho - 1) * stride[0]
                                         + (kernel_hw[0] - 1) * dilation[0] >= hp)
            or (wo and (wo - 1) * stride[1] + (kernel_hw[1] - 1) * dilation[1] >= wp)):
        raise ValueError(f"{fn}: padded input {padded.shape} and output {outputs.shape} "
                         f"do not fit a {kernel_hw} window")
    if weight is not None and weight.shape != (c, 1) + kernel_hw:
        raise ValueError(f"{fn}: weight {weight.shape} for {c} channels")
    return n * c, c, hp, wp, ho, wo


def depthwise_forward(xp, w, out_hw, stride, dilation):
    """A depthwise convolution (one kh x kw filter per channel, w (c, 1, kh, kw)) of the
    zero-padded float32 input xp (n, c, hp, wp): a new (n, c) + out_hw array."""
    out = np.empty(xp.shape[:2] + tuple(out_hw), np.float32)
    wa = np.ascontiguousarray(w, np.float32)
    cdef int kh = wa.shape[2], kw = wa.shape[3]
    cdef long planes, channels, hp, wp, ho, wo
    planes, channels, hp, wp, ho, wo = _depthwise_dims("depthwise_forward", xp, out, (kh, kw),
                                                       stride, dilation, wa)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>xp)
    cdef const float *pw = <const float *>cnp.PyArray_DATA(<cnp.ndarray>wa)
    cdef float *po = <float *>cnp.PyArray_DATA(<cnp.ndarray>out)
    cdef int sh = stride[0], sw = stride[1], dh = dilation[0], dw = dilation[1]
    with nogil:
        imp_depthwise_forward(planes, channels, hp, wp, ho, wo, kh, kw, sh, sw, dh, dw,
                              px, pw, po)
    return out


def depthwise_grad_input(dy, w, padded_hw, stride, dilation):
    """The gradient of depthwise_forward's padded input, (n, c) + padded_hw, from the
    output's gradient dy (n, c, ho, wo), C-contiguous float32."""
    gxp = np.zeros(dy.shape[:2] + tuple(padded_hw), np.float32)
    wa = np.ascontiguousarray(w, np.float32)
    cdef int kh = wa.shape[2], kw = wa.shape[3]
    cdef long planes, channels, hp, wp, ho, wo
    planes, channels, hp, wp, ho, wo = _depthwise_dims("depthwise_grad_input", gxp, dy,
                                                       (kh, kw), stride, dilation, wa)
    cdef const float *pd = <const float *>cnp.PyArray_DATA(<cnp.ndarray>dy)
    cdef const float *pw = <const float *>cnp.PyArray_DATA(<cnp.ndarray>wa)
    cdef float *pg = <float *>cnp.PyArray_DATA(<cnp.ndarray>gxp)
    cdef int sh = stride[0], sw = stride[1], dh = dilation[0], dw = dilation[1]
    with nogil:
        imp_depthwise_grad_input(planes, channels, hp, wp, ho, wo, kh, kw, sh, sw, dh, dw,
                                 pd, pw, pg)
    return gxp


def depthwise_grad_weight(xp, dy, kernel_hw, stride, dilation):
    """The gradient of depthwise_forward's weight, (c, 1, kh, kw) float32, from its padded
    input and the output's gradient dy; each tap's sum over an image plane in eight float
    lanes, the planes' sums in double."""
    cdef long planes, channels, hp, wp, ho, wo
    planes, channels, hp, wp, ho, wo = _depthwise_dims("depthwise_grad_weight", xp, dy,
                                                       tuple(kernel_hw), stride, dilation)
    cdef int kh = kernel_hw[0], kw = kernel_hw[1]
    gw = np.zeros((channels, 1, kh, kw), np.float64)
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>xp)
    cdef const float *pd = <const float *>cnp.PyArray_DATA(<cnp.ndarray>dy)
    cdef double *pg = <double *>cnp.PyArray_DATA(<cnp.ndarray>gw)
    cdef int sh = stride[0], sw = stride[1], dh = dilation[0], dw = dilation[1]
    with nogil:
        imp_depthwise_grad_weight(planes, channels, hp, wp, ho, wo, kh, kw, sh, sw, dh, dw,
                                  px, pd, pg)
    return gw.astype(np.float32)
