/* Memory-bound float32 loops behind imperative._kernels' elementwise and normalisation
 * entry points (relu_grad, axpy, channel_moments, channel_affine, layer_norm_rows): one pass
 * where numpy makes several. The AVX-512/AVX2 paths are compiled per function (target
 * attributes) and chosen at run time with the products' instruction set (imp_native_isa,
 * _sgemm.c). Declared in _loops.h. */
#include <math.h>
#include <stdint.h>

#include "_loops.h"
#include "_sgemm.h"     /* IMP_X86_NATIVE */
#include "_vec8.h"      /* IMP_INLINE, IMP_ISA_VARIANTS_EXACT */
/* dy * (y > 0) (exact: the same bits on every path), with the products' instruction
 * set (imp_native_isa) */
void imp_relu_grad(long n, const float *dy, const float *y, float *out)
{
    long i = imp_relu_grad_vectors(n, dy, y, out);   /* gcc will not vectorize this loop */
    for (; i < n; i++) out[i] = dy[i] * (float)(y[i] > 0.f);
}

#if IMP_X86_NATIVE
#include <immintrin.h>
/* x + alpha * y rounded as numpy does it: a product, then a sum (no fused multiply-add) */
__attribute__((target("avx512f"), optimize("fp-contract=off")))
static inline __m512 axpy16(const float *x, __m512 alpha, const float *y)
{
    return _mm512_add_ps(_mm512_loadu_ps(x), _mm512_mul_ps(alpha, _mm512_loadu_ps(y)));
}

__attribute__((target("avx512f"), optimize("fp-contract=off")))
static long imp_axpy_avx512(long n, const float *x, float alpha, const float *y, float *out)
{
    const __m512 a = _mm512_set1_ps(alpha);
    long i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 r0 = axpy16(x + i, a, y + i), r1 = axpy16(x + i + 16, a, y + i + 16);
        __m512 r2 = axpy16(x + i + 32, a, y + i + 32), r3 = axpy16(x + i + 48, a, y + i + 48);
        _mm512_storeu_ps(out + i, r0);
        _mm512_storeu_ps(out + i + 16, r1);
        _mm512_storeu_ps(out + i + 32, r2);
        _mm512_storeu_ps(out + i + 48, r3);
    }
    return i;
}

__attribute__((target("avx2"), optimize("fp-contract=off")))
static inline __m256 axpy8(const float *x, __m256 alpha, const float *y)
{
    return _mm256_add_ps(_mm256_loadu_ps(x), _mm256_mul_ps(alpha, _mm256_loadu_ps(y)));
}

__attribute__((target("avx2"), optimize("fp-contract=off")))
static long imp_axpy_avx2(long n, const float *x, float alpha, const float *y, float *out)
{
    const __m256 a = _mm256_set1_ps(alpha);
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 r0 = axpy8(x + i, a, y + i), r1 = axpy8(x + i + 8, a, y + i + 8);
        __m256 r2 = axpy8(x + i + 16, a, y + i + 16), r3 = axpy8(x + i + 24, a, y + i + 24);
        _mm256_storeu_ps(out + i, r0);
        _mm256_storeu_ps(out + i + 8, r1);
        _mm256_storeu_ps(out + i + 16, r2);
        _mm256_storeu_ps(out + i + 24, r3);
    }
    return i;
}
#endif

/* out = x + alpha * y in one pass; out may be x or y (numpy's blocked two-pass
 * version ran 1.7x slower on cold parameters). With AVX-512 (or AVX2), four vectors a
 * step: the plain loop, vectorized only for gcc's baseline and checked for overlap (out
 * is x), ran 15% slower on cold parameters than PyTorch's add_. The same bits on every
 * path: a product, then a sum. */
void imp_axpy(long n, const float *x, float alpha, const float *y, float *out)
{
    long i = 0;
#if IMP_X86_NATIVE
    int isa = imp_native_isa();
    if (isa == IMP_ISA_AVX512) i = imp_axpy_avx512(n, x, alpha, y, out);
    else if (isa == IMP_ISA_AVX2) i = imp_axpy_avx2(n, x, alpha, y, out);
#endif
    for (; i < n; i++) out[i] = x[i] + alpha * y[i];
}

