/*
 * gdn_neon.c — NEON kernels of the gated delta rule (gdn.h): the vector layer for
 * gdn_simd_body.h, 4 floats per vector, 32 registers: decode panels of 8 vectors
 * (16 accumulators), scan panels of 4, GEMM tiles 4 x 16.
 */
#include <stdbool.h>
#include <string.h>

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
#define V_ADD(a, b) vaddq_f32(a, b)
#define V_EXP(v) vexp_neon(v)
#define V_HSUM(v) vaddvq_f32(v)
#define STEP_NV 8
#define SCAN_NV 4
#define GEMM_NV 4
#define GDN_KERNELS_NAME gdn_kernels_neon

static inline void transpose_tile(const float *src, int64_t lds, float *dst, int64_t ldd) {
    float32x4x2_t t0 = vtrnq_f32(vld1q_f32(src), vld1q_f32(src + lds));
    float32x4x2_t t1 = vtrnq_f32(vld1q_f32(src + 2 * lds), vld1q_f32(src + 3 * lds));
    vst1q_f32(dst, vcombine_f32(vget_low_f32(t0.val[0]), vget_low_f32(t1.val[0])));
    vst1q_f32(dst + ldd, vcombine_f32(vget_low_f32(t0.val[1]), vget_low_f32(t1.val[1])));
    vst1q_f32(dst + 2 * ldd, vcombine_f32(vget_high_f32(t0.val[0]), vget_high_f32(t1.val[0])));
    vst1q_f32(dst + 3 * ldd, vcombine_f32(vget_high_f32(t0.val[1]), vget_high_f32(t1.val[1])));
}

#include "ssm/gdn_simd_body.h"
