# cython: language_level=3
"""Native float32 kernels (_sgemm.c) for numpy arrays: the GIL is released while they run.

Callers check `supported()` and the shapes/dtypes below; these functions only validate
what would otherwise corrupt memory."""
import numpy as np

cimport numpy as cnp
cnp.import_array()


cdef inline size_t _addr(object array) except? 0:
    """The address of an ndarray's first element (`array.ctypes.data` builds two Python
    objects per call: microseconds, more than a small kernel's whole run)."""
    return <size_t>cnp.PyArray_DATA(<cnp.ndarray?>array)

cdef extern from "_sgemm.h" nogil:
    int imp_sgemm_supported()
    int imp_native_cpu_isa()
    int imp_native_isa()
    int imp_native_select_isa(int isa)
    int IMP_X86_NATIVE
    int IMP_ISA_NONE, IMP_ISA_AVX2, IMP_ISA_AVX512
    int IMP_EPILOGUE_NONE, IMP_EPILOGUE_RELU, IMP_EPILOGUE_RELU_GRAD, IMP_EPILOGUE_AXPY
    int IMP_SGEMM_ACCUMULATE, IMP_SGEMM_STREAM
    int imp_sgemm(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
                  long rsb, long csb, float *c, long ldc, int flags, int epilogue,
                  const float *y, long ldy, float alpha)
    int imp_conv2d_s1(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                      const float *w, long ph, long pw, long dh, long dw, float *y,
                      const float *bias, int epilogue, const float *ey)
    int imp_conv2d_s1_grad_w(long N, long C, long H, long W, const float *x, long O, long kh,
                             long kw, const float *dy, long ph, long pw, long dh, long dw,
                             float *gw, float *gb)

_ISA_NAMES = {IMP_ISA_NONE: None, IMP_ISA_AVX2: "avx2", IMP_ISA_AVX512: "avx512"}
_ISA_CODES = {"avx2": IMP_ISA_AVX2, "avx512": IMP_ISA_AVX512}


def _select_isa_from_env():
    """IMPERATIVE_NATIVE_ISA=avx2 runs the AVX2 kernels on an AVX-512 CPU (to test them
    there, or to get an AVX2 machine's weight-gradient sums); `auto` (the default) or
    `avx512`: the widest this CPU runs. A garbage value, or a set the CPU lacks, warns and
    keeps the default. Read once, at import: a process never switches kernels."""
    import os
    import warnings
    text = os.environ.get("IMPERATIVE_NATIVE_ISA", "auto")
    want = text.strip().lower()
    if want in ("", "auto"):
        return
    best = imp_native_cpu_isa()
    if want not in _ISA_CODES:
        warnings.warn(f"ignoring environment variable IMPERATIVE_NATIVE_ISA={text!r}: expected "
                      f"auto, avx2 or avx512; using the default auto", RuntimeWarning)
    elif _ISA_CODES[want] > best:
        warnings.warn(f"ignoring environment variable IMPERATIVE_NATIVE_ISA={text!r}: this "
                      f"{'build' if not IMP_X86_NATIVE else 'CPU'} does not run it; using "
                      f"{_ISA_NAMES[best] or 'numpy'}", RuntimeWarning)
    else:
        imp_native_select_isa(_ISA_CODES[want])


_select_isa_from_env()
_SUPPORTED = bool(imp_sgemm_supported())
# False off x86-64, or in a build made with IMPERATIVE_NO_NATIVE=1 (setup.py): then the
# products never run here (numpy does them) and the other loops are portable C
NATIVE_BUILD = bool(IMP_X86_NATIVE)


def supported():
    """True when this CPU runs the native kernels (AVX-512F, or AVX2, with FMA) and they
    were built."""
    return _SUPPORTED


def isa():
    """The instruction set the native products run with in this process: "avx512", "avx2",
    or None (numpy runs them). Chosen once, at import (see IMPERATIVE_NATIVE_ISA)."""
    return _ISA_NAMES[imp_native_isa()]


