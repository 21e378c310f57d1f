/*
 * gdn_simd_body.h — internal: the SIMD kernels of the gated delta rule, written
 * once over a thin vector-macro layer. gdn_avx512.c, gdn_avx2.c and gdn_neon.c
 * each define the layer and include this file, which then defines the table
 * GDN_KERNELS_NAME. Vector loads and stores are unaligned and never masked:
 * d_v (and every column block) is a multiple of VW; lengths that need not be
 * (d_k, chunk rows) get a scalar tail.
 *
 * The layer: V (vector type), VW (floats per vector), V_ZERO(), V_SET1(x),
 * V_LOAD(p), V_STORE(p, v), V_FMA(a, b, c) = a*b + c, V_FNMA(a, b, c) = c - a*b,
 * V_MUL(a, b), V_ADD(a, b), V_EXP(v), V_HSUM(v), transpose_tile(src, lds, dst, ldd)
 * (one VW x VW tile); STEP_NV / SCAN_NV / GEMM_NV: vectors per panel of the decode
 * step, the scan and the GEMM micro-tile (powers of two <= 8).
 *
 * Decode step: value columns in panels of STEP_NV vectors. Pass 1 streams the d_k
 * rows of the panel once and keeps 2 x STEP_NV accumulators (S^T k, S^T q); pass 2
 * rewrites the rows (still in L1/L2) as e S + k u^T. o = e scale S^T q + u (k.q scale).
 * Scan: panels of SCAN_NV vectors (64 columns on AVX-512: a d_k x 64 slice of S is
 * 32 KiB for d_k = 128 and stays in L1); the update of token t and the reductions of
 * token t+1 share one pass over the rows.
 * GEMM: micro-tiles of 4 rows x GEMM_NV vectors, B panel reused from L1 across the
 * row blocks, A broadcast one element at a time.
 */

#define AI static inline __attribute__((always_inline))

/* ==== Decode step ==== */

AI float dot(const float *x, const float *y, int64_t n) {
    V acc = V_ZERO();
    int64_t i = 0;
    for (; i + VW <= n; i += VW) acc = V_FMA(V_LOAD(x + i), V_LOAD(y + i), acc);
    float s = V_HSUM(acc);
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

AI void step_panel(const int NV, const float *q, const float *k, const float *v, float e, float beta, float scale,
                   float kq, const float *S_in, float *S_out, int64_t d_k, int64_t d_v, float *o) {
    V sk[8], sq[8], u[8];
#pragma GCC unroll 8
    for (int c = 0; c < NV; c++) sk[c] = sq[c] = V_ZERO();
    for (int64_t i = 0; i < d_k; i++) {
        const float *row = S_in + i * d_v;
        V ki = V_SET1(k[i]), qi = V_SET1(q[i]);
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) {
            V s = V_LOAD(row + VW * c);
            sk[c] = V_FMA(ki, s, sk[c]);
            sq[c] = V_FMA(qi, s, sq[c]);
        }
    }
    V ve = V_SET1(e), vb = V_SET1(beta), vkq = V_SET1(kq), ves = V_SET1(e * scale);
#pragma GCC unroll 8
    for (int c = 0; c < NV; c++) {
        u[c] = V_MUL(vb, V_FNMA(ve, sk[c], V_LOAD(v + VW * c)));
        V_STORE(o + VW * c, V_FMA(u[c], vkq, V_MUL(ves, sq[c])));
    }
    for (int64_t i = 0; i < d_k; i++) {
        const float *in = S_in + i * d_v;
        float *out = S_out + i * d_v;
        V ki = V_SET1(k[i]);
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) V_STORE(out + VW * c, V_FMA(ki, u[c], V_MUL(ve, V_LOAD(in + VW * c))));
    }
}

