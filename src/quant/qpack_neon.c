/*
 * qpack_neon.c — NEON kernels with the dot-product instructions (sdot) on packed weights
 * (qpack.h): one group of 16 rows times one tile of 1..8 tokens over the whole row.
 *
 * A 64-byte weight vector (4 consecutive quants of each of the 16 rows) is four 16-byte
 * registers of 4 rows each; sdot multiplies one by 4 activation bytes of one token
 * replicated to every lane (ld1r), so each int32 lane accumulates one row's block sum.
 * sdot is signed x signed, so the quants go in signed: Q8_0's q + 128 back to q and
 * IQ4_NL / IQ4_XS's index to the signed kvalue, which makes the tile's offset term
 * (-128 x the activation sum) unneeded; nibbles (0..15, 0..31 with Q5's fifth bit) are
 * already non-negative. The integer sums are those of qpack_kernel_ref exactly, and the
 * float operations per lane are the reference's in its order, so the results are
 * bit-identical to it (tests/test_quant_simd.c, under qemu on x86 machines).
 * Registers: a pass covers the rows of NQ registers (all 16 rows for 1-2 tokens, 8 for
 * 3-4, 4 for 5-8) for every unit, so the int32 and float accumulators (NT x NQ each)
 * fit the 32 registers; the group's later passes read it from cache.
 */
#include <arm_neon.h>
#include <string.h>

#include "base/error.h"
#include "qpack.h"
#include "qpack_kernels.h"
#include "qpack_prefetch.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")
#define FOR_T UNROLL for (int t = 0; t < NT; t++)
#define FOR_Q UNROLL for (int qq = 0; qq < NQ; qq++)

/* 4 activation bytes at p, replicated to every 32-bit lane */
INLINE int8x16_t rep4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

INLINE float ldf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

INLINE int32_t ldi(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* 4 halves (f16 or bf16) at p, widened exactly */
INLINE float32x4_t f16x4(const uint8_t *p) {
    uint16_t h[4];
    memcpy(h, p, 8);
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}
INLINE float32x4_t bf16x4(const uint8_t *p) {
    uint16_t h[4];
    memcpy(h, p, 8);
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(h), 16));
}

/* byte i of register reg (bytes 16 reg..16 reg + 15 of a 64-byte vector): `add` where bit
 * 16 reg + i of the mask m is set, else 0 */
INLINE uint8x16_t bits_as(uint64_t m, int reg, uint8_t add) {
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint16_t b = (uint16_t)(m >> (16 * reg));
    const uint8x16_t rep = vcombine_u8(vdup_n_u8((uint8_t)(b & 0xff)), vdup_n_u8((uint8_t)(b >> 8)));
    return vandq_u8(vtstq_u8(rep, vld1q_u8(bits)), vdupq_n_u8(add));
}

/* The low and high nibbles of register reg (rows 4 reg..4 reg + 3) of a 64-byte vector of
 * 4-bit quants, as the signed quants sdot takes: plus 16 where Q5's fifth-bit masks (m_lo,
 * m_hi: a bit per byte of the vector) say so (FIFTH), or through the IQ4 table (TABLE). */
INLINE void nibbles(const bool FIFTH, const bool TABLE, const uint8_t *vec, uint64_t m_lo, uint64_t m_hi, int reg,
                    int8x16_t *lo, int8x16_t *hi) {
    const uint8x16_t n = vld1q_u8(vec + 16 * reg);
    uint8x16_t l = vandq_u8(n, vdupq_n_u8(15)), h = vshrq_n_u8(n, 4);
    if (FIFTH) l = vaddq_u8(l, bits_as(m_lo, reg, 16)), h = vaddq_u8(h, bits_as(m_hi, reg, 16));
    if (TABLE) {
        const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
        *lo = vqtbl1q_s8(kv, l), *hi = vqtbl1q_s8(kv, h);
    } else {
        *lo = vreinterpretq_s8_u8(l), *hi = vreinterpretq_s8_u8(h);
    }
}

/* Writes register q's rows (4 q..4 q + 3) that exist: those below nrows */
INLINE void store_rows(float32x4_t acc, float *y, int q, int nrows) {
    float v[4];
    vst1q_f32(v, acc);
    for (int i = 0; i < 4 && 4 * q + i < nrows; i++) y[4 * q + i] = v[i];
}