/* Batch normalisation of x (N, C, L) contiguous over N and L, per channel: the mean and
 * the biased variance (two passes, see imp_row_deviations; each row of L summed in
 * float, rows added in double), then y = (x - mean) * scale + shift in numpy's order of
 * operations. Three contiguous passes instead of numpy's six strided ones. */
/* Sixteen float lanes as two vectors of eight, lane u taking the values j = u (mod 16):
 * a single float sum may not be reordered, and GCC left a 16-float array of lanes in
 * memory. The lanes are added to s in double, in order. */
IMP_INLINE double imp_lanes_added(double s, imp_v8 lo, imp_v8 hi)
{
    float lanes[16];
    imp_store(lanes, lo);
    imp_store(lanes + 8, hi);
    for (int u = 0; u < 16; u++) s += lanes[u];
    return s;
}

IMP_INLINE double imp_row_sum(const float *row, long l)
{
    imp_v8 lo = imp_splat(0.f), hi = lo;
    long j = 0;
    for (; j + 16 <= l; j += 16) {
        lo += imp_load(row + j);
        hi += imp_load(row + j + 8);
    }
    double s = imp_lanes_added(0.0, lo, hi);
    for (; j < l; j++) s += row[j];
    return s;
}

/* Adds to *sum and *squares the sums of d and d * d, d = row[j] - m, over 16 lanes.
 * With m a first estimate of the mean, mean = m + sum / n and variance = squares / n -
 * (sum / n)^2 are exact to float32 rounding even when the first estimate is not: a lane
 * sum of n floats is off by up to about n / 16 roundings, and normalising divides the
 * deviations by a standard deviation that may be far below the mean (a near-constant
 * row), which magnified that error into the output (PyTorch's float32 was 1000x closer). */
IMP_INLINE void imp_row_deviations(const float *row, long l, float m, double *sum, double *squares)
{
    const imp_v8 vm = imp_splat(m);
    imp_v8 lo = imp_splat(0.f), hi = lo, square_lo = lo, square_hi = lo;
    long j = 0;
    for (; j + 16 <= l; j += 16) {
        imp_v8 d_lo = imp_load(row + j) - vm, d_hi = imp_load(row + j + 8) - vm;
        lo += d_lo;
        hi += d_hi;
        square_lo += d_lo * d_lo;
        square_hi += d_hi * d_hi;
    }
    *sum = imp_lanes_added(*sum, lo, hi);
    *squares = imp_lanes_added(*squares, square_lo, square_hi);
    for (; j < l; j++) {
        float d = row[j] - m;
        *sum += d;
        *squares += d * d;
    }
}

/* mean and biased variance of n values from a first estimate m and their deviations */
IMP_INLINE void imp_corrected_moments(float m, double sum, double squares, double n,
                                  float *mean, float *var)
{
    double shift = sum / n, v = squares / n - shift * shift;
    *mean = (float)(m + shift);
    *var = (float)(v > 0.0 ? v : 0.0);
}

void imp_channel_moments(long n, long c, long l, const float *x, float *mean,
                                float *var)
{
    for (long ch = 0; ch < c; ch++) {
        double total = 0.0, sum = 0.0, squares = 0.0;
        for (long i = 0; i < n; i++) total += imp_row_sum(x + (i * c + ch) * l, l);
        float m = (float)(total / (double)(n * l));
        for (long i = 0; i < n; i++)
            imp_row_deviations(x + (i * c + ch) * l, l, m, &sum, &squares);
        imp_corrected_moments(m, sum, squares, (double)(n * l), mean + ch, var + ch);
    }
}

/* Two passes a channel: the sums of dy and of dy * (x - mean), in double, row by row; then
 * dx = w rstd (dy - mean(dy) - xhat mean(dy xhat)), with xhat = (x - mean) rstd, which is
 * the composite rule's formula with its two means read from those sums. */
