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
 * qpack_kernels_match_ref, also at the largest quants and activations).
 */
#include <immintrin.h>
#include <string.h>

#include "base/error.h"
#include "qpack.h"

#define INLINE static inline __attribute__((always_inline))
#define FOR_T _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
#define UNROLL _Pragma("GCC unroll 8")

enum { HT = 4 }; /* tokens per pass */

/* Four bytes to every lane, as a float broadcast: on AMD Zen vbroadcastss from memory is a
 * load alone, where vpbroadcastd also takes a vector pipe (25% more kernel throughput). */
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

/* 32 bits of a Q5 mask -> 32 bytes, 16 where the bit is set, else 0 */
INLINE __m256i mask_bytes16(uint32_t m) {
    const __m256i v = _mm256_set1_epi32((int)m);
    const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i sel = _mm256_and_si256(_mm256_shuffle_epi8(v, idx), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(sel, bit), _mm256_set1_epi8(16));
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

/* The weights stream from memory in the first pass over a group (rows 0..7, the
 * first tokens): it prefetches each unit's bytes PF_BYTES ahead, as qpack_avx512.c
 * does; the later passes find them in cache. */
#define PF_BYTES 4096
INLINE void prefetch_unit(const uint8_t *w, size_t bytes, int h, int t0) {
    if (h == 0 && t0 == 0)
        for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(w + PF_BYTES + o, 0, 3);
}

/* ==== 32-element formats ==== */

INLINE size_t ub32(const qpack_format F) {
    return F == QPACK_Q8_0 ? 544 : F == QPACK_Q4_1 ? 320 : F == QPACK_Q5_0 ? 352 : F == QPACK_Q5_1 ? 384 : 288;
}

/* rows 8h..8h+7 of the group, tokens t0..t0+NT-1 of the tile */
INLINE void k32(const qpack_format F, int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h, int t0,
                float (*io)[8], const int NT) {
    const bool Q5 = F == QPACK_Q5_0 || F == QPACK_Q5_1, MIN = F == QPACK_Q4_1 || F == QPACK_Q5_1;
    const bool SIGNED = F == QPACK_Q8_0 || F == QPACK_IQ4_NL;
    const size_t UB = ub32(F), AB = 320;
    const size_t DOFF = F == QPACK_Q8_0 ? 512 : Q5 ? 320 : 256, MOFF = Q5 ? 352 : 288;
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)); /* signed */
    __m256 acc[HT];
    FOR_T acc[t] = k0 ? _mm256_loadu_ps(io[t]) : _mm256_setzero_ps();
    w += 32 * h;
    a += 32 * t0;
    for (int64_t k = 0; k < nu; k++, w += UB, a += AB) {
        prefetch_unit(w, UB, h, t0);
        __m256i ia[HT];
        FOR_T ia[t] = MIN || SIGNED ? _mm256_setzero_si256() : bcast32(a - 32 * t0 + 288 + 4 * (t0 + t));
        if (F == QPACK_Q8_0) {
            UNROLL for (int j = 0; j < 8; j++) {
                const __m256i q = _mm256_xor_si256(ld(w + 64 * j), _mm256_set1_epi8((char)0x80));
                const __m256i qa = _mm256_abs_epi8(q);
                FOR_T ia[t] = dot1s(ia[t], qa, q, bcast32(a + 32 * t + 4 * j));
            }
        } else if (F == QPACK_IQ4_NL) {
            UNROLL for (int v = 0; v < 4; v++) {
                const __m256i n = ld(w + 64 * v);
                const __m256i lo = _mm256_shuffle_epi8(kv, _mm256_and_si256(n, m4));
                const __m256i hi = _mm256_shuffle_epi8(kv, _mm256_and_si256(_mm256_srli_epi16(n, 4), m4));
                const __m256i la = _mm256_abs_epi8(lo), ha = _mm256_abs_epi8(hi);
                FOR_T {
                    ia[t] = dot1s(ia[t], la, lo, bcast32(a + 32 * t + 4 * v));
                    ia[t] = dot1s(ia[t], ha, hi, bcast32(a + 32 * t + 16 + 4 * v));
                }
            }
        } else {
            /* nibbles: all 8 products in one 16-bit sum; Q5 quants: 4 at a time */
            __m256i s16[HT];
            FOR_T s16[t] = _mm256_setzero_si256();
            UNROLL for (int v = 0; v < 4; v++) {
                const __m256i n = ld(w + 64 * v);
                __m256i lo = _mm256_and_si256(n, m4), hi = _mm256_and_si256(_mm256_srli_epi16(n, 4), m4);
                if (Q5) {
                    uint32_t h0, h1;
                    memcpy(&h0, w - 32 * h + 256 + 8 * v + 4 * h, 4);
                    memcpy(&h1, w - 32 * h + 256 + 8 * (v + 4) + 4 * h, 4);
                    lo = _mm256_add_epi8(lo, mask_bytes16(h0));
                    hi = _mm256_add_epi8(hi, mask_bytes16(h1));
                }
                FOR_T s16[t] = madd2(s16[t], lo, bcast32(a + 32 * t + 4 * v), hi, bcast32(a + 32 * t + 16 + 4 * v));
                if (Q5 && v % 2 == 1) FOR_T s16[t] = widen16(&ia[t], s16[t]);
            }
            if (!Q5) FOR_T widen16(&ia[t], s16[t]);
        }
        const __m256 dw = f16x8(w - 32 * h + DOFF + 16 * h);
        FOR_T acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[t]), _mm256_mul_ps(dw, bcastf(a - 32 * t0 + 256 + 4 * (t0 + t))),
                                       acc[t]);
        if (MIN) {
            const __m256 mw = f16x8(w - 32 * h + MOFF + 16 * h);
            FOR_T acc[t] = _mm256_fmadd_ps(mw, bcastf(a - 32 * t0 + 288 + 4 * (t0 + t)), acc[t]);
        }
    }
    FOR_T _mm256_storeu_ps(io[t], acc[t]);
}

