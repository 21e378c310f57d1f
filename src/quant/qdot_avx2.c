/*
 * qdot_avx2.c — AVX2 + FMA + F16C dot kernels and activation quantizers (the Haswell
 * baseline; also what AVX-512 parts without VNNI run).
 *
 * Owns: one tile kernel per supported weight type (qdot.h: one weight row against
 * 1..4 activation rows) and Q8_0 / Q8_K quantization of float rows. Compiled with
 * -mavx2 -mfma -mf16c; called only when the CPU has them.
 *
 * Integer products: vpmaddubsw (u8 x s8 -> pairs summed into int16, saturating) then
 * vpmaddwd with a vector of 1s or of sub-block scales (-> int32). Signed weights use
 * the sign trick (|w| unsigned, the activation's sign flipped where w < 0, zeroed
 * where w = 0). The int16 pair sums never saturate: the unsigned operand is at most
 * 128 and activation quants are in [-127, 127], so |pair| <= 2 * 128 * 127 = 32512.
 * Every int32 lane is a partial sum of true products (times a sub-block scale), so
 * summing lanes in float after conversion is as accurate as the reference.
 *
 * One 32-element block (or sub-block pair) per 256-bit vector. Tiles: always-inline
 * templates over NC activation rows, as in qdot_avx512.c.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "qdot.h"

#define INLINE static inline __attribute__((always_inline))
#define FOR_C _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)
#define UNROLL _Pragma("GCC unroll 8")

/* ==== Helpers ==== */

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 nibble bytes -> 32 bytes [q & 15 | q >> 4] (elements 0..15, 16..31) */
static inline __m256i nibbles(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)q);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(15));
}

/* 32 bits -> 32 bytes, 0xff where bit i of b is set */
static inline __m256i bits_to_bytes(uint32_t b) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)b), shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

static inline __m256i kvalues_x2(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
}

/* sum of products of signed bytes w and x, per group of 4, as int32 lanes, each
 * pair sum first multiplied by the int16 lanes of s (1s, or a sub-block scale) */
static inline __m256i dot_s8(__m256i wabs, __m256i wsign, __m256i x, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(x, wsign)), s);
}

static inline __m256i dot_u8(__m256i w, __m256i x, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), s);
}

#define TILE_FN(NAME)                                                                                        \
    static void NAME(int64_t n, const void *w, const void *a, size_t as, int na, float *out) {               \
        switch (na) {                                                                                        \
        case 1: NAME##_k(n, w, (const char *)a, as, out, 1); break;                                          \
        case 2: NAME##_k(n, w, (const char *)a, as, out, 2); break;                                          \
        case 3: NAME##_k(n, w, (const char *)a, as, out, 3); break;                                          \
        default: NAME##_k(n, w, (const char *)a, as, out, 4); break;                                         \
        }                                                                                                    \
    }

/* ==== Float weights x F32 activations ==== */

enum { WF32, WF16, WBF16 };

INLINE __m256 load_w8(const int WT, const void *w, int64_t i) {
    if (WT == WF32) return _mm256_loadu_ps((const float *)w + i);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (WT == WF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE float load_w1(const int WT, const void *w, int64_t i) {
    if (WT == WF32) return ((const float *)w)[i];
    if (WT == WF16) return h2f(((const uint16_t *)w)[i]);
    return bf16_to_f32(((const uint16_t *)w)[i]);
}

INLINE void float_k(const int WT, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    __m256 acc0[QDOT_MAX_ACT], acc1[QDOT_MAX_ACT];
    FOR_C acc0[c] = acc1[c] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = load_w8(WT, w, i), w1 = load_w8(WT, w, i + 8);
        FOR_C {
            const float *x = (const float *)(a + c * as) + i;
            acc0[c] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc0[c]);
            acc1[c] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), acc1[c]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 w0 = load_w8(WT, w, i);
        FOR_C acc0[c] = _mm256_fmadd_ps(w0, _mm256_loadu_ps((const float *)(a + c * as) + i), acc0[c]);
    }
    FOR_C {
        float s = hsum256(_mm256_add_ps(acc0[c], acc1[c]));
        for (int64_t k = i; k < n; k++) s += load_w1(WT, w, k) * ((const float *)(a + c * as))[k];
        out[c] = s;
    }
}

