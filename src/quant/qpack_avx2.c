/*
 * qpack_avx2.c — AVX2 kernels on packed weights (qpack.h), for CPUs without AVX-512
 * VNNI: the same groups and tiles as qpack_avx512.c, a group taken as two halves of 8
 * rows (the low and high 32 bytes of each 64-byte weight vector) and the tile's tokens
 * 4 at a time, to fit 16 vector registers.
 *
 * Integer dots without vpdpbusd: vpmaddubsw (u8 weight x s8 activation -> s16 pair
 * sums), added up in 16 bits for as long as they fit, then widened with vpmaddwd by
 * ones (-> s32). On these CPUs vpmaddubsw and vpmaddwd share the vector multipliers, so
 * the fewer widenings the faster. Activations are within +-128, so a pair sum of u8
 * quants of at most m is within 2 * m * 128, and a 16-bit sum holds:
 *   - nibbles (Q4_0, Q4_1, Q4_K; m = 15): the 8 pair sums of a 32-element block;
 *   - Q5 quants (m = 31): 4 pair sums; Q6_K's (m = 63): 2.
 * Q8_0 (packed quants up to 255: no room) goes back to signed (q = packed ^ 0x80), and
 * IQ4_NL and IQ4_XS have signed table values: these use the sign trick — |q| against the
 * activation with q's sign (vpsignb) — and start from 0 instead of the -128 sum of the
 * tile. Every lane thus holds one row's exact block sum, and the float operations are
 * those of qpack_kernel_ref: the results are identical to it (tests/test_quant_simd.c,
 * qpack_kernels_match_ref, also at the largest quants and activations). F16 and BF16
 * rows are widened to floats 8 rows at a time, with the float operations of the
 * reference as well.
 */
#include <immintrin.h>
#include <string.h>

#include "base/error.h"
#include "qpack.h"
#include "qpack_kernels.h"
#include "qpack_prefetch.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

enum { HT = 4 }; /* tokens per pass */

/* Four bytes to every lane, as a float broadcast: on AMD Zen vbroadcastss from memory is a
 * load alone, where vpbroadcastd also takes a vector pipe. */
INLINE __m256i bcast32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return _mm256_castps_si256(_mm256_set1_ps(v));
}

INLINE __m256 bcastf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return _mm256_set1_ps(v);
}