void imp_batch_norm_grad(long n, long c, long l, const float *x, const float *dy,
                         const float *mean, const float *var, const float *weight, float eps,
                         float *dx, double *dw, double *db)
{
    double count = (double)(n * l);
    for (long ch = 0; ch < c; ch++) {
        float m = mean[ch], rstd = 1.0f / sqrtf(var[ch] + eps);
        double sum_dy = 0.0, sum_dy_xc = 0.0;
        for (long i = 0; i < n; i++) {
            const float *xr = x + (i * c + ch) * l, *gr = dy + (i * c + ch) * l;
            double s[4] = {0.0, 0.0, 0.0, 0.0}, t[4] = {0.0, 0.0, 0.0, 0.0};
            long j = 0;
            for (; j + 4 <= l; j += 4)          /* four chains of adds: not one long one */
                for (int q = 0; q < 4; q++) {
                    s[q] += gr[j + q];
                    t[q] += (double)gr[j + q] * (double)(xr[j + q] - m);
                }
            for (; j < l; j++) {
                s[0] += gr[j];
                t[0] += (double)gr[j] * (double)(xr[j] - m);
            }
            sum_dy += (s[0] + s[1]) + (s[2] + s[3]);
            sum_dy_xc += (t[0] + t[1]) + (t[2] + t[3]);
        }
        db[ch] = sum_dy;
        dw[ch] = sum_dy_xc * rstd;
        float a = weight[ch] * rstd;
        float mean_dy = (float)(sum_dy / count);
        float k = (float)(sum_dy_xc * rstd / count) * rstd;    /* mean(dy xhat) rstd */
        for (long i = 0; i < n; i++) {
            const float *xr = x + (i * c + ch) * l, *gr = dy + (i * c + ch) * l;
            float *out = dx + (i * c + ch) * l;
            for (long j = 0; j < l; j++)
                out[j] = a * ((gr[j] - mean_dy) - (xr[j] - m) * k);
        }
    }
}

void imp_channel_affine(long n, long c, long l, const float *x, const float *mean,
                               const float *scale, const float *shift, float *y)
{
    for (long i = 0; i < n; i++)
        for (long ch = 0; ch < c; ch++) {
            const float *row = x + (i * c + ch) * l;
            float *out = y + (i * c + ch) * l;
            float m = mean[ch], k = scale[ch], b = shift[ch];
            for (long j = 0; j < l; j++) {
                float t = row[j] - m;
                t = t * k;
                out[j] = t + b;
            }
        }
}

/* Layer norm's statistics of two rows at a time: each of a row's 16 lanes sums its values
 * as one chain of dependent adds (their order fixes the bits), which alone keeps the
 * adder a quarter busy; two rows' chains side by side give the same bits in half the time.
 * The first pass, the sums, runs in the loop writing the previous pair's outputs (below):
 * the loads of the rows to come, from memory when the input is not in cache, proceed
 * beside the stores of the rows done instead of after them. */
typedef struct { imp_v8 a_lo, a_hi, b_lo, b_hi; } imp_pair_sums;

IMP_INLINE void imp_pair_sums_add(imp_pair_sums *s, const float *a, const float *b, long j)
{
    s->a_lo += imp_load(a + j);
    s->a_hi += imp_load(a + j + 8);
    s->b_lo += imp_load(b + j);
    s->b_hi += imp_load(b + j + 8);
}

/* The mean and rstd of rows a and b as imp_row_sum, imp_row_deviations and
 * imp_corrected_moments make them, from their lane sums `s` over the first l - l % 16;
 * one cache line of `ahead` (a row to come, or NULL) prefetched per 16 floats */