/* rows per pass, in registers of 4 */
#define NQ_OF(NT) ((NT) <= 2 ? 4 : (NT) <= 4 ? 2 : 1)

/* ==== 32-element formats: Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1 ==== */

INLINE size_t unit_bytes32(const qpack_format F) {
    return F == QPACK_Q8_0 ? 544 : F == QPACK_Q4_1 ? 320 : F == QPACK_Q5_0 ? 352 : F == QPACK_Q5_1 ? 384 : 288;
}

INLINE void k32_pass(const qpack_format F, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys,
                     int nrows, const int NT, const int NQ, int q0) {
    const bool Q5 = F == QPACK_Q5_0 || F == QPACK_Q5_1, MIN = F == QPACK_Q4_1 || F == QPACK_Q5_1;
    const bool OFF = F == QPACK_Q4_0 || F == QPACK_Q5_0; /* the tile's -8 or -16 x sum */
    const size_t UB = unit_bytes32(F), AB = 320;
    const size_t DOFF = F == QPACK_Q8_0 ? 512 : Q5 ? 320 : 256, MOFF = Q5 ? 352 : 288;
    float32x4_t acc[QPACK_TOK][4];
    FOR_T FOR_Q acc[t][qq] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < nu; k++, w += UB, a += AB) {
        if (q0 == 0) qpack_prefetch_unit(w, UB);
        int32x4_t ia[QPACK_TOK][4];
        FOR_T FOR_Q ia[t][qq] = vdupq_n_s32(OFF ? ldi(a + 288 + 4 * t) : 0);
        if (F == QPACK_Q8_0) {
            UNROLL for (int j = 0; j < 8; j++) {
                int8x16_t wv[4];
                FOR_Q wv[qq] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(w + 64 * j + 16 * (q0 + qq)), vdupq_n_u8(0x80)));
                FOR_T {
                    const int8x16_t x = rep4(a + 32 * t + 4 * j);
                    FOR_Q ia[t][qq] = vdotq_s32(ia[t][qq], wv[qq], x);
                }
            }
        } else {
            UNROLL for (int v = 0; v < 4; v++) {
                int8x16_t lo[4], hi[4];
                uint64_t h0 = 0, h1 = 0;
                if (Q5) memcpy(&h0, w + 256 + 8 * v, 8), memcpy(&h1, w + 256 + 8 * (v + 4), 8);
                FOR_Q nibbles(Q5, F == QPACK_IQ4_NL, w + 64 * v, h0, h1, q0 + qq, &lo[qq], &hi[qq]);
                FOR_T {
                    const int8x16_t xl = rep4(a + 32 * t + 4 * v), xh = rep4(a + 32 * t + 16 + 4 * v);
                    FOR_Q ia[t][qq] = vdotq_s32(ia[t][qq], lo[qq], xl);
                    FOR_Q ia[t][qq] = vdotq_s32(ia[t][qq], hi[qq], xh);
                }
            }
        }
        FOR_Q {
            const float32x4_t dw = f16x4(w + DOFF + 8 * (q0 + qq));
            FOR_T acc[t][qq] = vfmaq_f32(acc[t][qq], vcvtq_f32_s32(ia[t][qq]), vmulq_n_f32(dw, ldf(a + 256 + 4 * t)));
            if (MIN) {
                const float32x4_t mw = f16x4(w + MOFF + 8 * (q0 + qq));
                FOR_T acc[t][qq] = vfmaq_f32(acc[t][qq], mw, vdupq_n_f32(ldf(a + 288 + 4 * t)));
            }
        }
    }
    FOR_T FOR_Q store_rows(acc[t][qq], y + t * ys, q0 + qq, nrows);
}

/* ==== Q4_K, Q5_K, IQ4_XS: 8 sub-blocks of 32 ==== */

