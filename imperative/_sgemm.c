/* Single-threaded float32 matrix products for x86-64 CPUs with AVX-512 or AVX2 (and FMA): a
 * general sgemm and a direct (im2col-free) stride-1 convolution, both built on one
 * register-blocked micro-kernel.
 *
 * Why our own: with one BLAS thread, numpy's OpenBLAS (SkylakeX kernel) runs the shapes of a
 * training step 10-15% slower than PyTorch's MKL, and a convolution lowered to im2col + sgemm
 * pays for two copies of a 9x-inflated input before any arithmetic. The layout follows the
 * BLIS papers (Van Zee & van de Geijn): operands are packed into panels the micro-kernel
 * streams through; the convolution instead gives the micro-kernel a table of offsets into the
 * padded image (an "indirect" GEMM), so its input is never copied per kernel tap. (On an
 * AVX2-only Zen 3, OpenBLAS's sgemm ran a training step's shapes as fast as this one; there
 * the gain is the convolution, 1.5x faster than im2col + OpenBLAS, and the fused epilogues.)
 *
 * The micro-kernel keeps an MR x NR tile of C in registers. Each step of k loads the NR
 * values of B (NV vectors) and broadcasts MR values of A. On their way into C the sums may go
 * through an epilogue (ReLU, or ReLU's gradient), the work of the op that follows the product
 * in a training step, so that op needs no pass of its own (see backend/epilogue.py).
 *
 * The code is written once (_sgemm_kernels.h) and compiled twice, with the vector operations
 * and tile sizes of each instruction set, every function with its own target attribute (the
 * build needs no -march flag). The first call picks the widest set this CPU runs (or the one
 * imp_native_select_isa chose), once per process, so a process's results do not change.
 */
#include "_sgemm.h"

#if !IMP_X86_NATIVE
/* Other CPUs: nothing native; the callers check imp_sgemm_supported() and use numpy. */
int imp_native_cpu_isa(void) { return IMP_ISA_NONE; }
int imp_native_isa(void) { return IMP_ISA_NONE; }
int imp_native_select_isa(int isa) { return IMP_ISA_NONE; }
int imp_sgemm_supported(void) { return 0; }
int imp_sgemm(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
              long rsb, long csb, float *c, long ldc, int flags, int epilogue,
              const float *y, long ldy, float alpha) { return -1; }
int imp_conv2d_s1(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                  const float *w, long ph, long pw, long dh, long dw, float *y,
                  const float *bias, int epilogue, const float *ey) { return -1; }
int imp_conv2d_s1_grad_w(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                         const float *dy, long ph, long pw, long dh, long dw, float *gw, float *gb) { return -1; }
long imp_relu_grad_vectors(long n, const float *dy, const float *y, float *out) { return 0; }
#else

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_MIN (1L << 20) /* elements of C: 4 MB, twice L2 */
/* images of a weight gradient's chunk: about this many bytes of padded input and dy */
#define GW_CHUNK_BYTES (1L << 20)

/* How a tile's sums reach C: added to C's old value (accumulate), with streaming stores for
 * whole vectors (stream), and through an epilogue (IMP_EPILOGUE_*, see _sgemm.h) whose
 * IMP_EPILOGUE_RELU_GRAD reads y at the tile's place in a matrix of row stride ldy. */
typedef struct {
    int accumulate, stream, epilogue;
    long ldy;
    float alpha; /* IMP_EPILOGUE_AXPY's */
} store_mode;

static const store_mode plain_store = {0, 0, IMP_EPILOGUE_NONE, 0, 0.f};

static long round_up(long x, long to) { return (x + to - 1) / to * to; }

/* Scratch memory (packed panels, padded images) is kept per thread between calls: a fresh
 * allocation of a megabyte or more comes from mmap, and touching its new pages cost more
 * than packing them. Kept up to SCRATCH_KEEP bytes, freed when the thread exits. */
#define SCRATCH_KEEP (64L << 20)

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static __thread char *scratch_base;
static __thread size_t scratch_cap;

static void scratch_make_key(void) { pthread_key_create(&scratch_key, free); }

