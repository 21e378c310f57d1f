/*
 * dot_ref.c — scalar reference dot products: one weight row with one activation row.
 *
 * Owns: quant_dot_type and vec_dot_ref for every supported weight type. Does not
 * own: layouts (quant.h), quantizing the activations (quantize_ref.c), matmul over
 * many rows and threads (src/ops/).
 *
 * Method, the same for every quantized pair: within a block (or super-block) the
 * products of the integer quants are summed exactly in int32 (every bound below
 * fits with room to spare), then scaled by the float32 product of the block
 * scales and accumulated across blocks in float32. Offset terms (the `m` of
 * Q4_1/Q5_1, the mins of Q2_K/Q4_K/Q5_K) use the integer sum of the activation
 * quants (Q8_K carries it per 16 as bsums). Float weights accumulate in double.
 *
 * sum_i w_i a_i with w_i = dw * sw_j * q_i (- mins) and a_i = da * p_i:
 *   block result = dw * da * sum_j sw_j * (sum_{i in j} q_i p_i)  [- dmin * da * sum_j m_j * sum p]
 */
#include "quant/quant.h"

#include "base/error.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* ==== Float weights, float activations ==== */

static float dot_f32(const float *w, const float *a, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)w[i] * (double)a[i];
    return (float)sum;
}

static float dot_f16(const uint16_t *w, const float *a, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)fp16_to_f32(w[i]) * (double)a[i];
    return (float)sum;
}

static float dot_bf16(const uint16_t *w, const float *a, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)bf16_to_f32(w[i]) * (double)a[i];
    return (float)sum;
}

/* ==== 32-element blocks x Q8_0 ==== */

/* Adds ds * isum (+ ms * asum) for one block to *sum, one rounding per operation. */
static void acc_block(float *sum, float ds, int32_t isum, float ms, int32_t asum) {
    const float t = ds * (float)isum;
    const float u = ms * (float)asum;
    const float v = t + u;
    *sum += v;
}

static float dot_q4_0(const block_q4_0 *w, const block_q8_0 *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0; /* |isum| <= 32 * 8 * 128 */
        for (int j = 0; j < QK4_0 / 2; j++) {
            isum += ((w[b].qs[j] & 15) - 8) * a[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + QK4_0 / 2];
        }
        acc_block(&sum, fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d), isum, 0.0f, 0);
    }
    return sum;
}

static float dot_q4_1(const block_q4_1 *w, const block_q8_0 *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0, asum = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            isum += (w[b].qs[j] & 15) * a[b].qs[j];
            isum += (w[b].qs[j] >> 4) * a[b].qs[j + QK4_1 / 2];
            asum += a[b].qs[j] + a[b].qs[j + QK4_1 / 2];
        }
        const float da = fp16_to_f32(a[b].d);
        acc_block(&sum, fp16_to_f32(w[b].d) * da, isum, fp16_to_f32(w[b].m) * da, asum);
    }
    return sum;
}

static uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float dot_q5_0(const block_q5_0 *w, const block_q8_0 *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t qh = load_u32le(w[b].qh);
        int32_t isum = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (w[b].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int q1 = (w[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += (q0 - 16) * a[b].qs[j] + (q1 - 16) * a[b].qs[j + QK5_0 / 2];
        }
        acc_block(&sum, fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d), isum, 0.0f, 0);
    }
    return sum;
}

static float dot_q5_1(const block_q5_1 *w, const block_q8_0 *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint32_t qh = load_u32le(w[b].qh);
        int32_t isum = 0, asum = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (w[b].qs[j] & 15) | (int)(((qh >> j) & 1) << 4);
            int q1 = (w[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            isum += q0 * a[b].qs[j] + q1 * a[b].qs[j + QK5_1 / 2];
            asum += a[b].qs[j] + a[b].qs[j + QK5_1 / 2];
        }
        const float da = fp16_to_f32(a[b].d);
        acc_block(&sum, fp16_to_f32(w[b].d) * da, isum, fp16_to_f32(w[b].m) * da, asum);
    }
    return sum;
}

static float dot_q8_0(const block_q8_0 *w, const block_q8_0 *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0; /* |isum| <= 32 * 128 * 128 */
        for (int j = 0; j < QK8_0; j++) isum += w[b].qs[j] * a[b].qs[j];
        acc_block(&sum, fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d), isum, 0.0f, 0);
    }
    return sum;
}