INLINE void f32_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    float_k(WF32, n, w, a, as, out, NC);
}
INLINE void f16_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    float_k(WF16, n, w, a, as, out, NC);
}
INLINE void bf16_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    float_k(WBF16, n, w, a, as, out, NC);
}
TILE_FN(f32)
TILE_FN(f16)
TILE_FN(bf16)

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

INLINE void blk32_k(const int T, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / 32;
    const bool has_min = T == B_Q4_1 || T == B_Q5_1;
    const __m256i ones = _mm256_set1_epi16(1), ones8 = _mm256_set1_epi8(1);
    __m256 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = (const uint8_t *)w + b * b_size(T);
        uint16_t dh, mh = 0;
        memcpy(&dh, wb, 2);
        if (has_min) memcpy(&mh, wb + 2, 2);
        __m256i q;
        if (T == B_Q8_0) {
            q = loadu256(wb + 2);
        } else {
            const size_t qs_off = T == B_Q4_0 || T == B_IQ4_NL ? 2 : T == B_Q4_1 ? 4 : T == B_Q5_0 ? 6 : 8;
            q = nibbles(wb + qs_off);
            if (T == B_Q5_0 || T == B_Q5_1)
                q = _mm256_or_si256(q, _mm256_and_si256(bits_to_bytes(rd32(wb + (T == B_Q5_0 ? 2 : 4))),
                                                        _mm256_set1_epi8(16)));
            if (T == B_Q4_0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(8));
            if (T == B_Q5_0) q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
            if (T == B_IQ4_NL) q = _mm256_shuffle_epi8(kvalues_x2(), q);
        }
        const __m256i qabs = has_min ? q : _mm256_sign_epi8(q, q);
        const float d = h2f(dh), m = has_min ? h2f(mh) : 0.0f;
        FOR_C {
            const block_q8_0 *x = (const block_q8_0 *)(a + c * as) + b;
            const __m256i xq = loadu256(x->qs);
            const float dx = h2f(x->d);
            if (has_min) {
                const __m256i s = dot_u8(q, xq, ones), xs = dot_u8(ones8, xq, ones);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * dx), acc[c]);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(xs), _mm256_set1_ps(m * dx), acc[c]);
            } else {
                const __m256i s = dot_s8(qabs, q, xq, ones);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * dx), acc[c]);
            }
        }
    }
    FOR_C out[c] = hsum256(acc[c]);
}

#define BLK32(NAME, T)                                                                                       \
    INLINE void NAME##_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {     \
        blk32_k(T, n, w, a, as, out, NC);                                                                    \
    }                                                                                                        \
    TILE_FN(NAME)
BLK32(q4_0, B_Q4_0)
BLK32(q4_1, B_Q4_1)
BLK32(q5_0, B_Q5_0)
BLK32(q5_1, B_Q5_1)
BLK32(q8_0, B_Q8_0)
BLK32(iq4_nl, B_IQ4_NL)

/* ==== K-quants x Q8_K ==== */

/* int16 lanes [s_j x 16] of a vector holding 16-bit values s_0..s_7 in both 128-bit
 * halves (for a sub-block of 32) */
static inline __m256i bcast16(__m256i s, int j) {
    const __m256i idx = _mm256_set1_epi16((short)(2 * j | (2 * j + 1) << 8));
    return _mm256_shuffle_epi8(s, idx);
}

/* int16 lanes [s_j x 8 | s_{j+1} x 8] from s holding 16 int16 values, j even (two
 * sub-blocks of 16 in one vector) */
static inline __m256i pair16(__m256i s, int j) {
    const __m256i d = _mm256_permutevar8x32_epi32(s, _mm256_set1_epi32(j / 2));
    const __m256i idx = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
                                         2, 3, 2, 3, 2, 3);
    return _mm256_shuffle_epi8(d, idx);
}

