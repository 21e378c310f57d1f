/*
 * qdot_neon.c — aarch64 NEON dot kernels, with and without the dot-product
 * extension, and NEON activation quantizers.
 *
 * Owns: two tile kernels per integer weight type (qdot.h): "neon" (ARMv8.0: smull +
 * sadalp) and "neon_dotprod" (sdot), instantiated from the same templates with a
 * DP flag; the float-weight kernels (F32/F16/BF16, "neon" only); Q8_0 / Q8_K
 * quantization. The file is compiled with +dotprod, but the DP = false instances
 * issue no sdot, so "neon" runs on any ARMv8 core.
 *
 * NEON multiplies signed bytes by signed bytes, so signed quants go in as they are.
 * A 16-byte vector never straddles a (sub-)block, so each int32 lane is a partial sum
 * of true products of one block: integer scales apply per vector (mla by a scalar),
 * and float conversion happens once per block or super-block.
 */
#include <arm_neon.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "qdot.h"

#define INLINE static inline __attribute__((always_inline))
#define FOR_C _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)
#define UNROLL _Pragma("GCC unroll 8")

/* ==== Helpers ==== */

static inline float h2f(uint16_t h) { return fp16_to_f32(h); }

static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* acc + sum over groups of products of a and b (int8), as 4 int32 lanes */
INLINE int32x4_t dot16(const bool DP, int32x4_t acc, int8x16_t a, int8x16_t b) {
    if (DP) return vdotq_s32(acc, a, b);
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

/* acc + the sum of the 16 bytes of x, as 4 int32 lanes */
INLINE int32x4_t sum16(const bool DP, int32x4_t acc, int8x16_t x) {
    if (DP) return vdotq_s32(acc, x, vdupq_n_s8(1));
    return vpadalq_s16(acc, vpaddlq_s8(x));
}

/* 16 nibble bytes -> low nibbles (elements 0..15) and high nibbles (16..31) */
static inline void nibbles(const uint8_t *q, int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t v = vld1q_u8(q);
    *lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(15)));
    *hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
}

/* bits 0..15 of b -> 16 bytes, 16 where the bit is set, else 0 */
static inline uint8x16_t bits16(uint32_t b) {
    static const uint8_t m[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t v = vcombine_u8(vdup_n_u8((uint8_t)b), vdup_n_u8((uint8_t)(b >> 8)));
    return vandq_u8(vtstq_u8(v, vld1q_u8(m)), vdupq_n_u8(16));
}

#define TILE_FN(NAME, DP)                                                                                    \
    static void NAME(int64_t n, const void *w, const void *a, size_t as, int na, float *out) {               \
        switch (na) {                                                                                        \
        case 1: NAME##_k(DP, n, w, (const char *)a, as, out, 1); break;                                      \
        case 2: NAME##_k(DP, n, w, (const char *)a, as, out, 2); break;                                      \
        case 3: NAME##_k(DP, n, w, (const char *)a, as, out, 3); break;                                      \
        default: NAME##_k(DP, n, w, (const char *)a, as, out, 4); break;                                     \
        }                                                                                                    \
    }

/* ==== Float weights x F32 activations ==== */

enum { WF32, WF16, WBF16 };

INLINE float32x4_t load_w4(const int WT, const void *w, int64_t i) {
    if (WT == WF32) return vld1q_f32((const float *)w + i);
    const uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    if (WT == WF16) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

INLINE float load_w1(const int WT, const void *w, int64_t i) {
    if (WT == WF32) return ((const float *)w)[i];
    if (WT == WF16) return fp16_to_f32(((const uint16_t *)w)[i]);
    return bf16_to_f32(((const uint16_t *)w)[i]);
}

INLINE void float_k(const bool DP, const int WT, int64_t n, const void *w, const char *a, size_t as, float *out,
                    const int NC) {
    (void)DP;
    float32x4_t acc0[QDOT_MAX_ACT], acc1[QDOT_MAX_ACT];
    FOR_C acc0[c] = acc1[c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t w0 = load_w4(WT, w, i), w1 = load_w4(WT, w, i + 4);
        FOR_C {
            const float *x = (const float *)(a + c * as) + i;
            acc0[c] = vfmaq_f32(acc0[c], w0, vld1q_f32(x));
            acc1[c] = vfmaq_f32(acc1[c], w1, vld1q_f32(x + 4));
        }
    }
    FOR_C {
        float s = vaddvq_f32(vaddq_f32(acc0[c], acc1[c]));
        for (int64_t k = i; k < n; k++) s += load_w1(WT, w, k) * ((const float *)(a + c * as))[k];
        out[c] = s;
    }
}

INLINE void f32_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    float_k(DP, WF32, n, w, a, as, out, NC);
}
INLINE void f16_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    float_k(DP, WF16, n, w, a, as, out, NC);
}
INLINE void bf16_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    float_k(DP, WBF16, n, w, a, as, out, NC);
}
TILE_FN(f32, false)
TILE_FN(f16, false)
TILE_FN(bf16, false)

