/*
 * gdn_neon.c — NEON kernels of the gated delta rule (gdn.h): the vector layer for
 * gdn_simd_body.h, 4 floats per vector, 32 registers: decode panels of 8 vectors
 * (16 accumulators), scan panels of 4, GEMM tiles 4 x 16.
 */
#include "ssm/ssm_kernels.h"
#include "ssm/ssm_simd.h"

#define V float32x4_t
#define VW 4
#define V_ZERO() vdupq_n_f32(0.0f)
#define V_SET1(x) vdupq_n_f32(x)
#define V_LOAD(p) vld1q_f32(p)
#define V_STORE(p, v) vst1q_f32(p, v)
#define V_FMA(a, b, c) vfmaq_f32(c, a, b)
#define V_FNMA(a, b, c) vfmsq_f32(c, a, b)
#define V_MUL(a, b) vmulq_f32(a, b)
#define V_EXP(v) ssm_exp_neon(v)
#define V_HSUM(v) vaddvq_f32(v)
#define STEP_NV 8
#define SCAN_NV 4
#define GEMM_NV 4
#define GDN_KERNELS_NAME gdn_kernels_neon

#include "ssm/gdn_simd_body.h"
