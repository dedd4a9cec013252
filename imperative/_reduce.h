/* Small float32 reductions (_reduce.c) over the rows of a C-contiguous (rows, n) array,
 * n >= 1: the same bits as numpy's np.add / np.maximum / np.minimum reductions along a
 * contiguous axis. */
#ifndef IMP_REDUCE_H
#define IMP_REDUCE_H

enum { IMP_REDUCE_SUM = 0, IMP_REDUCE_MEAN = 1, IMP_REDUCE_MAX = 2, IMP_REDUCE_MIN = 3 };

/* out[r] = the reduction `mode` of x[r * n .. r * n + n). *unsure = 1 where a result is a
 * NaN or infinite, or a maximum or minimum is a zero (numpy may choose another NaN or
 * zero, and warns of overflows), else 0. */
void imp_reduce_rows(int mode, long rows, long n, const float *x, float *out, int *unsure);
/* the maxima (sign 1) or minima (sign -1) of imp_reduce_rows, with their *unsure */
void imp_extreme_rows(long rows, long n, const float *x, float sign, float *out, int *unsure);

#endif