/* A 64-byte aligned block of `bytes` for this call; `release_scratch` after the call. */
static char *get_scratch(size_t bytes)
{
    bytes = round_up(bytes, 64);
    if (bytes > SCRATCH_KEEP) return aligned_alloc(64, bytes);
    if (bytes > scratch_cap) {
        pthread_once(&scratch_once, scratch_make_key);
        free(scratch_base);
        scratch_base = aligned_alloc(64, bytes);
        scratch_cap = scratch_base ? bytes : 0;
        pthread_setspecific(scratch_key, scratch_base);
    }
    return scratch_base;
}

static void release_scratch(char *block)
{
    if (block != scratch_base) free(block);
}

/* The next `bytes` of a scratch block, 64-byte aligned. */
static void *carve(char **cursor, size_t bytes)
{
    void *p = *cursor;
    *cursor += round_up(bytes, 64);
    return p;
}

/* off[k] for tap k = (c, i, j) of a kh x kw kernel with dilation (dh, dw), over padded
 * images of `plane` = Hp * Wp floats per channel and rows of `wp` floats. */
static void tap_offsets(long C, long kh, long kw, long plane, long wp, long dh, long dw, long *off)
{
    for (long c = 0, k = 0; c < C; c++)
        for (long i = 0; i < kh; i++)
            for (long j = 0; j < kw; j++) off[k++] = c * plane + i * dh * wp + j * dw;
}

/* The (C, H, W) image xn into the interior of the zero-bordered (C, Hp, Wp) buffer dst. */
static void copy_padded(const float *xn, long C, long H, long W, long ph, long pw, long hp,
                        long wp, float *dst)
{
    for (long c = 0; c < C; c++)
        for (long r = 0; r < H; r++)
            memcpy(dst + c * hp * wp + (r + ph) * wp + pw, xn + (c * H + r) * W, W * sizeof(float));
}


/* ---- AVX-512: 16 floats a vector, 32 zmm registers */

#define AVX512 __attribute__((target("avx512f,fma")))

