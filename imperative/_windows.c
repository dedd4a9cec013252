/* Sliding-window float32 loops behind imperative._kernels.max_pool_grad and max_pool_2x2.
 *
 * A max pooling's gradient as the composite rule of autodiff/rules_nn.py builds it took
 * some thirty ops
 * for a 2x2 window (a padded copy, per tap a comparison, casts, products and a strided
 * add), each a pass over the data; here one pass finds each window's first tap (row-major,
 * the padding's -inf included) holding its maximum, then tap after tap every window adds
 * dy * hit (hit 1 for that tap, else 0) to the input position the tap reads, as the rule
 * adds its per-tap slabs: the same products and sums in the same order, so the same bits,
 * infinite and NaN gradients included (inf * 0 is a NaN there too; which NaN, by sign,
 * may differ).
 *
 * The forward 2x2 stride-2 pooling combines each window's taps in the order and by the
 * rule (np.maximum's) of ops/pool.py's numpy loop. Declared in _windows.h. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_vec8.h"       /* imp_v8, IMP_ISA_VARIANTS_EXACT */
#include "_windows.h"

#define NO_TAP 255
/* every product and sum rounded where the source says (as numpy rounds the rule's) */
#define EXACT __attribute__((optimize("fp-contract=off")))

static inline uint32_t float_bits(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* v == m for a maximum m that is no NaN, by integer compares (the same bits, or both
 * zeros): a float compare branches on its unordered flag, and where a window's maximum
 * lies is as good as random, so the branch would be mispredicted half the time */
static inline int same_number(uint32_t bv, uint32_t bm)
{
    return (bv == bm) | (((bv | bm) & 0x7fffffffu) == 0);
}

/* the first tap of the window at (r0, c0) whose value equals the window's maximum m, or
 * NO_TAP (a NaN maximum equals nothing); taps in the padding read -inf */
static unsigned char first_hit(const float *x, long h, long w, long r0, long c0, int kh,
                               int kw, float m)
{
    if (r0 >= 0 && c0 >= 0 && r0 + kh <= h && c0 + kw <= w && m == m) {
        /* inside, and m no NaN: no bounds to check, no branch (same_number), and the last
         * tap to match, walking backwards, is the first */
        const float *corner = x + r0 * w + c0;
        unsigned char first = NO_TAP;
        uint32_t bm = float_bits(m);
        for (int i = kh - 1; i >= 0; i--)
            for (int j = kw - 1; j >= 0; j--)
                first = same_number(float_bits(corner[i * w + j]), bm)
                        ? (unsigned char)(i * kw + j) : first;
        return first;
    }
    for (int i = 0; i < kh; i++)
        for (int j = 0; j < kw; j++) {
            long r = r0 + i, c = c0 + j;
            float v = (r >= 0 && r < h && c >= 0 && c < w) ? x[r * w + c] : -INFINITY;
            if (v == m)
                return (unsigned char)(i * kw + j);
        }
    return NO_TAP;
}

/* Windows that do not overlap (stride >= window): each input position gets one tap's
 * contribution at most, 0 + dy * hit as the rule's sum of one slab gives it, written
 * window after window. */
EXACT static void disjoint_windows(const float *xp, const float *op, const float *gp,
                                   float *dp, long h, long w, long ho, long wo, int kh, int kw,
                                   int sh, int sw, int ph, int pw)
{
    for (long oh = 0; oh < ho; oh++)
        for (long ow = 0; ow < wo; ow++) {
            long r0 = oh * sh - ph, c0 = ow * sw - pw;
            float g = gp[oh * wo + ow];
            int hit = first_hit(xp, h, w, r0, c0, kh, kw, op[oh * wo + ow]);
            for (int i = 0; i < kh; i++) {
                long r = r0 + i;
                if (r < 0 || r >= h)
                    continue;               /* padding: the rule crops it away */
                for (int j = 0; j < kw; j++) {
                    long c = c0 + j;
                    if (c >= 0 && c < w)
                        dp[r * w + c] = 0.f + g * (i * kw + j == hit ? 1.f : 0.f);
                }
            }
        }
}

/* The common 2x2 window with stride 2 and no padding, eight windows at a time: a row
 * pair's values split into the windows' four taps, the hits as in the rule (each tap's
 * equality, times what no earlier tap claimed), each value 0 + dy * hit, put back in
 * place. A NaN maximum equals nothing. */
IMP_INLINE imp_v8 ones_where(imp_m8 mask)
{
    return (imp_v8)(mask & (imp_m8)imp_splat(1.f));
}

/* the four taps of eight 2x2 windows (top-left, top-right, bottom-left, bottom-right),
 * from 16 values of a row and 16 of the row below it */
IMP_INLINE void load_taps_2x2(const float *top, const float *bottom, imp_v8 tap[4])
{
    imp_v8 t0 = imp_load(top), t1 = imp_load(top + 8);
    imp_v8 b0 = imp_load(bottom), b1 = imp_load(bottom + 8);
    tap[0] = __builtin_shufflevector(t0, t1, 0, 2, 4, 6, 8, 10, 12, 14);
    tap[1] = __builtin_shufflevector(t0, t1, 1, 3, 5, 7, 9, 11, 13, 15);
    tap[2] = __builtin_shufflevector(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14);
    tap[3] = __builtin_shufflevector(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15);
}

/* eight windows of a row pair: tops[0 .. 16), bottoms likewise */
IMP_INLINE void eight_windows_2x2(const float *top, const float *bottom, const float *m,
                                  const float *g, float *dtop, float *dbottom)
{
    const imp_v8 one = imp_splat(1.f), zero = imp_splat(0.f);
    imp_v8 tap[4];
    load_taps_2x2(top, bottom, tap);
    imp_v8 mx = imp_load(m), gv = imp_load(g);
    imp_v8 ha = ones_where(tap[0] == mx);
    imp_v8 hb = ones_where(tap[1] == mx) * (one - ha);
    imp_v8 hc = ones_where(tap[2] == mx) * ((one - ha) - hb);
    imp_v8 hd = ones_where(tap[3] == mx) * (((one - ha) - hb) - hc);
    imp_v8 ra = zero + gv * ha, rb = zero + gv * hb, rc = zero + gv * hc, rd = zero + gv * hd;
    imp_store(dtop, __builtin_shufflevector(ra, rb, 0, 8, 1, 9, 2, 10, 3, 11));
    imp_store(dtop + 8, __builtin_shufflevector(ra, rb, 4, 12, 5, 13, 6, 14, 7, 15));
    imp_store(dbottom, __builtin_shufflevector(rc, rd, 0, 8, 1, 9, 2, 10, 3, 11));
    imp_store(dbottom + 8, __builtin_shufflevector(rc, rd, 4, 12, 5, 13, 6, 14, 7, 15));
}

/* 1 where v == m (m no NaN), else 0 */
IMP_INLINE float equal_01(float v, uint32_t bm)
{
    return (float)same_number(float_bits(v), bm);
}

/* one window, the same arithmetic */
IMP_INLINE void one_window_2x2(const float *top, const float *bottom, float m, float g,
                               float *dtop, float *dbottom)
{
    uint32_t bm = float_bits(m);
    float number = (float)((bm & 0x7fffffffu) <= 0x7f800000u);     /* 0 for a NaN maximum */
    float ha = equal_01(top[0], bm) * number;
    float hb = equal_01(top[1], bm) * number * (1.f - ha);
    float hc = equal_01(bottom[0], bm) * number * ((1.f - ha) - hb);
    float hd = equal_01(bottom[1], bm) * number * (((1.f - ha) - hb) - hc);
    dtop[0] = 0.f + g * ha;
    dtop[1] = 0.f + g * hb;
    dbottom[0] = 0.f + g * hc;
    dbottom[1] = 0.f + g * hd;
}

IMP_INLINE void imp_max_pool_grad_2x2_body(long rows, long w, long wo, const float *x,
                                      const float *out, const float *dy, float *dx)
{
    for (long oh = 0; oh < rows; oh++) {
        const float *top = x + 2 * oh * w, *m = out + oh * wo, *g = dy + oh * wo;
        float *dtop = dx + 2 * oh * w;
        long ow = 0;
        for (; ow + 8 <= wo; ow += 8)
            eight_windows_2x2(top + 2 * ow, top + w + 2 * ow, m + ow, g + ow, dtop + 2 * ow,
                              dtop + w + 2 * ow);
        for (; ow < wo; ow++)
            one_window_2x2(top + 2 * ow, top + w + 2 * ow, m[ow], g[ow], dtop + 2 * ow,
                           dtop + w + 2 * ow);
    }
}
IMP_ISA_VARIANTS_EXACT(imp_max_pool_grad_2x2, (long rows, long w, long wo, const float *x,
                                               const float *out, const float *dy, float *dx),
                       (rows, w, wo, x, out, dy, dx))

/* Overlapping windows: first each window's first hit, then tap after tap every window adds
 * its contribution, in the rule's order of sums. */
EXACT static void overlapping_windows(const float *xp, const float *op, const float *gp,
                                float *dp, long h, long w, long ho, long wo, int kh, int kw,
                                int sh, int sw, int ph, int pw, unsigned char *first)
{
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
                    continue;
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

void imp_max_pool_grad(long planes, long h, long w, long ho, long wo, int kh, int kw,
                       int sh, int sw, int ph, int pw, const float *x, const float *out,
                       const float *dy, float *dx, unsigned char *first)
{
    for (long p = 0; p < planes; p++) {
        const float *xp = x + p * h * w, *op = out + p * ho * wo, *gp = dy + p * ho * wo;
        float *dp = dx + p * h * w;
        memset(dp, 0, (size_t)(h * w) * sizeof(float));
        if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0)
            imp_max_pool_grad_2x2(ho, w, wo, xp, op, gp, dp);
        else if (sh >= kh && sw >= kw)
            disjoint_windows(xp, op, gp, dp, h, w, ho, wo, kh, kw, sh, sw, ph, pw);
        else
            overlapping_windows(xp, op, gp, dp, h, w, ho, wo, kh, kw, sh, sw, ph, pw, first);
    }
}

/* np.maximum's rule, lane by lane: a where a >= b or a is a NaN, else b */
IMP_INLINE imp_v8 numpy_max(imp_v8 a, imp_v8 b)
{
    return imp_select((a >= b) | (a != a), a, b);
}

static inline float numpy_max1(float a, float b)
{
    return (a >= b || a != a) ? a : b;
}

/* The maxima of 2x2 windows with stride 2 and no padding over `rows` output rows of one
 * plane, combined in the order the numpy kernel (ops/pool.py) combines them: top-left,
 * top-right, bottom-left, bottom-right, each by np.maximum's rule. */
IMP_INLINE void imp_max_pool_2x2_forward_body(long rows, long w, long wo, const float *x,
                                              float *out)
{
    for (long oh = 0; oh < rows; oh++) {
        const float *top = x + 2 * oh * w, *bottom = top + w;
        float *o = out + oh * wo;
        long ow = 0;
        for (; ow + 8 <= wo; ow += 8) {
            imp_v8 tap[4];
            load_taps_2x2(top + 2 * ow, bottom + 2 * ow, tap);
            imp_store(o + ow, numpy_max(numpy_max(numpy_max(tap[0], tap[1]), tap[2]), tap[3]));
        }
        for (; ow < wo; ow++)
            o[ow] = numpy_max1(numpy_max1(numpy_max1(top[2 * ow], top[2 * ow + 1]),
                                          bottom[2 * ow]), bottom[2 * ow + 1]);
    }
}
IMP_ISA_VARIANTS_EXACT(imp_max_pool_2x2_forward, (long rows, long w, long wo, const float *x,
                                                  float *out),
                       (rows, w, wo, x, out))

/* Depthwise convolution on zero-padded planes (planes, hp, wp): plane p uses the kh x kw taps
 * w + (p % channels) * kh * kw. Rows of wo outputs, eight at a time where the stride along
 * a row is 1 (the part vector for the rest), one at a time otherwise. */
/* the three depthwise loops' dimensions: planes, the channel count their taps cycle over,
 * the padded plane, the output plane, the window, its stride and dilation */
#define DEPTHWISE_DIMS                                                                        \
    long planes, long channels, long hp, long wp, long ho, long wo, int kh, int kw, int sh,   \
        int sw, int dh, int dw
#define DEPTHWISE_ARGS planes, channels, hp, wp, ho, wo, kh, kw, sh, sw, dh, dw

/* one output row: with stride 1 along the row, 32 outputs at a time in four vector
 * accumulators over all the taps (each output's taps summed in the (i, j) order the scalar
 * tail also takes) */
IMP_INLINE void depthwise_row(float *o, const float *rows, long wp, long wo, int kh, int kw,
                              int sw, int dh, int dw, const float *taps)
{
    long x = 0;
    if (sw == 1)
        for (; x + 32 <= wo; x += 32) {
            imp_v8 acc[4] = {imp_splat(0.f), imp_splat(0.f), imp_splat(0.f), imp_splat(0.f)};
            for (int i = 0; i < kh; i++)
                for (int j = 0; j < kw; j++) {
                    const imp_v8 t = imp_splat(taps[i * kw + j]);
                    const float *src = rows + i * dh * wp + j * dw + x;
                    for (int v = 0; v < 4; v++) acc[v] += t * imp_load(src + 8 * v);
                }
            for (int v = 0; v < 4; v++) imp_store(o + x + 8 * v, acc[v]);
        }
    for (; x < wo; x++) {
        float acc = 0.f;
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++)
                acc += taps[i * kw + j] * rows[i * dh * wp + j * dw + x * sw];
        o[x] = acc;
    }
}