def _require_native(fn):
    if not _SUPPORTED:
        why = ("a CPU with AVX2 (or AVX-512F) and FMA" if NATIVE_BUILD
               else "an x86-64 build (this one has none)")
        raise RuntimeError(f"native {fn} needs {why}")


cdef long _stride(arr, int axis) except? -1:
    cdef long s = arr.strides[axis]
    if s % 4:
        raise ValueError("native sgemm: strides must be whole float32 elements")
    return s // 4


_EPILOGUES = {None: IMP_EPILOGUE_NONE, "relu": IMP_EPILOGUE_RELU, "relu_grad": IMP_EPILOGUE_RELU_GRAD,
              "axpy": IMP_EPILOGUE_AXPY}


cdef int _epilogue_code(str fn, epilogue) except -1:
    if epilogue not in _EPILOGUES:
        raise ValueError(f"native {fn}: epilogue must be one of {list(_EPILOGUES)}, got {epilogue!r}")
    return _EPILOGUES[epilogue]


def sgemm(a, b, out, bint accumulate=False, epilogue=None, y=None, bint streaming=False,
          float alpha=0):
    """out[...] = a @ b (or out += a @ b): 2-D float32 arrays; `out` has unit column stride.
    a and b may be any strided views (transposes included). epilogue: None, "relu" (each
    value v becomes max(v, 0)), "relu_grad" (v * (y > 0), y an array shaped as out with unit
    column stride) or "axpy" (y + alpha * v, as `axpy` computes it: an optimizer's update of
    y by the product), applied as numpy would on the way into out. streaming: out is read
    only much later (a weight gradient), so a large one-pass product may bypass the caches."""
    _require_native("sgemm")
    for name, arr in (("a", a), ("b", b), ("out", out)):
        if arr.dtype != np.float32 or arr.ndim != 2:
            raise TypeError(f"native sgemm: {name} must be a 2-D float32 array, got "
                            f"{arr.ndim}-D {arr.dtype}")
    cdef long M = a.shape[0], K = a.shape[1], N = b.shape[1]
    if b.shape[0] != K or out.shape[0] != M or out.shape[1] != N:
        raise ValueError(f"native sgemm: shapes {a.shape} @ {b.shape} -> {out.shape} do not match")
    if out.strides[1] != 4 or not out.flags.writeable:
        raise ValueError("native sgemm: out must be writeable with contiguous rows")
    cdef int epi = _epilogue_code("sgemm", epilogue)
    cdef int flags = (IMP_SGEMM_ACCUMULATE if accumulate else 0) | (IMP_SGEMM_STREAM if streaming else 0)
    cdef size_t py = 0
    cdef long ldy = 0
    if epi == IMP_EPILOGUE_RELU_GRAD or epi == IMP_EPILOGUE_AXPY:
        if (y is None or y.dtype != np.float32 or y.ndim != 2 or y.shape != out.shape
                or y.strides[1] != 4):
            raise ValueError(f"native sgemm: the {epilogue} epilogue needs y, a float32 array "
                             "shaped as out with contiguous rows")
        if np.may_share_memory(y, out):
            raise ValueError("native sgemm: y must not overlap out")
        py, ldy = _addr(y), _stride(y, 0)
    cdef long rsa = _stride(a, 0), csa = _stride(a, 1), rsb = _stride(b, 0), csb = _stride(b, 1)
    cdef long ldc = _stride(out, 0)
    cdef size_t pa = _addr(a), pb = _addr(b), pc = _addr(out)
    cdef int rc
    with nogil:
        rc = imp_sgemm(M, N, K, <const float *>pa, rsa, csa, <const float *>pb, rsb, csb,
                       <float *>pc, ldc, flags, epi, <const float *>py, ldy, alpha)
    if rc:
        raise MemoryError("native sgemm: out of memory for packing buffers")
    return out


