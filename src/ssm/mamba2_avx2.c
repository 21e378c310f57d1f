/*
 * mamba2_avx2.c — the AVX2+FMA Mamba-2 kernel set (compiled with -mavx2 -mfma; used
 * only when the CPU has them). Columns past the last multiple of 8 go to the
 * scalar kernels.
 *
 *   step_head  a panel of 32 columns (4 ymm) of the state per pass over its rows
 *   gemm       6 rows x 16 columns of accumulators (12 ymm), broadcast A, stream B rows
 *   mask_row   vector exp over a row of segment sums
 */
#include <immintrin.h>
#include <math.h>

#include "mamba2_impl.h"

#define AI static inline __attribute__((always_inline))

/* ==== exp ==== */

/* e^x for x <= 88 (same reduction and polynomial as the AVX-512 set; 2^n built in
 * the exponent field); x < -87.33 gives 0. */
AI __m256 exp_ps(__m256 x) {
    __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), x);
    x = _mm256_max_ps(_mm256_set1_ps(-87.33654f), x);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* ==== Step ==== */

AI void step_panel(const float *hin, float *hout, int64_t ld, const float *x, const float *B, const float *C,
                   float dt, float dA, float D, int64_t N, float *y, const int nv) {
    __m256 u[4], acc[4];
    const __m256 vdA = _mm256_set1_ps(dA);
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) {
        u[j] = _mm256_mul_ps(_mm256_set1_ps(dt), _mm256_loadu_ps(x + 8 * j));
        acc[j] = _mm256_setzero_ps();
    }
    for (int64_t n = 0; n < N; n++) {
        const __m256 b = _mm256_set1_ps(B[n]), c = _mm256_set1_ps(C[n]);
        const float *hi = hin + n * ld;
        float *ho = hout + n * ld;
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            __m256 h = _mm256_fmadd_ps(b, u[j], _mm256_mul_ps(vdA, _mm256_loadu_ps(hi + 8 * j)));
            _mm256_storeu_ps(ho + 8 * j, h);
            acc[j] = _mm256_fmadd_ps(c, h, acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++)
        _mm256_storeu_ps(y + 8 * j, _mm256_fmadd_ps(_mm256_set1_ps(D), _mm256_loadu_ps(x + 8 * j), acc[j]));
}

static void step_head_avx2(const float *hin, float *hout, const float *x, const float *B, const float *C,
                           float dt, float dA, float D, int64_t P, int64_t N, float *y) {
    int64_t p0 = 0;
    for (; p0 + 8 <= P; p0 += 32) {
        int64_t nv = (P - p0) / 8 < 4 ? (P - p0) / 8 : 4;
        const float *hi = hin + p0;
        float *ho = hout + p0;
        switch (nv) {
        case 4: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 4); break;
        case 3: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 3); break;
        case 2: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 2); break;
        default: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 1); break;
        }
        if (nv < 4) {
            p0 += 8 * nv;
            break;
        }
    }
    if (p0 < P) mamba2_step_cols_scalar(hin + p0, hout + p0, P, x + p0, B, C, dt, dA, D, P - p0, N, y + p0);
}

/* ==== GEMM ==== */

AI void gemm_block(const mamba2_gemm_args *g, int64_t m0, const int mr, int64_t j0, const int nv) {
    int64_t kmax = g->lower && m0 + mr < g->K ? m0 + mr : g->K;
    __m256 acc[6][2];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) acc[i][j] = _mm256_setzero_ps();
    const float *ar[6]; /* row pointers, so the loop indexes each row by k alone */
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) ar[i] = g->A + (m0 + i) * g->lda;
    const float *b = g->B + j0;
    for (int64_t k = 0; k < kmax; k++, b += g->ldb) {
        __m256 bv[2];
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) bv[j] = _mm256_loadu_ps(b + 8 * j);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            __m256 av = _mm256_broadcast_ss(ar[i] + k);
#pragma GCC unroll 2
            for (int j = 0; j < nv; j++) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    const __m256 beta = _mm256_set1_ps(g->beta);
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        float *c = g->C + (m0 + i) * g->ldc + j0;
        __m256 sc = _mm256_set1_ps(g->row_scale ? g->row_scale[m0 + i] : 1.0f);
#pragma GCC unroll 2
        for (int j = 0; j < nv; j++) {
            __m256 v = g->row_scale ? _mm256_mul_ps(acc[i][j], sc) : acc[i][j];
            if (g->beta != 0.0f) v = _mm256_fmadd_ps(beta, _mm256_loadu_ps(c + 8 * j), v);
            _mm256_storeu_ps(c + 8 * j, v);
        }
    }
}

#define GEMM_CASE(MR, NV) \
    case MR * 4 + NV: gemm_block(g, m0, MR, j0, NV); break;

static void gemm_avx2(const mamba2_gemm_args *g) {
    int64_t j0 = 0;
    for (; j0 + 8 <= g->N; j0 += 16) {
        int nv = j0 + 16 <= g->N ? 2 : 1;
        for (int64_t m0 = 0; m0 < g->M; m0 += 6) {
            int mr = g->M - m0 < 6 ? (int)(g->M - m0) : 6;
            switch (mr * 4 + nv) {
                GEMM_CASE(6, 2) GEMM_CASE(6, 1) GEMM_CASE(5, 2) GEMM_CASE(5, 1)
                GEMM_CASE(4, 2) GEMM_CASE(4, 1) GEMM_CASE(3, 2) GEMM_CASE(3, 1)
                GEMM_CASE(2, 2) GEMM_CASE(2, 1) GEMM_CASE(1, 2) GEMM_CASE(1, 1)
            default: break;
            }
        }
        if (nv == 1) {
            j0 += 8;
            break;
        }
    }
    if (j0 < g->N) {
        mamba2_gemm_args rest = *g;
        rest.N = g->N - j0;
        rest.B = g->B + j0;
        rest.C = g->C + j0;
        mamba2_gemm_scalar(&rest);
    }
}

/* ==== Intra-chunk row ==== */

static void mask_row_avx2(float *m, const float *g, float *seg, const float *dt, float a, int64_t t, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t s = 0;
    for (; s + 8 <= t; s += 8) _mm256_storeu_ps(seg + s, _mm256_add_ps(_mm256_loadu_ps(seg + s), va));
    for (; s < t; s++) seg[s] += a;
    seg[t] = 0.0f;
    for (s = 0; s + 8 <= t + 1; s += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(g + s), exp_ps(_mm256_loadu_ps(seg + s)));
        _mm256_storeu_ps(m + s, _mm256_mul_ps(v, _mm256_loadu_ps(dt + s)));
    }
    for (; s <= t; s++) m[s] = g[s] * expf(seg[s]) * dt[s];
    for (; s < n; s++) m[s] = 0.0f;
}

/* ==== Row gather and scale ==== */

static void scale_rows_avx2(float *dst, int64_t ldd, const float *src, int64_t lds, const float *w, int64_t rows,
                            int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        const float sc = w ? w[r] : 1.0f;
        const __m256 s = _mm256_set1_ps(sc);
        const float *a = src + r * lds;
        float *d = dst + r * ldd;
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) _mm256_storeu_ps(d + j, _mm256_mul_ps(s, _mm256_loadu_ps(a + j)));
        for (; j < n; j++) d[j] = sc * a[j];
    }
}

const mamba2_kernels mamba2_kernels_avx2 = {
    .step_head = step_head_avx2,
    .gemm = gemm_avx2,
    .mask_row = mask_row_avx2,
    .scale_rows = scale_rows_avx2,
};