IMP_INLINE void imp_depthwise_forward_body(DEPTHWISE_DIMS, const float *xp, const float *w,
                                           float *out)
{
    for (long p = 0; p < planes; p++) {
        const float *taps = w + (p % channels) * kh * kw;
        for (long oh = 0; oh < ho; oh++)
            depthwise_row(out + (p * ho + oh) * wo, xp + (p * hp + oh * sh) * wp, wp, wo, kh,
                          kw, sw, dh, dw, taps);
    }
}
IMP_ISA_VARIANTS_EXACT(imp_depthwise_forward,
                       (DEPTHWISE_DIMS, const float *xp, const float *w, float *out),
                       (DEPTHWISE_ARGS, xp, w, out))

/* gxp (planes, hp, wp), zeroed by the caller, gets each tap's w * dy where the tap read */
IMP_INLINE void imp_depthwise_grad_input_body(DEPTHWISE_DIMS, const float *dy,
                                              const float *w, float *gxp)
{
    for (long p = 0; p < planes; p++) {
        const float *taps = w + (p % channels) * kh * kw;
        for (long oh = 0; oh < ho; oh++) {
            const float *g = dy + (p * ho + oh) * wo;
            for (int i = 0; i < kh; i++) {
                float *row = gxp + (p * hp + oh * sh + i * dh) * wp;
                for (int j = 0; j < kw; j++) {
                    float *dst = row + j * dw, t = taps[i * kw + j];
                    long x = 0;
                    if (sw == 1) {
                        const imp_v8 tv = imp_splat(t);
                        for (; x + 8 <= wo; x += 8)
                            imp_store(dst + x, imp_load(dst + x) + tv * imp_load(g + x));
                    }
                    for (; x < wo; x++) dst[x * sw] += t * g[x];
                }
            }
        }
    }
}
IMP_ISA_VARIANTS_EXACT(imp_depthwise_grad_input,
                       (DEPTHWISE_DIMS, const float *dy, const float *w, float *gxp),
                       (DEPTHWISE_ARGS, dy, w, gxp))

