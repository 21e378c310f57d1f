/*
 * gated_norm_avx512.c — AVX-512 kernels of gated RMSNorm (ssm.h), masked tails.
 */
#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

static void norm_gate_avx512(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m512 v = _mm512_maskz_loadu_ps(ssm_mask16(n - i), y + i);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    __m512 s = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)n + eps));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = ssm_mask16(n - i);
        __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), s), _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(v, ssm_silu512(_mm512_maskz_loadu_ps(m, z + i))));
    }
}

static void gate_norm_avx512(const float *y, const float *z, const float *w, float eps, float *out, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = ssm_mask16(n - i);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), ssm_silu512(_mm512_maskz_loadu_ps(m, z + i)));
        _mm512_mask_storeu_ps(out + i, m, x);
        acc = _mm512_fmadd_ps(x, x, acc);
    }
    __m512 s = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(acc) / (float)n + eps));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = ssm_mask16(n - i);
        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, out + i), s);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(x, _mm512_maskz_loadu_ps(m, w + i)));
    }
}

const gated_norm_kernels gated_norm_kernels_avx512 = {norm_gate_avx512, gate_norm_avx512};