IMP_INLINE void imp_norm_stats_pair(imp_pair_sums s, const float *a, const float *b, long l,
                                    float eps, float *mean, float *rstd, const float *ahead)
{
    long j = l - l % 16;
    double sum_a = imp_lanes_added(0.0, s.a_lo, s.a_hi), sum_b = imp_lanes_added(0.0, s.b_lo, s.b_hi);
    for (long k = j; k < l; k++) {
        sum_a += a[k];
        sum_b += b[k];
    }
    float m_a = (float)(sum_a / (double)l), m_b = (float)(sum_b / (double)l), var;
    const imp_v8 vm_a = imp_splat(m_a), vm_b = imp_splat(m_b);
    imp_v8 a_lo = imp_splat(0.f), a_hi = a_lo, b_lo = a_lo, b_hi = a_lo;
    imp_v8 sq_a_lo = a_lo, sq_a_hi = a_lo, sq_b_lo = a_lo, sq_b_hi = a_lo;
    for (j = 0; j + 16 <= l; j += 16) {
        if (ahead)
            __builtin_prefetch(ahead + j);
        imp_v8 da_lo = imp_load(a + j) - vm_a, da_hi = imp_load(a + j + 8) - vm_a;
        imp_v8 db_lo = imp_load(b + j) - vm_b, db_hi = imp_load(b + j + 8) - vm_b;
        a_lo += da_lo;
        a_hi += da_hi;
        b_lo += db_lo;
        b_hi += db_hi;
        sq_a_lo += da_lo * da_lo;
        sq_a_hi += da_hi * da_hi;
        sq_b_lo += db_lo * db_lo;
        sq_b_hi += db_hi * db_hi;
    }
    double dev_a = imp_lanes_added(0.0, a_lo, a_hi), squares_a = imp_lanes_added(0.0, sq_a_lo, sq_a_hi);
    double dev_b = imp_lanes_added(0.0, b_lo, b_hi), squares_b = imp_lanes_added(0.0, sq_b_lo, sq_b_hi);
    for (; j < l; j++) {
        float d_a = a[j] - m_a, d_b = b[j] - m_b;
        dev_a += d_a;
        squares_a += d_a * d_a;
        dev_b += d_b;
        squares_b += d_b * d_b;
    }
    imp_corrected_moments(m_a, dev_a, squares_a, (double)l, mean, &var);
    rstd[0] = 1.f / sqrtf(var + eps);
    imp_corrected_moments(m_b, dev_b, squares_b, (double)l, mean + 1, &var);
    rstd[1] = 1.f / sqrtf(var + eps);
}

/* out[j..j+8) = (x - m) * s * weight + bias (weight NULL: (x - m) * s), rounded as the
 * scalar expression is */
IMP_INLINE void imp_norm_out8(float *out, const float *x, long j, imp_v8 m, imp_v8 s,
                              const float *weight, const float *bias, int stream)
{
    imp_v8 t = (imp_load(x + j) - m) * s;
    imp_v8 v = weight ? t * imp_load(weight + j) + imp_load(bias + j) : t;
#if IMP_X86_NATIVE
    if (stream) {
        __m128 lo, hi;
        memcpy(&lo, &v, sizeof lo);
        memcpy(&hi, (const char *)&v + sizeof lo, sizeof hi);
        _mm_stream_ps(out + j, lo);
        _mm_stream_ps(out + j + 4, hi);
        return;
    }
#endif
    imp_store(out + j, v);
}

/* Outputs of at least this many bytes are written past the caches (non-temporal stores):
 * a store to a line not in cache first reads it, a third of the memory traffic of a pass
 * reading one array and writing another, and an output this large leaves the caches
 * before it is read anyway. */
#define IMP_STREAM_BYTES (8L << 20)

/* Layer normalisation of each of `rows` rows of `size` floats: (x - mean) * rstd, then
 * * weight + bias (per column) when weight is given; rows two at a time (a last odd row
 * paired with itself), each pair staying in L1 from its sums to its outputs (numpy's
 * blocked version made six passes over cache-sized blocks). Compiled per instruction set
 * without fused multiply-adds: every variant gives the baseline's bits. With `stats` the
 * rows' mean and rstd are written there, or, with stats_given, read from there: a
 * recomputation (DTR) then makes the last pass only. */
