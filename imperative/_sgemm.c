/* Single-threaded float32 matrix products for AVX-512 CPUs: a general sgemm and a direct
 * (im2col-free) stride-1 convolution, both built on one register-blocked micro-kernel.
 *
 * Why our own: with one BLAS thread, numpy's OpenBLAS (SkylakeX kernel) runs the shapes of a
 * training step 10-15% slower than PyTorch's MKL, and a convolution lowered to im2col + sgemm
 * pays for two copies of a 9x-inflated input before any arithmetic. The layout follows the
 * BLIS papers (Van Zee & van de Geijn): operands are packed into panels the micro-kernel
 * streams through; the convolution instead gives the micro-kernel a table of offsets into the
 * padded image (an "indirect" GEMM), so its input is never copied per kernel tap.
 *
 * The micro-kernel keeps an MR x NR tile of C in registers: NR = 32 columns are two zmm
 * vectors, MR = 14 rows, 28 accumulators of the 32 zmm registers. Each step of k loads two
 * vectors of B and broadcasts MR values of A. On their way into C the sums may go through an
 * epilogue (ReLU, or ReLU's gradient), the work of the op that follows the product in a
 * training step, so that op needs no pass of its own (see ops/epilogue.py).
 */
#include "_sgemm.h"

#if !IMP_X86_NATIVE
/* Other CPUs: nothing native; the callers check imp_sgemm_supported() and use numpy. */
int imp_sgemm_supported(void) { return 0; }
int imp_sgemm(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
              long rsb, long csb, float *c, long ldc, int flags, int epilogue,
              const float *y, long ldy) { return -1; }
int imp_conv2d_s1(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                  const float *w, long ph, long pw, long dh, long dw, float *y,
                  const float *bias, int epilogue, const float *ey) { return -1; }
int imp_conv2d_s1_grad_w(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                         const float *dy, long ph, long pw, long dh, long dw, float *gw, float *gb) { return -1; }
#else

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MR 14
#define NR 32
#define KC 384 /* depth of a packed block: A's micro-panel (MR x KC) stays in L1 */
#define NC 192 /* columns of a packed block of B: KC x NC floats (288 KB) stay in L2 beside
                  * the packed A block; 640 measured 5-10% slower in a loop of mixed GEMMs */
#define MC 3072
#define STREAM_MIN (1L << 20) /* elements of C: 4 MB, twice L2 */
/* the convolution's tile: 8 output channels (a divisor of the usual channel counts) x 48
 * positions, 24 accumulators; measured best of 4x96, 6x64, 8x48, 14x32 and 16x16 */
#define CONV_MR 8
#define CONV_V 3
#define CONV_NR (16 * CONV_V)

#define AVX512 __attribute__((target("avx512f,fma")))

