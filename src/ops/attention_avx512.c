/*
 * attention_avx512.c — the AVX-512 attention unit kernel (attention.h): the vector
 * layer for attention_simd_body.h, 16 floats per vector, 32 registers: a key block
 * is one vector of scores per row, 8 rows per score pass; value passes keep 4 rows
 * x 4 vectors of outputs. Compiled with -mavx512f ... -mf16c; called only when the
 * CPU has AVX-512 F/BW/VL/DQ.
 */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/vexp.h"

#define V __m512
#define VW 16
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps(p, v)
#define V_LOAD_H(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_EXP(v) vexp512(v)
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define V_HMAX(v) _mm512_reduce_max_ps(v)
#define SC_RB 8
#define PV_RB 4
#define PV_NV 4
#define ATTN_KERNEL_NAME attn_kernel_avx512
#define ATTN_KERNEL_ISA "avx512"

/* 16 x 16 transpose: pairs of rows interleaved (unpack), then 4 x 4 blocks within
 * each 128-bit lane (shuffle_ps), then the lanes themselves (shuffle_f32x4 twice).
 * After the second step r[4i + j] holds, in lane k, column 4k + j of rows 4i..4i+3. */
static inline void transpose_store(__m512 r[16], float *dst, int64_t ldd) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), b = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
        __m512 c = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88), d = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
        _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(a, c, 0x88));
        _mm512_storeu_ps(dst + (8 + j) * ldd, _mm512_shuffle_f32x4(a, c, 0xdd));
        _mm512_storeu_ps(dst + (4 + j) * ldd, _mm512_shuffle_f32x4(b, d, 0x88));
        _mm512_storeu_ps(dst + (12 + j) * ldd, _mm512_shuffle_f32x4(b, d, 0xdd));
    }
}

#include "ops/attention_simd_body.h"
