/*
 * ssm_simd.h — internal: SiLU, sums and masks for the ISA files of src/ssm/.
 *
 * Included only by *_avx2.c, *_avx512.c and *_neon.c; each section compiles only
 * under its ISA's flags. The vector exp (vexp512 / vexp256 / vexp_neon, about 2 ulp,
 * 0 below -87.3, never a denormal) lives in ops/vexp.h.
 * silu(x) = x / (1 + exp(-x)) with an exact division.
 */
#ifndef EDDY_SSM_SIMD_H
#define EDDY_SSM_SIMD_H

#include "ops/vexp.h"

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __m512 ssm_silu512(__m512 x) {
    __m512 e = vexp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static inline __mmask16 ssm_mask16(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

static inline __m256 ssm_silu256(__m256 x) {
    __m256 e = vexp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static inline float ssm_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* lanes [0, n) set, n in 0..8 */
static inline __m256i ssm_mask8(int64_t n) {
    static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(m + 8 - (n > 8 ? 8 : n)));
}
#endif

#if defined(__ARM_NEON)
#include <arm_neon.h>

static inline float32x4_t ssm_silu_neon(float32x4_t x) {
    float32x4_t e = vexp_neon(vnegq_f32(x));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e));
}
#endif

#endif
