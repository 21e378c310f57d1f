/*
 * gated_norm_avx2.c — AVX2 + FMA kernels of gated RMSNorm (ssm.h), masked tails.
 */
#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

static inline __m256 load8(__m256i m, const float *p) { return _mm256_maskload_ps(p, m); }

static void norm_gate_avx2(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v = load8(ssm_mask8(n - i), y + i);
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    __m256 s = _mm256_set1_ps(1.0f / sqrtf(ssm_hsum256(acc) / (float)n + eps));
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = ssm_mask8(n - i);
        __m256 v = _mm256_mul_ps(_mm256_mul_ps(load8(m, y + i), s), load8(m, w + i));
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(v, ssm_silu256(load8(m, z + i))));
    }
}

static void gate_norm_avx2(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = ssm_mask8(n - i);
        __m256 x = _mm256_mul_ps(load8(m, y + i), ssm_silu256(load8(m, z + i)));
        _mm256_maskstore_ps(out + i, m, x);
        acc = _mm256_fmadd_ps(x, x, acc);
    }
    __m256 s = _mm256_set1_ps(1.0f / sqrtf(ssm_hsum256(acc) / (float)n + eps));
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = ssm_mask8(n - i);
        __m256 x = _mm256_mul_ps(load8(m, out + i), s);
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(x, load8(m, w + i)));
    }
}

const gated_norm_kernels gated_norm_kernels_avx2 = {norm_gate_avx2, gate_norm_avx2};
