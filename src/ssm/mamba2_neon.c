/*
 * mamba2_neon.c — the NEON Mamba-2 kernel set (aarch64). Columns past the last
 * multiple of 4 go to the scalar kernels.
 *
 *   step_head  a panel of 16 columns (4 q registers) of the state per pass over its rows
 *   gemm       6 rows x 16 columns of accumulators (24 q registers)
 *   mask_row   vector exp over a row of segment sums
 */
#include <arm_neon.h>
#include <math.h>

#include "mamba2_impl.h"

#define AI static inline __attribute__((always_inline))

/* ==== exp ==== */

/* e^x for x <= 88 (same reduction and polynomial as the x86 sets); x < -87.33 gives 0. */
AI float32x4_t exp_ps(float32x4_t x) {
    uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(-87.33654f));
    x = vminq_f32(x, vdupq_n_f32(88.0f));
    x = vmaxq_f32(x, vdupq_n_f32(-87.33654f));
    int32x4_t ni = vcvtnq_s32_f32(vmulq_n_f32(x, 1.44269504f));
    float32x4_t n = vcvtq_f32_s32(ni);
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t e = vshlq_n_s32(vaddq_s32(ni, vdupq_n_s32(127)), 23);
    float32x4_t v = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), tiny));
}

/* ==== Step ==== */

AI void step_panel(const float *hin, float *hout, int64_t ld, const float *x, const float *B, const float *C,
                   float dt, float dA, float D, int64_t N, float *y, const int nv) {
    float32x4_t u[4], acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) {
        u[j] = vmulq_n_f32(vld1q_f32(x + 4 * j), dt);
        acc[j] = vdupq_n_f32(0.0f);
    }
    for (int64_t n = 0; n < N; n++) {
        const float b = B[n], c = C[n];
        const float *hi = hin + n * ld;
        float *ho = hout + n * ld;
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            float32x4_t h = vfmaq_n_f32(vmulq_n_f32(vld1q_f32(hi + 4 * j), dA), u[j], b);
            vst1q_f32(ho + 4 * j, h);
            acc[j] = vfmaq_n_f32(acc[j], h, c);
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < nv; j++) vst1q_f32(y + 4 * j, vfmaq_n_f32(acc[j], vld1q_f32(x + 4 * j), D));
}

static void step_head_neon(const float *hin, float *hout, const float *x, const float *B, const float *C,
                           float dt, float dA, float D, int64_t P, int64_t N, float *y) {
    int64_t p0 = 0;
    for (; p0 + 4 <= P; p0 += 16) {
        int64_t nv = (P - p0) / 4 < 4 ? (P - p0) / 4 : 4;
        const float *hi = hin + p0;
        float *ho = hout + p0;
        switch (nv) {
        case 4: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 4); break;
        case 3: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 3); break;
        case 2: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 2); break;
        default: step_panel(hi, ho, P, x + p0, B, C, dt, dA, D, N, y + p0, 1); break;
        }
        if (nv < 4) {
            p0 += 4 * nv;
            break;
        }
    }
    if (p0 < P) mamba2_step_cols_scalar(hin + p0, hout + p0, P, x + p0, B, C, dt, dA, D, P - p0, N, y + p0);
}

/* ==== GEMM ==== */

AI void gemm_block(const mamba2_gemm_args *g, int64_t m0, const int mr, int64_t j0, const int nv) {
    int64_t kmax = g->lower && m0 + mr < g->K ? m0 + mr : g->K;
    float32x4_t acc[6][4];
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) acc[i][j] = vdupq_n_f32(0.0f);
    const float *ar[6]; /* row pointers, so the loop indexes each row by k alone */
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) ar[i] = g->A + (m0 + i) * g->lda;
    const float *b = g->B + j0;
    for (int64_t k = 0; k < kmax; k++, b += g->ldb) {
        float32x4_t bv[4];
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) bv[j] = vld1q_f32(b + 4 * j);
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            float av = ar[i][k];
#pragma GCC unroll 4
            for (int j = 0; j < nv; j++) acc[i][j] = vfmaq_n_f32(acc[i][j], bv[j], av);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        float *c = g->C + (m0 + i) * g->ldc + j0;
        float sc = g->row_scale ? g->row_scale[m0 + i] : 1.0f;
#pragma GCC unroll 4
        for (int j = 0; j < nv; j++) {
            float32x4_t v = g->row_scale ? vmulq_n_f32(acc[i][j], sc) : acc[i][j];
            if (g->beta != 0.0f) v = vfmaq_n_f32(v, vld1q_f32(c + 4 * j), g->beta);
            vst1q_f32(c + 4 * j, v);
        }
    }
}

#define GEMM_CASE(MR, NV) \
    case MR * 8 + NV: gemm_block(g, m0, MR, j0, NV); break;

static void gemm_neon(const mamba2_gemm_args *g) {
    int64_t j0 = 0;
    for (; j0 + 4 <= g->N; j0 += 16) {
        int nv = (g->N - j0) / 4 < 4 ? (int)((g->N - j0) / 4) : 4;
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
        if (nv < 4) {
            j0 += 4 * nv;
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

static void mask_row_neon(float *m, const float *g, float *seg, const float *dt, float a, int64_t t, int64_t n) {
    const float32x4_t va = vdupq_n_f32(a);
    int64_t s = 0;
    for (; s + 4 <= t; s += 4) vst1q_f32(seg + s, vaddq_f32(vld1q_f32(seg + s), va));
    for (; s < t; s++) seg[s] += a;
    seg[t] = 0.0f;
    for (s = 0; s + 4 <= t + 1; s += 4) {
        float32x4_t v = vmulq_f32(vld1q_f32(g + s), exp_ps(vld1q_f32(seg + s)));
        vst1q_f32(m + s, vmulq_f32(v, vld1q_f32(dt + s)));
    }
    for (; s <= t; s++) m[s] = g[s] * expf(seg[s]) * dt[s];
    for (; s < n; s++) m[s] = 0.0f;
}

/* ==== Row gather and scale ==== */

static void scale_rows_neon(float *dst, int64_t ldd, const float *src, int64_t lds, const float *w, int64_t rows,
                            int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        const float sc = w ? w[r] : 1.0f;
        const float *a = src + r * lds;
        float *d = dst + r * ldd;
        int64_t j = 0;
        for (; j + 4 <= n; j += 4) vst1q_f32(d + j, vmulq_n_f32(vld1q_f32(a + j), sc));
        for (; j < n; j++) d[j] = sc * a[j];
    }
}

const mamba2_kernels mamba2_kernels_neon = {
    .step_head = step_head_neon,
    .gemm = gemm_neon,
    .mask_row = mask_row_neon,
    .scale_rows = scale_rows_neon,
};
