/* The blocking, packing and micro-kernels of _sgemm.c, written once for any vector width and
 * included by _sgemm.c once per instruction set (AVX-512, AVX2): only the vector operations
 * and the tile sizes differ between the two, so both are defined by the includer:
 *
 *   FN(name)            this instruction set's name for a function (name##_avx512, ...)
 *   TARGET              the target attribute its vector functions are compiled with
 *   VW, vec             floats per vector, and the vector type
 *   vzero() vset1(x) vload(p) vstore(p, v) vfma(a, b, c) vadd(a, b) vmul(a, b) vstream(p, v)
 *   vload_n(p, n)       the first n lanes from p (none if n <= 0, all if n >= VW), the
 *                       others 0; lanes past n are never read, so p + n may end a buffer
 *   vstore_n(p, n, v)   the first n lanes of v to p, nothing past them written
 *   vhsum(v)            the sum of v's lanes; vtranspose(r) r[i][j] = r[j][i] (VW x VW)
 *   vrelu(v) vrelu_grad(x, y)   ReLU and its gradient as numpy computes them
 *   MR, NV, KC, NC, MC  sgemm: an MR x NR tile of C (NR = NV vectors), packed blocks of A
 *                       (MC x KC) and B (KC x NC)
 *   CONV_MR, CONV_V     the convolution's tile: CONV_MR channels x CONV_V vectors
 *   CONV_PREFETCH       how many taps ahead the convolution prefetches its input (0: none)
 *   GW_O, GW_T          the weight gradient's tile: GW_O channels x GW_T taps
 *
 * The order in which a product sums its terms does not depend on the tile: each value of C
 * is one chain of fused multiply-adds along k, in KC-deep blocks. So the sgemm and the
 * convolution give the same bits with either instruction set when KC is the same; the
 * weight and bias gradients sum along positions in VW lanes first and differ by rounding.
 */

#define NR (NV * VW)
#define CONV_NR (CONV_V * VW)

/* y + alpha * v as ScaledAdd's native loop computes it (_loops.c: axpy): the product is
 * rounded before the sum (the empty asm keeps the compiler from contracting the two into
 * a fused multiply-add, which rounds once and gives other bits). */
TARGET static inline vec FN(axpy)(vec v, vec y, float alpha)
{
    vec t = vmul(vset1(alpha), v);
    __asm__("" : "+x"(t));
    return vadd(y, t);
}

/* The epilogue applied to the first `left` of VW values v; y[at..] is read by
 * IMP_EPILOGUE_RELU_GRAD and IMP_EPILOGUE_AXPY only, alpha by the latter. */
TARGET static inline vec FN(epilogue)(int epilogue, vec v, const float *y, long at, long left,
                                      float alpha)
{
    if (epilogue == IMP_EPILOGUE_RELU) return vrelu(v);
    if (epilogue == IMP_EPILOGUE_RELU_GRAD) return vrelu_grad(v, vload_n(y + at, left));
    if (epilogue == IMP_EPILOGUE_AXPY) return FN(axpy)(v, vload_n(y + at, left), alpha);
    return v;
}

/* dst[0, n) = src[0, n) plus *bias (unless NULL), then the epilogue (y: the row's y), in
 * numpy's order: the bias added as its own float sum, then the epilogue. dst may be src. */
TARGET static void FN(finish_row)(float *dst, const float *src, long n, const float *bias,
                                  int epilogue, const float *y, float alpha)
{
    for (long j = 0; j < n; j += VW) {
        vec v = vload_n(src + j, n - j);
        if (bias) v = vadd(v, vset1(*bias));
        vstore_n(dst + j, n - j, FN(epilogue)(epilogue, v, y, j, n - j, alpha));
    }
}

/* The micro-kernel body: acc (R x V vectors) = sum over k of a[k*AS + i] * B_k[j], where
 * AS >= R is the row count A was packed with and B_k is the expression `bk` (a pointer to
 * V vectors for step k), then stored to c (m x n valid) as `st` says (y: the epilogue's y at
 * this tile). Instantiated for R x V = MR x NV and shorter (sgemm) and CONV_MR x CONV_V
 * (convolution). */