static float dot_iq4_nl(const block_iq4_nl *w, const block_q8_0 *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < QK4_NL / 2; j++) {
            isum += kvalues_iq4nl[w[b].qs[j] & 15] * a[b].qs[j];
            isum += kvalues_iq4nl[w[b].qs[j] >> 4] * a[b].qs[j + QK4_NL / 2];
        }
        acc_block(&sum, fp16_to_f32(w[b].d) * fp16_to_f32(a[b].d), isum, 0.0f, 0);
    }
    return sum;
}

/* ==== K-quants and IQ4_XS x Q8_K ==== */

static float dot_q2_K(const block_q2_K *w, const block_q8_K *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0, msum = 0; /* |isum| <= 256 * 15 * 3 * 128 */
        for (int j = 0; j < QK_K / 16; j++) {
            int32_t s = 0;
            for (int k = 0; k < 16; k++) {
                const int e = 16 * j + k, h = e / 128, sh = 2 * ((e / 32) % 4), l = e % 32;
                s += ((w[b].qs[32 * h + l] >> sh) & 3) * a[b].qs[e];
            }
            isum += (w[b].scales[j] & 15) * s;
            msum += (w[b].scales[j] >> 4) * a[b].bsums[j];
        }
        acc_block(&sum, a[b].d * fp16_to_f32(w[b].d), isum, -(a[b].d * fp16_to_f32(w[b].dmin)), msum);
    }
    return sum;
}

static float dot_q3_K(const block_q3_K *w, const block_q8_K *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        /* the 6-bit sub-block scales, as in dequant_ref.c */
        const uint8_t *s8 = w[b].scales;
        int32_t isum = 0; /* |isum| <= 256 * 32 * 4 * 128 */
        for (int j = 0; j < QK_K / 16; j++) {
            const int lo = (j < 8 ? s8[j] : s8[j - 8] >> 4) & 15;
            const int hi = (s8[8 + j % 4] >> (2 * (j / 4))) & 3;
            int32_t s = 0;
            for (int k = 0; k < 16; k++) {
                const int e = 16 * j + k, h = e / 128, sh = 2 * ((e / 32) % 4), l = e % 32;
                const int q = ((w[b].qs[32 * h + l] >> sh) & 3) - (((w[b].hmask[l] >> (e / 32)) & 1) ? 0 : 4);
                s += q * a[b].qs[e];
            }
            isum += ((lo | hi << 4) - 32) * s;
        }
        acc_block(&sum, a[b].d * fp16_to_f32(w[b].d), isum, 0.0f, 0);
    }
    return sum;
}

static float dot_q4_K(const block_q4_K *w, const block_q8_K *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0, msum = 0; /* |isum| <= 256 * 63 * 15 * 128 */
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            quant_get_scale_min_k4(w[b].scales, j, &sc, &m);
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            int32_t s = 0;
            for (int l = 0; l < 32; l++) s += ((q[l] >> shift) & 15) * a[b].qs[32 * j + l];
            isum += sc * s;
            msum += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        acc_block(&sum, a[b].d * fp16_to_f32(w[b].d), isum, -(a[b].d * fp16_to_f32(w[b].dmin)), msum);
    }
    return sum;
}

static float dot_q5_K(const block_q5_K *w, const block_q8_K *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0, msum = 0; /* |isum| <= 256 * 63 * 31 * 128 */
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            quant_get_scale_min_k4(w[b].scales, j, &sc, &m);
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            int32_t s = 0;
            for (int l = 0; l < 32; l++) {
                const int v = ((q[l] >> shift) & 15) | (((w[b].qh[l] >> j) & 1) << 4);
                s += v * a[b].qs[32 * j + l];
            }
            isum += sc * s;
            msum += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        acc_block(&sum, a[b].d * fp16_to_f32(w[b].d), isum, -(a[b].d * fp16_to_f32(w[b].dmin)), msum);
    }
    return sum;
}

