/*
 * attention_neon.c — the NEON attention unit kernel (attention.h): the vector
 * layer for attention_simd_body.h, 4 floats per vector, 32 registers: a key block
 * is four vectors of scores per row, 4 rows per score pass; value passes keep 4 rows
 * x 4 vectors of outputs. Halves convert with the base fp16 storage instructions.
 */
#include <arm_neon.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/vexp.h"

#define V float32x4_t
#define VW 4
#define V_ZERO() vdupq_n_f32(0.0f)
#define V_SET1(x) vdupq_n_f32(x)
#define V_LOAD(p) vld1q_f32(p)
#define V_STORE(p, v) vst1q_f32(p, v)
#define V_LOAD_H(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))
#define V_FMA(a, b, c) vfmaq_f32(c, a, b)
#define V_MUL(a, b) vmulq_f32(a, b)
#define V_ADD(a, b) vaddq_f32(a, b)
#define V_SUB(a, b) vsubq_f32(a, b)
#define V_MAX(a, b) vmaxq_f32(a, b)
#define V_EXP(v) vexp_neon(v)
#define V_HSUM(v) vaddvq_f32(v)
#define V_HMAX(v) vmaxvq_f32(v)
#define SC_RB 4
#define PV_RB 4
#define PV_NV 4
#define ATTN_KERNEL_NAME attn_kernel_neon
#define ATTN_KERNEL_ISA "neon"

static inline void transpose_store(float32x4_t r[4], float *dst, int64_t ldd) {
    float32x4x2_t t0 = vtrnq_f32(r[0], r[1]), t1 = vtrnq_f32(r[2], r[3]);
    vst1q_f32(dst, vcombine_f32(vget_low_f32(t0.val[0]), vget_low_f32(t1.val[0])));
    vst1q_f32(dst + ldd, vcombine_f32(vget_low_f32(t0.val[1]), vget_low_f32(t1.val[1])));
    vst1q_f32(dst + 2 * ldd, vcombine_f32(vget_high_f32(t0.val[0]), vget_high_f32(t1.val[0])));
    vst1q_f32(dst + 3 * ldd, vcombine_f32(vget_high_f32(t0.val[1]), vget_high_f32(t1.val[1])));
}

#include "ops/attention_simd_body.h"
