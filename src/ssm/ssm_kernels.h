/*
 * ssm_kernels.h — internal: the per-ISA block kernels behind ssm.h and gdn.h.
 *
 * The threaded drivers (conv1d.c, gated_norm.c, gdn.c, gdn_chunked.c) are written
 * once; each ISA supplies a table of small kernels that do the arithmetic on one
 * block (a channel range, a head, a GEMM tile set). The scalar tables live next to
 * the drivers; *_avx2.c, *_avx512.c and *_neon.c define the others and are only
 * reached after isa_available() said yes.
 */
#ifndef EDDY_SSM_KERNELS_H
#define EDDY_SSM_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "ssm/gdn.h"
#include "ssm/ssm.h"

/* ==== conv1d ==== */

typedef struct {
    /* y[t][c] for t in [t0, t1), c in [c0, c1): the conv + SiLU of ssm.h, reading the
     * window from x rows (tau >= 0) and the sequence's state rows (tau < 0). */
    void (*tile)(const conv1d_params *p, int64_t c0, int64_t c1, int64_t t0, int64_t t1, const float *x,
                 int64_t x_stride, const float *state, float *y, int64_t y_stride);
    /* The same outputs for t in [0, T), computed as a scan that keeps the window of
     * each channel vector in registers; reads state, does not write it. Must give
     * bit-identical results to tile(). */
    void (*scan)(const conv1d_params *p, int64_t c0, int64_t c1, int64_t T, const float *x, int64_t x_stride,
                 const float *state, float *y, int64_t y_stride);
    /* y[0..n) *= 1/sqrt(sum y^2 + eps) */
    void (*l2norm)(float *y, int64_t n, float eps);
} conv1d_kernels;

/* ==== gated RMSNorm ==== */

typedef struct {
    /* One (row, head): out = y / sqrt(mean(y^2) + eps) * w * silu(z), n elements. */
    void (*norm_gate)(const float *y, const float *z, const float *w, float eps, float *out, int64_t n);
    /* One (row, group): x = y * silu(z); out = x / sqrt(mean(x^2) + eps) * w, n elements. */
    void (*gate_norm)(const float *y, const float *z, const float *w, float eps, float *out, int64_t n);
} gated_norm_kernels;

/* ==== gated delta rule ==== */

/* gemm: row blocks are GDN_GEMM_MR rows, starting at multiples of it */
#define GDN_GEMM_MR 4
/* gemm flags */
#define GDN_GEMM_OUT_LOWER 2 /* only C[i][j] with j <= i is needed (tiles above may be skipped) */
#define GDN_GEMM_A_LOWER 4 /* A[i][p] = 0 for p > i: the k loop of a row block stops at its last row, so
                             A is read up to the end of the row block and must hold zeros there */

typedef struct {
    /* One token of one head, value columns [j0, j1): reads S_in once, writes
     * S_out = exp(g) S_in + k u^T (S_out may equal S_in) and o[j0..j1).
     * q, k: (d_k); v, o: (d_v) (indexed by j); S: (d_k, d_v). */
    void (*head_step)(const float *q, const float *k, const float *v, float g, float beta, float scale,
                      const float *S_in, float *S_out, int64_t d_k, int64_t d_v, int64_t j0, int64_t j1, float *o);
    /* T tokens of one head, value columns [j0, j1), S updated in place. rows holds the
     * head's pointers (q, k at its key head; v, g, beta, o at the value head). */
    void (*head_scan)(const gdn_rows *rows, int64_t T, float scale, float *S, int64_t d_k, int64_t d_v, int64_t j0,
                      int64_t j1);
    /* C[i][j] = cs_i Cin[i][j] + as_i sum_p A[i][p] B[p][j], with cs_i = cin_rows[i]
     * (or cin_scale when cin_rows is NULL) and as_i = acc_rows[i] (or 1). Cin NULL:
     * no first term. Row-major, leading dimensions in floats; n a multiple of the
     * ISA's vector width. Cin may equal C; nothing else may overlap C. */
    void (*gemm)(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                 const float *Cin, int64_t ldcin, float cin_scale, const float *cin_rows, const float *acc_rows,
                 float *C, int64_t ldc, int flags);
    /* x[i] = exp(x[i]) */
    void (*expv)(float *x, int64_t n);
    /* y[i] = a * x[i] (y may equal x) */
    void (*scale)(float *y, const float *x, float a, int64_t n);
    /* y[i] = a * x[i] + b * y[i] */
    void (*axpby)(float *y, float a, const float *x, float b, int64_t n);
    /* y[i] = x[i] + a (y may equal x) */
    void (*add_scalar)(float *y, const float *x, float a, int64_t n);
    /* y[i] = a * x[i] * z[i] (y may equal x or z) */
    void (*hadamard)(float *y, float a, const float *x, const float *z, int64_t n);
    /* B[j][i] = A[i][j] for an m x n A. */
    void (*transpose)(int64_t m, int64_t n, const float *A, int64_t lda, float *B, int64_t ldb);
    int width; /* d_v must be a multiple of this for the table to be used */
} gdn_kernels;

extern const conv1d_kernels conv1d_kernels_ref;
extern const gated_norm_kernels gated_norm_kernels_ref;
extern const gdn_kernels gdn_kernels_ref;
#if defined(__x86_64__)
extern const conv1d_kernels conv1d_kernels_avx2, conv1d_kernels_avx512;
extern const gated_norm_kernels gated_norm_kernels_avx2, gated_norm_kernels_avx512;
extern const gdn_kernels gdn_kernels_avx2, gdn_kernels_avx512;
#elif defined(__aarch64__)
extern const conv1d_kernels conv1d_kernels_neon;
extern const gated_norm_kernels gated_norm_kernels_neon;
extern const gdn_kernels gdn_kernels_neon;
#endif

/* The table for an ISA and these parameters (the scalar one when d_v does not fit the
 * ISA's width), and how many value-column blocks to cut each head into (gdn.c). */
const gdn_kernels *gdn_kernels_for(isa_level isa, const gdn_params *p);
int64_t gdn_column_blocks(const gdn_params *p, const gdn_kernels *kk, int64_t units, int nth);

/* The scalar chunk kernels (gdn_chunked.c), entries of gdn_kernels_ref. */
void gdn_gemm_ref(int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B, int64_t ldb,
                  const float *Cin, int64_t ldcin, float cin_scale, const float *cin_rows, const float *acc_rows,
                  float *C, int64_t ldc, int flags);
void gdn_expv_ref(float *x, int64_t n);
void gdn_scale_ref(float *y, const float *x, float a, int64_t n);
void gdn_axpby_ref(float *y, float a, const float *x, float b, int64_t n);
void gdn_add_scalar_ref(float *y, const float *x, float a, int64_t n);
void gdn_hadamard_ref(float *y, float a, const float *x, const float *z, int64_t n);
void gdn_transpose_ref(int64_t m, int64_t n, const float *A, int64_t lda, float *B, int64_t ldb);

/* ==== scalar helpers shared by the reference paths ==== */

static inline float ssm_silu_ref(float x) { return x / (1.0f + expf(-x)); }

#endif