def conv2d_s1(x, w, padding, dilation, bias=None, epilogue=None, y=None):
    """Stride-1, one-group convolution of C-contiguous float32 x (N, C, H, W) by w
    (O, C, kh, kw): a new (N, O, Ho, Wo) array; plus bias (O,) per channel when given, then
    the epilogue ("relu", or "relu_grad" with y shaped as the output), as for sgemm."""
    _require_native("conv2d")
    x = np.ascontiguousarray(x, dtype=np.float32)
    w = np.ascontiguousarray(w, dtype=np.float32)
    cdef long n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3]
    cdef long o = w.shape[0], kh = w.shape[2], kw = w.shape[3]
    if x.ndim != 4 or w.ndim != 4 or w.shape[1] != c:
        raise ValueError(f"native conv2d: input {x.shape} and weight {w.shape} do not match")
    cdef long ph = padding[0], pw = padding[1], dh = dilation[0], dw = dilation[1]
    cdef long ho = h + 2 * ph - dh * (kh - 1), wo = wd + 2 * pw - dw * (kw - 1)
    if ho < 1 or wo < 1:
        raise ValueError("native conv2d: kernel larger than the padded input")
    cdef int epi = _epilogue_code("conv2d", epilogue)
    if epi == IMP_EPILOGUE_AXPY:
        raise ValueError("native conv2d: no axpy epilogue (a product's only)")
    out = np.empty((n, o, ho, wo), dtype=np.float32)
    cdef size_t pbias = 0, pey = 0
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32)
        if bias.shape != (o,):
            raise ValueError(f"native conv2d: bias must have shape ({o},), got {bias.shape}")
        pbias = _addr(bias)
    if epi == IMP_EPILOGUE_RELU_GRAD:
        if y is None or y.dtype != np.float32 or y.shape != out.shape or not y.flags.c_contiguous:
            raise ValueError("native conv2d: the relu_grad epilogue needs y, a C-contiguous "
                             "float32 array shaped as the output")
        pey = _addr(y)
    cdef size_t px = _addr(x), pwt = _addr(w), pout = _addr(out)
    cdef int rc
    with nogil:
        rc = imp_conv2d_s1(n, c, h, wd, <const float *>px, o, kh, kw, <const float *>pwt,
                           ph, pw, dh, dw, <float *>pout, <const float *>pbias, epi,
                           <const float *>pey)
    if rc:
        raise MemoryError("native conv2d: out of memory for its buffers")
    return out


def conv2d_s1_grad_weight(x, dy, kernel_hw, padding, dilation, bint with_bias=False):
    """The weight gradient (O, C, kh, kw) of `conv2d_s1(x, w, padding, dilation)` given its
    output gradient dy (N, O, Ho, Wo): a new float32 array; with_bias: (weight gradient,
    bias gradient (O,)), the second summed from dy as the kernel reads it."""
    _require_native("conv2d")
    x = np.ascontiguousarray(x, dtype=np.float32)
    dy = np.ascontiguousarray(dy, dtype=np.float32)
    cdef long n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3]
    cdef long o = dy.shape[1], kh = kernel_hw[0], kw = kernel_hw[1]
    cdef long ph = padding[0], pw = padding[1], dh = dilation[0], dw = dilation[1]
    cdef long ho = h + 2 * ph - dh * (kh - 1), wo = wd + 2 * pw - dw * (kw - 1)
    if x.ndim != 4 or dy.ndim != 4 or tuple(dy.shape) != (n, o, ho, wo):
        raise ValueError(f"native conv2d: input {x.shape} and output gradient {dy.shape} "
                         f"do not match a {kh}x{kw} kernel")
    gw = np.empty((o, c, kh, kw), dtype=np.float32)
    gb = np.empty(o, dtype=np.float32) if with_bias else None
    cdef size_t px = _addr(x), pdy = _addr(dy), pg = _addr(gw)
    cdef size_t pb = _addr(gb) if with_bias else 0
    cdef int rc
    with nogil:
        rc = imp_conv2d_s1_grad_w(n, c, h, wd, <const float *>px, o, kh, kw,
                                  <const float *>pdy, ph, pw, dh, dw, <float *>pg, <float *>pb)
    if rc:
        raise MemoryError("native conv2d: out of memory for its buffers")
    return (gw, gb) if with_bias else gw