/* ==== 32-element blocks x Q8_0 ==== */

enum { B_Q4_0, B_Q4_1, B_Q5_0, B_Q5_1, B_Q8_0, B_IQ4_NL };

INLINE size_t b_size(const int T) {
    switch (T) {
    case B_Q4_0: return sizeof(block_q4_0);
    case B_Q4_1: return sizeof(block_q4_1);
    case B_Q5_0: return sizeof(block_q5_0);
    case B_Q5_1: return sizeof(block_q5_1);
    case B_Q8_0: return sizeof(block_q8_0);
    default: return sizeof(block_iq4_nl);
    }
}

INLINE void blk32_k(const bool DP, const int T, int64_t n, const void *w, const char *a, size_t as, float *out,
                    const int NC) {
    const int64_t nb = n / 32;
    const bool has_min = T == B_Q4_1 || T == B_Q5_1;
    const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
    float32x4_t acc[QDOT_MAX_ACT];
    FOR_C acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = (const uint8_t *)w + b * b_size(T);
        uint16_t dh, mh = 0;
        memcpy(&dh, wb, 2);
        if (has_min) memcpy(&mh, wb + 2, 2);
        int8x16_t q0, q1;
        if (T == B_Q8_0) {
            q0 = vld1q_s8((const int8_t *)wb + 2), q1 = vld1q_s8((const int8_t *)wb + 18);
        } else {
            const size_t qs_off = T == B_Q4_0 || T == B_IQ4_NL ? 2 : T == B_Q4_1 ? 4 : T == B_Q5_0 ? 6 : 8;
            nibbles(wb + qs_off, &q0, &q1);
            if (T == B_Q5_0 || T == B_Q5_1) {
                const uint32_t qh = rd32(wb + (T == B_Q5_0 ? 2 : 4));
                q0 = vorrq_s8(q0, vreinterpretq_s8_u8(bits16(qh)));
                q1 = vorrq_s8(q1, vreinterpretq_s8_u8(bits16(qh >> 16)));
            }
            if (T == B_Q4_0) q0 = vsubq_s8(q0, vdupq_n_s8(8)), q1 = vsubq_s8(q1, vdupq_n_s8(8));
            if (T == B_Q5_0) q0 = vsubq_s8(q0, vdupq_n_s8(16)), q1 = vsubq_s8(q1, vdupq_n_s8(16));
            if (T == B_IQ4_NL)
                q0 = vqtbl1q_s8(kv, vreinterpretq_u8_s8(q0)), q1 = vqtbl1q_s8(kv, vreinterpretq_u8_s8(q1));
        }
        const float d = h2f(dh), m = has_min ? h2f(mh) : 0.0f;
        FOR_C {
            const block_q8_0 *x = (const block_q8_0 *)(a + c * as) + b;
            const int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
            const float dx = h2f(x->d);
            const int32x4_t s = dot16(DP, dot16(DP, vdupq_n_s32(0), q0, x0), q1, x1);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(s), d * dx);
            if (has_min) {
                const int32x4_t xs = sum16(DP, sum16(DP, vdupq_n_s32(0), x0), x1);
                acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(xs), m * dx);
            }
        }
    }
    FOR_C out[c] = vaddvq_f32(acc[c]);
}