INLINE __m256 f16x8(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

INLINE __m256i ld(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 32 bits of a Q5 (Q3_K) mask -> 32 bytes, v where the bit is set, else 0 */
INLINE __m256i mask_bytes(uint32_t m, char val) {
    const __m256i v = _mm256_set1_epi32((int)m);
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i sel = _mm256_and_si256(_mm256_shuffle_epi8(v, idx), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(sel, bit), _mm256_set1_epi8(val));
}

/* One 32-byte vector of packed nibbles (8 rows x 4 bytes) as its low and high quants; Q5:
 * masks at the piece's 64-bit bit-4 masks, advanced to this vector (bytes 4 h and 32 + 4 h
 * hold half h's bits for lo and hi), else NULL. */
INLINE void unpack_nibbles(const uint8_t *p, const uint8_t *masks, int h, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(15), n = ld(p);
    *lo = _mm256_and_si256(n, m4), *hi = _mm256_and_si256(_mm256_srli_epi16(n, 4), m4);
    if (masks) {
        uint32_t b0, b1;
        memcpy(&b0, masks + 4 * h, 4);
        memcpy(&b1, masks + 32 + 4 * h, 4);
        *lo = _mm256_add_epi8(*lo, mask_bytes(b0, 16));
        *hi = _mm256_add_epi8(*hi, mask_bytes(b1, 16));
    }
}

/* s32 lanes += pair sums of (u8 a) x (s8 b) + (u8 c) x (s8 d), both pairs within 2 * 63 * 128 */
INLINE __m256i dot2u(__m256i acc, __m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(a, b), _mm256_maddubs_epi16(c, d));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* The running sum v as it stands: without it GCC turns a chain of 16-bit sums into
 * products kept on the stack and added up as a tree, which spills every one of them. */
INLINE __m256i chain(__m256i v) {
    __asm__("" : "+x"(v));
    return v;
}

/* s16 lanes += pair sums of (u8 a) x (s8 b) + (u8 c) x (s8 d): the caller keeps the 16-bit
 * sums in range (see the top) */
INLINE __m256i madd2(__m256i s16, __m256i a, __m256i b, __m256i c, __m256i d) {
    return chain(_mm256_add_epi16(s16, _mm256_add_epi16(_mm256_maddubs_epi16(a, b), _mm256_maddubs_epi16(c, d))));
}

/* *acc (s32 lanes) += the pair sums of s16; returns a zeroed s16 */
INLINE __m256i widen16(__m256i *acc, __m256i s16) {
    *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
    return _mm256_setzero_si256();
}

/* s32 lanes += q x x for signed q given as |q| and q */
INLINE __m256i dot1s(__m256i acc, __m256i qabs, __m256i q, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(qabs, _mm256_sign_epi8(x, q));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* The weights stream from memory in the first pass over a chunk (the one that starts at
 * rows 0..7 and the first tokens), which prefetches them (qpack_prefetch.h); the later
 * passes find them in cache. */
#define FIRST_PASS (h0 == 0 && t0 == 0)

/* ==== 32-element formats ==== */

INLINE size_t ub32(const qpack_format F) {
    return F == QPACK_Q8_0 ? 544 : F == QPACK_Q4_1 ? 320 : F == QPACK_Q5_0 ? 352 : F == QPACK_Q5_1 ? 384 : 288;
}

/* The kernels below run NH halves of the group (rows 8 h0 .. 8 (h0 + NH) - 1) against NT
 * tokens of the tile (t0 .. t0 + NT - 1), NH * NT <= 4 lanes of sums c = (hh, t): two
 * halves for one token (decode: each weight line loaded once, the activations broadcast
 * once for both; also two tokens), else one half for up to 4 tokens. The sums carry over
 * in io[h][t]. */
#define FOR_C _Pragma("GCC unroll 4") for (int c = 0; c < NH * NT; c++)
#define FOR_H _Pragma("GCC unroll 2") for (int hh = 0; hh < NH; hh++)
#define HH (c / NT)
#define TT (c % NT)

INLINE void k32(const qpack_format F, int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h0, int t0,
                float (*io)[QPACK_TOK][8], const int NH, const int NT) {
    const bool Q5 = F == QPACK_Q5_0 || F == QPACK_Q5_1, MIN = F == QPACK_Q4_1 || F == QPACK_Q5_1;
    const bool SIGNED = F == QPACK_Q8_0 || F == QPACK_IQ4_NL;
    const size_t UB = ub32(F), AB = 320;
    const size_t DOFF = F == QPACK_Q8_0 ? 512 : Q5 ? 320 : 256, MOFF = Q5 ? 352 : 288;
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)); /* signed */
    __m256 acc[4];
    FOR_C acc[c] = k0 ? _mm256_loadu_ps(io[h0 + HH][t0 + TT]) : _mm256_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += AB) {
        if (FIRST_PASS) qpack_prefetch_unit(w, UB);
        const uint8_t *x = a + 32 * t0, *wh = w + 32 * h0; /* token t0's quants, half h0's weights */
        __m256i ia[4];
        FOR_C ia[c] = MIN || SIGNED ? _mm256_setzero_si256() : bcast32(a + 288 + 4 * (t0 + TT));
        if (F == QPACK_Q8_0) {
            UNROLL for (int j = 0; j < 8; j++) {
                __m256i q[2], qa[2];
                FOR_H q[hh] = _mm256_xor_si256(ld(wh + 64 * j + 32 * hh), _mm256_set1_epi8((char)0x80)),
                      qa[hh] = _mm256_abs_epi8(q[hh]);
                FOR_C ia[c] = dot1s(ia[c], qa[HH], q[HH], bcast32(x + 32 * TT + 4 * j));
            }
        } else if (F == QPACK_IQ4_NL) {
            UNROLL for (int v = 0; v < 4; v++) {
                __m256i lo[2], hi[2];
                FOR_H {
                    unpack_nibbles(wh + 64 * v + 32 * hh, NULL, 0, &lo[hh], &hi[hh]);
                    lo[hh] = _mm256_shuffle_epi8(kv, lo[hh]), hi[hh] = _mm256_shuffle_epi8(kv, hi[hh]);
                }
                FOR_C {
                    ia[c] = dot1s(ia[c], _mm256_abs_epi8(lo[HH]), lo[HH], bcast32(x + 32 * TT + 4 * v));
                    ia[c] = dot1s(ia[c], _mm256_abs_epi8(hi[HH]), hi[HH], bcast32(x + 32 * TT + 16 + 4 * v));
                }
            }
        } else {
            /* nibbles: all 8 products in one 16-bit sum; Q5 quants: 4 at a time */
            __m256i s16[4];
            FOR_C s16[c] = _mm256_setzero_si256();
            UNROLL for (int v = 0; v < 4; v++) {
                __m256i lo[2], hi[2];
                FOR_H unpack_nibbles(wh + 64 * v + 32 * hh, Q5 ? w + 256 + 8 * v : NULL, h0 + hh, &lo[hh], &hi[hh]);
                FOR_C s16[c] = madd2(s16[c], lo[HH], bcast32(x + 32 * TT + 4 * v), hi[HH], bcast32(x + 32 * TT + 16 + 4 * v));
                if (Q5 && v % 2 == 1) FOR_C s16[c] = widen16(&ia[c], s16[c]);
            }
            if (!Q5) FOR_C widen16(&ia[c], s16[c]);
        }
        __m256 dw[2], mw[2];
        FOR_H dw[hh] = f16x8(w + DOFF + 16 * (h0 + hh)),
              mw[hh] = MIN ? f16x8(w + MOFF + 16 * (h0 + hh)) : _mm256_setzero_ps();
        FOR_C acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[c]), _mm256_mul_ps(dw[HH], bcastf(a + 256 + 4 * (t0 + TT))),
                                       acc[c]);
        if (MIN) FOR_C acc[c] = _mm256_fmadd_ps(mw[HH], bcastf(a + 288 + 4 * (t0 + TT)), acc[c]);
    }
    FOR_C _mm256_storeu_ps(io[h0 + HH][t0 + TT], acc[c]);
}

