/* Row-wise float32 kernels (_rows.c) over C-contiguous (rows, n) arrays, n >= 1. */
#ifndef IMP_ROWS_H
#define IMP_ROWS_H

/* y[r] = exp(x[r] - max) / sum(exp(x[r] - max)); y may be x */
void imp_softmax_rows(long rows, long n, const float *x, float *y);
/* y[r] = (x[r] - max) - log(sum(exp(x[r] - max))); y may be x */
void imp_log_softmax_rows(long rows, long n, const float *x, float *y);
/* loss[r] = -log_softmax(x[r])[labels[r]]; *bad = the first row with a label outside
 * [0, n) (nothing computed then), else -1 */
void imp_cross_entropy_rows(long rows, long n, const float *x, const long long *labels,
                            float *loss, long *bad);

#endif