#define BLK32(NAME, T)                                                                                       \
    INLINE void NAME##_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out,      \
                         const int NC) {                                                                     \
        blk32_k(DP, T, n, w, a, as, out, NC);                                                                \
    }                                                                                                        \
    TILE_FN(NAME, false)                                                                                     \
    TILE_FN(NAME##_dp, true)

/* the _dp instances reuse the same template */
#define q4_0_dp_k q4_0_k
#define q4_1_dp_k q4_1_k
#define q5_0_dp_k q5_0_k
#define q5_1_dp_k q5_1_k
#define q8_0_dp_k q8_0_k
#define iq4_nl_dp_k iq4_nl_k
#define q2_K_dp_k q2_K_k
#define q3_K_dp_k q3_K_k
#define q4_K_dp_k q4_K_k
#define q5_K_dp_k q5_K_k
#define q6_K_dp_k q6_K_k
#define iq4_xs_dp_k iq4_xs_k

BLK32(q4_0, B_Q4_0)
BLK32(q4_1, B_Q4_1)
BLK32(q5_0, B_Q5_0)
BLK32(q5_1, B_Q5_1)
BLK32(q8_0, B_Q8_0)
BLK32(iq4_nl, B_IQ4_NL)

/* ==== K-quants x Q8_K ==== */

/* Q4_K / Q5_K: the 8 six-bit scales and mins as bytes (see quant_get_scale_min_k4) */
static inline void k4_scales(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    const uint32_t u0 = rd32(s), u1 = rd32(s + 4), u2 = rd32(s + 8);
    const uint32_t v[4] = {u0 & 0x3f3f3f3fu, (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u), u1 & 0x3f3f3f3fu,
                           ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)};
    memcpy(sc, v, 8);
    memcpy(mn, v + 2, 8);
}

/* sum_j m_j * bsums[j] for 16 int16 bsums and 16 int16 weights m (int32 lanes) */
static inline int32x4_t bsum_dot(const int16_t *bsums, int16x8_t m0, int16x8_t m1) {
    const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    int32x4_t s = vmull_s16(vget_low_s16(b0), vget_low_s16(m0));
    s = vmlal_high_s16(s, b0, m0);
    s = vmlal_s16(s, vget_low_s16(b1), vget_low_s16(m1));
    return vmlal_high_s16(s, b1, m1);
}

INLINE void k4_k(const bool DP, const bool Q5, int64_t n, const void *w, const char *a, size_t as, float *out,
                 const int NC) {
    const int64_t nb = n / QK_K;
    float32x4_t acc[QDOT_MAX_ACT];
    FOR_C acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *qs, *sc8, *qh = NULL;
        uint16_t dh, dmh;
        if (Q5) {
            const block_q5_K *wb = (const block_q5_K *)w + b;
            qs = wb->qs, sc8 = wb->scales, qh = wb->qh, dh = wb->d, dmh = wb->dmin;
        } else {
            const block_q4_K *wb = (const block_q4_K *)w + b;
            qs = wb->qs, sc8 = wb->scales, dh = wb->d, dmh = wb->dmin;
        }
        uint8_t sc[8], mn[8];
        k4_scales(sc8, sc, mn);
        /* mins per 16-element bsum: [m0, m0, m1, m1, ...] */
        const uint8x8_t mv = vld1_u8(mn);
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vzip1_u8(mv, mv)));
        const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_u8(vzip2_u8(mv, mv)));
        int8x16_t q[16]; /* sub-block j in q[2j], q[2j + 1] */
        UNROLL for (int k = 0; k < 4; k++) {
            UNROLL for (int h = 0; h < 2; h++) {
                const uint8x16_t raw = vld1q_u8(qs + 32 * k + 16 * h);
                uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(15)), hi = vshrq_n_u8(raw, 4);
                if (Q5) {
                    const uint8x16_t hv = vld1q_u8(qh + 16 * h);
                    lo = vorrq_u8(lo, vandq_u8(vtstq_u8(hv, vdupq_n_u8((uint8_t)(1 << (2 * k)))), vdupq_n_u8(16)));
                    hi = vorrq_u8(hi, vandq_u8(vtstq_u8(hv, vdupq_n_u8((uint8_t)(2 << (2 * k)))), vdupq_n_u8(16)));
                }
                q[4 * k + h] = vreinterpretq_s8_u8(lo);
                q[4 * k + 2 + h] = vreinterpretq_s8_u8(hi);
            }
        }
        const float d = h2f(dh), dmin = h2f(dmh);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            int32x4_t is = vdupq_n_s32(0);
            UNROLL for (int j = 0; j < 8; j++) {
                int32x4_t s = dot16(DP, vdupq_n_s32(0), q[2 * j], vld1q_s8(x->qs + 32 * j));
                s = dot16(DP, s, q[2 * j + 1], vld1q_s8(x->qs + 32 * j + 16));
                is = vmlaq_n_s32(is, s, sc[j]);
            }
            const int32x4_t ms = bsum_dot(x->bsums, m0, m1);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(is), d * x->d);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(ms), -(dmin * x->d));
        }
    }
    FOR_C out[c] = vaddvq_f32(acc[c]);
}

