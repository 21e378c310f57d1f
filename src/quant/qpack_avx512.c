/*
 * qpack_avx512.c — AVX-512 VNNI kernels on packed weights (qpack.h): one group of 16
 * rows times one tile of 1..8 tokens over the whole row.
 *
 * Register tile: a 64-byte weight vector holds 4 consecutive quants of each of the 16
 * rows; vpdpbusd multiplies it by 4 activation bytes of one token broadcast to every
 * lane (an embedded {1to16} broadcast from the tile), so each int32 lane accumulates one
 * row's block sum for that token. A weight vector is loaded (and unpacked, for nibbles)
 * once and used for every token of the tile: 8 int32 and 8 float accumulators, the
 * float ones (one per token, lanes = rows) live for the whole row. Per 32 quants and
 * token: 8 vpdpbusd, one conversion and one or two FMAs (plus a multiply for the
 * 32-element formats, whose activation scale changes per block). The operations, and
 * their order per lane, are those of qpack_kernel_ref, so the results are identical.
 * F16 and BF16 rows are widened to floats 16 rows at a time and multiplied by each
 * token's activations broadcast, two running sums per token and unit (qpack.h).
 */
#include <immintrin.h>
#include <string.h>

#include "base/error.h"
#include "qpack.h"
#include "qpack_kernels.h"
#include "qpack_prefetch.h"

#define INLINE static inline __attribute__((always_inline))
#define FOR_T _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++)
#define UNROLL _Pragma("GCC unroll 8")

INLINE __m512i bcast32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

INLINE __m512 bcastf(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return _mm512_set1_ps(v);
}

INLINE __m512 f16x16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

INLINE __m512i ld(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }

/* qpack_unit_bytes of the 32-element formats, as a constant after inlining */
INLINE size_t qpack_unit_bytes_c(const qpack_format F) {
    return F == QPACK_Q8_0 ? 544 : F == QPACK_Q4_1 ? 320 : F == QPACK_Q5_0 ? 352 : F == QPACK_Q5_1 ? 384 : 288;
}

/* ==== 32-element formats: Q8_0, Q4_0, Q4_1, IQ4_NL, Q5_0, Q5_1 ==== */

INLINE void k32(const qpack_format F, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys,
                int nrows, const int NT) {
    const bool Q5 = F == QPACK_Q5_0 || F == QPACK_Q5_1, MIN = F == QPACK_Q4_1 || F == QPACK_Q5_1;
    const size_t UB = qpack_unit_bytes_c(F), AB = 320;
    const size_t DOFF = F == QPACK_Q8_0 ? 512 : Q5 ? 320 : 256, MOFF = Q5 ? 352 : 288;
    const __m512i m4 = _mm512_set1_epi8(15), k16 = _mm512_set1_epi8(16);
    /* IQ4_NL: index -> kvalue + 128 (unsigned), in each 128-bit lane */
    const __m512i kv = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)),
                                        _mm512_set1_epi8((char)0x80));
    __m512 acc[QPACK_TOK];
    FOR_T acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += AB) {
        qpack_prefetch_unit(w, UB);
        __m512i ia[QPACK_TOK];
        FOR_T ia[t] = MIN ? _mm512_setzero_si512() : bcast32(a + 288 + 4 * t);
        if (F == QPACK_Q8_0) {
            UNROLL for (int j = 0; j < 8; j++) {
                const __m512i wv = ld(w + 64 * j);
                FOR_T ia[t] = _mm512_dpbusd_epi32(ia[t], wv, bcast32(a + 32 * t + 4 * j));
            }
        } else {
            UNROLL for (int v = 0; v < 4; v++) {
                const __m512i n = ld(w + 64 * v);
                __m512i lo = _mm512_and_si512(n, m4), hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), m4);
                if (F == QPACK_IQ4_NL) lo = _mm512_shuffle_epi8(kv, lo), hi = _mm512_shuffle_epi8(kv, hi);
                if (Q5) {
                    uint64_t h0, h1;
                    memcpy(&h0, w + 256 + 8 * v, 8);
                    memcpy(&h1, w + 256 + 8 * (v + 4), 8);
                    lo = _mm512_mask_add_epi8(lo, (__mmask64)h0, lo, k16);
                    hi = _mm512_mask_add_epi8(hi, (__mmask64)h1, hi, k16);
                }
                FOR_T ia[t] = _mm512_dpbusd_epi32(ia[t], lo, bcast32(a + 32 * t + 4 * v));
                FOR_T ia[t] = _mm512_dpbusd_epi32(ia[t], hi, bcast32(a + 32 * t + 16 + 4 * v));
            }
        }
        const __m512 dw = f16x16(w + DOFF);
        FOR_T acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), _mm512_mul_ps(dw, bcastf(a + 256 + 4 * t)), acc[t]);
        if (MIN) {
            const __m512 mw = f16x16(w + MOFF);
            FOR_T acc[t] = _mm512_fmadd_ps(mw, bcastf(a + 288 + 4 * t), acc[t]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << nrows) - 1);
    FOR_T _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

