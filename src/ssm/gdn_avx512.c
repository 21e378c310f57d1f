/*
 * gdn_avx512.c — AVX-512 kernels of the gated delta rule (gdn.h): the vector
 * layer for gdn_simd_body.h, 16 floats per vector. Decode panels of 8 vectors
 * (128 columns, 16 accumulators), scan panels of 4, GEMM tiles 4 x 64.
 */
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
#define V_EXP(v) ssm_exp512(v)
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define STEP_NV 8
#define SCAN_NV 4
#define GEMM_NV 4
#define GDN_KERNELS_NAME gdn_kernels_avx512

#include "ssm/gdn_simd_body.h"