/* ==== Q4_K, Q5_K, IQ4_XS: 8 sub-blocks of 32 ==== */

INLINE void k4k(const qpack_format F, int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h, int t0,
                float (*io)[8], const int NT) {
    const bool Q5 = F == QPACK_Q5_K, XS = F == QPACK_IQ4_XS;
    const size_t UB = Q5 ? 2880 : XS ? 2208 : 2368, SO = Q5 ? 2560 : 2048, DO = Q5 ? 2816 : XS ? 2176 : 2304;
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i kv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)); /* signed */
    __m256 acc[HT];
    FOR_T acc[t] = k0 ? _mm256_loadu_ps(io[t]) : _mm256_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2336) {
        prefetch_unit(w, UB, h, t0);
        const __m256 dv = f16x8(w + DO + 16 * h), mv = XS ? dv : f16x8(w + DO + 32 + 16 * h);
        __m256 sb[HT];
        FOR_T sb[t] = _mm256_setzero_ps();
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = w + 256 * s + 32 * h, *x = a + 256 * s + 32 * t0;
            __m256i ia[HT], s16[HT];
            FOR_T ia[t] = s16[t] = _mm256_setzero_si256(); /* IQ4_XS: signed quants, no -128 sum */
            UNROLL for (int v = 0; v < 4; v++) {
                const __m256i n = ld(q + 64 * v);
                __m256i lo = _mm256_and_si256(n, m4), hi = _mm256_and_si256(_mm256_srli_epi16(n, 4), m4);
                if (Q5) {
                    uint32_t h0, h1;
                    memcpy(&h0, w + 2048 + 64 * s + 8 * v + 4 * h, 4);
                    memcpy(&h1, w + 2048 + 64 * s + 8 * (v + 4) + 4 * h, 4);
                    lo = _mm256_add_epi8(lo, mask_bytes16(h0));
                    hi = _mm256_add_epi8(hi, mask_bytes16(h1));
                }
                if (XS) {
                    lo = _mm256_shuffle_epi8(kv, lo), hi = _mm256_shuffle_epi8(kv, hi);
                    const __m256i la = _mm256_abs_epi8(lo), ha = _mm256_abs_epi8(hi);
                    FOR_T {
                        ia[t] = dot1s(ia[t], la, lo, bcast32(x + 32 * t + 4 * v));
                        ia[t] = dot1s(ia[t], ha, hi, bcast32(x + 32 * t + 16 + 4 * v));
                    }
                } else {
                    /* nibbles: the sub-block's 8 products in one 16-bit sum; Q5_K: 4 at a time */
                    FOR_T s16[t] = madd2(s16[t], lo, bcast32(x + 32 * t + 4 * v), hi, bcast32(x + 32 * t + 16 + 4 * v));
                    if (v == 3 || (Q5 && v == 1)) FOR_T s16[t] = widen16(&ia[t], s16[t]);
                }
            }
            const __m128i sc8 = _mm_loadl_epi64((const __m128i *)(w + SO + 16 * s + 8 * h));
            const __m256 dws = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(XS ? _mm256_cvtepi8_epi32(sc8) : _mm256_cvtepu8_epi32(sc8)));
            if (XS) {
                FOR_T sb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[t]), dws, sb[t]);
            } else {
                const __m256 mws = _mm256_mul_ps(
                    mv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w + SO + 128 + 16 * s + 8 * h)))));
                FOR_T {
                    sb[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[t]), dws, sb[t]);
                    sb[t] = _mm256_fnmadd_ps(mws, bcastf(a + 2080 + 4 * (8 * s + t0 + t)), sb[t]);
                }
            }
        }
        FOR_T acc[t] = _mm256_fmadd_ps(sb[t], bcastf(a + 2048 + 4 * (t0 + t)), acc[t]);
    }
    FOR_T _mm256_storeu_ps(io[t], acc[t]);
}

/* ==== Q6_K ==== */

INLINE __m256i crumb_hi(__m256i c, const int k) {
    return k == 0 ? _mm256_slli_epi16(c, 4) : k == 1 ? _mm256_slli_epi16(c, 2) : k == 2 ? c : _mm256_srli_epi16(c, 2);
}