/* ==== Q4_K, Q5_K, IQ4_XS: 8 sub-blocks of 32 ==== */

INLINE void k4k(const qpack_format F, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys, int nrows,
                const int NT) {
    const bool Q5 = F == QPACK_Q5_K, XS = F == QPACK_IQ4_XS;
    const size_t UB = Q5 ? 2880 : XS ? 2208 : 2368, SO = Q5 ? 2560 : 2048, DO = Q5 ? 2816 : XS ? 2176 : 2304;
    const __m512i m4 = _mm512_set1_epi8(15), k16 = _mm512_set1_epi8(16);
    const __m512i kv = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)),
                                        _mm512_set1_epi8((char)0x80));
    __m512 acc[QPACK_TOK];
    FOR_T acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2336) {
        const __m512 dv = f16x16(w + DO), mv = XS ? dv : f16x16(w + DO + 32);
        __m512 sb[QPACK_TOK];
        FOR_T sb[t] = _mm512_setzero_ps();
        for (int s = 0; s < 8; s++) {
            const uint8_t *q = w + 256 * s, *x = a + 256 * s;
            qpack_prefetch_part(w, UB, s);
            __m512i ia[QPACK_TOK];
            FOR_T ia[t] = XS ? bcast32(a + 2080 + 4 * (8 * s + t)) : _mm512_setzero_si512();
            UNROLL for (int v = 0; v < 4; v++) {
                const __m512i n = ld(q + 64 * v);
                __m512i lo = _mm512_and_si512(n, m4), hi = _mm512_and_si512(_mm512_srli_epi16(n, 4), m4);
                if (Q5) {
                    uint64_t h0, h1;
                    memcpy(&h0, w + 2048 + 64 * s + 8 * v, 8);
                    memcpy(&h1, w + 2048 + 64 * s + 8 * (v + 4), 8);
                    lo = _mm512_mask_add_epi8(lo, (__mmask64)h0, lo, k16);
                    hi = _mm512_mask_add_epi8(hi, (__mmask64)h1, hi, k16);
                }
                if (XS) lo = _mm512_shuffle_epi8(kv, lo), hi = _mm512_shuffle_epi8(kv, hi);
                FOR_T ia[t] = _mm512_dpbusd_epi32(ia[t], lo, bcast32(x + 32 * t + 4 * v));
                FOR_T ia[t] = _mm512_dpbusd_epi32(ia[t], hi, bcast32(x + 32 * t + 16 + 4 * v));
            }
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)(w + SO + 16 * s));
            const __m512 dws = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(XS ? _mm512_cvtepi8_epi32(sc8) : _mm512_cvtepu8_epi32(sc8)));
            if (XS) {
                FOR_T sb[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), dws, sb[t]);
            } else {
                const __m512 mws = _mm512_mul_ps(
                    mv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + SO + 128 + 16 * s)))));
                FOR_T {
                    sb[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[t]), dws, sb[t]);
                    sb[t] = _mm512_fnmadd_ps(mws, bcastf(a + 2080 + 4 * (8 * s + t)), sb[t]);
                }
            }
        }
        FOR_T acc[t] = _mm512_fmadd_ps(sb[t], bcastf(a + 2048 + 4 * t), acc[t]);
    }
    const __mmask16 m = (__mmask16)((1u << nrows) - 1);
    FOR_T _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

/* ==== Q6_K, Q3_K, Q2_K ==== */

/* bits 2k..2k+1 of each byte of c, moved to bits 4..5 (other bits unspecified) */
INLINE __m512i crumb_hi(__m512i c, const int k) {
    return k == 0 ? _mm512_slli_epi16(c, 4) : k == 1 ? _mm512_slli_epi16(c, 2) : k == 2 ? c : _mm512_srli_epi16(c, 2);
}