/* ==== F16, BF16: widened to floats, fused multiply-adds (qpack.h) ==== */

INLINE __m256 widen8(const bool BF, const uint8_t *p) {
    const __m128i h = _mm_loadu_si128((const __m128i *)p);
    return BF ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

INLINE void kf(const bool BF, int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h0, int t0,
               float (*io)[QPACK_TOK][8], const int NH, const int NT) {
    __m256 acc[4];
    FOR_C acc[c] = k0 ? _mm256_loadu_ps(io[h0 + HH][t0 + TT]) : _mm256_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += 1024, a += 1024) {
        if (FIRST_PASS) qpack_prefetch_unit(w, 1024);
        __m256 s0[4], s1[4];
        FOR_C s0[c] = _mm256_setzero_ps(), s1[c] = _mm256_setzero_ps();
        UNROLL for (int j = 0; j < 32; j += 2) {
            __m256 w0[2], w1[2];
            FOR_H w0[hh] = widen8(BF, w + 32 * j + 16 * (h0 + hh)), w1[hh] = widen8(BF, w + 32 * (j + 1) + 16 * (h0 + hh));
            FOR_C {
                s0[c] = _mm256_fmadd_ps(w0[HH], bcastf(a + 128 * (t0 + TT) + 4 * j), s0[c]);
                s1[c] = _mm256_fmadd_ps(w1[HH], bcastf(a + 128 * (t0 + TT) + 4 * (j + 1)), s1[c]);
            }
        }
        FOR_C acc[c] = _mm256_add_ps(acc[c], _mm256_add_ps(s0[c], s1[c]));
    }
    FOR_C _mm256_storeu_ps(io[h0 + HH][t0 + TT], acc[c]);
}

/* ==== Q4_K, Q5_K, IQ4_XS: 8 sub-blocks of 32 ==== */

