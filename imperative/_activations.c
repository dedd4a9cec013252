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

/* y = f(x) over n values, eight at a time: EXPR computes a vector from the vector `v` of
 * inputs (the last n % 8 through a part vector, its other lanes 0) */
#define MAP8(n, x, y, EXPR)                                                                   \
    do {                                                                                      \
        long i_ = 0;                                                                          \
        for (; i_ + 8 <= (n); i_ += 8) {                                                      \
            imp_v8 v = imp_load((x) + i_);                                                    \
            imp_store((y) + i_, (EXPR));                                                      \
        }                                                                                     \
        if (i_ < (n)) {                                                                       \
            imp_v8 v = imp_load_part((x) + i_, (n) - i_, 0.f);                                \
            imp_store_part((y) + i_, (n) - i_, (EXPR));                                       \
        }                                                                                     \
    } while (0)

/* min(max(v, 0), 6) as numpy's clip computes it: a NaN stays (no comparison holds) */
IMP_INLINE imp_v8 clip0to6(imp_v8 v)
{
    const imp_v8 zero = imp_splat(0.f), six = imp_splat(6.f);
    v = imp_select(v < zero, zero, v);
    return imp_select(v > six, six, v);
}

/* GELU works on blocks of GELU_VECTORS vectors: its erfc polynomial is a chain of dependent
 * multiply-adds (Horner's rule), so one vector at a time waits on each step's latency, while
 * four independent chains step together keep the units busy (2.5 times faster here). Each
 * lane computes exactly what it would alone. */
#define GELU_VECTORS 4
#define GELU_BLOCK (8 * GELU_VECTORS)

/* Phi(x) and phi(x) * sqrt(2 pi) = exp(-x^2 / 2) of a block: Phi from erfc(|z|) / 2, z = x /
 * sqrt 2, as described in _activations.h (the smaller tail, accurate relative to itself) */
IMP_INLINE void normal_cdf_block(const imp_v8 *x, const float *c, int degree, imp_v8 *cdf,
                                 imp_v8 *density)
{
    const imp_v8 one = imp_splat(1.f), half = imp_splat(0.5f);
    imp_v8 z[GELU_VECTORS], a[GELU_VECTORS], t[GELU_VECTORS], s[GELU_VECTORS],
        r[GELU_VECTORS];
    for (int j = 0; j < GELU_VECTORS; j++) {
        z[j] = x[j] * imp_splat(0.70710678118654752f);
        a[j] = imp_abs(z[j]);
        t[j] = one / (a[j] * half + one);
        s[j] = t[j] * imp_splat(2.f) - one;
        r[j] = imp_splat(c[degree]);
    }
    for (int k = degree - 1; k >= 0; k--) {
        const imp_v8 ck = imp_splat(c[k]);
        for (int j = 0; j < GELU_VECTORS; j++) r[j] = r[j] * s[j] + ck;
    }
    for (int j = 0; j < GELU_VECTORS; j++) {
        imp_v8 tail = imp_exp_nonpos(r[j] - a[j] * a[j]) * t[j] * half;
        cdf[j] = imp_select(z[j] < imp_splat(0.f), tail, one - tail);
        if (density) density[j] = imp_exp_nonpos(-(a[j] * a[j]));
    }
}

/* y = x Phi(x) over one block of GELU_BLOCK values */
IMP_INLINE void gelu_block(const float *x, float *y, const float *c, int degree)
{
    imp_v8 v[GELU_VECTORS], cdf[GELU_VECTORS];
    for (int j = 0; j < GELU_VECTORS; j++) v[j] = imp_load(x + 8 * j);
    normal_cdf_block(v, c, degree, cdf, NULL);
    for (int j = 0; j < GELU_VECTORS; j++) imp_store(y + 8 * j, v[j] * cdf[j]);
}

/* out = dy (Phi(x) + x phi(x)) over one block (out may be dy or x: each block is read whole
 * before it is written) */