INLINE void k4k_pass(const qpack_format F, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys,
                     int nrows, const int NT, const int NQ, int q0) {
    const bool Q5 = F == QPACK_Q5_K, XS = F == QPACK_IQ4_XS;
    const size_t UB = Q5 ? 2880 : XS ? 2208 : 2368, SO = Q5 ? 2560 : 2048, DO = Q5 ? 2816 : XS ? 2176 : 2304;
    float32x4_t acc[QPACK_TOK][4];
    FOR_T FOR_Q acc[t][qq] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2336) {
        float32x4_t dv[4], mv[4], sb[QPACK_TOK][4];
        FOR_Q dv[qq] = f16x4(w + DO + 8 * (q0 + qq)), mv[qq] = XS ? dv[qq] : f16x4(w + DO + 32 + 8 * (q0 + qq));
        FOR_T FOR_Q sb[t][qq] = vdupq_n_f32(0.0f);
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = w + 256 * s, *x = a + 256 * s;
            if (q0 == 0) qpack_prefetch_part(w, UB, s);
            int32x4_t ia[QPACK_TOK][4];
            FOR_T FOR_Q ia[t][qq] = vdupq_n_s32(0);
            UNROLL for (int v = 0; v < 4; v++) {
                int8x16_t lo[4], hi[4];
                uint64_t h0 = 0, h1 = 0;
                if (Q5) memcpy(&h0, w + 2048 + 64 * s + 8 * v, 8), memcpy(&h1, w + 2048 + 64 * s + 8 * (v + 4), 8);
                FOR_Q nibbles(Q5, XS, q + 64 * v, h0, h1, q0 + qq, &lo[qq], &hi[qq]);
                FOR_T {
                    const int8x16_t xl = rep4(x + 32 * t + 4 * v), xh = rep4(x + 32 * t + 16 + 4 * v);
                    FOR_Q ia[t][qq] = vdotq_s32(ia[t][qq], lo[qq], xl);
                    FOR_Q ia[t][qq] = vdotq_s32(ia[t][qq], hi[qq], xh);
                }
            }
            FOR_Q {
                const uint8_t *sc = w + SO + 16 * s + 4 * (q0 + qq);
                const float32x4_t scf = XS ? (float32x4_t){(float)(int8_t)sc[0], (float)(int8_t)sc[1],
                                                           (float)(int8_t)sc[2], (float)(int8_t)sc[3]}
                                           : (float32x4_t){(float)sc[0], (float)sc[1], (float)sc[2], (float)sc[3]};
                const float32x4_t dws = vmulq_f32(dv[qq], scf);
                if (XS) {
                    FOR_T sb[t][qq] = vfmaq_f32(sb[t][qq], vcvtq_f32_s32(ia[t][qq]), dws);
                } else {
                    const uint8_t *mn = sc + 128;
                    const float32x4_t mws =
                        vmulq_f32(mv[qq], (float32x4_t){(float)mn[0], (float)mn[1], (float)mn[2], (float)mn[3]});
                    FOR_T {
                        sb[t][qq] = vfmaq_f32(sb[t][qq], vcvtq_f32_s32(ia[t][qq]), dws);
                        sb[t][qq] = vfmsq_f32(sb[t][qq], mws, vdupq_n_f32(ldf(a + 2080 + 4 * (8 * s + t))));
                    }
                }
            }
        }
        FOR_T FOR_Q acc[t][qq] = vfmaq_f32(acc[t][qq], sb[t][qq], vdupq_n_f32(ldf(a + 2048 + 4 * t)));
    }
    FOR_T FOR_Q store_rows(acc[t][qq], y + t * ys, q0 + qq, nrows);
}

/* ==== Q6_K, Q3_K, Q2_K: 16 sub-blocks of 16, their scales applied in integers ==== */