IMP_INLINE void imp_layer_norm_rows_body(long rows, long size, const float *x,
                                         const float *weight, const float *bias, float eps,
                                         float *y, float *stats, int stats_given)
{
    const long body = size - size % 16;
    const int given = stats && stats_given;
    /* (16-byte aligned stores only: every row's start, when the first's is and size % 4 == 0) */
    const int stream = (double)rows * (double)size * sizeof(float) >= (double)IMP_STREAM_BYTES
                       && (uintptr_t)y % 16 == 0 && size % 4 == 0;
    const imp_pair_sums zero = {imp_splat(0.f), imp_splat(0.f), imp_splat(0.f), imp_splat(0.f)};
    imp_pair_sums sums = zero;
    if (!given && rows > 0)
        for (long j = 0; j < body; j += 16)
            imp_pair_sums_add(&sums, x, x + (rows > 1 ? size : 0), j);
    for (long r = 0; r < rows; r += 2) {
        int pair = r + 1 < rows;
        const float *a = x + r * size, *b = pair ? a + size : a;
        float *out_a = y + r * size, *out_b = pair ? out_a + size : out_a;
        float mean[2], rstd[2];
        if (given) {
            for (int k = 0; k <= pair; k++) {
                mean[k] = stats[2 * (r + k)];
                rstd[k] = stats[2 * (r + k) + 1];
            }
        } else {
            imp_norm_stats_pair(sums, a, b, size, eps, mean, rstd,
                                r + 5 < rows ? a + 4 * size : NULL);
            for (int k = 0; stats && k <= pair; k++) {
                stats[2 * (r + k)] = mean[k];
                stats[2 * (r + k) + 1] = rstd[k];
            }
        }
        /* the next pair's sums (past the last pair, the last row's again, unused) */
        const float *next_a = r + 2 < rows ? a + 2 * size : a;
        const float *next_b = r + 3 < rows ? next_a + size : next_a;
        const imp_v8 m_a = imp_splat(mean[0]), s_a = imp_splat(rstd[0]);
        const imp_v8 m_b = imp_splat(mean[pair]), s_b = imp_splat(rstd[pair]);
        sums = zero;
        long j = 0;
        const int ahead = r + 5 < rows;
        for (; j < body; j += 16) {
            /* the input two pairs on, one cache line per step: with cold input the next
             * pair's loads stalled (a burst of prefetches at each pair's start overflowed
             * the miss buffers). The pair's first row is fetched during the statistics'
             * pass (imp_norm_stats_pair), its second here, so that misses are in flight
             * through both loops: with both here, the pass between left memory idle. */
            if (ahead) {
                if (given)
                    __builtin_prefetch(a + 4 * size + j);
                __builtin_prefetch(a + 5 * size + j);
            }
            if (!given)
                imp_pair_sums_add(&sums, next_a, next_b, j);
            imp_norm_out8(out_a, a, j, m_a, s_a, weight, bias, stream);
            imp_norm_out8(out_a, a, j + 8, m_a, s_a, weight, bias, stream);
            imp_norm_out8(out_b, b, j, m_b, s_b, weight, bias, stream);
            imp_norm_out8(out_b, b, j + 8, m_b, s_b, weight, bias, stream);
        }
        for (int k = 0; k <= pair; k++) {
            const float *in = k ? b : a;
            float *out = k ? out_b : out_a, m = mean[k], s = rstd[k];
            for (long t = j; t < size; t++)
                out[t] = weight ? (in[t] - m) * s * weight[t] + bias[t] : (in[t] - m) * s;
        }
    }
#if IMP_X86_NATIVE
    if (stream)
        _mm_sfence();     /* the streamed lines reach memory before any reader looks */
#endif
}
IMP_ISA_VARIANTS_EXACT(imp_layer_norm_rows, (long rows, long size, const float *x,
                                             const float *weight, const float *bias, float eps,
                                             float *y, float *stats, int stats_given),
                       (rows, size, x, weight, bias, eps, y, stats, stats_given))

/* Adam's update of n floats in one pass (ops/optim.py:AdamStep), each value rounded as the
 * op-by-op update rounds it (no fused multiply-adds: the EXACT variants; the square root is
 * correctly rounded, as numpy's):
 * m' = m * b1 + g * (1 - b1), v' = v * b2 + (g * g) * (1 - b2),
 * out = param + alpha * ((m' / c1) / (sqrt(v' / c2) + eps)), alpha = -lr. */
IMP_INLINE void imp_adam_body(long n, const float *param, const float *g, const float *m,
                              const float *v, const float *k, float *restrict out,
                              float *restrict m_out, float *restrict v_out)
{
    /* (restrict: GCC gives up vectorising after ten run-time overlap checks, and the
     * outputs are fresh arrays) */
    const float b1 = k[0], one_minus_b1 = k[1], b2 = k[2], one_minus_b2 = k[3];
    const float c1 = k[4], c2 = k[5], eps = k[6], alpha = k[7];
    for (long i = 0; i < n; i++) {
        float gi = g[i];
        float mi = m[i] * b1 + gi * one_minus_b1, vi = v[i] * b2 + (gi * gi) * one_minus_b2;
        m_out[i] = mi;
        v_out[i] = vi;
        out[i] = param[i] + alpha * ((mi / c1) / (sqrtf(vi / c2) + eps));
    }
}
IMP_ISA_VARIANTS_EXACT(imp_adam, (long n, const float *param, const float *g, const float *m,
                                  const float *v, const float *k, float *out, float *m_out,
                                  float *v_out),
                       (n, param, g, m, v, k, out, m_out, v_out))

