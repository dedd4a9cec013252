/* Small float32 reductions behind imperative._kernels.reduce_rows_or. A tiny tensor's sum
 * or maximum spent most of its time in numpy's reduction machinery (0.8-1 us to set up an
 * iterator for 64 values); these loops take the same values in the same order, so they
 * give numpy's bits: sums associate as numpy's pairwise summation does (blocks of up to
 * 128 values summed in eight interleaved partial sums, longer runs split in halves at a
 * multiple of eight). Maxima and minima are numpy's where no result is a zero (numpy's
 * vector loops pick between -0 and +0 by lane order). Where a result is a NaN (which NaN,
 * among several, depends on the order too) or infinite (numpy warns of an overflow), the
 * caller asks numpy (imp_reduce_rows' *unsure). Compiled without contraction or
 * reassociation: every sum is rounded where the source says. Declared in _reduce.h. */
#include <math.h>

#include "_reduce.h"
#include "_vec8.h"

#define PAIRWISE_BLOCK 128      /* numpy's PW_BLOCKSIZE */

static float pairwise_sum(const float *a, long n)
{
    if (n < 8) {
        float res = 0.f;
        for (long i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= PAIRWISE_BLOCK) {
        float r[8];
        long i;
        for (int k = 0; k < 8; k++)
            r[k] = a[k];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++)
                r[k] += a[i + k];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    long half = n / 2;
    half -= half % 8;
    return pairwise_sum(a, half) + pairwise_sum(a + half, n - half);
}

/* The largest (sign > 0) or smallest (sign < 0) value of each row, where it holds no NaN
 * nor infinity (else *unsure is set: the caller asks numpy, as for a zero answer). Eight
 * lanes of running extremes and of sums of v - v (0 unless v is a NaN or an infinity):
 * without NaNs and apart from the sign of a zero, the order of comparisons does not
 * change the answer. */
IMP_INLINE void imp_extreme_rows_body(long rows, long n, const float *x, float sign,
                                      float *out, int *unsure)
{
    const imp_v8 s = imp_splat(sign);
    for (long r = 0; r < rows; r++) {
        const float *a = x + r * n;
        imp_v8 m = imp_splat(sign * a[0]), odd = imp_splat(0.f);
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            imp_v8 v = s * imp_load(a + i);
            m = imp_max(m, v);
            odd += v - v;
        }
        if (i < n) {
            imp_v8 v = s * imp_load_part(a + i, n - i, a[0]);
            m = imp_max(m, v);
            odd += v - v;
        }
        if (imp_lane_sum(odd) != 0.f)
            *unsure = 1;
        out[r] = sign * imp_lane_max(m);
    }
}
IMP_ISA_VARIANTS_EXACT(imp_extreme_rows, (long rows, long n, const float *x, float sign,
                                          float *out, int *unsure),
                       (rows, n, x, sign, out, unsure))

void imp_reduce_rows(int mode, long rows, long n, const float *x, float *out, int *unsure)
{
    *unsure = 0;
    if (mode == IMP_REDUCE_MAX || mode == IMP_REDUCE_MIN)
        imp_extreme_rows(rows, n, x, mode == IMP_REDUCE_MAX ? 1.f : -1.f, out, unsure);
    for (long r = 0; r < rows; r++) {
        if (mode == IMP_REDUCE_SUM)         /* numpy adds the sum to the identity, 0 */
            out[r] = 0.f + pairwise_sum(x + r * n, n);
        else if (mode == IMP_REDUCE_MEAN)   /* the float32 sum over the count, a float32 */
            out[r] = (0.f + pairwise_sum(x + r * n, n)) / (float)n;
        else if (out[r] == 0.f)
            *unsure = 1;
        if (!isfinite(out[r]))
            *unsure = 1;
    }
}