/* Q4_K / Q5_K: the 8 six-bit scales and mins as bytes (see quant_get_scale_min_k4) */
static inline void k4_scales(const uint8_t *s, uint64_t *sc, uint64_t *mn) {
    const uint32_t u0 = rd32(s), u1 = rd32(s + 4), u2 = rd32(s + 8);
    *sc = (u0 & 0x3f3f3f3fu) | (uint64_t)((u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    *mn = (u1 & 0x3f3f3f3fu) | (uint64_t)(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)) << 32;
}

INLINE void k4_k(const bool Q5, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m256 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15);
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
        uint64_t sc, mn;
        k4_scales(sc8, &sc, &mn);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc)));
        /* [m0, m0, m1, m1, ... m7, m7] for a madd with the 16 bsums */
        const __m128i dup = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128((long long)mn), dup));
        const __m256i hv = Q5 ? loadu256(qh) : _mm256_setzero_si256();
        __m256i q[8], scv[8];
        UNROLL for (int k = 0; k < 4; k++) {
            const __m256i raw = loadu256(qs + 32 * k);
            q[2 * k] = _mm256_and_si256(raw, m4);
            q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        }
        UNROLL for (int j = 0; j < 8; j++) {
            if (Q5) {
                /* bit j of qh[l] -> bit 4 */
                const __m256i hb = j <= 4 ? _mm256_slli_epi16(hv, 4 - j) : _mm256_srli_epi16(hv, j - 4);
                q[j] = _mm256_or_si256(q[j], _mm256_and_si256(hb, _mm256_set1_epi8(16)));
            }
            scv[j] = bcast16(sc16, j);
        }
        const float d = h2f(dh), dmin = h2f(dmh);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m256i is = _mm256_setzero_si256();
            UNROLL for (int j = 0; j < 8; j++)
                is = _mm256_add_epi32(is, dot_u8(q[j], loadu256(x->qs + 32 * j), scv[j]));
            const __m256i ms = _mm256_madd_epi16(loadu256(x->bsums), m16);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * x->d), acc[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(-(dmin * x->d)), acc[c]);
        }
    }
    FOR_C out[c] = hsum256(acc[c]);
}

INLINE void q4_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    k4_k(false, n, w, a, as, out, NC);
}
INLINE void q5_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    k4_k(true, n, w, a, as, out, NC);
}
TILE_FN(q4_K)
TILE_FN(q5_K)

/* Q2_K: element 128h + 32s + l is (qs[32h + l] >> 2s) & 3; group g = 4h + s holds
 * sub-blocks 2g, 2g + 1 (scale low nibble, min high nibble of scales[j]). */
INLINE void q2_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m256 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < nb; b++) {
        const block_q2_K *wb = (const block_q2_K *)w + b;
        const __m128i s8 = _mm_loadu_si128((const __m128i *)wb->scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(15)));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(15)));
        __m256i q[8], scv[8];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m256i raw = loadu256(wb->qs + 32 * h);
            UNROLL for (int s = 0; s < 4; s++) {
                q[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m3);
                scv[4 * h + s] = pair16(sc16, 2 * (4 * h + s));
            }
        }
        const float d = h2f(wb->d), dmin = h2f(wb->dmin);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m256i is = _mm256_setzero_si256();
            UNROLL for (int g = 0; g < 8; g++)
                is = _mm256_add_epi32(is, dot_u8(q[g], loadu256(x->qs + 32 * g), scv[g]));
            const __m256i ms = _mm256_madd_epi16(loadu256(x->bsums), m16);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * x->d), acc[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(-(dmin * x->d)), acc[c]);
        }
    }
    FOR_C out[c] = hsum256(acc[c]);
}
TILE_FN(q2_K)