INLINE void q4_K_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    k4_k(DP, false, n, w, a, as, out, NC);
}
INLINE void q5_K_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    k4_k(DP, true, n, w, a, as, out, NC);
}
TILE_FN(q4_K, false)
TILE_FN(q4_K_dp, true)
TILE_FN(q5_K, false)
TILE_FN(q5_K_dp, true)

/* Q2_K: element 128h + 32s + l is (qs[32h + l] >> 2s) & 3; a 16-byte vector is one
 * sub-block of 16 (scale low nibble, min high nibble). */
INLINE void q2_K_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    float32x4_t acc[QDOT_MAX_ACT];
    FOR_C acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const block_q2_K *wb = (const block_q2_K *)w + b;
        const uint8x16_t s8 = vld1q_u8(wb->scales);
        uint8_t sc[16];
        vst1q_u8(sc, vandq_u8(s8, vdupq_n_u8(15)));
        const uint8x16_t mv = vshrq_n_u8(s8, 4);
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mv)));
        const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mv));
        int8x16_t q[16];
        UNROLL for (int h = 0; h < 2; h++) {
            UNROLL for (int l = 0; l < 2; l++) {
                const uint8x16_t raw = vld1q_u8(wb->qs + 32 * h + 16 * l);
                q[8 * h + l] = vreinterpretq_s8_u8(vandq_u8(raw, vdupq_n_u8(3)));
                q[8 * h + 2 + l] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(raw, 2), vdupq_n_u8(3)));
                q[8 * h + 4 + l] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(raw, 4), vdupq_n_u8(3)));
                q[8 * h + 6 + l] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 6));
            }
        }
        const float d = h2f(wb->d), dmin = h2f(wb->dmin);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            int32x4_t is = vdupq_n_s32(0);
            UNROLL for (int j = 0; j < 16; j++)
                is = vmlaq_n_s32(is, dot16(DP, vdupq_n_s32(0), q[j], vld1q_s8(x->qs + 16 * j)), sc[j]);
            const int32x4_t ms = bsum_dot(x->bsums, m0, m1);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(is), d * x->d);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(ms), -(dmin * x->d));
        }
    }
    FOR_C out[c] = vaddvq_f32(acc[c]);
}
TILE_FN(q2_K, false)
TILE_FN(q2_K_dp, true)

/* Q3_K: q = 2 low bits + 4 * hmask bit - 4; the 16 six-bit scales minus 32. */
static inline void q3_K_scales(const uint8_t *s, int8_t sc[16]) {
    const uint32_t a0 = rd32(s), a1 = rd32(s + 4), a2 = rd32(s + 8);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t v[4] = {(a0 & m4) | ((a2 & m2) << 4), (a1 & m4) | (((a2 >> 2) & m2) << 4),
                           ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4), ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4)};
    int8x16_t t;
    memcpy(&t, v, 16);
    vst1q_s8(sc, vsubq_s8(t, vdupq_n_s8(32)));
}

INLINE void q3_K_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    float32x4_t acc[QDOT_MAX_ACT];
    FOR_C acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const block_q3_K *wb = (const block_q3_K *)w + b;
        int8_t sc[16];
        q3_K_scales(wb->scales, sc);
        int8x16_t q[16];
        UNROLL for (int l = 0; l < 2; l++) {
            const uint8x16_t hm = vld1q_u8(wb->hmask + 16 * l);
            UNROLL for (int h = 0; h < 2; h++) {
                const uint8x16_t raw = vld1q_u8(wb->qs + 32 * h + 16 * l);
                UNROLL for (int s = 0; s < 4; s++) {
                    const uint8x16_t lo = vandq_u8(vshlq_u8(raw, vdupq_n_s8((int8_t)(-2 * s))), vdupq_n_u8(3));
                    const uint8x16_t hset = vtstq_u8(hm, vdupq_n_u8((uint8_t)(1 << (4 * h + s))));
                    const uint8x16_t sub = vbicq_u8(vdupq_n_u8(4), hset);
                    q[8 * h + 2 * s + l] = vreinterpretq_s8_u8(vsubq_u8(lo, sub));
                }
            }
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            int32x4_t is = vdupq_n_s32(0);
            UNROLL for (int j = 0; j < 16; j++)
                is = vmlaq_n_s32(is, dot16(DP, vdupq_n_s32(0), q[j], vld1q_s8(x->qs + 16 * j)), sc[j]);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(is), d * x->d);
        }
    }
    FOR_C out[c] = vaddvq_f32(acc[c]);
}
TILE_FN(q3_K, false)
TILE_FN(q3_K_dp, true)