# ---- the worker thread's array allocator (_pool.c)

cdef extern from "_pool.h":
    int imp_pool_install() except -1
    object imp_pool_enter()
    int imp_pool_leave(object previous) except -1
    void imp_pool_trim() nogil
    void imp_pool_set_limit(size_t nbytes) nogil
    void imp_pool_set_reserve(size_t nbytes) nogil
    void imp_pool_stats(size_t *cached, size_t *limit, size_t *handed_out, size_t *reserve,
                        size_t *room, unsigned long long *hits, unsigned long long *misses,
                        size_t *highest, size_t *largest, size_t *scattered) nogil


def install_pool():
    """Make the caching allocator numpy's allocator for arrays made in this thread (its
    context): called by the interpreter's worker thread as it starts."""
    imp_pool_install()


def pool_enter():
    """Make the caching allocator numpy's allocator in this thread's context until
    `pool_leave(previous)` with what this returns: host compute (an op run on the caller's
    thread) makes its large arrays as the worker would, without the user's arrays."""
    return imp_pool_enter()


def pool_leave(previous):
    imp_pool_leave(previous)


def pool_trim():
    """Hand the pages of every free block back to the system, and unmap the segments
    that are wholly free."""
    imp_pool_trim()


def pool_set_limit(size_t nbytes):
    """Keep `nbytes` of freed memory mapped for reuse (64 MiB by default), or what the most
    handed out at once needs where that is more; a budget may allow less."""
    imp_pool_set_limit(nbytes)


def pool_set_reserve(size_t nbytes):
    """Under a memory budget of `nbytes` (0: none), keep the large blocks handed out plus
    the free memory kept mapped within it, or within the most handed out at once where that
    is more, with room for fragmentation (_pool.c: FRAGMENTATION)."""
    imp_pool_set_reserve(nbytes)


def pool_stats():
    """{"cached", "limit", "in_use", "reserve", "room", "hits", "misses", "highest",
    "largest", "scattered"}: bytes of free memory kept mapped, its limit, bytes of large
    blocks handed out, the budget they and the free memory keep to (0: none), how much free
    memory may stay mapped now, how many large allocations reused the pool's memory or
    mapped a new segment, and what sizes that room: the most bytes handed out at once and
    the largest block recently, and the bytes faulted in for want of a free piece large
    enough."""
    cdef size_t cached, limit, in_use, reserve, room, highest, largest, scattered
    cdef unsigned long long hits, misses
    imp_pool_stats(&cached, &limit, &in_use, &reserve, &room, &hits, &misses, &highest,
                   &largest, &scattered)
    return {"cached": cached, "limit": limit, "in_use": in_use, "reserve": reserve,
            "room": room, "hits": hits, "misses": misses, "highest": highest,
            "largest": largest, "scattered": scattered}



# ---- memory-bound loops: elementwise and normalisation (_loops.c)

cdef extern from "_loops.h":
    void imp_relu_grad(long n, const float *dy, const float *y, float *out) nogil
    void imp_layer_norm_rows(long rows, long size, const float *x, const float *weight,
                             const float *bias, float eps, float *y, float *stats,
                             int stats_given) nogil
    void imp_channel_moments(long n, long c, long l, const float *x, float *mean,
                             float *var) nogil
    void imp_channel_affine(long n, long c, long l, const float *x, const float *mean,
                            const float *scale, const float *shift, float *y) nogil
    void imp_axpy(long n, const float *x, float alpha, const float *y, float *out) nogil
    void imp_layer_norm_grad(long rows, long size, const float *x, const float *dy,
                             const float *weight, float eps, float *dx, double *dw,
                             double *db) nogil