/* Layer norm's gradients from x, dy and the weight (NULL: none), the statistics
 * recomputed as imp_layer_norm_rows computes them: per row, with xhat = (x - mean) * rstd
 * and g = dy * weight, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); over the rows,
 * dw += dy * xhat and db += dy in double (dw and db zeroed by the caller, NULL without a
 * weight). Two passes over each row after the statistics' two, all in L1. */
IMP_INLINE void imp_layer_norm_grad_body(long rows, long size, const float *x, const float *dy,
                                         const float *weight, float eps, float *dx,
                                         double *dw, double *db)
{
    const double inv_size = 1.0 / (double)size;
    for (long r = 0; r < rows; r++) {
        const float *row = x + r * size, *grow = dy + r * size;
        float *out = dx + r * size;
        double sum = 0.0, squares = 0.0;
        float m = (float)(imp_row_sum(row, size) * inv_size), var;
        imp_row_deviations(row, size, m, &sum, &squares);
        imp_corrected_moments(m, sum, squares, (double)size, &m, &var);
        float rstd = 1.f / sqrtf(var + eps);
        double g_sum = 0.0, gx_sum = 0.0;
        for (long j = 0; j < size; j++) {
            float xhat = (row[j] - m) * rstd, g = weight ? grow[j] * weight[j] : grow[j];
            g_sum += g;
            gx_sum += g * xhat;
            if (weight) {
                dw[j] += (double)grow[j] * xhat;
                db[j] += grow[j];
            }
        }
        float a = (float)(g_sum * inv_size), b = (float)(gx_sum * inv_size);
        for (long j = 0; j < size; j++) {
            float xhat = (row[j] - m) * rstd, g = weight ? grow[j] * weight[j] : grow[j];
            out[j] = rstd * (g - a - xhat * b);
        }
    }
}
IMP_ISA_VARIANTS(imp_layer_norm_grad, (long rows, long size, const float *x, const float *dy,
                                       const float *weight, float eps, float *dx, double *dw,
                                       double *db),
                 (rows, size, x, dy, weight, eps, dx, dw, db))

/* out = cond ? x : y over `n` 4-byte values, as bit patterns (a select copies bits: numpy's
 * where's result); x and y full arrays (their flag 1) or one value each (0). Branch-free, so
 * that it vectorises: numpy's where took 3.6 ns a value on random masks here. */
IMP_INLINE void where32_run(long n, const unsigned char *cond, const uint32_t *x, int x_full,
                            const uint32_t *y, int y_full, uint32_t *out)
{
#define WHERE32_LOOP(XI, YI)                                                                  \
    for (long i = 0; i < n; i++) {                                                            \
        uint32_t m = (uint32_t)0 - (uint32_t)(cond[i] != 0);                                  \
        out[i] = (x[XI] & m) | (y[YI] & ~m);                                                  \
    }
    if (x_full && y_full)
        WHERE32_LOOP(i, i)
    else if (x_full)
        WHERE32_LOOP(i, 0)
    else if (y_full)
        WHERE32_LOOP(0, i)
    else
        WHERE32_LOOP(0, 0)
#undef WHERE32_LOOP
}

IMP_INLINE void imp_where32_body(long n, long cond_n, const unsigned char *cond,
                                 const uint32_t *x, int x_full, const uint32_t *y, int y_full,
                                 uint32_t *out)
{
    for (long b = 0; b < n; b += cond_n)
        where32_run(cond_n, cond, x + (x_full ? b : 0), x_full, y + (y_full ? b : 0), y_full,
                    out + b);
}
IMP_ISA_VARIANTS_EXACT(imp_where32, (long n, long cond_n, const unsigned char *cond,
                                     const uint32_t *x, int x_full, const uint32_t *y,
                                     int y_full, uint32_t *out),
                       (n, cond_n, cond, x, x_full, y, y_full, out))

