/*
 * gated_norm.c — gated RMSNorm in its two forms (ssm.h): per value head with a
 * shared weight, norm before gate (Gated DeltaNet), and per group with a
 * per-channel weight, gate before norm (Mamba-2). Scalar oracles, the scalar
 * kernels, and the threaded driver shared by every ISA.
 */
#include "base/error.h"
#include "ssm/ssm.h"
#include "ssm/ssm_kernels.h"

/* ==== Scalar kernels and oracles ==== */

static void norm_gate_ref(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += y[i] * y[i];
    float s = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = y[i] * s * w[i] * ssm_silu_ref(z[i]);
}

static void gate_norm_ref(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float x = y[i] * ssm_silu_ref(z[i]);
        out[i] = x;
        ss += x * x;
    }
    float s = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = out[i] * s * w[i];
}

const gated_norm_kernels gated_norm_kernels_ref = {norm_gate_ref, gate_norm_ref};

void gated_rmsnorm_ref(int64_t n_rows, int64_t n_heads, int64_t d, const float *y, int64_t y_stride, const float *z,
                       int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t h = 0; h < n_heads; h++)
            norm_gate_ref(y + r * y_stride + h * d, z + r * z_stride + h * d, w, eps, out + r * out_stride + h * d, d);
}

void gated_rmsnorm_group_ref(int64_t n_rows, int64_t n_groups, int64_t group_size, const float *y, int64_t y_stride,
                             const float *z, int64_t z_stride, const float *w, float eps, float *out,
                             int64_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t g = 0; g < n_groups; g++) {
            int64_t o = g * group_size;
            gate_norm_ref(y + r * y_stride + o, z + r * z_stride + o, w + o, eps, out + r * out_stride + o,
                          group_size);
        }
}

/* ==== Threaded driver ==== */

static const gated_norm_kernels *kernels_for(isa_level isa) {
    EDDY_ASSERT(isa_available(isa));
    switch (isa) {
#if defined(__x86_64__)
    case ISA_AVX512: return &gated_norm_kernels_avx512;
    case ISA_AVX2: return &gated_norm_kernels_avx2;
#elif defined(__aarch64__)
    case ISA_NEON: return &gated_norm_kernels_neon;
#endif
    default: return &gated_norm_kernels_ref;
    }
}

typedef struct {
    const gated_norm_kernels *kk;
    bool grouped;
    int64_t n_units_per_row, n; /* heads (groups) per row, elements per head (group) */
    int64_t n_rows;
    const float *y, *z, *w;
    int64_t y_stride, z_stride, out_stride;
    float eps;
    float *out;
} norm_job;

static void norm_task(void *ctx, int ith, int nth) {
    const norm_job *j = ctx;
    int64_t b, e;
    pool_split(j->n_rows * j->n_units_per_row, ith, nth, &b, &e);
    for (int64_t u = b; u < e; u++) {
        int64_t r = u / j->n_units_per_row, o = u % j->n_units_per_row * j->n;
        const float *y = j->y + r * j->y_stride + o, *z = j->z + r * j->z_stride + o;
        float *out = j->out + r * j->out_stride + o;
        if (j->grouped)
            j->kk->gate_norm(y, z, j->w + o, j->eps, out, j->n);
        else
            j->kk->norm_gate(y, z, j->w, j->eps, out, j->n);
    }
}

static void run(norm_job *j, threadpool *pool) {
    int64_t units = j->n_rows * j->n_units_per_row;
    int nth = pool_size(pool);
    if ((double)units * (double)j->n < 32768.0) nth = 1;
    if (units < nth) nth = (int)(units > 0 ? units : 1);
    pool_run(pool, norm_task, j, nth);
}

void gated_rmsnorm_isa(isa_level isa, threadpool *pool, int64_t n_rows, int64_t n_heads, int64_t d, const float *y,
                       int64_t y_stride, const float *z, int64_t z_stride, const float *w, float eps, float *out,
                       int64_t out_stride) {
    norm_job j = {kernels_for(isa), false, n_heads, d, n_rows, y, z, w, y_stride, z_stride, out_stride, eps, out};
    run(&j, pool);
}

void gated_rmsnorm_group_isa(isa_level isa, threadpool *pool, int64_t n_rows, int64_t n_groups, int64_t group_size,
                             const float *y, int64_t y_stride, const float *z, int64_t z_stride, const float *w,
                             float eps, float *out, int64_t out_stride) {
    norm_job j = {kernels_for(isa), true, n_groups, group_size, n_rows, y, z, w, y_stride, z_stride, out_stride,
                  eps, out};
    run(&j, pool);
}

void gated_rmsnorm(threadpool *pool, int64_t n_rows, int64_t n_heads, int64_t d, const float *y, int64_t y_stride,
                   const float *z, int64_t z_stride, const float *w, float eps, float *out, int64_t out_stride) {
    gated_rmsnorm_isa(isa_active(), pool, n_rows, n_heads, d, y, y_stride, z, z_stride, w, eps, out, out_stride);
}

void gated_rmsnorm_group(threadpool *pool, int64_t n_rows, int64_t n_groups, int64_t group_size, const float *y,
                         int64_t y_stride, const float *z, int64_t z_stride, const float *w, float eps, float *out,
                         int64_t out_stride) {
    gated_rmsnorm_group_isa(isa_active(), pool, n_rows, n_groups, group_size, y, y_stride, z, z_stride, w, eps,
                            out, out_stride);
}
