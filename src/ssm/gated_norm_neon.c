/*
 * gated_norm_neon.c — NEON kernels of gated RMSNorm (ssm.h); scalar tails.
 */
#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

static void norm_gate_neon(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(y + i);
        acc = vfmaq_f32(acc, v, v);
    }
    float ss = vaddvq_f32(acc);
    for (; i < n; i++) ss += y[i] * y[i];
    float s = 1.0f / sqrtf(ss / (float)n + eps);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vmulq_f32(vmulq_n_f32(vld1q_f32(y + i), s), vld1q_f32(w + i));
        vst1q_f32(out + i, vmulq_f32(v, ssm_silu_neon(vld1q_f32(z + i))));
    }
    for (; i < n; i++) out[i] = y[i] * s * w[i] * ssm_silu_ref(z[i]);
}

static void gate_norm_neon(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vmulq_f32(vld1q_f32(y + i), ssm_silu_neon(vld1q_f32(z + i)));
        vst1q_f32(out + i, x);
        acc = vfmaq_f32(acc, x, x);
    }
    float ss = vaddvq_f32(acc);
    for (; i < n; i++) {
        float x = y[i] * ssm_silu_ref(z[i]);
        out[i] = x;
        ss += x * x;
    }
    float s = 1.0f / sqrtf(ss / (float)n + eps);
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vmulq_n_f32(vld1q_f32(out + i), s), vld1q_f32(w + i)));
    for (; i < n; i++) out[i] = out[i] * s * w[i];
}

const gated_norm_kernels gated_norm_kernels_neon = {norm_gate_neon, gate_norm_neon};
