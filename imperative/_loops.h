/* Memory-bound float32 loops (_loops.c): one pass each over C-contiguous arrays. */
#ifndef IMP_LOOPS_H
#define IMP_LOOPS_H

#include <stdint.h>

/* out = dy where y > 0 else 0 (dy * (y > 0), exact); out may be dy */
void imp_relu_grad(long n, const float *dy, const float *y, float *out);
/* out = x + alpha * y, a product then a sum (numpy's rounding); out may be x or y */
void imp_axpy(long n, const float *x, float alpha, const float *y, float *out);
/* mean and biased variance per channel of x (n, c, l) */
void imp_channel_moments(long n, long c, long l, const float *x, float *mean, float *var);
/* batch norm's gradients in training, per channel of x and dy (n, c, l), from the batch's
 * mean and biased variance: db = sum(dy), dw = sum(dy * xhat) (double), and dx */
void imp_batch_norm_grad(long n, long c, long l, const float *x, const float *dy,
                         const float *mean, const float *var, const float *weight, float eps,
                         float *dx, double *dw, double *db);
/* y = (x - mean) * scale + shift per channel of x (n, c, l), in that order */
void imp_channel_affine(long n, long c, long l, const float *x, const float *mean,
                        const float *scale, const float *shift, float *y);
/* each of `rows` rows of `size` floats normalised; then * weight + bias when weight is given.
 * stats (NULL: none), two floats a row, the row's mean and 1 / sqrt(var + eps): written, or,
 * with stats_given, read instead of computed (the same bits as the run that wrote them) */
void imp_layer_norm_rows(long rows, long size, const float *x, const float *weight,
                         const float *bias, float eps, float *y, float *stats, int stats_given);
/* layer norm's gradients: dx of each row; dw += dy * xhat and db += dy over the rows, in
 * double (zeroed by the caller; NULL, and weight NULL, without an affine transform) */
void imp_layer_norm_grad(long rows, long size, const float *x, const float *dy,
                         const float *weight, float eps, float *dx, double *dw, double *db);
/* Adam (ops/optim.py:AdamStep) in one pass: k = (b1, 1 - b1, b2, 1 - b2, c1, c2, eps,
 * alpha); m' and v' the new moments, out = param + alpha * ((m' / c1) / (sqrt(v' / c2) + eps)) */
void imp_adam(long n, const float *param, const float *g, const float *m, const float *v,
              const float *k, float *out, float *m_out, float *v_out);
/* out = cond ? x : y over n 4-byte values (bit patterns); cond (bools) repeats every cond_n
 * values (cond_n divides n); x and y full arrays (flag 1) or one value each (0) */
void imp_where32(long n, long cond_n, const unsigned char *cond, const uint32_t *x,
                 int x_full, const uint32_t *y, int y_full, uint32_t *out);
/* out = (x * bit) / keep over n float32 values, bit i of the mask bit (i % 8) of byte i / 8:
 * a dropout's x * mask / keep for a boolean mask packed 8 to a byte */
void imp_dropout_bits32(long n, const float *x, const unsigned char *bits, float keep,
                        float *out);
/* dst (batch, rows, cols) = src (batch, cols, rows) with the last two axes swapped (4-byte
 * values, both C-contiguous) */
void imp_transpose32(long batch, long rows, long cols, const uint32_t *src, uint32_t *dst);
/* table[index[r], :] += value[r, :] for r = 0 .. n - 1 in order (rows of row_len floats;
 * indices within the table): numpy's add.at on a row index */
void imp_rows_add(long n, long row_len, const int64_t *index, const float *value,
                  float *table);

#endif
