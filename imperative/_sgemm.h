/* Native float32 kernels (see _sgemm.c). Each returns 0, or -1 when out of memory. */
#ifndef IMPERATIVE_SGEMM_H
#define IMPERATIVE_SGEMM_H

/* IMP_X86_NATIVE: the x86-64 code (AVX-512 and AVX2 intrinsics, target attributes) is compiled.
 * Elsewhere, or in a build with IMP_NO_NATIVE defined (setup.py does that for
 * IMPERATIVE_NO_NATIVE=1, so that the portable branch is built and tested on x86-64 too),
 * the products report themselves unsupported and numpy runs them. */
#if defined(__x86_64__) && !defined(IMP_NO_NATIVE)
#define IMP_X86_NATIVE 1
#else
#define IMP_X86_NATIVE 0
#endif

/* The instruction sets the products are compiled for: each is chosen at run time. */
#define IMP_ISA_NONE 0   /* none: the callers use numpy */
#define IMP_ISA_AVX2 1   /* AVX2 with FMA */
#define IMP_ISA_AVX512 2 /* AVX-512F with FMA */

/* The widest of them this CPU (and this build) runs. */
int imp_native_cpu_isa(void);
/* The one the products use: imp_native_cpu_isa() unless imp_native_select_isa chose
 * another; fixed once the first product ran, so that a process's results are reproducible. */
int imp_native_isa(void);
/* Use `isa` (at most imp_native_cpu_isa(); a wider one is capped) from now on; returns the
 * one in use. Meant for the module's import, before any product runs. */
int imp_native_select_isa(int isa);

/* 1 when this CPU runs the kernels (imp_native_isa() is not IMP_ISA_NONE), else 0. */
int imp_sgemm_supported(void);
/* dy * (y > 0) with the chosen instruction set over a prefix of the n floats; returns its
 * length (0 without native kernels): the caller does the rest. */
long imp_relu_grad_vectors(long n, const float *dy, const float *y, float *out);

/* What a product applies to each value on its way into c (numpy's rounding and NaNs):
 * max(c, 0) (ReLU), c * (y > 0) with y[M, N] of row stride ldy (ReLU's gradient), or
 * y + alpha * c, the product rounded first and then the sum (ScaledAdd's bits: an
 * optimizer's update of y by the gradient c; products only, not the convolution). */
#define IMP_EPILOGUE_NONE 0
#define IMP_EPILOGUE_RELU 1
#define IMP_EPILOGUE_RELU_GRAD 2
#define IMP_EPILOGUE_AXPY 3

/* flags of imp_sgemm: add c's old value; or, for a large product written in one pass that
 * nothing reads soon (a weight gradient, read by the optimizer after the whole backward
 * pass), write c with streaming stores, without fetching its lines first. */
#define IMP_SGEMM_ACCUMULATE 1
#define IMP_SGEMM_STREAM 2

/* c[M, N] (row stride ldc) = a[M, K] @ b[K, N] (plus c's old value, see flags), then the
 * epilogue; a and b given by element strides (rows, columns), so transposes cost nothing.
 * y is read only by IMP_EPILOGUE_RELU_GRAD and IMP_EPILOGUE_AXPY (else may be NULL), and
 * must not overlap c; alpha only by IMP_EPILOGUE_AXPY. */
int imp_sgemm(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
              long rsb, long csb, float *c, long ldc, int flags, int epilogue,
              const float *y, long ldy, float alpha);

/* Stride-1 convolution of C-contiguous x (N, C, H, W) by w (O, C, kh, kw) with zero padding
 * (ph, pw) and dilation (dh, dw), into C-contiguous y (N, O, Ho, Wo); then bias (O) added
 * unless NULL, then the epilogue (ey: y of IMP_EPILOGUE_RELU_GRAD, laid out as y). */
int imp_conv2d_s1(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                  const float *w, long ph, long pw, long dh, long dw, float *y,
                  const float *bias, int epilogue, const float *ey);

/* Its weight gradient: gw (O, C, kh, kw) from x (N, C, H, W) and dy (N, O, Ho, Wo), all
 * C-contiguous; gw is overwritten. Unless gb is NULL, the bias gradient too: gb (O) = the sum
 * of dy over images and positions, taken as dy is read. */
int imp_conv2d_s1_grad_w(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                         const float *dy, long ph, long pw, long dh, long dw, float *gw, float *gb);

#endif