INLINE void k4k(const qpack_format F, int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h0, int t0,
                float (*io)[QPACK_TOK][8], const int NH, const int NT) {
    const bool Q5 = F == QPACK_Q5_K, XS = F == QPACK_IQ4_XS;
    const size_t UB = Q5 ? 2880 : XS ? 2208 : 2368, SO = Q5 ? 2560 : 2048, DO = Q5 ? 2816 : XS ? 2176 : 2304;
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)); /* signed */
    __m256 acc[4];
    FOR_C acc[c] = k0 ? _mm256_loadu_ps(io[h0 + HH][t0 + TT]) : _mm256_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2336) {
        __m256 dv[2], mv[2];
        FOR_H dv[hh] = f16x8(w + DO + 16 * (h0 + hh)), mv[hh] = XS ? dv[hh] : f16x8(w + DO + 32 + 16 * (h0 + hh));
        __m256 sb[4];
        FOR_C sb[c] = _mm256_setzero_ps();
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = w + 256 * s + 32 * h0, *x = a + 256 * s + 32 * t0;
            if (FIRST_PASS) qpack_prefetch_part(w, UB, s);
            __m256i ia[4], s16[4];
            FOR_C ia[c] = s16[c] = _mm256_setzero_si256(); /* IQ4_XS: signed quants, no -128 sum */
            UNROLL for (int v = 0; v < 4; v++) {
                __m256i lo[2], hi[2];
                FOR_H {
                    unpack_nibbles(q + 64 * v + 32 * hh, Q5 ? w + 2048 + 64 * s + 8 * v : NULL, h0 + hh, &lo[hh], &hi[hh]);
                    if (XS) lo[hh] = _mm256_shuffle_epi8(kv, lo[hh]), hi[hh] = _mm256_shuffle_epi8(kv, hi[hh]);
                }
                if (XS) {
                    FOR_C {
                        ia[c] = dot1s(ia[c], _mm256_abs_epi8(lo[HH]), lo[HH], bcast32(x + 32 * TT + 4 * v));
                        ia[c] = dot1s(ia[c], _mm256_abs_epi8(hi[HH]), hi[HH], bcast32(x + 32 * TT + 16 + 4 * v));
                    }
                } else {
                    /* nibbles: the sub-block's 8 products in one 16-bit sum; Q5_K: 4 at a time */
                    FOR_C s16[c] = madd2(s16[c], lo[HH], bcast32(x + 32 * TT + 4 * v), hi[HH], bcast32(x + 32 * TT + 16 + 4 * v));
                    if (v == 3 || (Q5 && v == 1)) FOR_C s16[c] = widen16(&ia[c], s16[c]);
                }
            }
            __m256 dws[2], mws[2];
            FOR_H {
                const __m128i sc8 = _mm_loadl_epi64((const __m128i *)(w + SO + 16 * s + 8 * (h0 + hh)));
                dws[hh] = _mm256_mul_ps(dv[hh], _mm256_cvtepi32_ps(XS ? _mm256_cvtepi8_epi32(sc8) : _mm256_cvtepu8_epi32(sc8)));
                mws[hh] = XS ? dws[hh]
                             : _mm256_mul_ps(mv[hh], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                                         (const __m128i *)(w + SO + 128 + 16 * s + 8 * (h0 + hh))))));
            }
            FOR_C {
                sb[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[c]), dws[HH], sb[c]);
                if (!XS) sb[c] = _mm256_fnmadd_ps(mws[HH], bcastf(a + 2080 + 4 * (8 * s + t0 + TT)), sb[c]);
            }
        }
        FOR_C acc[c] = _mm256_fmadd_ps(sb[c], bcastf(a + 2048 + 4 * (t0 + TT)), acc[c]);
    }
    FOR_C _mm256_storeu_ps(io[h0 + HH][t0 + TT], acc[c]);
}

/* ==== Q6_K, Q3_K, Q2_K ==== */

INLINE __m256i crumb_hi(__m256i c, const int k) {
    return k == 0 ? _mm256_slli_epi16(c, 4) : k == 1 ? _mm256_slli_epi16(c, 2) : k == 2 ? c : _mm256_srli_epi16(c, 2);
}

