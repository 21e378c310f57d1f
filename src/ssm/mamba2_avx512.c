/*
 * mamba2_avx512.c — the AVX-512 Mamba-2 kernel set (compiled with -mavx512f ...;
 * used only when the CPU has AVX-512 F/BW/VL/DQ and FMA). Column tails use masks.
 *
 *   step_head  a panel of 64 columns (4 vectors) of the state per pass over its rows
 *   gemm       6 rows x 64 columns of accumulators (24 zmm), broadcast A, stream B rows
 *   mask_row   vector exp over a row of segment sums
 */
#include <immintrin.h>

#include "mamba2_impl.h"

#define AI static inline __attribute__((always_inline))

/* ==== exp ==== */

/* e^x for x <= 88, relative error about 2 ulp; x < -87.33 (results below FLT_MIN)
 * gives 0, NaN stays NaN. Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, then
 * e^r = 1 + r + r^2 p(r) with a degree-5 minimax p, scaled by 2^n. */
AI __m512 exp_ps(__m512 x) {
    __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_mov_ps((__mmask16)~tiny, _mm512_scalef_ps(p, n));
}

static __mmask16 tail_mask(int64_t w) { return w >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << w) - 1); }

/* ==== Step ==== */

/* nv vectors of columns (the last one masked by `last`) over all N state rows. */
AI void step_panel(const float *hin, float *hout, int64_t ld, const float *x, const float *B, const float *C,
                   float dt, float dA, float D, int64_t N, float *y, const int nv, __mmask16 last) {
    __m512 u[4], acc[4];
    __mmask16 mk[4];
    const __m512 vdA = _mm512_set1_ps(dA);
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) {
        mk[j] = j == nv - 1 ? last : (__mmask16)0xFFFF;
        u[j] = _mm512_mul_ps(_mm512_set1_ps(dt), _mm512_maskz_loadu_ps(mk[j], x + 16 * j));
        acc[j] = _mm512_setzero_ps();
    }
    for (int64_t n = 0; n < N; n++) {
        const __m512 b = _mm512_set1_ps(B[n]), c = _mm512_set1_ps(C[n]);
        const float *hi = hin + n * ld;
        float *ho = hout + n * ld;
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            __m512 h = _mm512_maskz_loadu_ps(mk[j], hi + 16 * j);
            h = _mm512_fmadd_ps(b, u[j], _mm512_mul_ps(vdA, h));
            _mm512_mask_storeu_ps(ho + 16 * j, mk[j], h);
            acc[j] = _mm512_fmadd_ps(c, h, acc[j]);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) {
        __m512 r = _mm512_fmadd_ps(_mm512_set1_ps(D), _mm512_maskz_loadu_ps(mk[j], x + 16 * j), acc[j]);
        _mm512_mask_storeu_ps(y + 16 * j, mk[j], r);
    }
}

static void step_head_avx512(const float *hin, float *hout, const float *x, const float *B, const float *C,
                             float dt, float dA, float D, int64_t P, int64_t N, float *y) {
    for (int64_t p0 = 0; p0 < P; p0 += 64) {
        int64_t w = P - p0 < 64 ? P - p0 : 64;
        int nv = (int)((w + 15) / 16);
        __mmask16 last = tail_mask(w - 16 * (nv - 1));
        const float *hi = hin + p0;
        float *ho = hout + p0;
        switch (nv) {
        case 4: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 4, last); break;
        case 3: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 3, last); break;
        case 2: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 2, last); break;
        default: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 1, last); break;
        }
    }
}

/* ==== GEMM ==== */

/* Rows [m0, m0 + mr) x columns [j0, j0 + 16 nv) of C (the last vector masked). */
AI void gemm_block(const mamba2_gemm_args *g, int64_t m0, const int mr, int64_t j0, const int nv,
                   __mmask16 last) {
    int64_t kmax = g->lower && m0 + mr < g->K ? m0 + mr : g->K;
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) acc[i][j] = _mm512_setzero_ps();
    const float *ar[6]; /* row pointers, so the loop indexes each row by k alone */
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) ar[i] = g->A + (m0 + i) * g->lda;
    const float *b = g->B + j0;
    for (int64_t k = 0; k < kmax; k++, b += g->ldb) {
        __m512 bv[4];
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++)
            bv[j] = j == nv - 1 ? _mm512_maskz_loadu_ps(last, b + 16 * j) : _mm512_loadu_ps(b + 16 * j);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            __m512 av = _mm512_set1_ps(ar[i][k]);
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
        }
    }
    const __m512 beta = _mm512_set1_ps(g->beta);
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        float *c = g->C + (m0 + i) * g->ldc + j0;
        __m512 sc = _mm512_set1_ps(g->row_scale ? g->row_scale[m0 + i] : 1.0f);
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            __mmask16 mk = j == nv - 1 ? last : (__mmask16)0xFFFF;
            __m512 v = g->row_scale ? _mm512_mul_ps(acc[i][j], sc) : acc[i][j];
            if (g->beta != 0.0f) v = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(mk, c + 16 * j), v);
            _mm512_mask_storeu_ps(c + 16 * j, mk, v);
        }
    }
}

