/* Float32 activations behind imperative._kernels' relu, sigmoid and gelu: one pass where
 * numpy makes five (sigmoid) or some thirty (gelu's erfc polynomial, its exp and the select),
 * with the vectorised exp of _vec8.h; relu because numpy's maximum against a scalar zero
 * takes a scalar loop (1 GB/s here, six times its loop on two arrays). Declared in
 * _activations.h. */
#include "_activations.h"
#include "_vec8.h"

IMP_INLINE imp_v8 sigmoid8(imp_v8 x)
{
    const imp_v8 one = imp_splat(1.f);
    imp_v8 e = imp_exp_nonpos(-imp_abs(x));
    imp_v8 d = one + e;
    return imp_select(x >= imp_splat(0.f), one / d, e / d);
}

/* numpy's maximum(x, 0) bit for bit: x where x > 0 or x is a NaN (sign and payload kept),
 * else +0 (-0 included) */
IMP_INLINE imp_v8 relu8(imp_v8 x)
{
    const imp_v8 zero = imp_splat(0.f);
    return imp_select((x > zero) | (x != x), x, zero);
}

IMP_INLINE imp_v8 gelu8(imp_v8 x, const float *c, int degree)
{
    const imp_v8 one = imp_splat(1.f), half = imp_splat(0.5f);
    imp_v8 z = x * imp_splat(0.70710678118654752f);
    imp_v8 a = imp_abs(z);
    imp_v8 t = one / (a * half + one);
    imp_v8 s = t * imp_splat(2.f) - one;
    imp_v8 r = imp_splat(c[degree]);
    for (int k = degree - 1; k >= 0; k--) r = r * s + imp_splat(c[k]);
    imp_v8 tail = imp_exp_nonpos(r - a * a) * t * half;
    return x * imp_select(z < imp_splat(0.f), tail, one - tail);
}

IMP_INLINE void imp_relu_body(long n, const float *x, float *y)
{
    long i = 0;
    for (; i + 8 <= n; i += 8) imp_store(y + i, relu8(imp_load(x + i)));
    if (i < n) imp_store_part(y + i, n - i, relu8(imp_load_part(x + i, n - i, 0.f)));
}
IMP_ISA_VARIANTS_EXACT(imp_relu, (long n, const float *x, float *y), (n, x, y))

IMP_INLINE void imp_sigmoid_body(long n, const float *x, float *y)
{
    long i = 0;
    for (; i + 8 <= n; i += 8) imp_store(y + i, sigmoid8(imp_load(x + i)));
    if (i < n) imp_store_part(y + i, n - i, sigmoid8(imp_load_part(x + i, n - i, 0.f)));
}
IMP_ISA_VARIANTS(imp_sigmoid, (long n, const float *x, float *y), (n, x, y))

IMP_INLINE void imp_gelu_body(long n, const float *x, float *y, const float *c, int degree)
{
    long i = 0;
    for (; i + 8 <= n; i += 8) imp_store(y + i, gelu8(imp_load(x + i), c, degree));
    if (i < n) imp_store_part(y + i, n - i, gelu8(imp_load_part(x + i, n - i, 0.f), c, degree));
}
IMP_ISA_VARIANTS(imp_gelu, (long n, const float *x, float *y, const float *c, int degree),
                 (n, x, y, c, degree))