/* max(x, 0) as numpy's maximum gives it: NaN stays NaN, -0 becomes +0 */
AVX512 static inline __m512 relu16(__m512 x)
{
    __m512 r = _mm512_max_ps(x, _mm512_setzero_ps()); /* equal zeros: the second, +0 */
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

/* x * (y > 0), as numpy computes ReLU's gradient (NaN * 0 stays NaN) */
AVX512 static inline __m512 relu_grad16(__m512 x, __m512 y)
{
    __mmask16 pos = _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_mul_ps(x, _mm512_maskz_mov_ps(pos, _mm512_set1_ps(1.f)));
}

/* The first `left` of 16 lanes (none when left <= 0, all when left >= 16). */
static inline __mmask16 lanes16(long left)
{
    return left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

/* out[c] = column c of the 16 x 16 block in[0..16) (in-register transpose). */
AVX512 static void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    for (int p = 0; p < 8; p++) {
        t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    for (int q = 0; q < 4; q++) {
        __m512d t0 = _mm512_castps_pd(t[4 * q]), t1 = _mm512_castps_pd(t[4 * q + 1]);
        __m512d t2 = _mm512_castps_pd(t[4 * q + 2]), t3 = _mm512_castps_pd(t[4 * q + 3]);
        u[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        u[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        u[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        u[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    /* u[4q + c], 128-bit lane L: column 4L + c of rows 4q..4q+3 */
    for (int c = 0; c < 4; c++) {
        __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        __m512 x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
        __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        r[8 + c] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
        r[12 + c] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
    }
}

#define FN(name) name##_avx512
#define TARGET AVX512
#define VW 16
#define vec __m512
#define vzero _mm512_setzero_ps
#define vset1 _mm512_set1_ps
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
#define vfma _mm512_fmadd_ps
#define vadd _mm512_add_ps
#define vmul _mm512_mul_ps
#define vstream _mm512_stream_ps
#define vload_n(p, n) _mm512_maskz_loadu_ps(lanes16(n), p)
#define vstore_n(p, n, v) _mm512_mask_storeu_ps(p, lanes16(n), v)
#define vhsum _mm512_reduce_add_ps
#define vtranspose transpose16
#define vrelu relu16
#define vrelu_grad relu_grad16
/* sgemm: 14 x 32 (two vectors), 28 accumulators of the 32 registers */
#define MR 14
#define NV 2
#define KC 384 /* depth of a packed block: A's micro-panel (MR x KC) stays in L1 */
#define NC 192 /* columns of a packed block of B: KC x NC floats (288 KB) stay in L2 beside
                * the packed A block; 640 measured 5-10% slower in a loop of mixed GEMMs */
#define MC 3072
/* the convolution's tile: 8 output channels (a divisor of the usual channel counts) x 48
 * positions, 24 accumulators; measured best of 4x96, 6x64, 8x48, 14x32 and 16x16 */
#define CONV_MR 8
#define CONV_V 3
#define CONV_PREFETCH 0 /* not measured on AVX-512 (see the AVX2 one) */
/* the weight gradient's tile: 4 channels x 6 taps, 24 accumulators */
#define GW_O 4
#define GW_T 6
#include "_sgemm_kernels.h"
#undef FN
#undef TARGET
#undef VW
#undef vec
#undef vzero
#undef vset1
#undef vload
#undef vstore
#undef vfma
#undef vadd
#undef vmul
#undef vstream
#undef vload_n
#undef vstore_n
#undef vhsum
#undef vtranspose
#undef vrelu
#undef vrelu_grad
#undef MR
#undef NV
#undef KC
#undef NC
#undef MC
#undef CONV_MR
#undef CONV_V
#undef CONV_PREFETCH
#undef GW_O
#undef GW_T

/* ---- AVX2: 8 floats a vector, 16 ymm registers */

#define AVX2 __attribute__((target("avx2,fma")))

/* max(x, 0) as numpy's maximum gives it: NaN stays NaN, -0 becomes +0 */
AVX2 static inline __m256 relu8(__m256 x)
{
    __m256 r = _mm256_max_ps(x, _mm256_setzero_ps()); /* equal zeros, or a NaN: the second */
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* x * (y > 0), as numpy computes ReLU's gradient (NaN * 0 stays NaN) */
AVX2 static inline __m256 relu_grad8(__m256 x, __m256 y)
{
    __m256 pos = _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_GT_OQ);
    return _mm256_mul_ps(x, _mm256_and_ps(pos, _mm256_set1_ps(1.f)));
}

/* The first `left` of 8 lanes as a vmaskmov mask (all bits set in each lane taken). */
AVX2 static inline __m256i lanes8(long left)
{
    int n = left <= 0 ? 0 : left >= 8 ? 8 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Whole vectors go through plain loads and stores: only a partial one needs vmaskmov (whose
 * store form is slow on some AMD cores). */
AVX2 static inline __m256 load8_n(const float *p, long n)
{
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes8(n));
}

AVX2 static inline void store8_n(float *p, long n, __m256 v)
{
    if (n >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, lanes8(n), v);
}

AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* r[c] = column c of the 8 x 8 block r[0..8) (in-register transpose). */
AVX2 static inline void transpose8(__m256 r[8])
{
    __m256 t[8], s[8];
    for (int p = 0; p < 4; p++) {
        t[2 * p] = _mm256_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm256_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    /* s[4h + c], 128-bit lane L: column 4L + c of rows 4h..4h+3 */
    for (int h = 0; h < 2; h++) {
        s[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xee);
        s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xee);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
    }
}

#define FN(name) name##_avx2
#define TARGET AVX2
#define VW 8
#define vec __m256
#define vzero _mm256_setzero_ps
#define vset1 _mm256_set1_ps
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
#define vfma _mm256_fmadd_ps
#define vadd _mm256_add_ps
#define vmul _mm256_mul_ps
#define vstream _mm256_stream_ps
#define vload_n load8_n
#define vstore_n store8_n
#define vhsum hsum8
#define vtranspose transpose8
#define vrelu relu8
#define vrelu_grad relu_grad8
/* sgemm: 6 x 16 (two vectors), 12 accumulators, 2 vectors of B and a broadcast of the 16
 * registers (the BLIS Haswell kernel's shape); the same KC as AVX-512, so that both give the
 * same bits (see _sgemm_kernels.h) */
#define MR 6
#define NV 2
#define KC 384
#define NC 192
#define MC 3072
/* the convolution's tile: 4 channels x 24 positions, 12 accumulators */
#define CONV_MR 4
#define CONV_V 3
#define CONV_PREFETCH 6 /* two rows of a 3x3 kernel ahead */
/* the weight gradient's tile: 3 channels x 4 taps, 12 accumulators, 3 vectors of dy and one
 * of x: the 16 registers exactly (1.5x faster than 2 x 6 on a 64-channel layer; 4 x 3
 * measured the same) */
#define GW_O 3
#define GW_T 4
#include "_sgemm_kernels.h"

/* ---- the choice, once per process */

static int native_isa = -1; /* IMP_ISA_*, or -1 before the first call */

int imp_native_cpu_isa(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("fma")) return IMP_ISA_NONE;
    if (__builtin_cpu_supports("avx512f")) return IMP_ISA_AVX512;
    if (__builtin_cpu_supports("avx2")) return IMP_ISA_AVX2;
    return IMP_ISA_NONE;
}

int imp_native_isa(void)
{
    int isa = __atomic_load_n(&native_isa, __ATOMIC_RELAXED);
    if (isa < 0) {
        isa = imp_native_cpu_isa();
        /* a racing first call computes the same value */
        __atomic_store_n(&native_isa, isa, __ATOMIC_RELAXED);
    }
    return isa;
}

int imp_native_select_isa(int isa)
{
    int best = imp_native_cpu_isa();
    if (isa < IMP_ISA_NONE || isa > best) isa = best;
    __atomic_store_n(&native_isa, isa, __ATOMIC_RELAXED);
    return isa;
}

int imp_sgemm_supported(void) { return imp_native_isa() != IMP_ISA_NONE; }

long imp_relu_grad_vectors(long n, const float *dy, const float *y, float *out)
{
    switch (imp_native_isa()) {
    case IMP_ISA_AVX512: return relu_grad_stream_avx512(n, dy, y, out);
    case IMP_ISA_AVX2: return relu_grad_stream_avx2(n, dy, y, out);
    default: return 0;
    }
}

int imp_sgemm(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
              long rsb, long csb, float *c, long ldc, int flags, int epilogue,
              const float *y, long ldy, float alpha)
{
    switch (imp_native_isa()) {
    case IMP_ISA_AVX512: return sgemm_avx512(M, N, K, a, rsa, csa, b, rsb, csb, c, ldc, flags, epilogue, y, ldy, alpha);
    case IMP_ISA_AVX2: return sgemm_avx2(M, N, K, a, rsa, csa, b, rsb, csb, c, ldc, flags, epilogue, y, ldy, alpha);
    default: return -1;
    }
}

int imp_conv2d_s1(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                  const float *w, long ph, long pw, long dh, long dw, float *y,
                  const float *bias, int epilogue, const float *ey)
{
    switch (imp_native_isa()) {
    case IMP_ISA_AVX512: return conv2d_s1_avx512(N, C, H, W, x, O, kh, kw, w, ph, pw, dh, dw, y, bias, epilogue, ey);
    case IMP_ISA_AVX2: return conv2d_s1_avx2(N, C, H, W, x, O, kh, kw, w, ph, pw, dh, dw, y, bias, epilogue, ey);
    default: return -1;
    }
}

int imp_conv2d_s1_grad_w(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                         const float *dy, long ph, long pw, long dh, long dw, float *gw, float *gb)
{
    switch (imp_native_isa()) {
    case IMP_ISA_AVX512: return conv2d_s1_grad_w_avx512(N, C, H, W, x, O, kh, kw, dy, ph, pw, dh, dw, gw, gb);
    case IMP_ISA_AVX2: return conv2d_s1_grad_w_avx2(N, C, H, W, x, O, kh, kw, dy, ph, pw, dh, dw, gw, gb);
    default: return -1;
    }
}

#endif /* IMP_X86_NATIVE */