/* Q3_K: q = 2 low bits + 4 * hmask bit - 4 (signed), 16 six-bit scales minus 32. */
static inline __m128i q3_K_scales(const uint8_t *s) {
    const uint32_t a0 = rd32(s), a1 = rd32(s + 4), a2 = rd32(s + 8);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const __m128i v = _mm_set_epi32((int)(((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4)),
                                    (int)(((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4)),
                                    (int)((a1 & m4) | (((a2 >> 2) & m2) << 4)), (int)((a0 & m4) | ((a2 & m2) << 4)));
    return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

INLINE void q3_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m256 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3), k4 = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < nb; b++) {
        const block_q3_K *wb = (const block_q3_K *)w + b;
        const __m256i sc16 = _mm256_cvtepi8_epi16(q3_K_scales(wb->scales));
        const __m256i hm = loadu256(wb->hmask);
        __m256i q[8], qa[8], scv[8];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m256i raw = loadu256(wb->qs + 32 * h);
            UNROLL for (int s = 0; s < 4; s++) {
                const int g = 4 * h + s;
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m3);
                const __m256i bit = _mm256_set1_epi8((char)(1 << g));
                const __m256i hset = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
                q[g] = _mm256_sub_epi8(lo, _mm256_andnot_si256(hset, k4));
                qa[g] = _mm256_sign_epi8(q[g], q[g]);
                scv[g] = pair16(sc16, 2 * g);
            }
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m256i is = _mm256_setzero_si256();
            UNROLL for (int g = 0; g < 8; g++)
                is = _mm256_add_epi32(is, dot_s8(qa[g], q[g], loadu256(x->qs + 32 * g), scv[g]));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * x->d), acc[c]);
        }
    }
    FOR_C out[c] = hsum256(acc[c]);
}
TILE_FN(q3_K)

/* Q6_K: q = (ql nibble | qh 2 bits << 4) - 32 (signed). Element 128h + 32g + l: low
 * bits (ql[64h + 32(g % 2) + l] >> 4(g / 2)) & 15, high (qh[32h + l] >> 2g) & 3. */
INLINE void q6_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m256 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < nb; b++) {
        const block_q6_K *wb = (const block_q6_K *)w + b;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
        __m256i q[8], qa[8], scv[8];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m256i l0 = loadu256(wb->ql + 64 * h), l1 = loadu256(wb->ql + 64 * h + 32);
            const __m256i hh = loadu256(wb->qh + 32 * h);
            UNROLL for (int g = 0; g < 4; g++) {
                const __m256i lraw = g % 2 ? l1 : l0;
                const __m256i lo = _mm256_and_si256(g < 2 ? lraw : _mm256_srli_epi16(lraw, 4), m4);
                const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hh, 2 * g), m3), 4);
                const int k = 4 * h + g;
                q[k] = _mm256_sub_epi8(_mm256_or_si256(lo, hi), k32);
                qa[k] = _mm256_sign_epi8(q[k], q[k]);
                scv[k] = pair16(sc16, 2 * k);
            }
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m256i is = _mm256_setzero_si256();
            UNROLL for (int k = 0; k < 8; k++)
                is = _mm256_add_epi32(is, dot_s8(qa[k], q[k], loadu256(x->qs + 32 * k), scv[k]));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * x->d), acc[c]);
        }
    }
    FOR_C out[c] = hsum256(acc[c]);
}
TILE_FN(q6_K)

/* IQ4_XS: sub-block j = qs[16j .. 16j + 15] (low nibbles elements 0..15, high 16..31),
 * scale ls_j - 32 applied in the madd (|pair| * 32 * 2 fits int32 with room). */