INLINE void k6k(int64_t k0, int64_t nu, const uint8_t *w, const uint8_t *a, int h, int t0, float (*io)[8],
                const int NT) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[HT];
    FOR_T acc[t] = k0 ? _mm256_loadu_ps(io[t]) : _mm256_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += 3360, a += 2592) {
        prefetch_unit(w, 3360, h, t0);
        __m256i isb[HT]; /* sub-block scales in integers, as vec_dot_ref */
        FOR_T isb[t] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            const uint8_t *q = w + 256 * p + 32 * h, *x = a + 256 * p + 32 * t0;
            UNROLL for (int hh = 0; hh < 2; hh++) {
                const int s = 2 * p + hh;
                const __m256i c = ld(w + 2048 + 128 * p + 64 * hh + 32 * h);
                __m256i ia[HT];
                FOR_T ia[t] = bcast32(a + 2080 + 4 * (8 * s + t0 + t));
                UNROLL for (int jj = 0; jj < 4; jj += 2) {
                    __m256i wv[2];
                    UNROLL for (int e = 0; e < 2; e++) {
                        const __m256i n = ld(q + 64 * (jj + e));
                        const __m256i lo = _mm256_and_si256(hh ? _mm256_srli_epi16(n, 4) : n, m4);
                        wv[e] = _mm256_or_si256(_mm256_and_si256(crumb_hi(c, jj + e), m30), lo);
                    }
                    FOR_T ia[t] = dot2u(ia[t], wv[0], bcast32(x + 32 * t + 16 * hh + 4 * jj), wv[1],
                                        bcast32(x + 32 * t + 16 * hh + 4 * jj + 4));
                }
                const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(w + 3072 + 16 * s + 8 * h)));
                FOR_T isb[t] = _mm256_add_epi32(isb[t], _mm256_mullo_epi32(ia[t], sc));
            }
        }
        const __m256 dv = f16x8(w + 3328 + 16 * h);
        FOR_T acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isb[t]), _mm256_mul_ps(dv, bcastf(a + 2048 + 4 * (t0 + t))),
                                       acc[t]);
    }
    FOR_T _mm256_storeu_ps(io[t], acc[t]);
}

/* ==== Instances: each half of the group with at least one row, tokens 4 at a time ==== */

#define BY_NT(CALL)                                                                                          \
    switch (n) {                                                                                             \
    case 1: CALL(1); break;                                                                                  \
    case 2: CALL(2); break;                                                                                  \
    case 3: CALL(3); break;                                                                                  \
    default: CALL(4); break;                                                                                 \
    }

/* The row length goes in chunks of about L1_CHUNK bytes of weights and activations, all
 * four passes (two halves x two token quads) over one chunk before the next, so that the
 * later passes read the chunk from L1; the sums carry over in io (the first chunk starts
 * them from 0), and each lane adds its
 * units in order, as qpack_kernel_ref does. */
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

#define q8_0_CALL(N) k32(QPACK_Q8_0, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q4_0_CALL(N) k32(QPACK_Q4_0, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q4_1_CALL(N) k32(QPACK_Q4_1, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define iq4_nl_CALL(N) k32(QPACK_IQ4_NL, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q5_0_CALL(N) k32(QPACK_Q5_0, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q5_1_CALL(N) k32(QPACK_Q5_1, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q4_K_CALL(N) k4k(QPACK_Q4_K, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q5_K_CALL(N) k4k(QPACK_Q5_K, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define iq4_xs_CALL(N) k4k(QPACK_IQ4_XS, k0, nk, gk, ak, h, t0, io[h] + t0, N)
#define q6_K_CALL(N) k6k(k0, nk, gk, ak, h, t0, io[h] + t0, N)
KERNEL_FN(q8_0, QPACK_Q8_0)
KERNEL_FN(q4_0, QPACK_Q4_0)
KERNEL_FN(q4_1, QPACK_Q4_1)
KERNEL_FN(iq4_nl, QPACK_IQ4_NL)
KERNEL_FN(q5_0, QPACK_Q5_0)
KERNEL_FN(q5_1, QPACK_Q5_1)
KERNEL_FN(q4_K, QPACK_Q4_K)
KERNEL_FN(q5_K, QPACK_Q5_K)
KERNEL_FN(iq4_xs, QPACK_IQ4_XS)
KERNEL_FN(q6_K, QPACK_Q6_K)

qpack_kernel_fn qpack_kernel_avx2(qpack_format f) {
    switch (f) {
    case QPACK_Q8_0: return q8_0;
    case QPACK_Q4_0: return q4_0;
    case QPACK_Q4_1: return q4_1;
    case QPACK_IQ4_NL: return iq4_nl;
    case QPACK_Q5_0: return q5_0;
    case QPACK_Q5_1: return q5_1;
    case QPACK_Q4_K: return q4_K;
    case QPACK_Q5_K: return q5_K;
    case QPACK_IQ4_XS: return iq4_xs;
    case QPACK_Q6_K: return q6_K;
    default: return NULL;
    }
}
