/*
 * vexp.h — internal: the vector exp shared by the ISA files (*_avx2.c, *_avx512.c,
 * *_neon.c) of src/ops and src/ssm; each section compiles only under its ISA's flags.
 *
 * Cephes expf scheme: n = round(x log2 e), r = x - n ln 2 (two-part ln 2), a degree-6
 * polynomial on |r| <= ln2/2, times 2^n. Relative error about 2 ulp over the normal
 * range. NaN propagates; inputs below -87.3 (and -inf) give exactly 0 — never a
 * denormal, whose production costs a microcode assist of a hundred-odd cycles per
 * lane on x86 — and inputs above 88.7 give about 3.4e38 rather than inf.
 */
#ifndef EDDY_OPS_VEXP_H
#define EDDY_OPS_VEXP_H

#define VEXP_HI 88.7f
#define VEXP_LO (-87.3f)
#define VEXP_LOG2E 1.44269504088896341f
#define VEXP_LN2_HI 0.693359375f
#define VEXP_LN2_LO (-2.12194440e-4f)
#define VEXP_P0 1.9875691500e-4f
#define VEXP_P1 1.3981999507e-3f
#define VEXP_P2 8.3334519073e-3f
#define VEXP_P3 4.1665795894e-2f
#define VEXP_P4 1.6666665459e-1f
#define VEXP_P5 5.0000001201e-1f

#if defined(__AVX512F__)
#include <immintrin.h>

static inline __m512 vexp512(__m512 x) {
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(VEXP_LO), _CMP_NLT_UQ); /* x >= lo or NaN */
    /* max/min with the constant first keep a NaN x */
    x = _mm512_min_ps(_mm512_set1_ps(VEXP_HI), _mm512_max_ps(_mm512_set1_ps(VEXP_LO), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(VEXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VEXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(VEXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(VEXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps(keep, p, n);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

static inline __m256 vexp256(__m256 x) {
    __m256 lo = _mm256_set1_ps(VEXP_LO);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(VEXP_HI), _mm256_max_ps(lo, x));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VEXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VEXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(VEXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(VEXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^n with n in [-126, 128]: split as 2^(n/2) twice so n = 128 does not overflow the exponent field */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i h = _mm256_srai_epi32(ni, 1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_andnot_ps(under, p);
}
#endif

#if defined(__ARM_NEON)
#include <arm_neon.h>

static inline float32x4_t vexp_neon(float32x4_t x) {
    float32x4_t lo = vdupq_n_f32(VEXP_LO);
    uint32x4_t under = vcltq_f32(x, lo);
    uint32x4_t isnan = vmvnq_u32(vceqq_f32(x, x));
    x = vminq_f32(vdupq_n_f32(VEXP_HI), vmaxq_f32(lo, x));
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(VEXP_LOG2E)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(VEXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(VEXP_LN2_LO));
    float32x4_t p = vdupq_n_f32(VEXP_P0);
    p = vfmaq_f32(vdupq_n_f32(VEXP_P1), p, r);
    p = vfmaq_f32(vdupq_n_f32(VEXP_P2), p, r);
    p = vfmaq_f32(vdupq_n_f32(VEXP_P3), p, r);
    p = vfmaq_f32(vdupq_n_f32(VEXP_P4), p, r);
    p = vfmaq_f32(vdupq_n_f32(VEXP_P5), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t ni = vcvtq_s32_f32(n);
    int32x4_t h = vshrq_n_s32(ni, 1);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(h, vdupq_n_s32(127)), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(ni, h), vdupq_n_s32(127)), 23));
    p = vmulq_f32(vmulq_f32(p, s1), s2);
    p = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(p), under));
    /* NEON min/max already return NaN for a NaN input; keep it through the integer steps */
    return vbslq_f32(isnan, vdupq_n_f32(__builtin_nanf("")), p);
}
#endif

#endif