static void head_step(const float *q, const float *k, const float *v, float g, float beta, float scale,
                      const float *S_in, float *S_out, int64_t d_k, int64_t d_v, int64_t j0, int64_t j1, float *o) {
    float e = expf(g), kq = scale * dot(k, q, d_k);
    for (int64_t j = j0; j < j1;) {
        int64_t left = (j1 - j) / VW;
        const float *si = S_in + j;
        float *so = S_out + j;
        if (STEP_NV >= 8 && left >= 8) {
            step_panel(8, q, k, v + j, e, beta, scale, kq, si, so, d_k, d_v, o + j);
            j += 8 * VW;
        } else if (STEP_NV >= 4 && left >= 4) {
            step_panel(4, q, k, v + j, e, beta, scale, kq, si, so, d_k, d_v, o + j);
            j += 4 * VW;
        } else if (left >= 2) {
            step_panel(2, q, k, v + j, e, beta, scale, kq, si, so, d_k, d_v, o + j);
            j += 2 * VW;
        } else {
            step_panel(1, q, k, v + j, e, beta, scale, kq, si, so, d_k, d_v, o + j);
            j += VW;
        }
    }
}

/* ==== Scan: one pass over the rows per token ==== */

AI void scan_panel(const int NV, const gdn_rows *r, int64_t T, float scale, float *S, int64_t d_k, int64_t d_v,
                   int64_t j) {
    V sk[8], sq[8];
#pragma GCC unroll 8
    for (int c = 0; c < NV; c++) sk[c] = sq[c] = V_ZERO();
    for (int64_t i = 0; i < d_k; i++) { /* reductions for token 0 */
        V ki = V_SET1(r->k[i]), qi = V_SET1(r->q[i]);
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) {
            V s = V_LOAD(S + i * d_v + j + VW * c);
            sk[c] = V_FMA(ki, s, sk[c]);
            sq[c] = V_FMA(qi, s, sq[c]);
        }
    }
    for (int64_t t = 0; t < T; t++) {
        const float *k = r->k + t * r->k_stride, *q = r->q + t * r->q_stride, *v = r->v + t * r->v_stride + j;
        if (t + 2 < T) { /* token rows are a projection row apart: ask for them early */
            for (int64_t b = 0; b < d_k; b += 16) {
                __builtin_prefetch(k + 2 * r->k_stride + b);
                __builtin_prefetch(q + 2 * r->q_stride + b);
            }
            for (int64_t b = 0; b < NV * VW; b += 16) __builtin_prefetch(v + 2 * r->v_stride + b);
        }
        /* no libm call in this loop: it would force every live vector register to the stack */
        V ve = V_EXP(V_SET1(r->g[t * r->g_stride])), vb = V_SET1(r->beta[t * r->beta_stride]);
        V vkq = V_SET1(scale * dot(k, q, d_k)), ves = V_MUL(ve, V_SET1(scale)), u[8];
        float *o = r->o + t * r->o_stride + j;
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++) {
            u[c] = V_MUL(vb, V_FNMA(ve, sk[c], V_LOAD(v + VW * c)));
            V_STORE(o + VW * c, V_FMA(u[c], vkq, V_MUL(ves, sq[c])));
            sk[c] = sq[c] = V_ZERO();
        }
        if (t + 1 < T) {
            const float *k1 = k + r->k_stride, *q1 = q + r->q_stride;
            for (int64_t i = 0; i < d_k; i++) {
                float *row = S + i * d_v + j;
                V ki = V_SET1(k[i]), k1i = V_SET1(k1[i]), q1i = V_SET1(q1[i]);
#pragma GCC unroll 8
                for (int c = 0; c < NV; c++) {
                    V s = V_FMA(ki, u[c], V_MUL(ve, V_LOAD(row + VW * c)));
                    V_STORE(row + VW * c, s);
                    sk[c] = V_FMA(k1i, s, sk[c]);
                    sq[c] = V_FMA(q1i, s, sq[c]);
                }
            }
        } else {
            for (int64_t i = 0; i < d_k; i++) {
                float *row = S + i * d_v + j;
                V ki = V_SET1(k[i]);
#pragma GCC unroll 8
                for (int c = 0; c < NV; c++) V_STORE(row + VW * c, V_FMA(ki, u[c], V_MUL(ve, V_LOAD(row + VW * c))));
            }
        }
    }
}