IMP_INLINE void gelu_grad_block(const float *dy, const float *x, float *out, const float *c,
                                int degree)
{
    const imp_v8 inv_sqrt_2pi = imp_splat(0.39894228040143268f);
    imp_v8 v[GELU_VECTORS], g[GELU_VECTORS], cdf[GELU_VECTORS], density[GELU_VECTORS];
    for (int j = 0; j < GELU_VECTORS; j++) {
        v[j] = imp_load(x + 8 * j);
        g[j] = imp_load(dy + 8 * j);
    }
    normal_cdf_block(v, c, degree, cdf, density);
    for (int j = 0; j < GELU_VECTORS; j++)
        imp_store(out + 8 * j, g[j] * (cdf[j] + v[j] * density[j] * inv_sqrt_2pi));
}

IMP_INLINE void imp_relu_body(long n, const float *x, float *y)
{
    MAP8(n, x, y, relu8(v));
}
IMP_ISA_VARIANTS_EXACT(imp_relu, (long n, const float *x, float *y), (n, x, y))

IMP_INLINE void imp_sigmoid_body(long n, const float *x, float *y)
{
    MAP8(n, x, y, sigmoid8(v));
}
IMP_ISA_VARIANTS(imp_sigmoid, (long n, const float *x, float *y), (n, x, y))

/* The last n % GELU_BLOCK values go through a zero-padded block on the stack. */
IMP_INLINE void imp_gelu_body(long n, const float *x, float *y, const float *c, int degree)
{
    long i = 0;
    for (; i + GELU_BLOCK <= n; i += GELU_BLOCK) gelu_block(x + i, y + i, c, degree);
    if (i < n) {
        float xs[GELU_BLOCK] = {0}, ys[GELU_BLOCK];
        memcpy(xs, x + i, (size_t)(n - i) * sizeof(float));
        gelu_block(xs, ys, c, degree);
        memcpy(y + i, ys, (size_t)(n - i) * sizeof(float));
    }
}
IMP_ISA_VARIANTS(imp_gelu, (long n, const float *x, float *y, const float *c, int degree),
                 (n, x, y, c, degree))

IMP_INLINE void imp_gelu_grad_body(long n, const float *dy, const float *x, float *out,
                                   const float *c, int degree)
{
    long i = 0;
    for (; i + GELU_BLOCK <= n; i += GELU_BLOCK)
        gelu_grad_block(dy + i, x + i, out + i, c, degree);
    if (i < n) {
        float gs[GELU_BLOCK] = {0}, xs[GELU_BLOCK] = {0}, os[GELU_BLOCK];
        memcpy(gs, dy + i, (size_t)(n - i) * sizeof(float));
        memcpy(xs, x + i, (size_t)(n - i) * sizeof(float));
        gelu_grad_block(gs, xs, os, c, degree);
        memcpy(out + i, os, (size_t)(n - i) * sizeof(float));
    }
}
IMP_ISA_VARIANTS(imp_gelu_grad, (long n, const float *dy, const float *x, float *out,
                                 const float *c, int degree), (n, dy, x, out, c, degree))

IMP_INLINE void imp_silu_body(long n, const float *x, float *y)
{
    MAP8(n, x, y, v * sigmoid8(v));
}
IMP_ISA_VARIANTS(imp_silu, (long n, const float *x, float *y), (n, x, y))

IMP_INLINE void imp_silu_grad_body(long n, const float *dy, const float *x, float *out)
{
    const imp_v8 one = imp_splat(1.f);
    long i = 0;
    for (; i < n; i += 8) {
        long m = n - i < 8 ? n - i : 8;
        imp_v8 v = m == 8 ? imp_load(x + i) : imp_load_part(x + i, m, 0.f);
        imp_v8 g = m == 8 ? imp_load(dy + i) : imp_load_part(dy + i, m, 0.f);
        imp_v8 s = sigmoid8(v);
        imp_v8 r = g * s * (one + v * (one - s));
        if (m == 8)
            imp_store(out + i, r);
        else
            imp_store_part(out + i, m, r);
    }
}
IMP_ISA_VARIANTS(imp_silu_grad, (long n, const float *dy, const float *x, float *out),
                 (n, dy, x, out))