INLINE void k6k(const qpack_format F, int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h0, int t0,
                float (*io)[QPACK_TOK][8], const int NH, const int NT) {
    /* Q3_K: the 3-bit q + 4 as the crumbs' low 2 bits plus 4 where the bit-2 masks have it;
     * Q2_K: the crumbs alone, its scale | min << 4 bytes applied in integers too (the mins
     * against the tile's sub-block sums, after the unit's products). A sub-block's 16 quants
     * (at most 7 x 128 each) stay in 16 bits. */
    const bool Q3 = F == QPACK_Q3_K, Q2 = F == QPACK_Q2_K, CR = Q2 || Q3;
    const size_t UB = Q2 ? 1344 : Q3 ? 1824 : 3360, CO = CR ? 0 : 2048;
    const size_t SCO = Q2 ? 1024 : Q3 ? 1536 : 3072, DO = Q2 ? 1280 : Q3 ? 1792 : 3328;
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30), m3 = _mm256_set1_epi8(3);
    __m256 acc[4];
    FOR_C acc[c] = k0 ? _mm256_loadu_ps(io[h0 + HH][t0 + TT]) : _mm256_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2592) {
        __m256i isb[4]; /* sub-block scales in integers, as vec_dot_ref */
        FOR_C isb[c] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            const uint8_t *q = w + 256 * p + 32 * h0, *x = a + 256 * p + 32 * t0;
            if (FIRST_PASS) qpack_prefetch_part(w, UB, p);
            UNROLL for (int hf = 0; hf < 2; hf++) { /* the 16-element halves of the 32 */
                const int s = 2 * p + hf;
                __m256i cr[2];
                FOR_H cr[hh] = ld(w + CO + 128 * p + 64 * hf + 32 * (h0 + hh));
                __m256i ia[4], s16[4];
                FOR_C {
                    ia[c] = Q2 ? _mm256_setzero_si256() : bcast32(a + 2080 + 4 * (8 * s + t0 + TT));
                    s16[c] = _mm256_setzero_si256();
                }
                UNROLL for (int jj = 0; jj < 4; jj += 2) {
                    __m256i wv[2][2];
                    FOR_H UNROLL for (int e = 0; e < 2; e++) {
                        if (CR) {
                            wv[hh][e] = _mm256_and_si256(jj + e ? _mm256_srli_epi16(cr[hh], 2 * (jj + e)) : cr[hh], m3);
                            if (Q3) {
                                uint32_t hb;
                                memcpy(&hb, w + 1024 + 64 * p + 8 * (4 * hf + jj + e) + 4 * (h0 + hh), 4);
                                wv[hh][e] = _mm256_add_epi8(wv[hh][e], mask_bytes(hb, 4));
                            }
                        } else {
                            const __m256i n = ld(q + 64 * (jj + e) + 32 * hh);
                            const __m256i lo = _mm256_and_si256(hf ? _mm256_srli_epi16(n, 4) : n, m4);
                            wv[hh][e] = _mm256_or_si256(_mm256_and_si256(crumb_hi(cr[hh], jj + e), m30), lo);
                        }
                    }
                    FOR_C {
                        const uint8_t *xt = x + 32 * TT + 16 * hf + 4 * jj;
                        if (CR) s16[c] = madd2(s16[c], wv[HH][0], bcast32(xt), wv[HH][1], bcast32(xt + 4));
                        else ia[c] = dot2u(ia[c], wv[HH][0], bcast32(xt), wv[HH][1], bcast32(xt + 4));
                    }
                }
                if (CR) FOR_C widen16(&ia[c], s16[c]);
                __m256i sc[2];
                FOR_H {
                    const __m128i sc8 = _mm_loadl_epi64((const __m128i *)(w + SCO + 16 * s + 8 * (h0 + hh)));
                    sc[hh] = Q2 ? _mm256_and_si256(_mm256_cvtepu8_epi32(sc8), _mm256_set1_epi32(15))
                                : _mm256_cvtepi8_epi32(sc8);
                }
                FOR_C isb[c] = _mm256_add_epi32(isb[c], _mm256_mullo_epi32(ia[c], sc[HH]));
            }
        }
        __m256 dv[2];
        FOR_H dv[hh] = f16x8(w + DO + 16 * (h0 + hh));
        FOR_C acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isb[c]), _mm256_mul_ps(dv[HH], bcastf(a + 2048 + 4 * (t0 + TT))),
                                       acc[c]);
        if (Q2) {
            __m256i msb[4];
            FOR_C msb[c] = _mm256_setzero_si256();
            for (int s = 0; s < 16; s++) {
                __m256i mn[2];
                FOR_H mn[hh] = _mm256_srli_epi32(
                    _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + 1024 + 16 * s + 8 * (h0 + hh)))), 4);
                FOR_C msb[c] = _mm256_add_epi32(msb[c], _mm256_mullo_epi32(mn[HH], bcast32(a + 2080 + 4 * (8 * s + t0 + TT))));
            }
            __m256 mv[2];
            FOR_H mv[hh] = f16x8(w + 1312 + 16 * (h0 + hh));
            FOR_C acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msb[c]),
                                            _mm256_mul_ps(mv[HH], bcastf(a + 2048 + 4 * (t0 + TT))), acc[c]);
        }
    }
    FOR_C _mm256_storeu_ps(io[h0 + HH][t0 + TT], acc[c]);
}

/* ==== Instances ==== */

#define BY_NT(CALL)                                                                                          \
    switch (n) {                                                                                             \
    case 1: CALL(1, 1); break;                                                                               \
    case 2: CALL(1, 2); break;                                                                               \
    case 3: CALL(1, 3); break;                                                                               \
    default: CALL(1, 4); break;                                                                              \
    }

/* The row length goes in even chunks of at most L1_CHUNK bytes of weights and activations,
 * every pass (halves x token quads) over one chunk before the next, so that the later
 * passes read the chunk from L1; the sums carry over in io (the first chunk starts them
 * from 0), and each lane adds its units in order, as qpack_kernel_ref does. One or two
 * tokens and more than 8 rows: both halves in one pass. */
