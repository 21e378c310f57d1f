/*
 * conv1d_neon.c — NEON block kernels of conv1d (ssm.h): 4 channels per vector.
 * A tail of fewer than 4 channels goes through the same vector code on copies
 * padded with zeros, so the tile and scan kernels agree bit for bit everywhere.
 */
#include <string.h>

#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

/* n (1..4) floats from p, zero-padded */
static inline float32x4_t load4(const float *p, int64_t n) {
    if (n >= 4) return vld1q_f32(p);
    float t[4] = {0, 0, 0, 0};
    memcpy(t, p, (size_t)n * sizeof(float));
    return vld1q_f32(t);
}

static inline void store4(float *p, float32x4_t v, int64_t n) {
    if (n >= 4) {
        vst1q_f32(p, v);
        return;
    }
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, (size_t)n * sizeof(float));
}

static void tile_neon(const conv1d_params *p, int64_t c0, int64_t c1, int64_t t0, int64_t t1, const float *x,
                      int64_t x_stride, const float *state, float *y, int64_t y_stride) {
    const int64_t C = p->conv_dim;
    const int K = p->K;
    for (int64_t t = t0; t < t1; t++) {
        const float *src[CONV1D_MAX_K];
        for (int j = 0; j < K; j++) {
            int64_t tau = t - (K - 1) + j;
            src[j] = tau >= 0 ? x + tau * x_stride : state + (K - 1 + tau) * C;
        }
        float *yt = y + t * y_stride;
        for (int64_t c = c0; c < c1; c += 4) {
            int64_t n = c1 - c;
            float32x4_t acc = p->bias ? load4(p->bias + c, n) : vdupq_n_f32(0.0f);
            for (int j = 0; j < K; j++) acc = vfmaq_f32(acc, load4(p->w + j * C + c, n), load4(src[j] + c, n));
            store4(yt + c, ssm_silu_neon(acc), n);
        }
    }
}

static void scan_neon(const conv1d_params *p, int64_t c0, int64_t c1, int64_t T, const float *x, int64_t x_stride,
                      const float *state, float *y, int64_t y_stride) {
    const int64_t C = p->conv_dim;
    const int K = p->K;
    for (int64_t c = c0; c < c1; c += 4) {
        int64_t n = c1 - c;
        float32x4_t w[CONV1D_MAX_K], win[CONV1D_MAX_K];
        float32x4_t b = p->bias ? load4(p->bias + c, n) : vdupq_n_f32(0.0f);
        for (int j = 0; j < K; j++) w[j] = load4(p->w + j * C + c, n);
        for (int j = 0; j < K - 1; j++) win[j] = load4(state + j * C + c, n);
        for (int64_t t = 0; t < T; t++) {
            win[K - 1] = load4(x + t * x_stride + c, n);
            float32x4_t acc = b;
            for (int j = 0; j < K; j++) acc = vfmaq_f32(acc, w[j], win[j]);
            store4(y + t * y_stride + c, ssm_silu_neon(acc), n);
            for (int j = 0; j < K - 1; j++) win[j] = win[j + 1];
        }
    }
}

static void l2norm_neon(float *y, int64_t n, float eps) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < n; i += 4) {
        float32x4_t v = load4(y + i, n - i);
        acc = vfmaq_f32(acc, v, v);
    }
    float s = 1.0f / sqrtf(vaddvq_f32(acc) + eps);
    for (int64_t i = 0; i < n; i += 4) store4(y + i, vmulq_n_f32(load4(y + i, n - i), s), n - i);
}

const conv1d_kernels conv1d_kernels_neon = {tile_neon, scan_neon, l2norm_neon};