static float dot_q6_K(const block_q6_K *w, const block_q8_K *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0; /* |isum| <= 256 * 128 * 32 * 128 */
        for (int j = 0; j < QK_K / 16; j++) {
            int32_t s = 0;
            for (int k = 0; k < 16; k++) {
                const int e = 16 * j + k, h = e / 128, r = e % 128;
                const int lo = (w[b].ql[64 * h + r % 64] >> (4 * (r / 64))) & 15;
                const int hi = (w[b].qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
                s += ((lo | hi << 4) - 32) * a[b].qs[e];
            }
            isum += w[b].scales[j] * s;
        }
        acc_block(&sum, a[b].d * fp16_to_f32(w[b].d), isum, 0.0f, 0);
    }
    return sum;
}

static float dot_iq4_xs(const block_iq4_xs *w, const block_q8_K *a, int64_t nb) {
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0; /* |isum| <= 256 * 32 * 127 * 128 */
        for (int j = 0; j < QK_K / 32; j++) {
            const int ls = ((w[b].scales_l[j / 2] >> (4 * (j % 2))) & 15) |
                           (((w[b].scales_h >> (2 * j)) & 3) << 4);
            const uint8_t *q = w[b].qs + 16 * j;
            const int8_t *p = a[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 16; l++)
                s += kvalues_iq4nl[q[l] & 15] * p[l] + kvalues_iq4nl[q[l] >> 4] * p[l + 16];
            isum += (ls - 32) * s;
        }
        acc_block(&sum, a[b].d * fp16_to_f32(w[b].d), isum, 0.0f, 0);
    }
    return sum;
}

/* ==== Dispatch ==== */

qtype quant_dot_type(qtype weight_type) {
    switch (weight_type) {
    case QTYPE_F32:
    case QTYPE_F16:
    case QTYPE_BF16: return QTYPE_F32;
    case QTYPE_Q4_0:
    case QTYPE_Q4_1:
    case QTYPE_Q5_0:
    case QTYPE_Q5_1:
    case QTYPE_Q8_0:
    case QTYPE_IQ4_NL: return QTYPE_Q8_0;
    case QTYPE_Q2_K:
    case QTYPE_Q3_K:
    case QTYPE_Q4_K:
    case QTYPE_Q5_K:
    case QTYPE_Q6_K:
    case QTYPE_IQ4_XS: return QTYPE_Q8_K;
    default: break;
    }
    EDDY_ASSERT(!"quant_dot_type: unsupported weight type");
    return QTYPE_COUNT;
}

float vec_dot_ref(qtype weight_type, int64_t n, const void *w_row, const void *act_row) {
    const qtype_traits *t = qtype_info((uint32_t)weight_type);
    EDDY_ASSERT(t && t->supported);
    EDDY_ASSERT(n >= 0 && n % t->block_size == 0);
    EDDY_ASSERT((uintptr_t)w_row % quant_row_align(weight_type) == 0);
    EDDY_ASSERT((uintptr_t)act_row % quant_row_align(quant_dot_type(weight_type)) == 0);
    const int64_t nb = n / t->block_size;
    const void *w = w_row, *a = act_row;
    switch (weight_type) {
    case QTYPE_F32: return dot_f32(w, a, n);
    case QTYPE_F16: return dot_f16(w, a, n);
    case QTYPE_BF16: return dot_bf16(w, a, n);
    case QTYPE_Q4_0: return dot_q4_0(w, a, nb);
    case QTYPE_Q4_1: return dot_q4_1(w, a, nb);
    case QTYPE_Q5_0: return dot_q5_0(w, a, nb);
    case QTYPE_Q5_1: return dot_q5_1(w, a, nb);
    case QTYPE_Q8_0: return dot_q8_0(w, a, nb);
    case QTYPE_IQ4_NL: return dot_iq4_nl(w, a, nb);
    case QTYPE_Q2_K: return dot_q2_K(w, a, nb);
    case QTYPE_Q3_K: return dot_q3_K(w, a, nb);
    case QTYPE_Q4_K: return dot_q4_K(w, a, nb);
    case QTYPE_Q5_K: return dot_q5_K(w, a, nb);
    case QTYPE_Q6_K: return dot_q6_K(w, a, nb);
    case QTYPE_IQ4_XS: return dot_iq4_xs(w, a, nb);
    default: break;
    }
    EDDY_ASSERT(!"vec_dot_ref: type not handled");
    return 0.0f;
}
