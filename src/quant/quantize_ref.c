/*
 * quantize_ref.c — scalar reference quantization of activation rows.
 *
 * Owns: float32 -> F16 / BF16 / Q8_0 / Q8_K for the right-hand side of the dot
 * products (quant_dot_type). Does not own: weight quantizers (eddy reads weights
 * already quantized), layouts (quant.h).
 *
 * Q8_0 follows gguf.quants (and so ggml's reference) operation for operation in
 * float32, so a row quantizes to the same bytes there and here. Q8_K has no
 * Python reference; it is defined here (see quant.h) and tested by its properties.
 * Quants are clamped to [-127, 127] and NaN products become 0 before any
 * float->int conversion, so inf/NaN/denormal inputs are never undefined behaviour
 * (finite inputs never reach the clamp).
 */
#include "quant/quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "base/error.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ==== Rounding ==== */

/* round-half-away-from-zero(v) as int8 in [-127, 127]; NaN -> 0. */
static int8_t quant_round_f(float v) {
    if (!(v == v)) return 0;
    if (v >= 127.0f) return 127;
    if (v <= -127.0f) return -127;
    return (int8_t)roundf(v);
}

static int8_t quant_round_d(double v) {
    if (!(v == v)) return 0;
    if (v >= 127.0) return 127;
    if (v <= -127.0) return -127;
    return (int8_t)round(v);
}

/* max |x[i]|, ignoring NaN. */
static float quant_amax(const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a;
    }
    return amax;
}

/* ==== Q8_0 ==== */

void quantize_row_q8_0_ref(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK8_0 == 0);
    EDDY_ASSERT((uintptr_t)dst % quant_row_align(QTYPE_Q8_0) == 0);
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        const float amax = quant_amax(x, QK8_0);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) {
            const float v = x[j] * id;
            y[b].qs[j] = quant_round_f(v);
        }
    }
}

/* ==== Q8_K ==== */

void quantize_row_q8_K_ref(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK_K == 0);
    EDDY_ASSERT((uintptr_t)dst % quant_row_align(QTYPE_Q8_K) == 0);
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        const float amax = quant_amax(x, QK_K);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* In double, 127 / amax is finite and exact enough for every float amax
         * (float32 would overflow for amax < ~3.7e-37). */
        const double id = 127.0 / (double)amax;
        float d = amax / 127.0f;
        if (d * 127.0f > FLT_MAX) d = nextafterf(d, 0.0f); /* amax near FLT_MAX: keep d*q finite */
        y[b].d = d;
        for (int j = 0; j < QK_K; j++) y[b].qs[j] = quant_round_d((double)x[j] * id);
        for (int i = 0; i < QK_K / 16; i++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[b].qs[16 * i + j];
            y[b].bsums[i] = (int16_t)sum; /* |sum| <= 16 * 127 */
        }
    }
}

/* ==== Dispatch ==== */

void quantize_row_ref(qtype type, const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0);
    switch (type) {
    case QTYPE_F32:
        EDDY_ASSERT((uintptr_t)dst % 4 == 0);
        memcpy(dst, x, (size_t)n * sizeof(float));
        break;
    case QTYPE_F16: {
        EDDY_ASSERT((uintptr_t)dst % 2 == 0);
        uint16_t *y = dst;
        for (int64_t i = 0; i < n; i++) y[i] = f32_to_fp16(x[i]);
        break;
    }
    case QTYPE_BF16: {
        EDDY_ASSERT((uintptr_t)dst % 2 == 0);
        uint16_t *y = dst;
        for (int64_t i = 0; i < n; i++) y[i] = f32_to_bf16(x[i]);
        break;
    }
    case QTYPE_Q8_0: quantize_row_q8_0_ref(x, dst, n); break;
    case QTYPE_Q8_K: quantize_row_q8_K_ref(x, dst, n); break;
    default: EDDY_ASSERT(!"quantize_row_ref: not an activation type");
    }
}