cdef int _check_same_size(str fn, object out, tuple names, tuple arrays) except -1:
    """Raise unless `arrays` (called `names`) and `out` are C-contiguous float32 ndarrays of
    one size and `out` is writeable (an elementwise kernel's precondition). C-level checks:
    these kernels run once per parameter and step, at sizes where Python's cost shows."""
    cdef cnp.ndarray arr
    cdef cnp.ndarray o = _float32_c_array(fn, "out", out)
    for i in range(len(arrays)):
        arr = _float32_c_array(fn, names[i], arrays[i])
        if cnp.PyArray_SIZE(arr) != cnp.PyArray_SIZE(o):
            raise ValueError(f"{fn}: arrays must have one size and out be writeable")
    if not cnp.PyArray_ISWRITEABLE(o):
        raise ValueError(f"{fn}: arrays must have one size and out be writeable")
    return 0


cdef inline bint _is_float32_c(object arr):
    return (isinstance(arr, np.ndarray) and cnp.PyArray_TYPE(<cnp.ndarray>arr) == cnp.NPY_FLOAT32
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>arr))


cdef cnp.ndarray _float32_c_array(str fn, str name, object arr):
    if not _is_float32_c(arr):
        raise TypeError(f"{fn}: {name} must be a C-contiguous float32 array")
    return <cnp.ndarray>arr


def relu_grad(dy, y, out):
    """out = dy where y > 0 else 0, in one pass (numpy needs a mask and a mixed-type
    multiply): C-contiguous float32 arrays of one size; `out` may be dy."""
    _require_native("relu_grad")
    _check_same_size("relu_grad", out, ("dy", "y"), (dy, y))
    cdef size_t pd = _addr(dy), py = _addr(y), po = _addr(out)
    cdef long n = dy.size
    with nogil:
        imp_relu_grad(n, <const float *>pd, <const float *>py, <float *>po)
    return out


def axpy(x, float alpha, y, out):
    """out = x + alpha * y, one pass: C-contiguous float32 arrays of one size (`out` may be
    x or y)."""
    _check_same_size("axpy", out, ("x", "y"), (x, y))
    cdef size_t px = _addr(x), py = _addr(y), po = _addr(out)
    cdef long n = x.size
    with nogil:
        imp_axpy(n, <const float *>px, alpha, <const float *>py, <float *>po)
    return out


def layer_norm_grad(x, dy, weight, float eps):
    """Layer norm's gradients for C-contiguous 2-D float32 x and dy (rows normalised) and the
    weight (float32, one value per column, or None): dx, and with a weight (dw, db) as
    float32, summed over the rows in double. The statistics are layer_norm_rows' own."""
    if not (isinstance(x, np.ndarray) and isinstance(dy, np.ndarray) and x.ndim == 2
            and dy.shape == x.shape):
        raise ValueError(f"layer_norm_grad: x and dy must be 2-D arrays of one shape, got "
                         f"{getattr(x, 'shape', type(x))} and {getattr(dy, 'shape', type(dy))}")
    # (dx is the array written: x and dy are only read and may be read-only, as a row cut
    # from a broadcast is; checked as the written array, x made the gradient of such a
    # layer norm's input fail)
    dx = np.empty(x.shape, np.float32)
    _check_same_size("layer_norm_grad", dx, ("x", "dy"), (x, dy))
    cdef long rows = x.shape[0], size = x.shape[1]
    cdef size_t pw = 0, pdw = 0, pdb = 0
    dw = db = None
    if weight is not None:
        weight = _as_float32_c(weight)
        if cnp.PyArray_SIZE(weight) != size:
            raise ValueError(f"layer_norm_grad: weight must have {size} values")
        dw, db = np.zeros(size, np.float64), np.zeros(size, np.float64)
        pw, pdw, pdb = _addr(weight), _addr(dw), _addr(db)
    cdef size_t px = _addr(x), pdy = _addr(dy), pdx = _addr(dx)
    with nogil:
        imp_layer_norm_grad(rows, size, <const float *>px, <const float *>pdy,
                            <const float *>pw, eps, <float *>pdx, <double *>pdw,
                            <double *>pdb)
    if weight is None:
        return dx
    return dx, dw.astype(np.float32), db.astype(np.float32)