INLINE void k6k(const qpack_format F, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys, int nrows,
                const int NT) {
    /* Q3_K: the 3-bit q + 4 as the crumbs' low 2 bits plus 4 under the bit-2 mask; Q2_K: the
     * crumbs alone, its scale | min << 4 bytes applied in integers too (the mins against the
     * tile's sub-block sums, after the unit's products) */
    const bool Q3 = F == QPACK_Q3_K, Q2 = F == QPACK_Q2_K, CR = Q2 || Q3;
    const size_t UB = Q2 ? 1344 : Q3 ? 1824 : 3360, CO = CR ? 0 : 2048;
    const size_t SCO = Q2 ? 1024 : Q3 ? 1536 : 3072, DO = Q2 ? 1280 : Q3 ? 1792 : 3328;
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), m3 = _mm512_set1_epi8(3);
    const __m512i k4 = _mm512_set1_epi8(4);
    __m512 acc[QPACK_TOK];
    FOR_T acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += UB, a += 2592) {
        /* the sub-block scales apply in integers (vpmulld): |sum| < 2^31, as in vec_dot_ref */
        __m512i isb[QPACK_TOK];
        FOR_T isb[t] = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            const uint8_t *q = w + 256 * p, *x = a + 256 * p;
            qpack_prefetch_part(w, UB, p);
            UNROLL for (int h = 0; h < 2; h++) {
                const int s = 2 * p + h;
                const __m512i c = ld(w + CO + 128 * p + 64 * h);
                __m512i ia[QPACK_TOK];
                FOR_T ia[t] = Q2 ? _mm512_setzero_si512() : bcast32(a + 2080 + 4 * (8 * s + t));
                UNROLL for (int jj = 0; jj < 4; jj++) {
                    __m512i wv;
                    if (CR) {
                        wv = _mm512_and_si512(jj ? _mm512_srli_epi16(c, 2 * jj) : c, m3);
                        if (Q3) {
                            uint64_t hb;
                            memcpy(&hb, w + 1024 + 64 * p + 8 * (4 * h + jj), 8);
                            wv = _mm512_mask_add_epi8(wv, (__mmask64)hb, wv, k4);
                        }
                    } else {
                        const __m512i n = ld(q + 64 * jj);
                        const __m512i lo = _mm512_and_si512(h ? _mm512_srli_epi16(n, 4) : n, m4);
                        /* (crumb << 4 & 0x30) | lo */
                        wv = _mm512_ternarylogic_epi32(crumb_hi(c, jj), m30, lo, 0xEA);
                    }
                    FOR_T ia[t] = _mm512_dpbusd_epi32(ia[t], wv, bcast32(x + 32 * t + 16 * h + 4 * jj));
                }
                const __m128i sc8 = _mm_loadu_si128((const __m128i *)(w + SCO + 16 * s));
                const __m512i sc = Q2 ? _mm512_and_si512(_mm512_cvtepu8_epi32(sc8), _mm512_set1_epi32(15))
                                      : _mm512_cvtepi8_epi32(sc8);
                FOR_T isb[t] = _mm512_add_epi32(isb[t], _mm512_mullo_epi32(ia[t], sc));
            }
        }
        const __m512 dv = f16x16(w + DO);
        FOR_T acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isb[t]), _mm512_mul_ps(dv, bcastf(a + 2048 + 4 * t)), acc[t]);
        if (Q2) {
            __m512i msb[QPACK_TOK];
            FOR_T msb[t] = _mm512_setzero_si512();
            for (int s = 0; s < 16; s++) {
                const __m128i sm8 = _mm_loadu_si128((const __m128i *)(w + 1024 + 16 * s));
                const __m512i mn = _mm512_srli_epi32(_mm512_cvtepu8_epi32(sm8), 4);
                FOR_T msb[t] = _mm512_add_epi32(msb[t], _mm512_mullo_epi32(mn, bcast32(a + 2080 + 4 * (8 * s + t))));
            }
            const __m512 mv = f16x16(w + 1312);
            FOR_T acc[t] =
                _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msb[t]), _mm512_mul_ps(mv, bcastf(a + 2048 + 4 * t)), acc[t]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << nrows) - 1);
    FOR_T _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

/* ==== F16, BF16: widened to floats, fused multiply-adds (qpack.h) ==== */

