/* Eight float32 lanes as a GCC generic vector, and the per-ISA instantiation of a loop
 * written once with them (_rows.c, _activations.c, _loops.c).
 *
 * A loop body is a static always-inline function over `imp_v8`; IMP_ISA_VARIANTS compiles
 * it three times (AVX-512F and AVX2: one ymm per vector; the baseline: two xmm) and
 * defines the entry point that picks one with the products' instruction set
 * (imp_native_isa). Generic vector operations are IEEE operations per lane; the AVX-512 and
 * AVX2 variants contract a product and a sum into a fused multiply-add where GCC sees one
 * (a quarter faster for the exp polynomial), the baseline (CPUs without FMA, where numpy
 * runs the products) does not, so its last bits may differ. (Eight lanes, not sixteen:
 * GCC splits a 64-byte vector's comparisons into scalar code under AVX2.) */
#ifndef IMP_VEC8_H
#define IMP_VEC8_H

#include <string.h>

#include "_sgemm.h"     /* IMP_X86_NATIVE, imp_native_isa */

typedef float imp_v8 __attribute__((vector_size(32)));
typedef int imp_m8 __attribute__((vector_size(32)));     /* a lane mask: 0 or -1 */

#define IMP_INLINE static inline __attribute__((always_inline))

IMP_INLINE imp_v8 imp_splat(float v)
{
    return (imp_v8){v, v, v, v, v, v, v, v};
}