def _channel_dims(fn, x):
    """(N, C, L) of a C-contiguous float32 array (N, C, ...), L the size of one channel of
    one sample; raises for any other array."""
    if x.dtype != np.float32 or not x.flags.c_contiguous or x.ndim < 2:
        raise TypeError(f"{fn}: x must be a C-contiguous float32 array (N, C, ...)")
    n, c = x.shape[0], x.shape[1]
    return n, c, x.size // max(1, n * c)


def channel_moments(x):
    """(mean, biased variance) per channel (axis 1) of a C-contiguous float32 array of at
    least 2 dimensions, over every other axis: float32 arrays of shape (C,)."""
    cdef long n, c, l
    n, c, l = _channel_dims("channel_moments", x)
    mean, var = np.empty(c, np.float32), np.empty(c, np.float32)
    cdef size_t px = _addr(x), pm = _addr(mean), pv = _addr(var)
    with nogil:
        imp_channel_moments(n, c, l, <const float *>px, <float *>pm, <float *>pv)
    return mean, var


def channel_affine(x, mean, scale, shift):
    """(x - mean) * scale + shift per channel (axis 1), in that order of float32 operations:
    a new array like x (C-contiguous float32); mean, scale, shift float32 of shape (C,)."""
    cdef long n, c, l
    n, c, l = _channel_dims("channel_affine", x)
    args = [np.ascontiguousarray(a, dtype=np.float32).reshape(-1) for a in (mean, scale, shift)]
    if any(a.size != c for a in args):
        raise ValueError(f"channel_affine: per-channel arrays must have {c} values")
    y = np.empty_like(x)
    cdef size_t px = _addr(x), pm = _addr(args[0]), ps = _addr(args[1])
    cdef size_t pb = _addr(args[2]), py = _addr(y)
    with nogil:
        imp_channel_affine(n, c, l, <const float *>px, <const float *>pm, <const float *>ps,
                           <const float *>pb, <float *>py)
    return y


cdef cnp.ndarray _as_float32_c(object a):
    """a as a C-contiguous float32 ndarray (itself when it is one: no Python-level call)."""
    if (type(a) is np.ndarray and cnp.PyArray_TYPE(<cnp.ndarray>a) == cnp.NPY_FLOAT32
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)):
        return <cnp.ndarray>a
    return np.ascontiguousarray(a, dtype=np.float32)


def layer_norm_rows(x, weight, bias, float eps, stats=None, bint stats_given=False):
    """Layer normalisation of each row of a C-contiguous 2-D float32 array (mean and biased
    variance per row), then `* weight + bias` per column unless weight is None: a new array.
    `stats`, a C-contiguous float32 array of two values a row (mean, 1 / sqrt(var + eps)),
    receives the rows' statistics, or with `stats_given` supplies them (the same bits)."""
    if x.dtype != np.float32 or not x.flags.c_contiguous or x.ndim != 2:
        raise TypeError("layer_norm_rows: x must be a C-contiguous 2-D float32 array")
    cdef long rows = x.shape[0], size = x.shape[1]
    cdef size_t pw = 0, pb = 0, ps = 0
    if stats is not None:
        if (type(stats) is not np.ndarray or stats.dtype != np.float32
                or not stats.flags.c_contiguous or stats.size != 2 * rows
                or (not stats_given and not stats.flags.writeable)):
            raise ValueError(f"layer_norm_rows: stats must be a C-contiguous float32 array of "
                             f"{2 * rows} values (two a row)")
        ps = _addr(stats)
    if weight is not None:
        weight = _as_float32_c(weight)
        bias = _as_float32_c(bias)
        if cnp.PyArray_SIZE(weight) != size or cnp.PyArray_SIZE(bias) != size:
            raise ValueError(f"layer_norm_rows: weight and bias must have {size} values")
        pw, pb = _addr(weight), _addr(bias)
    y = cnp.PyArray_EMPTY(2, cnp.PyArray_DIMS(<cnp.ndarray>x), cnp.NPY_FLOAT32, 0)
    cdef size_t px = _addr(x), py = _addr(y)
    with nogil:
        imp_layer_norm_rows(rows, size, <const float *>px, <const float *>pw, <const float *>pb,
                            eps, <float *>py, <float *>ps, stats_given)
    return y