/* Q6_K: q = (ql nibble | qh 2 bits << 4) - 32. Element 128h + 32g + l: low bits
 * (ql[64h + 32(g % 2) + l] >> 4(g / 2)) & 15, high (qh[32h + l] >> 2g) & 3. */
INLINE void q6_K_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    float32x4_t acc[QDOT_MAX_ACT];
    FOR_C acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const block_q6_K *wb = (const block_q6_K *)w + b;
        int8x16_t q[16];
        UNROLL for (int h = 0; h < 2; h++) {
            UNROLL for (int l = 0; l < 2; l++) {
                const uint8x16_t hh = vld1q_u8(wb->qh + 32 * h + 16 * l);
                UNROLL for (int g = 0; g < 4; g++) {
                    const uint8x16_t lraw = vld1q_u8(wb->ql + 64 * h + 32 * (g % 2) + 16 * l);
                    const uint8x16_t lo = g < 2 ? vandq_u8(lraw, vdupq_n_u8(15)) : vshrq_n_u8(lraw, 4);
                    const uint8x16_t hi =
                        vshlq_n_u8(vandq_u8(vshlq_u8(hh, vdupq_n_s8((int8_t)(-2 * g))), vdupq_n_u8(3)), 4);
                    q[8 * h + 2 * g + l] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, hi)), vdupq_n_s8(32));
                }
            }
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            int32x4_t is = vdupq_n_s32(0);
            UNROLL for (int j = 0; j < 16; j++)
                is = vmlaq_n_s32(is, dot16(DP, vdupq_n_s32(0), q[j], vld1q_s8(x->qs + 16 * j)), wb->scales[j]);
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(is), d * x->d);
        }
    }
    FOR_C out[c] = vaddvq_f32(acc[c]);
}
TILE_FN(q6_K, false)
TILE_FN(q6_K_dp, true)

/* IQ4_XS: sub-block j = qs[16j .. 16j + 15]: low nibbles elements 0..15, high 16..31. */
INLINE void iq4_xs_k(const bool DP, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
    float32x4_t acc[QDOT_MAX_ACT];
    FOR_C acc[c] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const block_iq4_xs *wb = (const block_iq4_xs *)w + b;
        int8x16_t q[16];
        int32_t ls[8];
        UNROLL for (int j = 0; j < 8; j++) {
            ls[j] = (((wb->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((wb->scales_h >> (2 * j)) & 3) << 4)) - 32;
            int8x16_t lo, hi;
            nibbles(wb->qs + 16 * j, &lo, &hi);
            q[2 * j] = vqtbl1q_s8(kv, vreinterpretq_u8_s8(lo));
            q[2 * j + 1] = vqtbl1q_s8(kv, vreinterpretq_u8_s8(hi));
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            int32x4_t is = vdupq_n_s32(0);
            UNROLL for (int j = 0; j < 8; j++) {
                int32x4_t s = dot16(DP, vdupq_n_s32(0), q[2 * j], vld1q_s8(x->qs + 32 * j));
                s = dot16(DP, s, q[2 * j + 1], vld1q_s8(x->qs + 32 * j + 16));
                is = vmlaq_n_s32(is, s, ls[j]);
            }
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(is), d * x->d);
        }
    }
    FOR_C out[c] = vaddvq_f32(acc[c]);
}
TILE_FN(iq4_xs, false)
TILE_FN(iq4_xs_dp, true)

/* ==== Kernel tables ==== */

