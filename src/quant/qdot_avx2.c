/*
 * qdot_avx2.c — AVX2 dot kernels (placeholder).
 */
#include "qdot.h"

qdot_fn qdot_kernel_avx2(qtype t) {
    (void)t;
    return NULL;
}
void quantize_row_q8_0_avx2(const float *x, void *dst, int64_t n) { quantize_row_q8_0_ref(x, dst, n); }
void quantize_row_q8_K_avx2(const float *x, void *dst, int64_t n) { quantize_row_q8_K_ref(x, dst, n); }