INLINE void k6k_pass(const qpack_format F, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys,
                     int nrows, const int NT, const int NQ, int q0) {
    /* Q6_K: nibbles plus the crumbs as bits 4..5; Q3_K: the crumbs plus 4 under the bit-2
     * masks (q + 4); Q2_K: the crumbs alone, its mins against the tile's sub-block sums */
    const bool Q3 = F == QPACK_Q3_K, Q2 = F == QPACK_Q2_K, CR = Q2 || Q3;
    const size_t UB = Q2 ? 1344 : Q3 ? 1824 : 3360, CO = CR ? 0 : 2048;
    const size_t SCO = Q2 ? 1024 : Q3 ? 1536 : 3072, DO = Q2 ? 1280 : Q3 ? 1792 : 3328;
    float32x4_t acc[QPACK_TOK][4];
    FOR_T FOR_Q acc[t][qq] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2592) {
        int32x4_t isb[QPACK_TOK][4];
        FOR_T FOR_Q isb[t][qq] = vdupq_n_s32(0);
        for (int p = 0; p < 8; p++) {
            const uint8_t *q = w + 256 * p, *x = a + 256 * p;
            if (q0 == 0) qpack_prefetch_part(w, UB, p);
            UNROLL for (int h = 0; h < 2; h++) {
                const int s = 2 * p + h;
                int32x4_t ia[QPACK_TOK][4];
                FOR_T FOR_Q ia[t][qq] = vdupq_n_s32(Q2 ? 0 : ldi(a + 2080 + 4 * (8 * s + t)));
                UNROLL for (int jj = 0; jj < 4; jj++) {
                    int8x16_t wv[4];
                    FOR_Q {
                        const uint8x16_t c = vld1q_u8(w + CO + 128 * p + 64 * h + 16 * (q0 + qq));
                        uint8x16_t v;
                        if (CR) {
                            v = vandq_u8(vshlq_u8(c, vdupq_n_s8((int8_t)(-2 * jj))), vdupq_n_u8(3));
                            if (Q3) {
                                uint64_t hb;
                                memcpy(&hb, w + 1024 + 64 * p + 8 * (4 * h + jj), 8);
                                v = vaddq_u8(v, bits_as(hb, q0 + qq, 4));
                            }
                        } else {
                            const uint8x16_t n = vld1q_u8(q + 64 * jj + 16 * (q0 + qq));
                            const uint8x16_t lo = h ? vshrq_n_u8(n, 4) : vandq_u8(n, vdupq_n_u8(15));
                            /* crumb jj (bits 2 jj..2 jj + 1) to bits 4..5, over the nibble */
                            v = vorrq_u8(vandq_u8(vshlq_u8(c, vdupq_n_s8((int8_t)(4 - 2 * jj))), vdupq_n_u8(0x30)), lo);
                        }
                        wv[qq] = vreinterpretq_s8_u8(v);
                    }
                    FOR_T {
                        const int8x16_t xv = rep4(x + 32 * t + 16 * h + 4 * jj);
                        FOR_Q ia[t][qq] = vdotq_s32(ia[t][qq], wv[qq], xv);
                    }
                }
                FOR_Q {
                    const uint8_t *sc = w + SCO + 16 * s + 4 * (q0 + qq);
                    const int32x4_t scv = Q2 ? (int32x4_t){sc[0] & 15, sc[1] & 15, sc[2] & 15, sc[3] & 15}
                                             : (int32x4_t){(int8_t)sc[0], (int8_t)sc[1], (int8_t)sc[2], (int8_t)sc[3]};
                    FOR_T isb[t][qq] = vmlaq_s32(isb[t][qq], ia[t][qq], scv);
                }
            }
        }
        FOR_Q {
            const float32x4_t dv = f16x4(w + DO + 8 * (q0 + qq));
            FOR_T acc[t][qq] = vfmaq_f32(acc[t][qq], vcvtq_f32_s32(isb[t][qq]), vmulq_n_f32(dv, ldf(a + 2048 + 4 * t)));
        }
        if (Q2) {
            FOR_Q {
                int32x4_t msb[QPACK_TOK];
                FOR_T msb[t] = vdupq_n_s32(0);
                for (int s = 0; s < 16; s++) {
                    const uint8_t *sm = w + 1024 + 16 * s + 4 * (q0 + qq);
                    const int32x4_t mn = {sm[0] >> 4, sm[1] >> 4, sm[2] >> 4, sm[3] >> 4};
                    FOR_T msb[t] = vmlaq_s32(msb[t], mn, vdupq_n_s32(ldi(a + 2080 + 4 * (8 * s + t))));
                }
                const float32x4_t mv = f16x4(w + 1312 + 8 * (q0 + qq));
                FOR_T acc[t][qq] = vfmsq_f32(acc[t][qq], vcvtq_f32_s32(msb[t]), vmulq_n_f32(mv, ldf(a + 2048 + 4 * t)));
            }
        }
    }
    FOR_T FOR_Q store_rows(acc[t][qq], y + t * ys, q0 + qq, nrows);
}

/* ==== F16, BF16: widened to floats, fused multiply-adds (qpack.h) ==== */

