/* Float32 activations (_activations.c) over n contiguous values; y may be x. */
#ifndef IMP_ACTIVATIONS_H
#define IMP_ACTIVATIONS_H

/* y = max(x, 0) as numpy's maximum gives it (NaN kept, -0 becomes +0) */
void imp_relu(long n, const float *x, float *y);
/* y = 1 / (1 + exp(-x)), as exp(-|x|) / (1 + exp(-|x|)) below 0 (never overflows) */
void imp_sigmoid(long n, const float *x, float *y);
/* y = x * Phi(x), Phi the standard normal CDF from erfc(|x| / sqrt 2) / 2 = t exp(L(s) -
 * a^2) / 2 with a = |x| / sqrt 2, t = 1 / (1 + a / 2), s = 2t - 1 and L the polynomial of
 * `degree` with coefficients c[0..degree] (lowest first; imperative/ops/elemwise.py fits it) */
void imp_gelu(long n, const float *x, float *y, const float *c, int degree);
/* out = dy (Phi(x) + x phi(x)), GELU's gradient, Phi as for imp_gelu and phi the normal
 * density; out may be dy or x */
void imp_gelu_grad(long n, const float *dy, const float *x, float *out, const float *c,
                   int degree);

#endif
