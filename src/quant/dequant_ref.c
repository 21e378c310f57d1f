/*
 * dequant_ref.c — scalar reference dequantization of every supported block format.
 *
 * Owns: dequantize_row_ref and the IQ4 level table. Does not own: layouts (quant.h),
 * the dot products (dot_ref.c) or quantization (quantize_ref.c).
 *
 * Bit-exactness. The results equal gguf.quants.dequantize (the `gguf` Python
 * package, numpy float32) bit for bit, so every float32 operation here is done in
 * the same order as there, one rounding per operation:
 *   - fp16 -> f32 is exact;
 *   - a sub-block scale is formed first (dl = d * sc, ml = dmin * m), then applied
 *     (y = dl * q - ml); legacy formats compute d * q, then + m.
 * Each product and sum is its own statement so that no compiler fuses them into an
 * FMA (clang contracts within one expression; the pragma below switches that off,
 * gcc in ISO C mode does not contract).
 */
#include "quant/quant.h"

#include <string.h>

#include "base/error.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

/* ==== Plain floats ==== */

static void dequant_f16(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = fp16_to_f32(x[i]);
}

static void dequant_bf16(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(x[i]);
}

/* ==== Legacy 32-element blocks ==== */

static void dequant_q4_0(const block_q4_0 *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK4_0) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = d * (float)((x[b].qs[j] & 15) - 8);
            y[j + QK4_0 / 2] = d * (float)((x[b].qs[j] >> 4) - 8);
        }
    }
}

static void dequant_q4_1(const block_q4_1 *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK4_1) {
        const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            float t0 = d * (float)(x[b].qs[j] & 15);
            float t1 = d * (float)(x[b].qs[j] >> 4);
            y[j] = t0 + m;
            y[j + QK4_1 / 2] = t1 + m;
        }
    }
}

static uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void dequant_q5_0(const block_q5_0 *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK5_0) {
        const float d = fp16_to_f32(x[b].d);
        const uint32_t qh = load_u32le(x[b].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (x[b].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int q1 = (x[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = d * (float)(q0 - 16);
            y[j + QK5_0 / 2] = d * (float)(q1 - 16);
        }
    }
}

static void dequant_q5_1(const block_q5_1 *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK5_1) {
        const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
        const uint32_t qh = load_u32le(x[b].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (x[b].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int q1 = (x[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            float t0 = d * (float)q0;
            float t1 = d * (float)q1;
            y[j] = t0 + m;
            y[j + QK5_1 / 2] = t1 + m;
        }
    }
}

static void dequant_q8_0(const block_q8_0 *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK8_0) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QK8_0; j++) y[j] = (float)x[b].qs[j] * d;
    }
}

static void dequant_iq4_nl(const block_iq4_nl *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK4_NL) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)kvalues_iq4nl[x[b].qs[j] & 15];
            y[j + QK4_NL / 2] = d * (float)kvalues_iq4nl[x[b].qs[j] >> 4];
        }
    }
}

/* ==== K-quants ==== */

static void dequant_q2_K(const block_q2_K *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128, s = (e / 32) % 4, l = e % 32, j = e / 16;
            const float dl = d * (float)(x[b].scales[j] & 15);
            const float ml = dmin * (float)(x[b].scales[j] >> 4);
            const int q = (x[b].qs[32 * h + l] >> (2 * s)) & 3;
            const float t = dl * (float)q;
            y[e] = t - ml;
        }
    }
}

/* The 16 6-bit Q3_K sub-block scales, offset to -32..31. */
static void q3_K_scales(const uint8_t *s, int sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = (j < 8 ? s[j] : s[j - 8] >> 4) & 15;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (lo | hi << 4) - 32;
    }
}

static void dequant_q3_K(const block_q3_K *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        const float d = fp16_to_f32(x[b].d);
        int sc[16];
        q3_K_scales(x[b].scales, sc);
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128, s = (e / 32) % 4, l = e % 32;
            const int lo = (x[b].qs[32 * h + l] >> (2 * s)) & 3;
            const int hbit = (x[b].hmask[l] >> (e / 32)) & 1;
            const int q = lo - (hbit ? 0 : 4);
            const float dl = d * (float)sc[e / 16];
            y[e] = dl * (float)q;
        }
    }
}