qdot_fn qdot_kernel_neon(qtype t) {
    switch (t) {
    case QTYPE_F32: return f32;
    case QTYPE_F16: return f16;
    case QTYPE_BF16: return bf16;
    case QTYPE_Q4_0: return q4_0;
    case QTYPE_Q4_1: return q4_1;
    case QTYPE_Q5_0: return q5_0;
    case QTYPE_Q5_1: return q5_1;
    case QTYPE_Q8_0: return q8_0;
    case QTYPE_IQ4_NL: return iq4_nl;
    case QTYPE_Q2_K: return q2_K;
    case QTYPE_Q3_K: return q3_K;
    case QTYPE_Q4_K: return q4_K;
    case QTYPE_Q5_K: return q5_K;
    case QTYPE_Q6_K: return q6_K;
    case QTYPE_IQ4_XS: return iq4_xs;
    default: return NULL;
    }
}

qdot_fn qdot_kernel_neon_dotprod(qtype t) {
    switch (t) {
    case QTYPE_Q4_0: return q4_0_dp;
    case QTYPE_Q4_1: return q4_1_dp;
    case QTYPE_Q5_0: return q5_0_dp;
    case QTYPE_Q5_1: return q5_1_dp;
    case QTYPE_Q8_0: return q8_0_dp;
    case QTYPE_IQ4_NL: return iq4_nl_dp;
    case QTYPE_Q2_K: return q2_K_dp;
    case QTYPE_Q3_K: return q3_K_dp;
    case QTYPE_Q4_K: return q4_K_dp;
    case QTYPE_Q5_K: return q5_K_dp;
    case QTYPE_Q6_K: return q6_K_dp;
    case QTYPE_IQ4_XS: return iq4_xs_dp;
    default: return NULL;
    }
}

/* ==== Activation quantization (bit-identical to quantize_ref.c) ==== */

/* max(|v|, m) per lane, a NaN lane of v leaving m as the reference's `if (a > amax)` */
static inline float32x4_t amax_step(float32x4_t m, float32x4_t v) {
    const float32x4_t a = vabsq_f32(v);
    return vbslq_f32(vcgtq_f32(a, m), a, m);
}

/* fcvtas rounds half away from zero, saturates, and maps NaN to 0; then clamp */
static inline int32x4_t round_q_ps(float32x4_t v) {
    return vmaxq_s32(vminq_s32(vcvtaq_s32_f32(v), vdupq_n_s32(127)), vdupq_n_s32(-127));
}

static inline int32x2_t round_q_pd(float64x2_t v) {
    const int64x2_t q = vcvtaq_s64_f64(v);
    const int64x2_t c = vbslq_s64(vcgtq_s64(q, vdupq_n_s64(127)), vdupq_n_s64(127), q);
    return vmovn_s64(vbslq_s64(vcltq_s64(c, vdupq_n_s64(-127)), vdupq_n_s64(-127), c));
}

static inline void store_q16(int8_t *dst, int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b)), cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    vst1q_s8(dst, vcombine_s8(vmovn_s16(ab), vmovn_s16(cd)));
}

void quantize_row_q8_0_neon(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK8_0 == 0);
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float32x4_t v[8], m = vdupq_n_f32(0.0f);
        for (int k = 0; k < 8; k++) v[k] = vld1q_f32(x + 4 * k), m = amax_step(m, v[k]);
        const float amax = vmaxvq_f32(m);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_fp16(d);
        int32x4_t q[8];
        for (int k = 0; k < 8; k++) q[k] = round_q_ps(vmulq_n_f32(v[k], id));
        store_q16(y[b].qs, q[0], q[1], q[2], q[3]);
        store_q16(y[b].qs + 16, q[4], q[5], q[6], q[7]);
    }
}

void quantize_row_q8_K_neon(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK_K == 0);
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int j = 0; j < QK_K; j += 4) m = amax_step(m, vld1q_f32(x + j));
        const float amax = vmaxvq_f32(m);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const double id = 127.0 / (double)amax;
        float d = amax / 127.0f;
        if (d * 127.0f > FLT_MAX) d = nextafterf(d, 0.0f);
        y[b].d = d;
        for (int g = 0; g < QK_K; g += 16) {
            int32x4_t q[4];
            for (int k = 0; k < 4; k++) {
                const float32x4_t v = vld1q_f32(x + g + 4 * k);
                const int32x2_t lo = round_q_pd(vmulq_n_f64(vcvt_f64_f32(vget_low_f32(v)), id));
                const int32x2_t hi = round_q_pd(vmulq_n_f64(vcvt_high_f64_f32(v), id));
                q[k] = vcombine_s32(lo, hi);
            }
            y[b].bsums[g / 16] = (int16_t)vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
            store_q16(y[b].qs + g, q[0], q[1], q[2], q[3]);
        }
    }
}
