/*
 * mamba2_impl.h — internals shared by the Mamba-2 kernel files: the per-token
 * discretization and the kernel sets (one per ISA) that the drivers in mamba2.c
 * (step, verify, sequential scan) and mamba2_chunk.c (SSD chunked scan) run.
 *
 * A kernel set is three inner loops; everything else (threading, chunking, scalar
 * per-token work) is written once in the drivers.
 */
#ifndef EDDY_SSM_MAMBA2_IMPL_H
#define EDDY_SSM_MAMBA2_IMPL_H

#include <math.h>

#include "mamba2.h"
#include "ops/norm.h"

/* ==== Discretization (scalar, once per token and head) ==== */

/* dt = clamp(softplus(raw + bias), dt_min, dt_max), softplus guarded for large inputs
 * as torch's is (threshold 20: ops_softplus). */
static inline float mamba2_dt(const mamba2_params *p, float raw, int64_t h) {
    float dt = ops_softplus(raw + p->dt_bias[h]);
    if (dt < p->dt_min) dt = p->dt_min;
    if (dt > p->dt_max) dt = p->dt_max;
    return dt;
}

/* ==== Subnormals ==== */

/* The kernel sets run with subnormals flushed to zero (x86: MXCSR FTZ and DAZ, set
 * per task and restored after). Decay factors like exp(-87 .. -104) and products of
 * small weights land in the subnormal range as a matter of course, and each x86
 * instruction that produces or reads one takes a microcode assist costing about a
 * hundred cycles: a chunked scan of long, fast-decaying heads ran several times
 * slower without this. The _ref kernels keep IEEE semantics; the difference is in
 * values below FLT_MIN. aarch64 handles subnormals at full speed and is left alone. */
#if defined(__x86_64__)
#include <xmmintrin.h>
static inline unsigned mamba2_flush_begin(void) {
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
    return old;
}
static inline void mamba2_flush_end(unsigned old) { _mm_setcsr(old); }
#else
static inline unsigned mamba2_flush_begin(void) { return 0; }
static inline void mamba2_flush_end(unsigned old) { (void)old; }
#endif

static inline int64_t mamba2_group_of(const mamba2_params *p, int64_t h) {
    return h / (p->n_heads / p->n_groups);
}

/* ==== Kernel sets ==== */

/* C(m, j) = beta * C(m, j) + scale[m] * sum_k A(m, k) B(k, j), for m < M, j < N, k < K:
 *   A(m, k) = A[m * lda + k],  B(k, j) = B[k * ldb + j],  C(m, j) = C[m * ldc + j].
 * beta == 0 overwrites C without reading it; row_scale NULL means 1. With `lower`,
 * row m may stop its sum at the end of its row block: callers guarantee A(m, k) = 0
 * for k > m, so that is the causal (lower-triangular) product. */
typedef struct {
    int64_t M, N, K;
    const float *A; int64_t lda;
    const float *B; int64_t ldb;
    float *C;       int64_t ldc;
    float beta;
    const float *row_scale; /* (M) or NULL */
    bool lower;
} mamba2_gemm_args;

typedef struct {
    /* One token of one head, state rows (N, P) row-major (rows n over p):
     *   u = dt x;  hout[n][:] = dA hin[n][:] + B[n] u;  y = sum_n C[n] hout[n][:] + D x
     * x, y: (P); B, C: (N). hin may equal hout. */
    void (*step_head)(const float *hin, float *hout, const float *x, const float *B, const float *C, float dt,
                      float dA, float D, int64_t P, int64_t N, float *y);
    void (*gemm)(const mamba2_gemm_args *g);
    /* Row t of the intra-chunk matrix (n = chunk length, t < n):
     *   seg[s] += a for s < t; seg[t] = 0           (seg[s] = sum of a_r over s < r <= t)
     *   m[s] = g[s] * exp(seg[s]) * dt[s] for s <= t,   m[s] = 0 for t < s < n */
    void (*mask_row)(float *m, const float *g, float *seg, const float *dt, float a, int64_t t, int64_t n);
    /* dst[r][j] = w[r] src[r][j] (w NULL: a copy), rows r < rows, j < n, with row
     * strides ldd and lds: gathers strided input rows into a contiguous block. */
    void (*scale_rows)(float *dst, int64_t ldd, const float *src, int64_t lds, const float *w, int64_t rows,
                       int64_t n);
} mamba2_kernels;

extern const mamba2_kernels mamba2_kernels_scalar;
#if defined(__x86_64__)
extern const mamba2_kernels mamba2_kernels_avx2;
extern const mamba2_kernels mamba2_kernels_avx512;
#elif defined(__aarch64__)
extern const mamba2_kernels mamba2_kernels_neon;
#endif

/* The set of a level (ISA_REF: mamba2_kernels_scalar); NULL when the build lacks it. */
const mamba2_kernels *mamba2_kernels_for(isa_level isa);

/* Scalar kernels, also used by the SIMD sets for column remainders. The step on
 * columns [0, ncols) of state rows with stride ld (x, y: the same columns). */
void mamba2_step_cols_scalar(const float *hin, float *hout, int64_t ld, const float *x, const float *B,
                             const float *C, float dt, float dA, float D, int64_t ncols, int64_t N, float *y);
void mamba2_gemm_scalar(const mamba2_gemm_args *g);
void mamba2_mask_row_scalar(float *m, const float *g, float *seg, const float *dt, float a, int64_t t, int64_t n);
void mamba2_scale_rows_scalar(float *dst, int64_t ldd, const float *src, int64_t lds, const float *w, int64_t rows,
                              int64_t n);

#endif
