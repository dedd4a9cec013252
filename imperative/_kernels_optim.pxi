# Included by _kernels.pyx: optimizer updates (_loops.c).

cdef extern from "_loops.h":
    void imp_adam(long n, const float *param, const float *g, const float *m, const float *v,
                  const float *k, float *out, float *m_out, float *v_out) nogil


def adam(param, grad, m, v, constants):
    """(param', m', v') of one Adam step, new arrays, each product, sum and quotient rounded to
    float32 as numpy's would be: param, grad, m, v C-contiguous float32 arrays of one size;
    `constants` a float32 array (b1, 1 - b1, b2, 1 - b2, c1, c2, eps, -lr)."""
    out, m_out, v_out = np.empty_like(param), np.empty_like(m), np.empty_like(v)
    _check_same_size("adam", out, ("param", "grad", "m", "v"), (param, grad, m, v))
    k = _float32_c_array("adam", "constants", constants)
    if k.size != 8:
        raise ValueError(f"adam: constants must hold 8 values, got {k.size}")
    _adam_pass(param, grad, m, v, k, out, m_out, v_out)
    return out, m_out, v_out


def adam_steps(tuple arrays, list constants):
    """`adam` for each of len(constants) parameters in one call (AdamStep over a model's
    parameters: a call each cost more than a small layer's update): `arrays` holds (param,
    grad, m, v, t) per parameter (t is not read), `constants` a float32 array of 8 per
    parameter as `adam` takes. A flat tuple of (param', m', v') per parameter, or None,
    before any work, where some parameter's four arrays are not C-contiguous float32 ones
    of one size."""
    cdef Py_ssize_t i, j, count = len(constants), n
    if len(arrays) != 5 * count:
        raise ValueError(f"adam_steps: {len(arrays)} arrays for {count} parameters")
    for i in range(count):
        n = -1
        for j in range(5 * i, 5 * i + 4):
            if not _is_float32_c(arrays[j]):
                return None
            if n >= 0 and cnp.PyArray_SIZE(<cnp.ndarray>arrays[j]) != n:
                return None
            n = cnp.PyArray_SIZE(<cnp.ndarray>arrays[j])
        k = constants[i]
        if not _is_float32_c(k) or cnp.PyArray_SIZE(<cnp.ndarray>k) != 8:
            raise ValueError("adam_steps: constants must be C-contiguous float32 arrays of 8")
    results = []
    for i in range(count):
        j = 5 * i
        param, grad, m, v = arrays[j], arrays[j + 1], arrays[j + 2], arrays[j + 3]
        out, m_out, v_out = np.empty_like(param), np.empty_like(m), np.empty_like(v)
        _adam_pass(param, grad, m, v, constants[i], out, m_out, v_out)
        results += (out, m_out, v_out)
    return tuple(results)


cdef void _adam_pass(param, grad, m, v, k, out, m_out, v_out):
    cdef size_t pp = _addr(param), pg = _addr(grad), pm = _addr(m), pv = _addr(v)
    cdef size_t pk = _addr(k), po = _addr(out), pmo = _addr(m_out), pvo = _addr(v_out)
    cdef long n = param.size
    with nogil:
        imp_adam(n, <const float *>pp, <const float *>pg, <const float *>pm, <const float *>pv,
                 <const float *>pk, <float *>po, <float *>pmo, <float *>pvo)