int imp_sgemm_supported(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

/* How a tile's sums reach C: added to C's old value (accumulate), with streaming stores for
 * whole vectors (stream), and through an epilogue (IMP_EPILOGUE_*, see _sgemm.h) whose
 * IMP_EPILOGUE_RELU_GRAD reads y at the tile's place in a matrix of row stride ldy. */
typedef struct {
    int accumulate, stream, epilogue;
    long ldy;
} store_mode;

static const store_mode plain_store = {0, 0, IMP_EPILOGUE_NONE, 0};

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
static inline __mmask16 lanes(long left)
{
    return left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

/* The epilogue applied to 16 values v (the lanes `keep`); y[at..] is read by
 * IMP_EPILOGUE_RELU_GRAD only. */
AVX512 static inline __m512 epilogue16(int epilogue, __m512 v, const float *y, long at, __mmask16 keep)
{
    if (epilogue == IMP_EPILOGUE_RELU) return relu16(v);
    if (epilogue == IMP_EPILOGUE_RELU_GRAD) return relu_grad16(v, _mm512_maskz_loadu_ps(keep, y + at));
    return v;
}

/* dst[0, n) = src[0, n) plus *bias (unless NULL), then the epilogue (y: the row's y), in
 * numpy's order: the bias added as its own float sum, then ReLU or ReLU's gradient.
 * dst may be src. */
AVX512 static void finish_row(float *dst, const float *src, long n, const float *bias, int epilogue,
                              const float *y)
{
    for (long j = 0; j < n; j += 16) {
        __mmask16 keep = lanes(n - j);
        __m512 v = _mm512_maskz_loadu_ps(keep, src + j);
        if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(*bias));
        _mm512_mask_storeu_ps(dst + j, keep, epilogue16(epilogue, v, y, j, keep));
    }
}

/* The micro-kernel body: acc (R x 16V) = sum over k of a[k*AS + i] * B_k[j], where AS >= R
 * is the row count A was packed with and B_k is the expression `bk` (a pointer to 16V floats
 * for step k), then stored to c (m x n valid) as `st` says (y: the epilogue's y at this
 * tile). Instantiated for R x V = MR x 2 and shorter (sgemm) and CONV_MR x CONV_V
 * (convolution). */
#define MICRO_KERNEL(R, AS, V, bk)                                                         \
    __m512 acc[R][V];                                                                      \
    _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                                   \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) acc[i][v] = _mm512_setzero_ps(); \
    for (long k = 0; k < kc; k++) {                                                        \
        const float *b_k = (bk);                                                           \
        __m512 bv[V];                                                                      \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) bv[v] = _mm512_loadu_ps(b_k + 16 * v); \
        _Pragma("GCC unroll 16") for (int i = 0; i < R; i++)                               \
        {                                                                                  \
            __m512 ai = _mm512_set1_ps(a[k * (AS) + i]);                                   \
            _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                            \
                acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);                         \
        }                                                                                  \
    }                                                                                      \
    for (int i = 0; i < m; i++)                                                            \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                \
        {                                                                                  \
            float *cv = c + i * ldc + 16 * v;                                              \
            int left = n - 16 * v;                                                         \
            __mmask16 mask = lanes(left);                                                  \
            __m512 out = acc[i][v];                                                        \
            if (st->accumulate) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask, cv)); \
            out = epilogue16(st->epilogue, out, y, i * st->ldy + 16 * v, mask);            \
            if (st->stream && mask == 0xffff) _mm512_stream_ps(cv, out);                   \
            else _mm512_mask_storeu_ps(cv, mask, out);                                     \
        }

/* B packed: step k reads b[k*NR .. k*NR + NR). The C tile is prefetched first: in a
 * training step C is usually a fresh buffer, and its lines then arrive while the k loop runs
 * instead of stalling the stores (2-3% of an MLP step). Not when C is streamed (see imp_sgemm):
 * its lines are then written without being read. */
AVX512 static void kernel_packed(long kc, const float *restrict a, const float *restrict b,
                                 float *c, long ldc, const store_mode *st, const float *y,
                                 int m, int n)
{
    for (int i = 0; i < m && !st->stream; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T0);
    }
    for (int i = 0; i < m && st->epilogue == IMP_EPILOGUE_RELU_GRAD; i++) {
        _mm_prefetch((const char *)(y + i * st->ldy), _MM_HINT_T0);
        _mm_prefetch((const char *)(y + i * st->ldy + 16), _MM_HINT_T0);
    }
    /* The last panel of a product whose rows are not a multiple of MR runs a shorter tile:
     * computing its zero padding cost 4% of a 256-row product. */
    if (m > 8) {
        MICRO_KERNEL(MR, MR, 2, b + k * NR);
    } else if (m > 4) {
        MICRO_KERNEL(8, MR, 2, b + k * NR);
    } else if (m > 2) {
        MICRO_KERNEL(4, MR, 2, b + k * NR);
    } else {
        MICRO_KERNEL(2, MR, 2, b + k * NR);
    }
}