INLINE void iq4_xs_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m256 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm256_setzero_ps();
    const __m256i kv = kvalues_x2();
    for (int64_t b = 0; b < nb; b++) {
        const block_iq4_xs *wb = (const block_iq4_xs *)w + b;
        __m256i q[8], qa[8], scv[8];
        UNROLL for (int j = 0; j < 8; j++) {
            const int ls = (((wb->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((wb->scales_h >> (2 * j)) & 3) << 4)) - 32;
            q[j] = _mm256_shuffle_epi8(kv, nibbles(wb->qs + 16 * j));
            qa[j] = _mm256_sign_epi8(q[j], q[j]);
            scv[j] = _mm256_set1_epi16((short)ls);
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m256i is = _mm256_setzero_si256();
            UNROLL for (int j = 0; j < 8; j++)
                is = _mm256_add_epi32(is, dot_s8(qa[j], q[j], loadu256(x->qs + 32 * j), scv[j]));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * x->d), acc[c]);
        }
    }
    FOR_C out[c] = hsum256(acc[c]);
}
TILE_FN(iq4_xs)

/* ==== Kernel table ==== */

qdot_fn qdot_kernel_avx2(qtype t) {
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

/* ==== Activation quantization (bit-identical to quantize_ref.c) ==== */

/* max(|v|, m) per lane; a NaN lane of v leaves m (vmaxps returns its second operand
 * when either is NaN), as in the reference's `if (a > amax)`. */
static inline __m256 amax_step(__m256 m, __m256 v) {
    return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), m);
}

static inline float hmax256(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* round-half-away-from-zero(v) clamped to [-127, 127], NaN -> 0, as int32 */
static inline __m256i round_q_ps(__m256 v) {
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(1.0f));
    t = _mm256_add_ps(t, _mm256_and_ps(up, one));
    t = _mm256_and_ps(t, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(t);
}

static inline __m128i round_q_pd(__m256d v) {
    __m256d t = _mm256_round_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256d frac = _mm256_andnot_pd(_mm256_set1_pd(-0.0), _mm256_sub_pd(v, t));
    const __m256d up = _mm256_cmp_pd(frac, _mm256_set1_pd(0.5), _CMP_GE_OQ);
    const __m256d one = _mm256_or_pd(_mm256_and_pd(v, _mm256_set1_pd(-0.0)), _mm256_set1_pd(1.0));
    t = _mm256_add_pd(t, _mm256_and_pd(up, one));
    t = _mm256_and_pd(t, _mm256_cmp_pd(v, v, _CMP_ORD_Q));
    t = _mm256_min_pd(_mm256_max_pd(t, _mm256_set1_pd(-127.0)), _mm256_set1_pd(127.0));
    return _mm256_cvtpd_epi32(t);
}

/* 32 int32 in four vectors -> 32 int8 in order (values already in [-127, 127]) */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i v = _mm256_packs_epi16(ab, cd);
    /* packs work within 128-bit lanes: dwords end up in order 0 4 1 5 2 6 3 7 */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void quantize_row_q8_0_avx2(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK8_0 == 0);
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k), m = amax_step(m, v[k]);
        const float amax = hmax256(m);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_fp16(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++) q[k] = round_q_ps(_mm256_mul_ps(v[k], vid));
        _mm256_storeu_si256((__m256i *)y[b].qs, pack32(q[0], q[1], q[2], q[3]));
    }
}

void quantize_row_q8_K_avx2(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK_K == 0);
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) m = amax_step(m, _mm256_loadu_ps(x + j));
        const float amax = hmax256(m);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const double id = 127.0 / (double)amax;
        float d = amax / 127.0f;
        if (d * 127.0f > FLT_MAX) d = nextafterf(d, 0.0f);
        y[b].d = d;
        const __m256d vid = _mm256_set1_pd(id);
        for (int g = 0; g < QK_K; g += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                const __m256 v = _mm256_loadu_ps(x + g + 8 * k);
                const __m128i lo = round_q_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vid));
                const __m128i hi = round_q_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vid));
                q[k] = _mm256_set_m128i(hi, lo);
            }
            for (int h = 0; h < 2; h++) {
                __m256i s = _mm256_add_epi32(q[2 * h], q[2 * h + 1]);
                __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
                y[b].bsums[g / 16 + h] = (int16_t)_mm_cvtsi128_si32(s4);
            }
            _mm256_storeu_si256((__m256i *)(y[b].qs + g), pack32(q[0], q[1], q[2], q[3]));
        }
    }
}