/* the exact variants below round each operation as numpy's passes do: the same bits */
IMP_INLINE void imp_leaky_relu_body(long n, const float *x, float *y, float slope)
{
    const imp_v8 zero = imp_splat(0.f), s = imp_splat(slope);
    MAP8(n, x, y, imp_select(v >= zero, v, v * s));
}
IMP_ISA_VARIANTS_EXACT(imp_leaky_relu, (long n, const float *x, float *y, float slope),
                       (n, x, y, slope))

IMP_INLINE void imp_hardswish_body(long n, const float *x, float *y)
{
    MAP8(n, x, y, v * clip0to6(v + imp_splat(3.f)) / imp_splat(6.f));
}
IMP_ISA_VARIANTS_EXACT(imp_hardswish, (long n, const float *x, float *y), (n, x, y))

IMP_INLINE void imp_hardsigmoid_body(long n, const float *x, float *y)
{
    MAP8(n, x, y, clip0to6(v + imp_splat(3.f)) / imp_splat(6.f));
}
IMP_ISA_VARIANTS_EXACT(imp_hardsigmoid, (long n, const float *x, float *y), (n, x, y))

/* erf over blocks of GELU_VECTORS vectors (independent Horner chains, as GELU's), with
 * ops/elemwise.py's two expansions: x S(2x^2 - 1) for |x| < 1, else sign(x) (1 - erfc|x|),
 * erfc(a) = t exp(L(2t - 1) - a^2), t = 1 / (1 + a / 2) */
IMP_INLINE void erf_block(const float *x, float *y, const float *cs, int ds, const float *cl,
                          int dl)
{
    const imp_v8 one = imp_splat(1.f), two = imp_splat(2.f), half = imp_splat(0.5f);
    imp_v8 v[GELU_VECTORS], a[GELU_VECTORS], s[GELU_VECTORS], r[GELU_VECTORS],
        t[GELU_VECTORS], u[GELU_VECTORS], q[GELU_VECTORS];
    for (int j = 0; j < GELU_VECTORS; j++) {
        v[j] = imp_load(x + 8 * j);
        a[j] = imp_abs(v[j]);
        s[j] = v[j] * v[j] * two - one;
        t[j] = one / (a[j] * half + one);
        u[j] = t[j] * two - one;
        r[j] = imp_splat(cs[ds]);
        q[j] = imp_splat(cl[dl]);
    }
    for (int k = ds - 1; k >= 0; k--)
        for (int j = 0; j < GELU_VECTORS; j++) r[j] = r[j] * s[j] + imp_splat(cs[k]);
    for (int k = dl - 1; k >= 0; k--)
        for (int j = 0; j < GELU_VECTORS; j++) q[j] = q[j] * u[j] + imp_splat(cl[k]);
    for (int j = 0; j < GELU_VECTORS; j++) {
        imp_v8 tail = imp_exp_nonpos(q[j] - a[j] * a[j]) * t[j];
        imp_v8 big = one - tail;                      /* erf(|x|), then x's sign on it */
        big = (imp_v8)((imp_m8)big | ((imp_m8)v[j] & (imp_m8)imp_splat(-0.f)));
        imp_store(y + 8 * j, imp_select(a[j] >= one, big, r[j] * v[j]));
    }
}

IMP_INLINE void imp_erf_body(long n, const float *x, float *y, const float *cs, int ds,
                             const float *cl, int dl)
{
    long i = 0;
    for (; i + GELU_BLOCK <= n; i += GELU_BLOCK) erf_block(x + i, y + i, cs, ds, cl, dl);
    if (i < n) {
        float xs[GELU_BLOCK] = {0}, ys[GELU_BLOCK];
        memcpy(xs, x + i, (size_t)(n - i) * sizeof(float));
        erf_block(xs, ys, cs, ds, cl, dl);
        memcpy(y + i, ys, (size_t)(n - i) * sizeof(float));
    }
}
IMP_ISA_VARIANTS(imp_erf, (long n, const float *x, float *y, const float *cs, int ds,
                           const float *cl, int dl), (n, x, y, cs, ds, cl, dl))
