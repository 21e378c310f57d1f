/*
 * gdn_avx2.c — AVX2 + FMA kernels of the gated delta rule (gdn.h): the vector
 * layer for gdn_simd_body.h, 8 floats per vector, 16 registers: decode panels of
 * 4 vectors (8 accumulators), scan panels of 4, GEMM tiles 4 x 16.
 */
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
#define V_EXP(v) ssm_exp256(v)
#define V_HSUM(v) ssm_hsum256(v)
#define STEP_NV 4
#define SCAN_NV 4
#define GEMM_NV 2
#define GDN_KERNELS_NAME gdn_kernels_avx2

#include "ssm/gdn_simd_body.h"