/* B read in place: step k reads base[off[k] .. off[k] + NR). */
AVX512 static void kernel_indirect(long kc, const float *restrict a, const float *base,
                                   const long *restrict off, float *c, long ldc, int m)
{
    const store_mode *st = &plain_store;
    const float *y = NULL;
    const int n = CONV_NR;
    MICRO_KERNEL(CONV_MR, CONV_MR, CONV_V, base + off[k]);
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

/* Rows [0, mc) x depth [0, kc) of A (element strides rs, cs) into r-row panels: panel p
 * holds, for each k, the r values A[p*r + i][k] side by side (zeros past row mc). */
AVX512 static void pack_a(long mc, long kc, const float *a, long rs, long cs, int r, float *dst)
{
    if (rs == 1 && r <= 16) {
        /* A is a transpose (a weight gradient's dy^T): each column of A is contiguous. One
         * sweep along each of them, across all the panels, as pack_b does with B's rows. */
        long panels = (mc + r - 1) / r;
        for (long k = 0; k < kc; k++)
            for (long p = 0; p < panels; p++) {
                __m512 v = _mm512_maskz_loadu_ps(lanes(mc - p * r), a + k * cs + p * r);
                _mm512_mask_storeu_ps(dst + p * kc * r + k * r, lanes(r), v);
            }
        return;
    }
    for (long i0 = 0; i0 < mc; i0 += r, dst += kc * r) {
        long m = mc - i0 < r ? mc - i0 : r;
        const float *src = a + i0 * rs;
        long k = 0;
        if (cs == 1 && r <= 16) {
            /* rows contiguous: 16 x 16 blocks through registers (3x faster than gathering) */
            __m512 rows[16];
            __mmask16 keep = lanes(r);
            for (; k + 16 <= kc; k += 16) {
                for (int i = 0; i < 16; i++)
                    rows[i] = i < m ? _mm512_loadu_ps(src + i * rs + k) : _mm512_setzero_ps();
                transpose16(rows);
                for (int kk = 0; kk < 16; kk++) _mm512_mask_storeu_ps(dst + (k + kk) * r, keep, rows[kk]);
            }
        }
        for (; k < kc; k++) {
            for (long i = 0; i < m; i++) dst[k * r + i] = src[i * rs + k * cs];
            for (long i = m; i < r; i++) dst[k * r + i] = 0.f;
        }
    }
}

/* Depth [0, kc) x columns [0, nc) of B (element strides rs, cs) into NR-column panels:
 * panel p holds, for each k, the NR values B[k][p*NR + j] side by side (zeros past nc). */
AVX512 static void pack_b(long kc, long nc, const float *b, long rs, long cs, float *dst)
{
    long j0 = 0;
    if (cs == 1) {
        /* rows contiguous: row by row across all the full panels. Panel by panel, each step
         * read a row a page away from the last, where the hardware prefetchers do not
         * follow; one sweep along each row packs a cold B 35% faster. */
        long full = nc / NR;
        for (long k = 0; k < kc; k++)
            for (long p = 0; p < full; p++) {
                const float *src = b + k * rs + p * NR;
                float *out = dst + p * kc * NR + k * NR;
                _mm512_storeu_ps(out, _mm512_loadu_ps(src));
                _mm512_storeu_ps(out + 16, _mm512_loadu_ps(src + 16));
            }
        j0 = full * NR;
        dst += full * kc * NR;
    }
    for (; j0 < nc; j0 += NR, dst += kc * NR) {
        long n = nc - j0 < NR ? nc - j0 : NR;
        const float *src = b + j0 * cs;
        long k = 0;
        if (rs == 1 && n == NR) {
            /* B is a transpose (columns contiguous): 16 x 16 blocks through registers */
            __m512 r[16];
            for (; k + 16 <= kc; k += 16)
                for (int half = 0; half < 2; half++) {
                    for (int j = 0; j < 16; j++)
                        r[j] = _mm512_loadu_ps(src + (half * 16 + j) * cs + k);
                    transpose16(r);
                    for (int kk = 0; kk < 16; kk++)
                        _mm512_storeu_ps(dst + (k + kk) * NR + half * 16, r[kk]);
                }
        }
        for (; k < kc; k++) {
            for (long j = 0; j < n; j++) dst[k * NR + j] = src[k * rs + j * cs];
            for (long j = n; j < NR; j++) dst[k * NR + j] = 0.f;
        }
    }
}

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

int imp_sgemm(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
              long rsb, long csb, float *c, long ldc, int flags, int epilogue,
              const float *y, long ldy)
{
    int accumulate = flags & IMP_SGEMM_ACCUMULATE;
    if (K == 0) {
        /* nothing to multiply: c is 0 (or kept); only the epilogue runs */
        if (!accumulate)
            for (long i = 0; i < M; i++) memset(c + i * ldc, 0, N * sizeof(float));
        for (long i = 0; i < M && epilogue != IMP_EPILOGUE_NONE; i++)
            finish_row(c + i * ldc, c + i * ldc, N, NULL, epilogue, y ? y + i * ldy : NULL);
        return 0;
    }
    long mcap = M < MC ? M : MC;
    size_t a_bytes = round_up(mcap, MR) * KC * sizeof(float), b_bytes = NC * KC * sizeof(float);
    char *block = get_scratch(round_up(a_bytes, 64) + b_bytes), *cursor = block;
    if (!block) return -1;
    float *pa = carve(&cursor, a_bytes), *pb = carve(&cursor, b_bytes);
    /* streaming stores (when asked for) need 64-byte lines to themselves, and pay only when
     * C is twice L2 or more: fetching fresh lines before writing them cost 6% of a weight
     * gradient's product (1-1.5% of an MLP step) */
    int stream = (flags & IMP_SGEMM_STREAM) && !accumulate && K <= KC && M * N >= STREAM_MIN
                 && (size_t)c % 64 == 0 && ldc % 16 == 0;
    /* passes before the last store partial sums; the epilogue belongs to the last */
    store_mode partial = {1, 0, IMP_EPILOGUE_NONE, 0};
    store_mode first = {accumulate, stream, K <= KC ? epilogue : IMP_EPILOGUE_NONE, ldy};
    store_mode last = {1, 0, epilogue, ldy};
    for (long ic = 0; ic < M; ic += MC) {
        long mc = M - ic < MC ? M - ic : MC;
        for (long pc = 0; pc < K; pc += KC) {
            long kc = K - pc < KC ? K - pc : KC;
            const store_mode *st = pc == 0 ? &first : pc + KC >= K ? &last : &partial;
            pack_a(mc, kc, a + ic * rsa + pc * csa, rsa, csa, MR, pa);
            for (long jc = 0; jc < N; jc += NC) {
                long nc = N - jc < NC ? N - jc : NC;
                pack_b(kc, nc, b + pc * rsb + jc * csb, rsb, csb, pb);
                for (long ir = 0; ir < mc; ir += MR) {
                    int m = mc - ir < MR ? (int)(mc - ir) : MR;
                    for (long jr = 0; jr < nc; jr += NR) {
                        int n = nc - jr < NR ? (int)(nc - jr) : NR;
                        kernel_packed(kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * ldc + jc + jr,
                                      ldc, st, y ? y + (ic + ir) * ldy + jc + jr : NULL, m, n);
                    }
                }
            }
        }
    }
    if (stream) _mm_sfence(); /* streaming stores are weakly ordered: done before we return */
    release_scratch(block);
    return 0;
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

/* Stride-1 convolution, one group: y (N, O, Ho, Wo) = x (N, C, H, W) (*) w (O, C, kh, kw).
 * Each image is copied once into a zero-padded (C, Hp, Wp) buffer. Output positions are
 * numbered q = oy * Wp + ox on the padded width, so that input tap (c, i, j) of position q
 * sits at q + off[c, i, j] with off = c*Hp*Wp + i*dh*Wp + j*dw: a tile of CONV_NR consecutive
 * q reads CONV_NR consecutive floats per tap, straight from the buffer. The Wp - Wo columns past
 * each row are computed and dropped when the rows are copied into y. */
int imp_conv2d_s1(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                  const float *w, long ph, long pw, long dh, long dw, float *y,
                  const float *bias, int epilogue, const float *ey)
{
    long hp = H + 2 * ph, wp = W + 2 * pw;
    long ho = hp - dh * (kh - 1), wo = wp - dw * (kw - 1);
    long K = C * kh * kw, image = C * hp * wp;
    long q_total = round_up(ho * wp, CONV_NR);
    /* the last tile's extra lanes read up to CONV_NR floats past the image's padded extent */
    size_t xp_bytes = (image + q_total + CONV_NR) * sizeof(float);
    size_t tmp_bytes = O * q_total * sizeof(float), pa_bytes = round_up(O, CONV_MR) * K * sizeof(float);
    char *block = get_scratch(xp_bytes + tmp_bytes + pa_bytes + K * sizeof(long) + 4 * 64);
    char *cursor = block;
    if (!block) return -1;
    float *xp = carve(&cursor, xp_bytes), *tmp = carve(&cursor, tmp_bytes), *pa = carve(&cursor, pa_bytes);
    long *off = carve(&cursor, K * sizeof(long));
    tap_offsets(C, kh, kw, hp * wp, wp, dh, dw, off);
    pack_a(O, K, w, K, 1, CONV_MR, pa);
    memset(xp, 0, xp_bytes);
    for (long n = 0; n < N; n++) {
        copy_padded(x + n * C * H * W, C, H, W, ph, pw, hp, wp, xp);
        /* a panel of weights stays in L1 while the tiles stream through the image in order
         * (12% faster than reusing each tile of the image across all output channels) */
        for (long o0 = 0; o0 < O; o0 += CONV_MR) {
            int m = O - o0 < CONV_MR ? (int)(O - o0) : CONV_MR;
            for (long q0 = 0; q0 < q_total; q0 += CONV_NR)
                kernel_indirect(K, pa + o0 * K, xp + q0, off, tmp + o0 * q_total + q0, q_total, m);
        }
        long at = n * O * ho * wo;
        for (long o = 0; o < O; o++)
            for (long r = 0; r < ho; r++, at += wo) {
                const float *row = tmp + o * q_total + r * wp;
                if (!bias && epilogue == IMP_EPILOGUE_NONE)
                    memcpy(y + at, row, wo * sizeof(float));
                else
                    finish_row(y + at, row, wo, bias ? bias + o : NULL, epilogue, ey ? ey + at : NULL);
            }
    }
    release_scratch(block);
    return 0;
}

/* The weight gradient of imp_conv2d_s1: gw (O, C, kh, kw) = sum over images and positions of
 * dy[o, q] * x[tap k at q]. Positions are numbered on the padded width as in the forward pass,
 * with dy zero in the dropped columns, and the sum runs along q in 16-lane vectors: a tile of
 * GW_O output channels x GW_T taps keeps GW_O * GW_T vector sums in registers and reads dy and
 * the padded images in place. The images are taken a chunk at a time (about GW_CHUNK_BYTES of
 * padded input and dy), and a tile sums over the whole chunk before its horizontal sums are
 * added to gw: one image at a time, those sums cost a third of a small layer's gradient. */
#define GW_O 4
#define GW_T 6
#define GW_CHUNK_BYTES (1L << 20)

/* dst[0, n) = src[0, n); returns their sum (16 lanes, then across them). */
AVX512 static float copy_and_sum(float *dst, const float *src, long n)
{
    __m512 sum = _mm512_setzero_ps();
    long j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 v = _mm512_loadu_ps(src + j);
        _mm512_storeu_ps(dst + j, v);
        sum = _mm512_add_ps(sum, v);
    }
    if (j < n) {
        __mmask16 rest = lanes(n - j);
        __m512 v = _mm512_maskz_loadu_ps(rest, src + j);
        _mm512_mask_storeu_ps(dst + j, rest, v);
        sum = _mm512_add_ps(sum, v);
    }
    return _mm512_reduce_add_ps(sum);
}

AVX512 static void kernel_grad_w(long steps, long images, const float *const dyr[GW_O],
                                 long dy_stride, const float *xp, long x_stride,
                                 const long off[GW_T], float out[GW_O][GW_T])
{
    __m512 acc[GW_O][GW_T];
    _Pragma("GCC unroll 8") for (int o = 0; o < GW_O; o++)
        _Pragma("GCC unroll 8") for (int t = 0; t < GW_T; t++) acc[o][t] = _mm512_setzero_ps();
    for (long b = 0; b < images; b++)
        for (long s = 0; s < steps; s++) {
            __m512 d[GW_O];
            _Pragma("GCC unroll 8") for (int o = 0; o < GW_O; o++)
                d[o] = _mm512_loadu_ps(dyr[o] + b * dy_stride + 16 * s);
            _Pragma("GCC unroll 8") for (int t = 0; t < GW_T; t++)
            {
                __m512 xv = _mm512_loadu_ps(xp + b * x_stride + off[t] + 16 * s);
                _Pragma("GCC unroll 8") for (int o = 0; o < GW_O; o++)
                    acc[o][t] = _mm512_fmadd_ps(d[o], xv, acc[o][t]);
            }
        }
    for (int o = 0; o < GW_O; o++)
        for (int t = 0; t < GW_T; t++) out[o][t] = _mm512_reduce_add_ps(acc[o][t]);
}

int imp_conv2d_s1_grad_w(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
                         const float *dy, long ph, long pw, long dh, long dw, float *gw, float *gb)
{
    long hp = H + 2 * ph, wp = W + 2 * pw;
    long ho = hp - dh * (kh - 1), wo = wp - dw * (kw - 1);
    long K = C * kh * kw, image = C * hp * wp;
    long q_total = round_up(ho * wp, 16);
    /* per image: its padded copy (taps read up to q_total floats past it) and its dy rows */
    long x_stride = round_up(image + q_total, 16);
    long per_image = (x_stride + O * q_total) * (long)sizeof(float);
    long chunk = GW_CHUNK_BYTES / per_image;
    chunk = chunk < 1 ? 1 : chunk > N ? N : chunk;
    /* dy rows (o, image) on the padded width, plus zero rows standing in for channels past O */
    size_t xp_bytes = chunk * x_stride * sizeof(float);
    size_t dyp_bytes = (O + 1) * chunk * q_total * sizeof(float);
    char *block = get_scratch(xp_bytes + dyp_bytes + (K + GW_T) * sizeof(long) + O * sizeof(double)
                              + 4 * 64);
    char *cursor = block;
    if (!block) return -1;
    float *xp = carve(&cursor, xp_bytes), *dyp = carve(&cursor, dyp_bytes);
    long *off = carve(&cursor, (K + GW_T) * sizeof(long));
    /* the bias gradient: each row's float sum, added up per channel in double */
    double *bias_sum = gb ? carve(&cursor, O * sizeof(double)) : NULL;
    if (bias_sum) memset(bias_sum, 0, O * sizeof(double));
    tap_offsets(C, kh, kw, hp * wp, wp, dh, dw, off);
    for (long k = K; k < K + GW_T; k++) off[k] = 0; /* taps past K: computed, then dropped */
    memset(xp, 0, xp_bytes);
    memset(dyp, 0, dyp_bytes);
    memset(gw, 0, O * K * sizeof(float));
    long dy_row = chunk * q_total;
    const float *zero_row = dyp + O * dy_row;
    for (long n0 = 0; n0 < N; n0 += chunk) {
        long images = N - n0 < chunk ? N - n0 : chunk;
        for (long b = 0; b < images; b++) {
            const float *dyn = dy + (n0 + b) * O * ho * wo;
            copy_padded(x + (n0 + b) * C * H * W, C, H, W, ph, pw, hp, wp, xp + b * x_stride);
            for (long o = 0; o < O; o++)
                for (long r = 0; r < ho; r++) {
                    float *dst = dyp + o * dy_row + b * q_total + r * wp;
                    const float *src = dyn + (o * ho + r) * wo;
                    if (bias_sum) bias_sum[o] += copy_and_sum(dst, src, wo);
                    else memcpy(dst, src, wo * sizeof(float));
                }
        }
        for (long o0 = 0; o0 < O; o0 += GW_O) {
            const float *dyr[GW_O];
            for (int o = 0; o < GW_O; o++)
                dyr[o] = o0 + o < O ? dyp + (o0 + o) * dy_row : zero_row;
            for (long t0 = 0; t0 < K; t0 += GW_T) {
                float part[GW_O][GW_T];
                kernel_grad_w(q_total / 16, images, dyr, q_total, xp, x_stride, off + t0, part);
                for (int o = 0; o < GW_O && o0 + o < O; o++)
                    for (int t = 0; t < GW_T && t0 + t < K; t++) gw[(o0 + o) * K + t0 + t] += part[o][t];
            }
        }
    }
    for (long o = 0; bias_sum && o < O; o++) gb[o] = (float)bias_sum[o];
    release_scratch(block);
    return 0;
}

#endif /* IMP_X86_NATIVE */