static void dequant_q4_K(const block_q4_K *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            quant_get_scale_min_k4(x[b].scales, j, &sc, &m);
            const float dl = d * (float)sc;
            const float ml = dmin * (float)m;
            const uint8_t *q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                const float t = dl * (float)((q[l] >> shift) & 15);
                y[32 * j + l] = t - ml;
            }
        }
    }
}

static void dequant_q5_K(const block_q5_K *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            quant_get_scale_min_k4(x[b].scales, j, &sc, &m);
            const float dl = d * (float)sc;
            const float ml = dmin * (float)m;
            const uint8_t *q = x[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            for (int l = 0; l < 32; l++) {
                const int v = ((q[l] >> shift) & 15) | (((x[b].qh[l] >> j) & 1) << 4);
                const float t = dl * (float)v;
                y[32 * j + l] = t - ml;
            }
        }
    }
}

static void dequant_q6_K(const block_q6_K *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        const float d = fp16_to_f32(x[b].d);
        for (int e = 0; e < QK_K; e++) {
            const int h = e / 128, r = e % 128;
            const int lo = (x[b].ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
            const int hi = (x[b].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
            const float dl = d * (float)x[b].scales[e / 16];
            y[e] = dl * (float)((lo | hi << 4) - 32);
        }
    }
}

static void dequant_iq4_xs(const block_iq4_xs *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K) {
        const float d = fp16_to_f32(x[b].d);
        for (int j = 0; j < QK_K / 32; j++) {
            const int ls = ((x[b].scales_l[j / 2] >> (4 * (j % 2))) & 15) |
                           (((x[b].scales_h >> (2 * j)) & 3) << 4);
            const float dl = d * (float)(ls - 32);
            const uint8_t *q = x[b].qs + 16 * j;
            for (int l = 0; l < 16; l++) {
                y[32 * j + l] = dl * (float)kvalues_iq4nl[q[l] & 15];
                y[32 * j + l + 16] = dl * (float)kvalues_iq4nl[q[l] >> 4];
            }
        }
    }
}

static void dequant_q8_K(const block_q8_K *x, float *y, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = x[b].d * (float)x[b].qs[j];
}

/* ==== Dispatch ==== */

void dequantize_row_ref(qtype type, const void *src, float *dst, int64_t n) {
    const qtype_traits *t = qtype_info((uint32_t)type);
    EDDY_ASSERT(t && (t->supported || type == QTYPE_Q8_K));
    EDDY_ASSERT(n >= 0 && n % t->block_size == 0);
    EDDY_ASSERT((uintptr_t)src % quant_row_align(type) == 0);
    const int64_t nb = n / t->block_size;
    switch (type) {
    case QTYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    case QTYPE_F16: dequant_f16(src, dst, n); break;
    case QTYPE_BF16: dequant_bf16(src, dst, n); break;
    case QTYPE_Q4_0: dequant_q4_0(src, dst, nb); break;
    case QTYPE_Q4_1: dequant_q4_1(src, dst, nb); break;
    case QTYPE_Q5_0: dequant_q5_0(src, dst, nb); break;
    case QTYPE_Q5_1: dequant_q5_1(src, dst, nb); break;
    case QTYPE_Q8_0: dequant_q8_0(src, dst, nb); break;
    case QTYPE_IQ4_NL: dequant_iq4_nl(src, dst, nb); break;
    case QTYPE_Q2_K: dequant_q2_K(src, dst, nb); break;
    case QTYPE_Q3_K: dequant_q3_K(src, dst, nb); break;
    case QTYPE_Q4_K: dequant_q4_K(src, dst, nb); break;
    case QTYPE_Q5_K: dequant_q5_K(src, dst, nb); break;
    case QTYPE_Q6_K: dequant_q6_K(src, dst, nb); break;
    case QTYPE_IQ4_XS: dequant_iq4_xs(src, dst, nb); break;
    case QTYPE_Q8_K: dequant_q8_K(src, dst, nb); break;
    default: EDDY_ASSERT(!"dequantize_row_ref: type not handled");
    }
}
