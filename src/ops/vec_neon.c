/*
 * vec_neon.c — NEON variants of vec.h (aarch64 only).
 */
#include <arm_neon.h>

#include "vec.h"
#include "vexp.h"

float vec_dot_f32_neon(const float *x, const float *y, int64_t n) {
    float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = vfmaq_f32(acc0, vld1q_f32(x + i), vld1q_f32(y + i));
        acc1 = vfmaq_f32(acc1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        acc2 = vfmaq_f32(acc2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        acc3 = vfmaq_f32(acc3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) acc0 = vfmaq_f32(acc0, vld1q_f32(x + i), vld1q_f32(y + i));
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < n; i++) sum += x[i] * y[i];
    return sum;
}

void vec_axpy_f32_neon(float *y, float a, const float *x, int64_t n) {
    float32x4_t va = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* each vector's exps widened to double and summed there */
double vec_sum_exp_f32_neon(const float *x, int64_t n, float m) {
    const float32x4_t vm = vdupq_n_f32(m);
    float64x2_t lo = vdupq_n_f64(0), hi = lo;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e = vexp_neon(vsubq_f32(vld1q_f32(x + i), vm));
        lo = vaddq_f64(lo, vcvt_f64_f32(vget_low_f32(e)));
        hi = vaddq_f64(hi, vcvt_high_f64_f32(e));
    }
    return vaddvq_f64(vaddq_f64(lo, hi)) + vec_sum_exp_f32_ref(x + i, n - i, m);
}

void vec_swiglu_f32_neon(float *out, const float *gate, const float *up, int64_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t g = vld1q_f32(gate + i), u = vld1q_f32(up + i);
        const float32x4_t e = vexp_neon(vnegq_f32(g));
        vst1q_f32(out + i, vmulq_f32(vdivq_f32(g, vaddq_f32(one, e)), u));
    }
    vec_swiglu_f32_ref(out + i, gate + i, up + i, n - i);
}
