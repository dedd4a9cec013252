/* Row-wise float32 kernels behind imperative._kernels' softmax_rows, log_softmax_rows and
 * cross_entropy_rows: each row of a C-contiguous (rows, n) array in two or three passes
 * that stay in L1, where numpy makes five over the whole block (max, subtract, exp, sum,
 * divide), each with a temporary. Written once over eight lanes (_vec8.h), so the
 * AVX-512, AVX2 and baseline builds give the same bits. Declared in _rows.h. */
#include <math.h>

#include "_rows.h"
#include "_vec8.h"

/* the largest value of a row (NaNs aside: they reach the output through exp) */
IMP_INLINE float row_max(const float *x, long n)
{
    /* four running maxima: one would wait on its own compare and blend at every step */
    imp_v8 m0 = imp_splat(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    long j = 0;
    for (; j + 32 <= n; j += 32) {
        m0 = imp_max(m0, imp_load(x + j));
        m1 = imp_max(m1, imp_load(x + j + 8));
        m2 = imp_max(m2, imp_load(x + j + 16));
        m3 = imp_max(m3, imp_load(x + j + 24));
    }
    for (; j + 8 <= n; j += 8) m0 = imp_max(m0, imp_load(x + j));
    if (j < n) m0 = imp_max(m0, imp_load_part(x + j, n - j, -INFINITY));
    return imp_lane_max(imp_max(imp_max(m0, m1), imp_max(m2, m3)));
}

/* the sum of exp(x - m) over a row, also stored in y unless y is NULL; `wide`: sixteen
 * lanes at a time where there are sixteen (the same values and sums: _vec8.h) */
IMP_INLINE float row_exp_sum(const float *x, long n, float m, float *y, int wide)
{
    const imp_v8 vm = imp_splat(m);
    imp_v8 sum = imp_splat(0.f);
    long j = 0;
    for (; wide && j + 16 <= n; j += 16) {
        imp_v16 e = imp_exp_nonpos16(imp_load16(x + j) - m);
        sum += imp_low8(e);
        sum += imp_high8(e);
        if (y) imp_store16(y + j, e);
    }
    for (; j + 8 <= n; j += 8) {
        imp_v8 e = imp_exp_nonpos(imp_load(x + j) - vm);
        sum += e;
        if (y) imp_store(y + j, e);
    }
    if (j < n) {        /* the missing lanes read -inf: exp gives 0, which adds nothing */
        imp_v8 e = imp_exp_nonpos(imp_load_part(x + j, n - j, -INFINITY) - vm);
        sum += e;
        if (y) imp_store_part(y + j, n - j, e);
    }
    return imp_lane_sum(sum);
}

/* y = y * (1 / s) (as PyTorch scales: a division per value cost a sixth of the kernel),
 * or with x given, y = (x - m) - s */
IMP_INLINE void row_finish(const float *x, long n, float m, float s, float *y)
{
    const imp_v8 vm = imp_splat(m), vs = imp_splat(x ? s : 1.f / s);
    long j = 0;
    for (; j + 8 <= n; j += 8)
        imp_store(y + j, x ? (imp_load(x + j) - vm) - vs : imp_load(y + j) * vs);
    if (j < n) {
        imp_v8 v = x ? (imp_load_part(x + j, n - j, 0.f) - vm) - vs
                      : imp_load_part(y + j, n - j, 1.f) * vs;
        imp_store_part(y + j, n - j, v);
    }
}

IMP_INLINE void imp_softmax_rows_body(long rows, long n, const float *x, float *y, int wide)
{
    for (long r = 0; r < rows; r++) {
        const float *row = x + r * n;
        float m = row_max(row, n);
        row_finish(NULL, n, m, row_exp_sum(row, n, m, y + r * n, wide), y + r * n);
    }
}
IMP_ISA_VARIANTS_WIDE(imp_softmax_rows, (long rows, long n, const float *x, float *y),
                 (rows, n, x, y))

IMP_INLINE void imp_log_softmax_rows_body(long rows, long n, const float *x, float *y,
                                           int wide)
{
    for (long r = 0; r < rows; r++) {
        const float *row = x + r * n;
        float m = row_max(row, n);
        row_finish(row, n, m, logf(row_exp_sum(row, n, m, NULL, wide)), y + r * n);
    }
}
IMP_ISA_VARIANTS_WIDE(imp_log_softmax_rows, (long rows, long n, const float *x, float *y),
                 (rows, n, x, y))

/* loss[r] = -log_softmax(x[r])[labels[r]], the value imp_log_softmax_rows has there; no
 * row of log-probabilities is written. *bad: the first row whose label is not in [0, n),
 * else -1 (then nothing was computed). */
IMP_INLINE void imp_cross_entropy_rows_body(long rows, long n, const float *x,
                                            const long long *labels, float *loss, long *bad,
                                            int wide)
{
    *bad = -1;
    for (long r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= n) {
            *bad = r;
            return;
        }
    for (long r = 0; r < rows; r++) {
        const float *row = x + r * n;
        float m = row_max(row, n);
        float lse = logf(row_exp_sum(row, n, m, NULL, wide));
        loss[r] = -((row[labels[r]] - m) - lse);
    }
}
IMP_ISA_VARIANTS_WIDE(imp_cross_entropy_rows, (long rows, long n, const float *x,
                                          const long long *labels, float *loss, long *bad),
                 (rows, n, x, labels, loss, bad))
