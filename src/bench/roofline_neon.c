/*
 * roofline_neon.c — the FMA-peak loop for NEON: 10 independent 4-wide chains.
 */
#include <arm_neon.h>

#include "bench.h"

double bench_fma_loop_neon(int64_t iters, float *sink) {
    float32x4_t m = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
    /* distinct start values: chains that start equal compute the same values, and the
     * compiler merges them into one (which then runs at the FMA latency, not its throughput) */
    float32x4_t a0 = vdupq_n_f32(1.0f), a1 = vdupq_n_f32(1.001f), a2 = vdupq_n_f32(1.002f), a3 = vdupq_n_f32(1.003f), a4 = vdupq_n_f32(1.004f);
    float32x4_t a5 = vdupq_n_f32(1.005f), a6 = vdupq_n_f32(1.006f), a7 = vdupq_n_f32(1.007f), a8 = vdupq_n_f32(1.008f), a9 = vdupq_n_f32(1.009f);
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
