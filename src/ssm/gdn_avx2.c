/*
 * gdn_avx2.c — AVX2 + FMA kernels of the gated delta rule (gdn.h): the vector
 * layer for gdn_simd_body.h, 8 floats per vector, 16 registers: decode panels of
 * 4 vectors (8 accumulators), scan panels of 4, GEMM tiles 4 x 16.
 */
#include <stdbool.h>
#include <string.h>

#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

#define V __m256
#define VW 8
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps(p, v)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_EXP(v) vexp256(v)
#define V_HSUM(v) ssm_hsum256(v)
#define STEP_NV 4
#define SCAN_NV 4
#define GEMM_NV 2
#define GDN_KERNELS_NAME gdn_kernels_avx2

static inline void transpose_tile(const float *src, int64_t lds, float *dst, int64_t ldd) {
    /* the loops unroll so that r[] and t[] stay in registers */
    __m256 r[8], t[8], u[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * lds);
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * ldd, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * ldd, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
    }
}

#include "ssm/gdn_simd_body.h"