#define L1_CHUNK 24576

#define KERNEL_FN(NAME, FMT)                                                                                 \
    static void NAME(int64_t nu, const void *g, const void *tile, int nt, float *y, int64_t ys, int nrows) {  \
        EDDY_ASSERT(nt >= 1 && nt <= QPACK_TOK && nrows >= 1 && nrows <= QPACK_ROWS);                        \
        const size_t ub = qpack_unit_bytes(FMT), ab = qpack_act_unit_bytes(FMT);                             \
        const int64_t fit = L1_CHUNK / (int64_t)(ub + ab) > 1 ? L1_CHUNK / (int64_t)(ub + ab) : 1;            \
        const int64_t chunk = (nu + (nu + fit - 1) / fit - 1) / ((nu + fit - 1) / fit); /* even chunks */    \
        float io[2][QPACK_TOK][8];                                                                           \
        for (int64_t k0 = 0; k0 < nu; k0 += chunk) {                                                         \
            const int64_t nk = nu - k0 < chunk ? nu - k0 : chunk;                                            \
            const uint8_t *gk = (const uint8_t *)g + k0 * ub, *ak = (const uint8_t *)tile + k0 * ab;         \
            if (nt <= 2 && nrows > 8) {                                                                      \
                const int h = 0, t0 = 0;                                                                     \
                if (nt == 1) NAME##_CALL(2, 1);                                                              \
                else NAME##_CALL(2, 2);                                                                      \
                continue;                                                                                    \
            }                                                                                                \
            for (int h = 0; h < 2 && 8 * h < nrows; h++)                                                     \
                for (int t0 = 0; t0 < nt; t0 += HT) {                                                        \
                    const int n = nt - t0 < HT ? nt - t0 : HT;                                               \
                    BY_NT(NAME##_CALL)                                                                       \
                }                                                                                            \
        }                                                                                                    \
        for (int t = 0; t < nt; t++)                                                                         \
            for (int h = 0; h < 2 && 8 * h < nrows; h++)                                                     \
                memcpy(y + t * ys + 8 * h, io[h][t], sizeof(float) * (size_t)(nrows - 8 * h < 8 ? nrows - 8 * h : 8)); \
    }

#define q8_0_CALL(NH, N) k32(QPACK_Q8_0, k0, nk, gk, ak, h, t0, io, NH, N)
#define q4_0_CALL(NH, N) k32(QPACK_Q4_0, k0, nk, gk, ak, h, t0, io, NH, N)
#define q4_1_CALL(NH, N) k32(QPACK_Q4_1, k0, nk, gk, ak, h, t0, io, NH, N)
#define iq4_nl_CALL(NH, N) k32(QPACK_IQ4_NL, k0, nk, gk, ak, h, t0, io, NH, N)
#define q5_0_CALL(NH, N) k32(QPACK_Q5_0, k0, nk, gk, ak, h, t0, io, NH, N)
#define q5_1_CALL(NH, N) k32(QPACK_Q5_1, k0, nk, gk, ak, h, t0, io, NH, N)
#define q4_K_CALL(NH, N) k4k(QPACK_Q4_K, k0, nk, gk, ak, h, t0, io, NH, N)
#define q5_K_CALL(NH, N) k4k(QPACK_Q5_K, k0, nk, gk, ak, h, t0, io, NH, N)
#define iq4_xs_CALL(NH, N) k4k(QPACK_IQ4_XS, k0, nk, gk, ak, h, t0, io, NH, N)
#define q6_K_CALL(NH, N) k6k(QPACK_Q6_K, k0, nk, gk, ak, h, t0, io, NH, N)
#define q3_K_CALL(NH, N) k6k(QPACK_Q3_K, k0, nk, gk, ak, h, t0, io, NH, N)
#define q2_K_CALL(NH, N) k6k(QPACK_Q2_K, k0, nk, gk, ak, h, t0, io, NH, N)
#define f16_CALL(NH, N) kf(false, k0, nk, gk, ak, h, t0, io, NH, N)
#define bf16_CALL(NH, N) kf(true, k0, nk, gk, ak, h, t0, io, NH, N)
#define KERNEL_OF(F, NAME) KERNEL_FN(NAME, F)
QPACK_KERNELS(KERNEL_OF)

qpack_kernel_fn qpack_kernel_avx2(qpack_format f) {
    switch (f) {
        QPACK_KERNELS(QPACK_KERNEL_CASE)
    default: return NULL;
    }
}