/* out = (x * bit) / keep for n float32 values and their mask packed 8 to a byte (bit k of
 * byte b is value 8b + k's): numpy's x * mask / keep for a boolean mask, each product and
 * quotient rounded as there (the mask's bit as 1.0f or 0.0f, so x * 0 keeps x's sign and a
 * NaN or an infinity gives NaN), in one pass reading an eighth of a byte a value. */
IMP_INLINE void imp_dropout_bits32_body(long n, const float *x, const unsigned char *bits,
                                        float keep, float *out)
{
    long bytes = n / 8;
    for (long b = 0; b < bytes; b++) {
        unsigned m = bits[b];
        for (int k = 0; k < 8; k++)
            out[8 * b + k] = (x[8 * b + k] * (float)((m >> k) & 1u)) / keep;
    }
    for (long i = 8 * bytes; i < n; i++)
        out[i] = (x[i] * (float)((bits[i / 8] >> (i % 8)) & 1u)) / keep;
}
IMP_ISA_VARIANTS_EXACT(imp_dropout_bits32, (long n, const float *x, const unsigned char *bits,
                                            float keep, float *out),
                       (n, x, bits, keep, out))

/* dst (batch, rows, cols) = src (batch, cols, rows) with its last two axes swapped, both
 * C-contiguous 4-byte values: 8 x 8 tiles transposed in registers (three rounds of
 * shuffles), a strip of 32 destination rows at a time so that each source line is used
 * whole while it is in cache; the edges one value at a time. numpy's copy of a transposed
 * view strides across the whole source for every value (2.9 ns a value on a 2 MiB matrix
 * here). */
#define SHUF __builtin_shufflevector
IMP_INLINE void transpose8x8(const float *src, long src_row, float *dst, long dst_row)
{
    imp_v8 r[8], t[8], u[8];
    for (int k = 0; k < 8; k++) r[k] = imp_load(src + k * src_row);
    for (int k = 0; k < 8; k += 2) {
        t[k] = SHUF(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[k + 1] = SHUF(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = SHUF(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 1] = SHUF(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[k + 2] = SHUF(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[k + 3] = SHUF(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int k = 0; k < 4; k++) {
        imp_store(dst + k * dst_row, SHUF(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11));
        imp_store(dst + (k + 4) * dst_row, SHUF(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15));
    }
}
#undef SHUF

#define TRANSPOSE_STRIP 32
IMP_INLINE void imp_transpose32_body(long batch, long rows, long cols, const uint32_t *src,
                                     uint32_t *dst)
{
    long rows8 = rows - rows % 8, cols8 = cols - cols % 8;
    for (long b = 0; b < batch; b++, src += rows * cols, dst += rows * cols) {
        const float *s = (const float *)src;
        float *d = (float *)dst;
        for (long i0 = 0; i0 < rows8; i0 += TRANSPOSE_STRIP) {
            long i1 = i0 + TRANSPOSE_STRIP < rows8 ? i0 + TRANSPOSE_STRIP : rows8;
            for (long j = 0; j < cols8; j += 8)
                for (long i = i0; i < i1; i += 8)
                    transpose8x8(s + j * rows + i, rows, d + i * cols + j, cols);
        }
        for (long i = 0; i < rows; i++)          /* the edges: last columns, last rows */
            for (long j = i < rows8 ? cols8 : 0; j < cols; j++)
                dst[i * cols + j] = src[j * rows + i];
    }
}
IMP_ISA_VARIANTS_EXACT(imp_transpose32, (long batch, long rows, long cols, const uint32_t *src,
                                         uint32_t *dst), (batch, rows, cols, src, dst))

/* table[index[r], :] += value[r, :] for r in order (numpy's add.at, the same sums in the same
 * order), rows of row_len floats; every index already checked within the table */
IMP_INLINE void imp_rows_add_body(long n, long row_len, const int64_t *index, const float *value,
                                  float *table)
{
    for (long r = 0; r < n; r++) {
        float *dst = table + index[r] * row_len;
        const float *src = value + r * row_len;
        for (long j = 0; j < row_len; j++) dst[j] += src[j];
    }
}
IMP_ISA_VARIANTS_EXACT(imp_rows_add, (long n, long row_len, const int64_t *index,
                                      const float *value, float *table),
                       (n, row_len, index, value, table))