#define MICRO_KERNEL(R, AS, V, bk)                                                         \
    vec acc[(R)][(V)];                                                                         \
    _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                                   \
        _Pragma("GCC unroll 8") for (int v = 0; v < (V); v++) acc[i][v] = vzero();           \
    for (long k = 0; k < kc; k++) {                                                        \
        const float *b_k = (bk);                                                           \
        vec bv[(V)];                                                                         \
        _Pragma("GCC unroll 8") for (int v = 0; v < (V); v++) bv[v] = vload(b_k + VW * v);   \
        _Pragma("GCC unroll 16") for (int i = 0; i < (R); i++)                               \
        {                                                                                  \
            vec ai = vset1(a[k * (AS) + i]);                                               \
            _Pragma("GCC unroll 8") for (int v = 0; v < (V); v++)                            \
                acc[i][v] = vfma(ai, bv[v], acc[i][v]);                                    \
        }                                                                                  \
    }                                                                                      \
    for (int i = 0; i < m; i++)                                                            \
        _Pragma("GCC unroll 8") for (int v = 0; v < (V); v++)                                \
        {                                                                                  \
            float *cv = c + i * ldc + VW * v;                                              \
            int left = n - VW * v;                                                         \
            vec out = acc[i][v];                                                           \
            if (st->accumulate) out = vadd(out, vload_n(cv, left));                        \
            out = FN(epilogue)(st->epilogue, out, y, i * st->ldy + VW * v, left, st->alpha); \
            if (st->stream && left >= VW) vstream(cv, out);                                \
            else vstore_n(cv, left, out);                                                  \
        }

/* B packed: step k reads b[k*NR .. k*NR + NR). The C tile is prefetched first: in a
 * training step C is usually a fresh buffer, and its lines then arrive while the k loop runs
 * instead of stalling the stores (2-3% of an MLP step). Not when C is streamed (see sgemm):
 * its lines are then written without being read. */
TARGET static void FN(kernel_packed)(long kc, const float *restrict a, const float *restrict b,
                                     float *c, long ldc, const store_mode *st, const float *y,
                                     int m, int n)
{
    for (int i = 0; i < m && !st->stream; i++)
        for (int j = 0; j < NR; j += 16) _mm_prefetch((const char *)(c + i * ldc + j), _MM_HINT_T0);
    for (int i = 0; i < m && (st->epilogue == IMP_EPILOGUE_RELU_GRAD || st->epilogue == IMP_EPILOGUE_AXPY); i++)
        for (int j = 0; j < NR; j += 16) _mm_prefetch((const char *)(y + i * st->ldy + j), _MM_HINT_T0);
    /* The last panel of a product whose rows are not a multiple of MR runs a shorter tile:
     * computing its zero padding cost 4% of a 256-row product. (With MR <= 8 the first
     * branch is never taken.) */
    if (m > 8) {
        MICRO_KERNEL(MR, MR, NV, b + k * NR);
    } else if (m > 4) {
        MICRO_KERNEL((MR < 8 ? MR : 8), MR, NV, b + k * NR);
    } else if (m > 2) {
        MICRO_KERNEL(4, MR, NV, b + k * NR);
    } else {
        MICRO_KERNEL(2, MR, NV, b + k * NR);
    }
}

/* B read in place: step k reads base[off[k] .. off[k] + CONV_NR). With CONV_PREFETCH > 0,
 * step k first prefetches the lines of tap k + CONV_PREFETCH (off holds that many entries
 * past kc): the taps of one kernel row share their lines, but each new row (c, i) is a jump
 * the hardware prefetchers do not follow, and its L1 misses held the AVX2 kernel back (a
 * 64-channel 32x32 layer ran about 10% faster with them, on Zen 3). */
#if CONV_PREFETCH
TARGET static inline const float *FN(prefetch_tap)(const float *p)
{
    _mm_prefetch((const char *)p, _MM_HINT_T0);
    _mm_prefetch((const char *)(p + CONV_NR - 1), _MM_HINT_T0);
    return p;
}
#define CONV_B(k) (FN(prefetch_tap)(base + off[(k) + CONV_PREFETCH]), base + off[k])
#else
#define CONV_B(k) (base + off[k])
#endif

TARGET static void FN(kernel_indirect)(long kc, const float *restrict a, const float *base,
                                       const long *restrict off, float *c, long ldc, int m)
{
    const store_mode *st = &plain_store;
    const float *y = NULL;
    const int n = CONV_NR;
    MICRO_KERNEL(CONV_MR, CONV_MR, CONV_V, CONV_B(k));
}

#undef CONV_B