/* For longer scans the panel is copied into a contiguous buffer for the duration:
 * in place its rows are d_v floats apart (512 bytes at d_v = 128), which maps it
 * onto half the L1 sets, and a 32 KiB panel then no longer stays in L1. */
static void head_scan(const gdn_rows *r, int64_t T, float scale, float *S, int64_t d_k, int64_t d_v, int64_t j0,
                      int64_t j1) {
    _Alignas(64) float Sp[GDN_MAX_DIM * SCAN_NV * VW];
    for (int64_t j = j0; j < j1;) {
        int64_t left = (j1 - j) / VW, nv = left >= SCAN_NV ? SCAN_NV : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        int64_t w = nv * VW;
        bool pack = T >= 4;
        float *base = S + j;
        int64_t ld = d_v;
        if (pack) {
            for (int64_t i = 0; i < d_k; i++) memcpy(Sp + i * w, S + i * d_v + j, (size_t)w * sizeof(float));
            base = Sp, ld = w;
        }
        gdn_rows rj = *r;
        rj.v += j, rj.o += j;
        if (SCAN_NV >= 8 && nv == 8) scan_panel(8, &rj, T, scale, base, d_k, ld, 0);
        else if (SCAN_NV >= 4 && nv == 4) scan_panel(4, &rj, T, scale, base, d_k, ld, 0);
        else if (SCAN_NV >= 2 && nv == 2) scan_panel(2, &rj, T, scale, base, d_k, ld, 0);
        else scan_panel(1, &rj, T, scale, base, d_k, ld, 0);
        if (pack)
            for (int64_t i = 0; i < d_k; i++) memcpy(S + i * d_v + j, Sp + i * w, (size_t)w * sizeof(float));
        j += w;
    }
}

/* ==== GEMM micro-tiles ==== */

AI void micro(const int MR, const int NV, int64_t kend, const float *A, int64_t lda, const float *B, int64_t ldb,
              const float *Cin, int64_t ldcin, float cs, const float *cin_rows, const float *acc_rows, float *C,
              int64_t ldc) {
    V acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) acc[r][c] = V_ZERO();
    for (int64_t p = 0; p < kend; p++) {
        V b[4];
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) b[c] = V_LOAD(B + p * ldb + VW * c);
#pragma GCC unroll 4
        for (int r = 0; r < MR; r++) {
            V a = V_SET1(A[r * lda + p]);
#pragma GCC unroll 4
            for (int c = 0; c < NV; c++) acc[r][c] = V_FMA(a, b[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < MR; r++) {
        V ar = V_SET1(acc_rows ? acc_rows[r] : 1.0f), cr = V_SET1(cin_rows ? cin_rows[r] : cs);
#pragma GCC unroll 4
        for (int c = 0; c < NV; c++) {
            V x = acc[r][c];
            if (acc_rows) x = V_MUL(x, ar);
            if (Cin) x = V_FMA(cr, V_LOAD(Cin + r * ldcin + VW * c), x);
            V_STORE(C + r * ldc + VW * c, x);
        }
    }
}

#define MICRO_CASE(mr, nv)                                                                 \
    case (mr) * 8 + (nv):                                                                  \
        micro(mr, nv, kend, A, lda, B, ldb, Cin, ldcin, cs, cin_rows, acc_rows, C, ldc); \
        break;

static void micro_any(int mr, int nv, int64_t kend, const float *A, int64_t lda, const float *B, int64_t ldb,
                      const float *Cin, int64_t ldcin, float cs, const float *cin_rows, const float *acc_rows,
                      float *C, int64_t ldc) {
    switch (mr * 8 + nv) {
        MICRO_CASE(4, 1) MICRO_CASE(3, 1) MICRO_CASE(2, 1) MICRO_CASE(1, 1)
        MICRO_CASE(4, 2) MICRO_CASE(3, 2) MICRO_CASE(2, 2) MICRO_CASE(1, 2)
#if GEMM_NV >= 4
        MICRO_CASE(4, 3) MICRO_CASE(3, 3) MICRO_CASE(2, 3) MICRO_CASE(1, 3)
        MICRO_CASE(4, 4) MICRO_CASE(3, 4) MICRO_CASE(2, 4) MICRO_CASE(1, 4)
#endif
    default: break;
    }
}

/* B is read in place: packing the panel (its rows are often 512 bytes apart)
 * measured no faster here, the panel staying within L1 and L2 either way. */
static void gemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                 const float *Cin, int64_t ldcin, float cin_scale, const float *cin_rows, const float *acc_rows,
                 float *C, int64_t ldc, int flags) {
    const int64_t panel = GEMM_NV * VW;
    for (int64_t j0 = 0; j0 < n; j0 += panel) {
        int nvmax = (int)((n - j0) / VW < GEMM_NV ? (n - j0) / VW : GEMM_NV);
        for (int64_t i0 = 0; i0 < m; i0 += GDN_GEMM_MR) {
            int mr = (int)(m - i0 < GDN_GEMM_MR ? m - i0 : GDN_GEMM_MR), nv = nvmax;
            if (flags & GDN_GEMM_OUT_LOWER) {
                int64_t need = i0 + mr - j0; /* columns j0 .. i0+mr-1 are needed */
                if (need <= 0) continue;
                if ((need + VW - 1) / VW < nv) nv = (int)((need + VW - 1) / VW);
            }
            int64_t kend = (flags & GDN_GEMM_A_LOWER) && i0 + mr < k ? i0 + mr : k;
            micro_any(mr, nv, kend, A + i0 * lda, lda, B + j0, ldb, Cin ? Cin + i0 * ldcin + j0 : NULL, ldcin,
                      cin_scale, cin_rows ? cin_rows + i0 : NULL, acc_rows ? acc_rows + i0 : NULL, C + i0 * ldc + j0,
                      ldc);
        }
    }
}