/* gw (channels, kh, kw), in double, zeroed by the caller, gets each tap's sum of dy times
 * what it read; each plane's row sums taken in eight float lanes */
IMP_INLINE void imp_depthwise_grad_weight_body(DEPTHWISE_DIMS, const float *xp,
                                               const float *dy, double *gw)
{
    for (long p = 0; p < planes; p++) {
        double *taps = gw + (p % channels) * kh * kw;
        for (int i = 0; i < kh; i++)
            for (int j = 0; j < kw; j++) {
                imp_v8 acc = imp_splat(0.f);
                float rest = 0.f;
                for (long oh = 0; oh < ho; oh++) {
                    const float *g = dy + (p * ho + oh) * wo;
                    const float *src = xp + (p * hp + oh * sh + i * dh) * wp + j * dw;
                    long x = 0;
                    if (sw == 1)
                        for (; x + 8 <= wo; x += 8) acc += imp_load(g + x) * imp_load(src + x);
                    for (; x < wo; x++) rest += g[x] * src[x * sw];
                }
                taps[i * kw + j] += (double)imp_lane_sum(acc) + (double)rest;
            }
    }
}
IMP_ISA_VARIANTS_EXACT(imp_depthwise_grad_weight,
                       (DEPTHWISE_DIMS, const float *xp, const float *dy, double *gw),
                       (DEPTHWISE_ARGS, xp, dy, gw))
