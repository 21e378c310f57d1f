/*
 * roofline_neon.c — the FMA-peak loop for NEON: 10 independent 4-wide chains.
 */
#include <arm_neon.h>

#include "bench.h"

double bench_fma_loop_neon(int64_t iters, float *sink) {
    float32x4_t m = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
    float32x4_t a0 = vdupq_n_f32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
    for (int64_t i = 0; i < iters; i++) {
        a0 = vfmaq_f32(c, a0, m), a1 = vfmaq_f32(c, a1, m), a2 = vfmaq_f32(c, a2, m);
        a3 = vfmaq_f32(c, a3, m), a4 = vfmaq_f32(c, a4, m), a5 = vfmaq_f32(c, a5, m);
        a6 = vfmaq_f32(c, a6, m), a7 = vfmaq_f32(c, a7, m), a8 = vfmaq_f32(c, a8, m);
        a9 = vfmaq_f32(c, a9, m);
    }
    float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)),
                              vaddq_f32(vaddq_f32(a4, a5), vaddq_f32(vaddq_f32(a6, a7), vaddq_f32(a8, a9))));
    *sink += vaddvq_f32(s);
    return (double)iters * 10 * 4 * 2;
}