#undef MICRO_KERNEL

/* Rows [0, mc) x depth [0, kc) of A (element strides rs, cs) into r-row panels: panel p
 * holds, for each k, the r values A[p*r + i][k] side by side (zeros past row mc). */
TARGET static void FN(pack_a)(long mc, long kc, const float *a, long rs, long cs, int r, float *dst)
{
    if (rs == 1 && r <= VW) {
        /* A is a transpose (a weight gradient's dy^T): each column of A is contiguous. One
         * sweep along each of them, across all the panels, as pack_b does with B's rows. */
        long panels = (mc + r - 1) / r;
        for (long k = 0; k < kc; k++)
            for (long p = 0; p < panels; p++) {
                vec v = vload_n(a + k * cs + p * r, mc - p * r);
                vstore_n(dst + p * kc * r + k * r, r, v);
            }
        return;
    }
    for (long i0 = 0; i0 < mc; i0 += r, dst += kc * r) {
        long m = mc - i0 < r ? mc - i0 : r;
        const float *src = a + i0 * rs;
        long k = 0;
        if (cs == 1 && r <= VW) {
            /* rows contiguous: VW x VW blocks through registers (3x faster than gathering) */
            vec rows[VW];
            for (; k + VW <= kc; k += VW) {
                for (int i = 0; i < VW; i++) rows[i] = i < m ? vload(src + i * rs + k) : vzero();
                vtranspose(rows);
                for (int kk = 0; kk < VW; kk++) vstore_n(dst + (k + kk) * r, r, rows[kk]);
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
TARGET static void FN(pack_b)(long kc, long nc, const float *b, long rs, long cs, float *dst)
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
                _Pragma("GCC unroll 8") for (int v = 0; v < NV; v++)
                    vstore(out + VW * v, vload(src + VW * v));
            }
        j0 = full * NR;
        dst += full * kc * NR;
    }
    for (; j0 < nc; j0 += NR, dst += kc * NR) {
        long n = nc - j0 < NR ? nc - j0 : NR;
        const float *src = b + j0 * cs;
        long k = 0;
        if (rs == 1 && n == NR) {
            /* B is a transpose (columns contiguous): VW x VW blocks through registers */
            vec r[VW];
            for (; k + VW <= kc; k += VW)
                for (int part = 0; part < NV; part++) {
                    for (int j = 0; j < VW; j++) r[j] = vload(src + (part * VW + j) * cs + k);
                    vtranspose(r);
                    for (int kk = 0; kk < VW; kk++) vstore(dst + (k + kk) * NR + part * VW, r[kk]);
                }
        }
        for (; k < kc; k++) {
            for (long j = 0; j < n; j++) dst[k * NR + j] = src[k * rs + j * cs];
            for (long j = n; j < NR; j++) dst[k * NR + j] = 0.f;
        }
    }
}

/* c = a @ b (see imp_sgemm in _sgemm.h), in blocks: a packed MC x KC block of A, a packed
 * KC x NC block of B that stays in L2 while the MR-row panels of A pass over it, each
 * panel in L1 while it meets the NR-column panels of B. */
static int FN(sgemm)(long M, long N, long K, const float *a, long rsa, long csa, const float *b,
                     long rsb, long csb, float *c, long ldc, int flags, int epilogue,
                     const float *y, long ldy, float alpha)
{
    int accumulate = flags & IMP_SGEMM_ACCUMULATE;
    if (K == 0) {
        /* nothing to multiply: c is 0 (or kept); only the epilogue runs */
        if (!accumulate)
            for (long i = 0; i < M; i++) memset(c + i * ldc, 0, N * sizeof(float));
        for (long i = 0; i < M && epilogue != IMP_EPILOGUE_NONE; i++)
            FN(finish_row)(c + i * ldc, c + i * ldc, N, NULL, epilogue, y ? y + i * ldy : NULL, alpha);
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
    store_mode partial = {1, 0, IMP_EPILOGUE_NONE, 0, 0.f};
    store_mode first = {accumulate, stream, K <= KC ? epilogue : IMP_EPILOGUE_NONE, ldy, alpha};
    store_mode last = {1, 0, epilogue, ldy, alpha};
    for (long ic = 0; ic < M; ic += MC) {
        long mc = M - ic < MC ? M - ic : MC;
        for (long pc = 0; pc < K; pc += KC) {
            long kc = K - pc < KC ? K - pc : KC;
            const store_mode *st = pc == 0 ? &first : pc + KC >= K ? &last : &partial;
            FN(pack_a)(mc, kc, a + ic * rsa + pc * csa, rsa, csa, MR, pa);
            for (long jc = 0; jc < N; jc += NC) {
                long nc = N - jc < NC ? N - jc : NC;
                FN(pack_b)(kc, nc, b + pc * rsb + jc * csb, rsb, csb, pb);
                for (long ir = 0; ir < mc; ir += MR) {
                    int m = mc - ir < MR ? (int)(mc - ir) : MR;
                    for (long jr = 0; jr < nc; jr += NR) {
                        int n = nc - jr < NR ? (int)(nc - jr) : NR;
                        FN(kernel_packed)(kc, pa + ir * kc, pb + jr * kc, c + (ic + ir) * ldc + jc + jr,
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

/* Stride-1 convolution, one group: y (N, O, Ho, Wo) = x (N, C, H, W) (*) w (O, C, kh, kw).
 * Each image is copied once into a zero-padded (C, Hp, Wp) buffer. Output positions are
 * numbered q = oy * Wp + ox on the padded width, so that input tap (c, i, j) of position q
 * sits at q + off[c, i, j] with off = c*Hp*Wp + i*dh*Wp + j*dw: a tile of CONV_NR consecutive
 * q reads CONV_NR consecutive floats per tap, straight from the buffer. The Wp - Wo columns past
 * each row are computed and dropped when the rows are copied into y. */
static int FN(conv2d_s1)(long N, long C, long H, long W, const float *x, long O, long kh, long kw,
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
    char *block = get_scratch(xp_bytes + tmp_bytes + pa_bytes + (K + CONV_PREFETCH) * sizeof(long)
                              + 4 * 64);
    char *cursor = block;
    if (!block) return -1;
    float *xp = carve(&cursor, xp_bytes), *tmp = carve(&cursor, tmp_bytes), *pa = carve(&cursor, pa_bytes);
    long *off = carve(&cursor, (K + CONV_PREFETCH) * sizeof(long));
    tap_offsets(C, kh, kw, hp * wp, wp, dh, dw, off);
    for (long k = K; k < K + CONV_PREFETCH; k++) off[k] = 0; /* prefetched past the last tap */
    FN(pack_a)(O, K, w, K, 1, CONV_MR, pa);
    memset(xp, 0, xp_bytes);
    for (long n = 0; n < N; n++) {
        copy_padded(x + n * C * H * W, C, H, W, ph, pw, hp, wp, xp);
        /* a panel of weights stays in L1 while the tiles stream through the image in order
         * (12% faster than reusing each tile of the image across all output channels) */
        for (long o0 = 0; o0 < O; o0 += CONV_MR) {
            int m = O - o0 < CONV_MR ? (int)(O - o0) : CONV_MR;
            for (long q0 = 0; q0 < q_total; q0 += CONV_NR)
                FN(kernel_indirect)(K, pa + o0 * K, xp + q0, off, tmp + o0 * q_total + q0, q_total, m);
        }
        long at = n * O * ho * wo;
        for (long o = 0; o < O; o++)
            for (long r = 0; r < ho; r++, at += wo) {
                const float *row = tmp + o * q_total + r * wp;
                if (!bias && epilogue == IMP_EPILOGUE_NONE)
                    memcpy(y + at, row, wo * sizeof(float));
                else
                    FN(finish_row)(y + at, row, wo, bias ? bias + o : NULL, epilogue, ey ? ey + at : NULL, 0.f);
            }
    }
    release_scratch(block);
    return 0;
}

/* The weight gradient of conv2d_s1: gw (O, C, kh, kw) = sum over images and positions of
 * dy[o, q] * x[tap k at q]. Positions are numbered on the padded width as in the forward pass,
 * with dy zero in the dropped columns, and the sum runs along q in VW-lane vectors: a tile of
 * GW_O output channels x GW_T taps keeps GW_O * GW_T vector sums in registers and reads dy and
 * the padded images in place. The images are taken a chunk at a time (about GW_CHUNK_BYTES of
 * padded input and dy), and a tile sums over the whole chunk before its horizontal sums are
 * added to gw: one image at a time, those sums cost a third of a small layer's gradient. */

/* dst[0, n) = src[0, n); returns their sum (VW lanes, then across them). */
TARGET static float FN(copy_and_sum)(float *dst, const float *src, long n)
{
    vec sum = vzero();
    long j = 0;
    for (; j + VW <= n; j += VW) {
        vec v = vload(src + j);
        vstore(dst + j, v);
        sum = vadd(sum, v);
    }
    if (j < n) {
        vec v = vload_n(src + j, n - j);
        vstore_n(dst + j, n - j, v);
        sum = vadd(sum, v);
    }
    return vhsum(sum);
}

TARGET static void FN(kernel_grad_w)(long steps, long images, const float *const dyr[GW_O],
                                     long dy_stride, const float *xp, long x_stride,
                                     const long off[GW_T], float out[GW_O][GW_T])
{
    vec acc[GW_O][GW_T];
    _Pragma("GCC unroll 8") for (int o = 0; o < GW_O; o++)
        _Pragma("GCC unroll 8") for (int t = 0; t < GW_T; t++) acc[o][t] = vzero();
    for (long b = 0; b < images; b++)
        for (long s = 0; s < steps; s++) {
            vec d[GW_O];
            _Pragma("GCC unroll 8") for (int o = 0; o < GW_O; o++)
                d[o] = vload(dyr[o] + b * dy_stride + VW * s);
            _Pragma("GCC unroll 8") for (int t = 0; t < GW_T; t++)
            {
                vec xv = vload(xp + b * x_stride + off[t] + VW * s);
                _Pragma("GCC unroll 8") for (int o = 0; o < GW_O; o++)
                    acc[o][t] = vfma(d[o], xv, acc[o][t]);
            }
        }
    for (int o = 0; o < GW_O; o++)
        for (int t = 0; t < GW_T; t++) out[o][t] = vhsum(acc[o][t]);
}

static int FN(conv2d_s1_grad_w)(long N, long C, long H, long W, const float *x, long O, long kh,
                                long kw, const float *dy, long ph, long pw, long dh, long dw,
                                float *gw, float *gb)
{
    long hp = H + 2 * ph, wp = W + 2 * pw;
    long ho = hp - dh * (kh - 1), wo = wp - dw * (kw - 1);
    long K = C * kh * kw, image = C * hp * wp;
    long q_total = round_up(ho * wp, VW);
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
                    if (bias_sum) bias_sum[o] += FN(copy_and_sum)(dst, src, wo);
                    else memcpy(dst, src, wo * sizeof(float));
                }
        }
        for (long o0 = 0; o0 < O; o0 += GW_O) {
            const float *dyr[GW_O];
            for (int o = 0; o < GW_O; o++)
                dyr[o] = o0 + o < O ? dyp + (o0 + o) * dy_row : zero_row;
            for (long t0 = 0; t0 < K; t0 += GW_T) {
                float part[GW_O][GW_T];
                FN(kernel_grad_w)(q_total / VW, images, dyr, q_total, xp, x_stride, off + t0, part);
                for (int o = 0; o < GW_O && o0 + o < O; o++)
                    for (int t = 0; t < GW_T && t0 + t < K; t++) gw[(o0 + o) * K + t0 + t] += part[o][t];
            }
        }
    }
    for (long o = 0; bias_sum && o < O; o++) gb[o] = (float)bias_sum[o];
    release_scratch(block);
    return 0;
}

#undef NR
#undef CONV_NR

/* dy * (y > 0) (ReLU's gradient, numpy's bits) over the first n - n % (4 VW) floats, four
 * vectors a step (one at a time ran 10-15% slower on a cold y); returns how many it did
 * (the caller finishes the rest) */
TARGET static long FN(relu_grad_stream)(long n, const float *dy, const float *y, float *out)
{
    long i = 0;
    for (; i + 4 * VW <= n; i += 4 * VW) {
        vec r0 = vrelu_grad(vload(dy + i), vload(y + i));
        vec r1 = vrelu_grad(vload(dy + i + VW), vload(y + i + VW));
        vec r2 = vrelu_grad(vload(dy + i + 2 * VW), vload(y + i + 2 * VW));
        vec r3 = vrelu_grad(vload(dy + i + 3 * VW), vload(y + i + 3 * VW));
        vstore(out + i, r0);
        vstore(out + i + VW, r1);
        vstore(out + i + 2 * VW, r2);
        vstore(out + i + 3 * VW, r3);
    }
    return i;
}
