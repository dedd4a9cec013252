/* Sliding-window float32 loops (_windows.c) over C-contiguous (planes, h, w) arrays. */
#ifndef IMP_WINDOWS_H
#define IMP_WINDOWS_H

/* dx (planes, h, w) gets a max pooling's input gradient from its
 * input x, its output `out` and the output's gradient dy (planes, ho, wo): the bits of the
 * composite rule (autodiff/rules_nn.py). `first` is scratch for ho * wo bytes; the window
 * has at most 254 taps. */
void imp_max_pool_grad(long planes, long h, long w, long ho, long wo, int kh, int kw,
                       int sh, int sw, int ph, int pw, const float *x, const float *out,
                       const float *dy, float *dx, unsigned char *first);
/* its 2x2, stride 2, unpadded case over `rows` output rows of one plane (ho rows of wo) */
void imp_max_pool_grad_2x2(long rows, long w, long wo, const float *x, const float *out,
                           const float *dy, float *dx);

/* the forward 2x2, stride 2, unpadded max pooling of one plane: `rows` output rows of wo
 * from rows of w inputs, each window combined as np.maximum combines the taps in order */
void imp_max_pool_2x2_forward(long rows, long w, long wo, const float *x, float *out);
/* Depthwise convolution over zero-padded planes xp (planes, hp, wp), plane p with the
 * kh x kw taps of channel p % channels: the forward pass into out (planes, ho, wo), the
 * input's gradient added into gxp (planes, hp, wp; zeroed by the caller), the weight's
 * added into gw (channels, kh, kw, double; zeroed by the caller) */
void imp_depthwise_forward(long planes, long channels, long hp, long wp, long ho, long wo,
                           int kh, int kw, int sh, int sw, int dh, int dw, const float *xp,
                           const float *w, float *out);
void imp_depthwise_grad_input(long planes, long channels, long hp, long wp, long ho, long wo,
                              int kh, int kw, int sh, int sw, int dh, int dw, const float *dy,
                              const float *w, float *gxp);
void imp_depthwise_grad_weight(long planes, long channels, long hp, long wp, long ho, long wo,
                               int kh, int kw, int sh, int sw, int dh, int dw, const float *xp,
                               const float *dy, double *gw);

#endif