def layer_norm_or(x, weight, bias, long size, float eps, fallback):
    """LayerNormForward's direct kernel: layer_norm_rows over the trailing `size` values of
    a C-contiguous float32 x of any shape, with C-contiguous float32 weight and bias of
    `size` values, as a new array of x's shape; anything else is fallback(x, weight, bias)."""
    if not (_rows_take(x, -1) and _rows_take(weight, -1) and _rows_take(bias, -1)) or (
            size <= 0 or cnp.PyArray_SIZE(<cnp.ndarray>x) % size
            or cnp.PyArray_SIZE(<cnp.ndarray>weight) != size
            or cnp.PyArray_SIZE(<cnp.ndarray>bias) != size):
        return fallback(x, weight, bias)
    cdef cnp.ndarray a = <cnp.ndarray>x
    cdef long rows = cnp.PyArray_SIZE(a) // size
    y = cnp.PyArray_EMPTY(a.ndim, cnp.PyArray_DIMS(a), cnp.NPY_FLOAT32, 0)
    cdef const float *px = <const float *>cnp.PyArray_DATA(a)
    cdef const float *pw = <const float *>cnp.PyArray_DATA(<cnp.ndarray>weight)
    cdef const float *pb = <const float *>cnp.PyArray_DATA(<cnp.ndarray>bias)
    cdef float *py = <float *>cnp.PyArray_DATA(<cnp.ndarray>y)
    if rows * size < _NOGIL_ELEMENTS:
        imp_layer_norm_rows(rows, size, px, pw, pb, eps, py, NULL, False)
    else:
        with nogil:
            imp_layer_norm_rows(rows, size, px, pw, pb, eps, py, NULL, False)
    return y



# ---- row-wise loops: softmax, log_softmax, cross entropy (_rows.c)

cdef extern from "_rows.h":
    void imp_softmax_rows(long rows, long n, const float *x, float *y) noexcept nogil
    void imp_log_softmax_rows(long rows, long n, const float *x, float *y) noexcept nogil
    void imp_cross_entropy_rows(long rows, long n, const float *x, const long long *labels,
                                float *loss, long *bad) nogil

# below this many elements a kernel keeps the GIL: releasing and taking it back costs more
# than the work, and nothing could run beside it meanwhile
cdef long _NOGIL_ELEMENTS = 1 << 14


def rows_apply(x, long axis):
    """True when the row kernels below take `x` along `axis`: a C-contiguous float32 ndarray
    of at least one dimension and one element, `axis` its last (C-level checks: a tiny
    softmax's whole kernel costs a few of Python's)."""
    return _rows_take(x, axis)


cdef bint _rows_take(object x, long axis):
    if type(x) is not np.ndarray:
        return False
    cdef cnp.ndarray a = <cnp.ndarray>x
    return (cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT32 and cnp.PyArray_IS_C_CONTIGUOUS(a)
            and a.ndim >= 1 and (axis == -1 or axis == a.ndim - 1) and cnp.PyArray_SIZE(a) > 0)


cdef long _row_length(str fn, object x) except -1:
    """The length of x's rows (its last axis): a C-contiguous float32 array of at least one
    dimension with a last dimension of at least one element."""
    cdef cnp.ndarray a = _float32_c_array(fn, "x", x)
    if a.ndim == 0 or cnp.PyArray_DIM(a, a.ndim - 1) == 0:
        raise ValueError(f"{fn}: x must have a last axis of at least one element, "
                         f"got shape {x.shape}")
    return cnp.PyArray_DIM(a, a.ndim - 1)


