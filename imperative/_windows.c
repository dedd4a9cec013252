/* Sliding-window float32 loops behind imperative._kernels.max_pool_grad. A max pooling's
 * gradient as the composite rule of autodiff/rules_nn.py builds it took some thirty ops
 * for a 2x2 window (a padded copy, per tap a comparison, casts, products and a strided
 * add), each a pass over the data; here one pass finds each window's first tap (row-major,
 * the padding's -inf included) holding its maximum, then tap after tap every window adds
 * dy * hit (hit 1 for that tap, else 0) to the input position the tap reads, as the rule
 * adds its per-tap slabs: the same products and sums in the same order, so the same bits,
 * infinite and NaN gradients included (inf * 0 is a NaN there too; which NaN, by sign,
 * may differ). Declared in _windows.h. */
#include <math.h>

#include "_windows.h"

#define NO_TAP 255

/* the first tap of window (oh, ow) whose value equals the window's maximum m, or NO_TAP
 * (a NaN maximum equals nothing) */
static unsigned char first_hit(const float *x, long h, long w, long r0, long c0, int kh,
                               int kw, float m)
{
    for (int i = 0; i < kh; i++)
        for (int j = 0; j < kw; j++) {
            long r = r0 + i, c = c0 + j;
            float v = (r >= 0 && r < h && c >= 0 && c < w) ? x[r * w + c] : -INFINITY;
            if (v == m)
                return (unsigned char)(i * kw + j);
        }
    return NO_TAP;
}

__attribute__((optimize("fp-contract=off")))
void imp_max_pool_grad(long planes, long h, long w, long ho, long wo, int kh, int kw,
                       int sh, int sw, int ph, int pw, const float *x, const float *out,
                       const float *dy, float *dx, unsigned char *first)
{
    for (long p = 0; p < planes; p++) {
        const float *xp = x + p * h * w, *op = out + p * ho * wo, *gp = dy + p * ho * wo;
        float *dp = dx + p * h * w;
        for (long oh = 0; oh < ho; oh++)
            for (long ow = 0; ow < wo; ow++)
                first[oh * wo + ow] = first_hit(xp, h, w, oh * sh - ph, ow * sw - pw, kh, kw,
                                                op[oh * wo + ow]);
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                unsigned char tap = (unsigned char)(i * kw + j);
                for (long oh = 0; oh < ho; oh++) {
                    long r = oh * sh - ph + i;
                    if (r < 0 || r >= h)
                        continue;               /* padding: the rule crops it away */
                    for (long ow = 0; ow < wo; ow++) {
                        long c = ow * sw - pw + j;
                        if (c < 0 || c >= w)
                            continue;
                        float hit = first[oh * wo + ow] == tap ? 1.f : 0.f;
                        dp[r * w + c] = dp[r * w + c] + gp[oh * wo + ow] * hit;
                    }
                }
            }
    }
}