INLINE void kf_pass(const bool BF, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys, int nrows,
                    const int NT, const int NQ, int q0) {
    float32x4_t acc[QPACK_TOK][4];
    FOR_T FOR_Q acc[t][qq] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < nu; k++, w += 1024, a += 1024) {
        if (q0 == 0) qpack_prefetch_unit(w, 1024);
        float32x4_t s0[QPACK_TOK][4], s1[QPACK_TOK][4];
        FOR_T FOR_Q s0[t][qq] = vdupq_n_f32(0.0f), s1[t][qq] = vdupq_n_f32(0.0f);
        for (int j = 0; j < 32; j += 2) {
            FOR_Q {
                const uint8_t *p0 = w + 32 * j + 8 * (q0 + qq), *p1 = p0 + 32;
                const float32x4_t w0 = BF ? bf16x4(p0) : f16x4(p0), w1 = BF ? bf16x4(p1) : f16x4(p1);
                FOR_T {
                    s0[t][qq] = vfmaq_f32(s0[t][qq], w0, vdupq_n_f32(ldf(a + 128 * t + 4 * j)));
                    s1[t][qq] = vfmaq_f32(s1[t][qq], w1, vdupq_n_f32(ldf(a + 128 * t + 4 * (j + 1))));
                }
            }
        }
        FOR_T FOR_Q acc[t][qq] = vaddq_f32(acc[t][qq], vaddq_f32(s0[t][qq], s1[t][qq]));
    }
    FOR_T FOR_Q store_rows(acc[t][qq], y + t * ys, q0 + qq, nrows);
}

/* ==== Instances ==== */

/* every pass of NQ registers that holds a row that exists */
#define PASSES(PASS, NT)                                                                                       \
    do {                                                                                                       \
        for (int q0 = 0; q0 < 4 && 4 * q0 < nrows; q0 += NQ_OF(NT)) PASS(NT, NQ_OF(NT), q0);                 \
    } while (0)

#define BY_NT(PASS)                                                                                            \
    switch (nt) {                                                                                              \
    case 1: PASSES(PASS, 1); break;                                                                            \
    case 2: PASSES(PASS, 2); break;                                                                            \
    case 3: PASSES(PASS, 3); break;                                                                            \
    case 4: PASSES(PASS, 4); break;                                                                            \
    case 5: PASSES(PASS, 5); break;                                                                            \
    case 6: PASSES(PASS, 6); break;                                                                            \
    case 7: PASSES(PASS, 7); break;                                                                            \
    default: PASSES(PASS, 8); break;                                                                           \
    }

#define KERNEL_FN(NAME)                                                                                        \
    static void NAME(int64_t nu, const void *g, const void *tile, int nt, float *y, int64_t ys, int nrows) {    \
        EDDY_ASSERT(nt >= 1 && nt <= QPACK_TOK && nrows >= 1 && nrows <= QPACK_ROWS);                          \
        BY_NT(NAME##_PASS)                                                                                     \
    }

#define q8_0_PASS(NT, NQ, q0) k32_pass(QPACK_Q8_0, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q4_0_PASS(NT, NQ, q0) k32_pass(QPACK_Q4_0, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q4_1_PASS(NT, NQ, q0) k32_pass(QPACK_Q4_1, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define iq4_nl_PASS(NT, NQ, q0) k32_pass(QPACK_IQ4_NL, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q5_0_PASS(NT, NQ, q0) k32_pass(QPACK_Q5_0, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q5_1_PASS(NT, NQ, q0) k32_pass(QPACK_Q5_1, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q4_K_PASS(NT, NQ, q0) k4k_pass(QPACK_Q4_K, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q5_K_PASS(NT, NQ, q0) k4k_pass(QPACK_Q5_K, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define iq4_xs_PASS(NT, NQ, q0) k4k_pass(QPACK_IQ4_XS, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q6_K_PASS(NT, NQ, q0) k6k_pass(QPACK_Q6_K, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q3_K_PASS(NT, NQ, q0) k6k_pass(QPACK_Q3_K, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define q2_K_PASS(NT, NQ, q0) k6k_pass(QPACK_Q2_K, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define f16_PASS(NT, NQ, q0) kf_pass(false, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define bf16_PASS(NT, NQ, q0) kf_pass(true, nu, g, tile, y, ys, nrows, NT, NQ, q0)
#define KERNEL_OF(F, NAME) KERNEL_FN(NAME)
QPACK_KERNELS(KERNEL_OF)

qpack_kernel_fn qpack_kernel_neon(qpack_format f) {
    switch (f) {
        QPACK_KERNELS(QPACK_KERNEL_CASE)
    default: return NULL;
    }
}