cdef object _row_kernel(str fn, void (*kernel)(long, long, const float *, float *) noexcept nogil,
                        object x):
    cdef long n = _row_length(fn, x)
    cdef cnp.ndarray a = <cnp.ndarray>x
    cdef long size = cnp.PyArray_SIZE(a)
    cdef cnp.ndarray y = cnp.PyArray_EMPTY(a.ndim, cnp.PyArray_DIMS(a), cnp.NPY_FLOAT32, 0)
    cdef const float *px = <const float *>cnp.PyArray_DATA(a)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    if size < _NOGIL_ELEMENTS:
        kernel(size // n, n, px, py)
    else:
        with nogil:
            kernel(size // n, n, px, py)
    return y


def softmax_rows(x):
    """exp(x - max) / sum(exp(x - max)) along the last axis of a C-contiguous float32 array
    (a new array), each row in L1 for its three passes."""
    return _row_kernel("softmax_rows", imp_softmax_rows, x)


def log_softmax_rows(x):
    """(x - max) - log(sum(exp(x - max))) along the last axis of a C-contiguous float32
    array (a new array)."""
    return _row_kernel("log_softmax_rows", imp_log_softmax_rows, x)


cdef object _row_kernel_or(str fn,
                           void (*kernel)(long, long, const float *, float *) noexcept nogil,
                           object x, object fallback):
    """The row kernel on x where it takes x along its last axis, else fallback(x)."""
    return _row_kernel(fn, kernel, x) if _rows_take(x, -1) else fallback(x)


def softmax_rows_or(x, fallback):
    """softmax_rows(x) where the row kernels take x along its last axis, else fallback(x):
    Softmax's direct kernel (OpDef.direct_kernel), one C call on the tiny-op path."""
    return _row_kernel_or("softmax_rows", imp_softmax_rows, x, fallback)


def log_softmax_rows_or(x, fallback):
    """log_softmax_rows(x), else fallback(x), as softmax_rows_or: LogSoftmax's direct kernel."""
    return _row_kernel_or("log_softmax_rows", imp_log_softmax_rows, x, fallback)


def cross_entropy_rows(x, labels):
    """(loss, bad): loss[r] = -log_softmax(x[r])[labels[r]] for a C-contiguous float32
    x (rows, n) and integer labels (rows,), float32; bad is the first row whose label is
    outside [0, n) (loss then unset), else -1."""
    cdef long n = _row_length("cross_entropy_rows", x)
    if x.ndim != 2:
        raise ValueError(f"cross_entropy_rows: x must be 2-D, got shape {x.shape}")
    cdef long rows = x.shape[0]
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    if labels.shape != (rows,):
        raise ValueError(f"cross_entropy_rows: labels must have shape ({rows},), "
                         f"got {labels.shape}")
    loss = np.empty(rows, np.float32)
    cdef long bad = -1
    cdef const float *px = <const float *>cnp.PyArray_DATA(<cnp.ndarray>x)
    cdef const long long *pl = <const long long *>cnp.PyArray_DATA(<cnp.ndarray>labels)
    cdef float *po = <float *>cnp.PyArray_DATA(<cnp.ndarray>loss)
    if rows * n < _NOGIL_ELEMENTS:
        imp_cross_entropy_rows(rows, n, px, pl, po, &bad)
    else:
        with nogil:
            imp_cross_entropy_rows(rows, n, px, pl, po, &bad)
    return loss, bad


include "_kernels_activations.pxi"   # relu, sigmoid, gelu (_activations.c)
include "_kernels_reduce.pxi"        # small sums, means, maxima, minima (_reduce.c)
include "_kernels_windows.pxi"       # a max pooling's gradient (_windows.c)
include "_kernels_optim.pxi"         # Adam's update of one parameter or many (_loops.c)
include "_kernels_select.pxi"        # where's one-pass select (_loops.c)
include "_kernels_copy.pxi"          # concatenation by plain copies
