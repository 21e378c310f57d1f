/*
 * gdn_avx512.c — AVX-512 kernels of the gated delta rule (gdn.h): the vector
 * layer for gdn_simd_body.h, 16 floats per vector. Decode panels of 8 vectors
 * (128 columns, 16 accumulators), scan panels of 4, GEMM tiles 4 x 64.
 */
#include <stdbool.h>
#include <string.h>

#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

#define V __m512
#define VW 16
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_EXP(v) vexp512(v)
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define STEP_NV 8
#define SCAN_NV 4
#define GEMM_NV 4
#define GDN_KERNELS_NAME gdn_kernels_avx512

static inline void transpose_tile(const float *src, int64_t lds, float *dst, int64_t ldd) {
    /* the loops unroll so that r[] and t[] stay in registers */
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 8)
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
            t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
        }
#pragma GCC unroll 16
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ldd, r[i]);
}

#include "ssm/gdn_simd_body.h"