#define GEMM_CASE(MR, NV) \
    case MR * 8 + NV: gemm_block(g, m0, MR, j0, NV, last); break;

static void gemm_avx512(const mamba2_gemm_args *g) {
    for (int64_t j0 = 0; j0 < g->N; j0 += 64) {
        int64_t w = g->N - j0 < 64 ? g->N - j0 : 64;
        int nv = (int)((w + 15) / 16);
        __mmask16 last = tail_mask(w - 16 * (nv - 1));
        for (int64_t m0 = 0; m0 < g->M; m0 += 6) {
            int mr = g->M - m0 < 6 ? (int)(g->M - m0) : 6;
            switch (mr * 8 + nv) {
                GEMM_CASE(6, 4) GEMM_CASE(6, 3) GEMM_CASE(6, 2) GEMM_CASE(6, 1)
                GEMM_CASE(5, 4) GEMM_CASE(5, 3) GEMM_CASE(5, 2) GEMM_CASE(5, 1)
                GEMM_CASE(4, 4) GEMM_CASE(4, 3) GEMM_CASE(4, 2) GEMM_CASE(4, 1)
                GEMM_CASE(3, 4) GEMM_CASE(3, 3) GEMM_CASE(3, 2) GEMM_CASE(3, 1)
                GEMM_CASE(2, 4) GEMM_CASE(2, 3) GEMM_CASE(2, 2) GEMM_CASE(2, 1)
                GEMM_CASE(1, 4) GEMM_CASE(1, 3) GEMM_CASE(1, 2) GEMM_CASE(1, 1)
            default: break;
            }
        }
    }
}

/* ==== Intra-chunk row ==== */

static void mask_row_avx512(float *m, const float *g, float *seg, const float *dt, float a, int64_t t, int64_t n) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 va = _mm512_set1_ps(a);
    int64_t s0 = 0;
    for (; s0 <= t; s0 += 16) {
        __m512i idx = _mm512_add_epi32(iota, _mm512_set1_epi32((int)s0));
        __mmask16 le = _mm512_cmple_epi32_mask(idx, _mm512_set1_epi32((int)t)); /* s <= t */
        __mmask16 lt = _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32((int)t)); /* s < t */
        __mmask16 in = tail_mask(n - s0);
        __m512 sv = _mm512_maskz_loadu_ps(lt, seg + s0);
        sv = _mm512_maskz_add_ps(le, sv, _mm512_maskz_mov_ps(lt, va)); /* seg[t] = 0 */
        _mm512_mask_storeu_ps(seg + s0, le, sv);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(le, g + s0), exp_ps(sv));
        v = _mm512_maskz_mul_ps(le, v, _mm512_maskz_loadu_ps(le, dt + s0));
        _mm512_mask_storeu_ps(m + s0, in, v);
    }
    for (; s0 < n; s0 += 16) _mm512_mask_storeu_ps(m + s0, tail_mask(n - s0), _mm512_setzero_ps());
}

/* ==== Row gather and scale ==== */

static void scale_rows_avx512(float *dst, int64_t ldd, const float *src, int64_t lds, const float *w, int64_t rows,
                              int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        const __m512 s = _mm512_set1_ps(w ? w[r] : 1.0f);
        const float *a = src + r * lds;
        float *d = dst + r * ldd;
        for (int64_t j = 0; j < n; j += 16) {
            __mmask16 mk = tail_mask(n - j);
            _mm512_mask_storeu_ps(d + j, mk, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(mk, a + j)));
        }
    }
}

const mamba2_kernels mamba2_kernels_avx512 = {
    .step_head = step_head_avx512,
    .gemm = gemm_avx512,
    .mask_row = mask_row_avx512,
    .scale_rows = scale_rows_avx512,
};