INLINE __m512 widen16(const bool BF, const uint8_t *p) {
    const __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return BF ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

INLINE void kf(const bool BF, int64_t nu, const uint8_t *w, const uint8_t *a, float *y, int64_t ys, int nrows,
               const int NT) {
    __m512 acc[QPACK_TOK];
    FOR_T acc[t] = _mm512_setzero_ps();
    for (int64_t k = 0; k < nu; k++, w += 1024, a += 1024) {
        qpack_prefetch_unit(w, 1024);
        __m512 s0[QPACK_TOK], s1[QPACK_TOK];
        FOR_T s0[t] = _mm512_setzero_ps(), s1[t] = _mm512_setzero_ps();
        UNROLL for (int j = 0; j < 32; j += 2) {
            const __m512 w0 = widen16(BF, w + 32 * j), w1 = widen16(BF, w + 32 * (j + 1));
            FOR_T {
                s0[t] = _mm512_fmadd_ps(w0, bcastf(a + 128 * t + 4 * j), s0[t]);
                s1[t] = _mm512_fmadd_ps(w1, bcastf(a + 128 * t + 4 * (j + 1)), s1[t]);
            }
        }
        FOR_T acc[t] = _mm512_add_ps(acc[t], _mm512_add_ps(s0[t], s1[t]));
    }
    const __mmask16 m = (__mmask16)((1u << nrows) - 1);
    FOR_T _mm512_mask_storeu_ps(y + t * ys, m, acc[t]);
}

/* ==== Instances ==== */

#define BY_NT(CALL)                                                                                          \
    switch (nt) {                                                                                            \
    case 1: CALL(1); break;                                                                                  \
    case 2: CALL(2); break;                                                                                  \
    case 3: CALL(3); break;                                                                                  \
    case 4: CALL(4); break;                                                                                  \
    case 5: CALL(5); break;                                                                                  \
    case 6: CALL(6); break;                                                                                  \
    case 7: CALL(7); break;                                                                                  \
    default: CALL(8); break;                                                                                 \
    }

#define KERNEL_FN(NAME)                                                                                      \
    static void NAME(int64_t nu, const void *g, const void *tile, int nt, float *y, int64_t ys, int nrows) {  \
        EDDY_ASSERT(nt >= 1 && nt <= QPACK_TOK && nrows >= 1 && nrows <= QPACK_ROWS);                        \
        BY_NT(NAME##_CALL)                                                                                   \
    }

#define q8_0_CALL(N) k32(QPACK_Q8_0, nu, g, tile, y, ys, nrows, N)
#define q4_0_CALL(N) k32(QPACK_Q4_0, nu, g, tile, y, ys, nrows, N)
#define q4_1_CALL(N) k32(QPACK_Q4_1, nu, g, tile, y, ys, nrows, N)
#define iq4_nl_CALL(N) k32(QPACK_IQ4_NL, nu, g, tile, y, ys, nrows, N)
#define q5_0_CALL(N) k32(QPACK_Q5_0, nu, g, tile, y, ys, nrows, N)
#define q5_1_CALL(N) k32(QPACK_Q5_1, nu, g, tile, y, ys, nrows, N)
#define q4_K_CALL(N) k4k(QPACK_Q4_K, nu, g, tile, y, ys, nrows, N)
#define q5_K_CALL(N) k4k(QPACK_Q5_K, nu, g, tile, y, ys, nrows, N)
#define iq4_xs_CALL(N) k4k(QPACK_IQ4_XS, nu, g, tile, y, ys, nrows, N)
#define q6_K_CALL(N) k6k(QPACK_Q6_K, nu, g, tile, y, ys, nrows, N)
#define q3_K_CALL(N) k6k(QPACK_Q3_K, nu, g, tile, y, ys, nrows, N)
#define q2_K_CALL(N) k6k(QPACK_Q2_K, nu, g, tile, y, ys, nrows, N)
#define f16_CALL(N) kf(false, nu, g, tile, y, ys, nrows, N)
#define bf16_CALL(N) kf(true, nu, g, tile, y, ys, nrows, N)
#define KERNEL_OF(F, NAME) KERNEL_FN(NAME)
QPACK_KERNELS(KERNEL_OF)

qpack_kernel_fn qpack_kernel_avx512(qpack_format f) {
    switch (f) {
        QPACK_KERNELS(QPACK_KERNEL_CASE)
    default: return NULL;
    }
}