/* ==== Small vector kernels ==== */

static void expv(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(x + i, V_EXP(V_LOAD(x + i)));
    for (; i < n; i++) x[i] = expf(x[i]);
}

static void scale(float *y, const float *x, float a, int64_t n) {
    V va = V_SET1(a);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(y + i, V_MUL(va, V_LOAD(x + i)));
    for (; i < n; i++) y[i] = a * x[i];
}

static void axpby(float *y, float a, const float *x, float b, int64_t n) {
    V va = V_SET1(a), vb = V_SET1(b);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(y + i, V_FMA(va, V_LOAD(x + i), V_MUL(vb, V_LOAD(y + i))));
    for (; i < n; i++) y[i] = a * x[i] + b * y[i];
}

static void add_scalar(float *y, const float *x, float a, int64_t n) {
    V va = V_SET1(a);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(y + i, V_ADD(V_LOAD(x + i), va));
    for (; i < n; i++) y[i] = x[i] + a;
}

static void hadamard(float *y, float a, const float *x, const float *z, int64_t n) {
    V va = V_SET1(a);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) V_STORE(y + i, V_MUL(V_MUL(va, V_LOAD(x + i)), V_LOAD(z + i)));
    for (; i < n; i++) y[i] = a * x[i] * z[i];
}

/* Whole VW x VW tiles with the ISA's register transpose, the edges one by one. */
static void transpose(int64_t m, int64_t n, const float *A, int64_t lda, float *B, int64_t ldb) {
    int64_t mt = m / VW * VW, nt = n / VW * VW;
    for (int64_t i0 = 0; i0 < mt; i0 += VW)
        for (int64_t j0 = 0; j0 < nt; j0 += VW) transpose_tile(A + i0 * lda + j0, lda, B + j0 * ldb + i0, ldb);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = i < mt ? nt : 0; j < n; j++) B[j * ldb + i] = A[i * lda + j];
}

const gdn_kernels GDN_KERNELS_NAME = {
    .head_step = head_step,
    .head_scan = head_scan,
    .gemm = gemm,
    .expv = expv,
    .scale = scale,
    .axpby = axpby,
    .add_scalar = add_scalar,
    .hadamard = hadamard,
    .transpose = transpose,
    .width = VW,
};
