/*
 * vec.c — the scalar reference vector kernels and the run-time dispatch.
 */
#include "vec.h"

#include "base/cpu.h"

/* ==== Reference ==== */

float vec_dot_f32_ref(const float *x, const float *y, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
    return sum;
}

void vec_axpy_f32_ref(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* ==== Dispatch ==== */

typedef enum { VARIANT_REF, VARIANT_AVX2, VARIANT_AVX512, VARIANT_NEON } variant;

static variant pick(void) {
    const cpu_caps *c = cpu_features();
#if defined(__x86_64__)
    if (cpu_has_avx512(c) && c->fma) return VARIANT_AVX512;
    if (cpu_has_avx2(c)) return VARIANT_AVX2;
#elif defined(__aarch64__)
    if (c->neon) return VARIANT_NEON;
#endif
    (void)c;
    return VARIANT_REF;
}

const char *vec_variant(void) {
    static const char *names[] = {"ref", "avx2", "avx512", "neon"};
    return names[pick()];
}

float vec_dot_f32(const float *x, const float *y, int64_t n) {
    switch (pick()) {
#if defined(__x86_64__)
    case VARIANT_AVX512: return vec_dot_f32_avx512(x, y, n);
    case VARIANT_AVX2: return vec_dot_f32_avx2(x, y, n);
#elif defined(__aarch64__)
    case VARIANT_NEON: return vec_dot_f32_neon(x, y, n);
#endif
    default: return vec_dot_f32_ref(x, y, n);
    }
}

void vec_axpy_f32(float *y, float a, const float *x, int64_t n) {
    switch (pick()) {
#if defined(__x86_64__)
    case VARIANT_AVX512: vec_axpy_f32_avx512(y, a, x, n); return;
    case VARIANT_AVX2: vec_axpy_f32_avx2(y, a, x, n); return;
#elif defined(__aarch64__)
    case VARIANT_NEON: vec_axpy_f32_neon(y, a, x, n); return;
#endif
    default: vec_axpy_f32_ref(y, a, x, n); return;
    }
}
