/*
 * mamba2_scalar.c — the portable kernel set (plain C loops), the set of ISA_REF:
 * what runs on a CPU without SIMD and under EDDY_FORCE_REF=1; it also serves the
 * SIMD sets' column remainders. Not the oracle: that is the _ref code in mamba2.c.
 */
#include <math.h>

#include "mamba2_impl.h"

#define COLS 64 /* columns per block: accumulators live in a small stack array */

void mamba2_step_cols_scalar(const float *hin, float *hout, int64_t ld, const float *x, const float *B,
                             const float *C, float dt, float dA, float D, int64_t ncols, int64_t N, float *y) {
    for (int64_t q0 = 0; q0 < ncols; q0 += COLS) {
        int64_t w = ncols - q0 < COLS ? ncols - q0 : COLS;
        float u[COLS], acc[COLS];
        for (int64_t q = 0; q < w; q++) u[q] = dt * x[q0 + q], acc[q] = 0.0f;
        for (int64_t n = 0; n < N; n++) {
            const float *hi = hin + n * ld + q0;
            float *ho = hout + n * ld + q0;
            for (int64_t q = 0; q < w; q++) {
                float s = dA * hi[q] + B[n] * u[q];
                ho[q] = s;
                acc[q] += C[n] * s;
            }
        }
        for (int64_t q = 0; q < w; q++) y[q0 + q] = acc[q] + D * x[q0 + q];
    }
}

static void step_head_scalar(const float *hin, float *hout, const float *x, const float *B, const float *C,
                             float dt, float dA, float D, int64_t P, int64_t N, float *y) {
    mamba2_step_cols_scalar(hin, hout, P, x, B, C, dt, dA, D, P, N, y);
}

void mamba2_gemm_scalar(const mamba2_gemm_args *g) {
    for (int64_t m = 0; m < g->M; m++) {
        int64_t kmax = g->lower && m + 1 < g->K ? m + 1 : g->K;
        float scale = g->row_scale ? g->row_scale[m] : 1.0f;
        const float *a = g->A + m * g->lda;
        float *c = g->C + m * g->ldc;
        for (int64_t j0 = 0; j0 < g->N; j0 += COLS) {
            int64_t w = g->N - j0 < COLS ? g->N - j0 : COLS;
            float acc[COLS] = {0};
            for (int64_t k = 0; k < kmax; k++) {
                const float *b = g->B + k * g->ldb + j0;
                for (int64_t j = 0; j < w; j++) acc[j] += a[k] * b[j];
            }
            if (g->beta == 0.0f)
                for (int64_t j = 0; j < w; j++) c[j0 + j] = scale * acc[j];
            else
                for (int64_t j = 0; j < w; j++) c[j0 + j] = g->beta * c[j0 + j] + scale * acc[j];
        }
    }
}

void mamba2_mask_row_scalar(float *m, const float *g, float *seg, const float *dt, float a, int64_t t, int64_t n) {
    for (int64_t s = 0; s < t; s++) seg[s] += a;
    seg[t] = 0.0f;
    for (int64_t s = 0; s <= t; s++) m[s] = g[s] * expf(seg[s]) * dt[s];
    for (int64_t s = t + 1; s < n; s++) m[s] = 0.0f;
}

void mamba2_scale_rows_scalar(float *dst, int64_t ldd, const float *src, int64_t lds, const float *w, int64_t rows,
                              int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        float s = w ? w[r] : 1.0f;
        for (int64_t j = 0; j < n; j++) dst[r * ldd + j] = s * src[r * lds + j];
    }
}

const mamba2_kernels mamba2_kernels_scalar = {
    .step_head = step_head_scalar,
    .gemm = mamba2_gemm_scalar,
    .mask_row = mamba2_mask_row_scalar,
    .scale_rows = mamba2_scale_rows_scalar,
};
