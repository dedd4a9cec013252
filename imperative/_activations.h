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
/* y = x / (1 + exp(-x)), x times imp_sigmoid's value */
void imp_silu(long n, const float *x, float *y);
/* out = dy s (1 + x (1 - s)), s = sigmoid(x): SiLU's gradient; out may be dy or x */
void imp_silu_grad(long n, const float *dy, const float *x, float *out);
/* y = x where x >= 0, else x * slope (a NaN times slope), as numpy's where gives it */
void imp_leaky_relu(long n, const float *x, float *y, float slope);
/* y = x * clip(x + 3, 0, 6) / 6 and clip(x + 3, 0, 6) / 6, each operation rounded as
 * numpy's passes round it */
void imp_hardswish(long n, const float *x, float *y);
void imp_hardsigmoid(long n, const float *x, float *y);
/* y = erf(x): x S(2x^2 - 1) for |x| < 1 (S: the ds + 1 coefficients cs), else
 * sign(x) (1 - t exp(L(2t - 1) - x^2)), t = 1 / (1 + |x| / 2) (L: the dl + 1 coefficients
 * cl); lowest degree first (imperative/ops/elemwise.py fits both) */
void imp_erf(long n, const float *x, float *y, const float *cs, int ds, const float *cl,
             int dl);

#endif
