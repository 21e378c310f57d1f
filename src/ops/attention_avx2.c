/*
 * attention_avx2.c — the AVX2 + FMA + F16C attention unit kernel (attention.h): the
 * vector layer for attention_simd_body.h, 8 floats per vector, 16 registers: a key
 * block is two vectors of scores per row, 4 rows per score pass; value passes keep
 * 4 rows x 2 vectors of outputs. Called only when the CPU has AVX2, FMA and F16C.
 */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/vexp.h"

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float hmax256(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define V __m256
#define VW 8
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_LOAD_H(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MAX(a, b) _mm256_max_ps(a, b)
#define V_EXP(v) vexp256(v)
#define V_HSUM(v) hsum256(v)
#define V_HMAX(v) hmax256(v)
#define SC_RB 4
#define PV_RB 4
#define PV_NV 2
#define ATTN_KERNEL_NAME attn_kernel_avx2
#define ATTN_KERNEL_ISA "avx2"

/* 8 x 8 transpose: unpack pairs of rows, 4 x 4 blocks within each 128-bit lane,
 * then swap lanes (after the second step r[4i + j] holds, in lane k, column 4k + j
 * of rows 4i..4i+3). */
static inline void transpose_store(__m256 r[8], float *dst, int64_t ldd) {
    __m256 t[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));
        _mm256_storeu_ps(dst + (4 + j) * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));
    }
}

#include "ops/attention_simd_body.h"