IMP_INLINE imp_v8 imp_load(const float *p)
{
    imp_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* the first `count` (< 8) floats at p, the other lanes `fill` */
IMP_INLINE imp_v8 imp_load_part(const float *p, long count, float fill)
{
    float lanes[8];
    for (int u = 0; u < 8; u++) lanes[u] = u < count ? p[u] : fill;
    return imp_load(lanes);
}

IMP_INLINE void imp_store(float *p, imp_v8 v) { memcpy(p, &v, sizeof v); }

IMP_INLINE void imp_store_part(float *p, long count, imp_v8 v)
{
    float lanes[8];
    imp_store(lanes, v);
    memcpy(p, lanes, (size_t)count * sizeof(float));
}

/* where mask: a, else b */
IMP_INLINE imp_v8 imp_select(imp_m8 mask, imp_v8 a, imp_v8 b)
{
    return (imp_v8)((mask & (imp_m8)a) | (~mask & (imp_m8)b));
}

/* |v|: the sign bit cleared (a NaN stays NaN) */
IMP_INLINE imp_v8 imp_abs(imp_v8 v) { return (imp_v8)((imp_m8)v & 0x7fffffff); }

/* the larger of each pair; a NaN in v keeps m (callers let NaNs reach the output
 * through the values themselves) */
IMP_INLINE imp_v8 imp_max(imp_v8 m, imp_v8 v) { return imp_select(v > m, v, m); }

/* The eight lanes summed in one fixed order (a tree), the same in every variant. */
IMP_INLINE float imp_lane_sum(imp_v8 v)
{
    float s[8];
    imp_store(s, v);
    for (int width = 4; width >= 1; width /= 2)
        for (int u = 0; u < width; u++) s[u] += s[u + width];
    return s[0];
}

IMP_INLINE float imp_lane_max(imp_v8 v)
{
    float s[8];
    imp_store(s, v);
    float m = s[0];
    for (int u = 1; u < 8; u++) m = s[u] > m ? s[u] : m;
    return m;
}

/* exp(x) for x <= 0 (a NaN stays NaN; x > 88 overflows the exponent: callers pass
 * differences from a maximum, or -|x|), within about 1 ulp: Cody and Waite's reduction
 * x = n ln 2 + r with ln 2 split in two, then the classic degree-5 minimax polynomial of
 * (e^r - 1 - r) / r^2 (Cephes' expf coefficients), and 2^n put in the exponent. Below
 * log(2^-126) the result is 0: the subnormal results e^-87.3 .. e^-103 are below any
 * tolerance a softmax, sigmoid or GELU is read at. Rounding to an integer adds and subtracts
 * 1.5 * 2^23 (exact for |x log2 e| < 2^22, and the same in every variant where a round
 * instruction might not be). */
#define IMP_EXP_NONPOS_BODY(V, M)                                                             \
    {                                                                                         \
        const V lo = (V){0} + -87.33654475f, magic = (V){0} + 12582912.f;                       \
        M under = x < lo;                                                                     \
        x = (V)((under & (M)lo) | (~under & (M)x));                                           \
        V n = (x * 1.44269504088896341f + magic) - magic;                                     \
        V r = x - n * 0.693359375f;                                                           \
        r = r - n * -2.12194440e-4f;                                                          \
        V p = (V){0} + 1.9875691500e-4f;                                                       \
        p = p * r + 1.3981999507e-3f;                                                         \
        p = p * r + 8.3334519073e-3f;                                                         \
        p = p * r + 4.1665795894e-2f;                                                         \
        p = p * r + 1.6666665459e-1f;                                                         \
        p = p * r + 5.0000001201e-1f;                                                         \
        V y = (p * (r * r) + r) + 1.f;                                                        \
        M e = (__builtin_convertvector(n, M) + 127) << 23;                                    \
        y = y * (V)e;                                                                         \
        return (V)(~under & (M)y);                                                            \
    }
IMP_INLINE imp_v8 imp_exp_nonpos(imp_v8 x) IMP_EXP_NONPOS_BODY(imp_v8, imp_m8)

/* Sixteen lanes, for the AVX-512 variant of a loop whose work is mostly exp
 * (IMP_ISA_VARIANTS_WIDE): each lane computes what the eight-lane code computes, so the
 * bits do not depend on the width, and sums go on over eight lanes (imp_low8, imp_high8)
 * in the eight-lane order. Only there: GCC splits a 64-byte vector's comparisons into
 * scalar code under AVX2. */
typedef float imp_v16 __attribute__((vector_size(64)));
typedef int imp_m16 __attribute__((vector_size(64)));

IMP_INLINE imp_v16 imp_load16(const float *p)
{
    imp_v16 v;
    memcpy(&v, p, sizeof v);
    return v;
}

IMP_INLINE void imp_store16(float *p, imp_v16 v) { memcpy(p, &v, sizeof v); }

IMP_INLINE imp_v8 imp_low8(imp_v16 v)
{
    return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
}

IMP_INLINE imp_v8 imp_high8(imp_v16 v)
{
    return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
}

IMP_INLINE imp_v16 imp_exp_nonpos16(imp_v16 x) IMP_EXP_NONPOS_BODY(imp_v16, imp_m16)

/* IMP_ISA_VARIANTS(name, (params), (args)): `void name(params)` runs `name##_body(args)`
 * compiled for the instruction set in use, with fused multiply-adds where GCC finds them
 * (AVX-512 and AVX2). IMP_ISA_VARIANTS_EXACT: without them, so that every variant rounds
 * each product and sum as the source says (the same bits on every CPU). */
#define IMP_FMA __attribute__((optimize("fp-contract=fast")))
#define IMP_NO_FMA __attribute__((optimize("fp-contract=off")))
#define IMP_ISA_VARIANTS(name, params, args) IMP_ISA_VARIANTS_WITH(IMP_FMA, name, params, args)
#define IMP_ISA_VARIANTS_EXACT(name, params, args)                                            \
    IMP_ISA_VARIANTS_WITH(IMP_NO_FMA, name, params, args)
/* IMP_ISA_VARIANTS_WIDE: as IMP_ISA_VARIANTS, the body taking one more argument, `wide`: 1
 * in the AVX-512 variant (it may use sixteen lanes), 0 in the others (a constant the
 * inlined body is specialised on). */
#define IMP_ARGS(...) __VA_ARGS__
#define IMP_ISA_VARIANTS_WIDE(name, params, args)                                             \
    IMP_INLINE void name##_narrow params { name##_body(IMP_ARGS args, 0); }                   \
    IMP_INLINE void name##_wide params { name##_body(IMP_ARGS args, 1); }                     \
    IMP_ISA_VARIANTS_WITH_BODIES(IMP_FMA, name, params, args, name##_wide, name##_narrow)
#define IMP_ISA_VARIANTS_WITH(contract, name, params, args)                                   \
    IMP_ISA_VARIANTS_WITH_BODIES(contract, name, params, args, name##_body, name##_body)
#if IMP_X86_NATIVE
#define IMP_ISA_VARIANTS_WITH_BODIES(contract, name, params, args, wide_body, body)           \
    __attribute__((target("avx512f,fma"))) contract static void name##_avx512 params        \
    { wide_body args; }                                                                      \
    __attribute__((target("avx2,fma"))) contract static void name##_avx2 params              \
    { body args; }                                                                           \
    IMP_NO_FMA static void name##_base params { body args; }                                  \
    void name params                                                                          \
    {                                                                                         \
        int isa = imp_native_isa();                                                           \
        if (isa == IMP_ISA_AVX512) name##_avx512 args;                                        \
        else if (isa == IMP_ISA_AVX2) name##_avx2 args;                                       \
        else name##_base args;                                                                \
    }
#else
#define IMP_ISA_VARIANTS_WITH_BODIES(contract, name, params, args, wide_body, body)           \
    IMP_NO_FMA void name params { body args; }
#endif

#endif
