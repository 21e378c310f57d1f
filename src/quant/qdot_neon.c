/*
 * qdot_neon.c — NEON dot kernels (placeholder).
 */
#include "qdot.h"

qdot_fn qdot_kernel_neon(qtype t) {
    (void)t;
    return NULL;
}
qdot_fn qdot_kernel_neon_dotprod(qtype t) {
    (void)t;
    return NULL;
}
void quantize_row_q8_0_neon(const float *x, void *dst, int64_t n) { quantize_row_q8_0_ref(x, dst, n); }
void quantize_row_q8_K_neon(const float *x, void *dst, int64_t n) { quantize_row_q8_K_ref(x, dst, n); }
