/*
 * qdot_avx512.c — AVX-512 dot kernels (F/BW/VL/DQ + VNNI) and activation quantizers.
 *
 * Owns: one tile kernel per supported weight type (qdot.h: one weight row against
 * 1..4 activation rows), 4-row kernels for the float and 32-element types, and
 * Q8_0 / Q8_K quantization of float rows. Compiled with
 * the AVX-512 flags; called only when the CPU has AVX-512 F/BW/VL/DQ and VNNI.
 *
 * Integer products use vpdpbusd (u8 x s8, four products per int32 lane). Signed
 * weights use the sign trick: |w| as the unsigned operand, the activation negated
 * where w < 0 (activation quants are in [-127, 127], so the negation never wraps).
 * Unsigned quants (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K) go in directly. Every int32 lane
 * holds a partial sum of true products (the offsets -4 of Q3_K and -32 of Q6_K are
 * applied to the quants, not through bsums), so converting lanes to float before
 * adding them loses no more than the reference's own float sum would.
 *
 * Sub-block scales of the K-quants are applied in the integer domain with vpdpwssd:
 * a vpdpbusd lane holds at most 4 * 32 * 127 (Q6_K) or 4 * 31 * 127 (Q5_K) in
 * magnitude, so it reads as an int16 (low half; the high half is its sign and meets a
 * 0 in the scale vector).
 * IQ4_XS lanes are too wide for that (4 * 127 * 127); its scales are applied in float,
 * exactly, since every partial sum stays below 2^24.
 *
 * Tiles: every kernel is an always-inline template over NC (the number of
 * activation rows, a constant after inlining); a weight block is loaded and
 * unpacked once and then used for each of the NC rows.
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

/* [f(lo), f(hi), 0, 0] */
static inline __m128 f16x2(uint16_t lo, uint16_t hi) {
    return _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)lo | (uint32_t)hi << 16)));
}

/* [v0 x 8 | v1 x 8]: a scale per 32-element block, for lanes 0-7 and 8-15 of a dpbusd result */
static inline __m512 spread2(__m128 v) {
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

static inline __m512i load2x256(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

static inline __m512i load1x256(const void *lo) {
    return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)lo));
}

/* Two 16-byte nibble arrays -> 64 bytes [q0 & 15, q0 >> 4, q1 & 15, q1 >> 4]
 * (for Q4_0 and friends: elements 0..31 of two consecutive blocks). */
static inline __m512i nibbles2(__m256i q01) {
    const __m512i z = _mm512_shuffle_i64x2(_mm512_castsi256_si512(q01), _mm512_castsi256_si512(q01),
                                           _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i sh = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi64(z, sh), _mm512_set1_epi8(15));
}

static inline __m256i load2x128(const void *lo, const void *hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)lo)),
                                   _mm_loadu_si128((const __m128i *)hi), 1);
}

static inline __m256i load1x128(const void *lo) {
    return _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)lo));
}

/* sum over groups of 4 of w * x, w given as |w| and a mask of its negative bytes */
static inline __m512i dot_s8(__m512i acc, __m512i wabs, __mmask64 wneg, __m512i x) {
    x = _mm512_mask_sub_epi8(x, wneg, _mm512_setzero_si512(), x);
    return _mm512_dpbusd_epi32(acc, wabs, x);
}

static inline __m512i kvalues_x4(void) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Instantiates a qdot_fn from a template NAME##_k(n, w, a, as, out, NC). */
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

/* 16 weights from i, as floats; m selects the valid ones (zero elsewhere) */
INLINE __m512 load_w16(const int WT, const void *w, int64_t i, __mmask16 m) {
    if (WT == WF32) return _mm512_maskz_loadu_ps(m, (const float *)w + i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i);
    if (WT == WF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE void float_k(const int WT, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    __m512 acc0[QDOT_MAX_ACT], acc1[QDOT_MAX_ACT];
    FOR_C acc0[c] = acc1[c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 w0 = load_w16(WT, w, i, 0xffff), w1 = load_w16(WT, w, i + 16, 0xffff);
        FOR_C {
            const float *x = (const float *)(a + c * as) + i;
            acc0[c] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc0[c]);
            acc1[c] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc1[c]);
        }
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 w0 = load_w16(WT, w, i, m);
        FOR_C acc0[c] = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, (const float *)(a + c * as) + i), acc0[c]);
    }
    FOR_C out[c] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[c], acc1[c]));
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

/* 4 x 4 tile: 4 weight rows (widened once) x 4 activation rows (loaded once), 16 FMA
 * chains; FMA-bound instead of bound by reloading activations from L2. */
INLINE void float_g(const int WT, int64_t n, const void *w, size_t ws, const char *a, size_t as, float *out,
                    const int NC) {
    __m512 acc[4][4];
    UNROLL for (int r = 0; r < 4; r++) FOR_C acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 x[4];
        FOR_C x[c] = _mm512_maskz_loadu_ps(m, (const float *)(a + c * as) + i);
        UNROLL for (int r = 0; r < 4; r++) {
            const __m512 wv = load_w16(WT, (const char *)w + r * ws, i, m);
            FOR_C acc[r][c] = _mm512_fmadd_ps(wv, x[c], acc[r][c]);
        }
    }
    UNROLL for (int r = 0; r < 4; r++) FOR_C out[4 * r + c] = _mm512_reduce_add_ps(acc[r][c]);
}

/* Instantiates a qgemm4_fn from a template NAME##_gk(n, w, ws, a, as, out, NC). */
#define GEMM4_FN(NAME)                                                                                       \
    static void NAME##_g4(int64_t n, const void *w, size_t ws, const void *a, size_t as, int na, float *out) {   \
        switch (na) {                                                                                        \
        case 1: NAME##_gk(n, w, ws, (const char *)a, as, out, 1); break;                                     \
        case 2: NAME##_gk(n, w, ws, (const char *)a, as, out, 2); break;                                     \
        case 3: NAME##_gk(n, w, ws, (const char *)a, as, out, 3); break;                                     \
        default: NAME##_gk(n, w, ws, (const char *)a, as, out, 4); break;                                    \
        }                                                                                                    \
    }

INLINE void f32_gk(int64_t n, const void *w, size_t ws, const char *a, size_t as, float *out, const int NC) {
    float_g(WF32, n, w, ws, a, as, out, NC);
}
INLINE void f16_gk(int64_t n, const void *w, size_t ws, const char *a, size_t as, float *out, const int NC) {
    float_g(WF16, n, w, ws, a, as, out, NC);
}
INLINE void bf16_gk(int64_t n, const void *w, size_t ws, const char *a, size_t as, float *out, const int NC) {
    float_g(WBF16, n, w, ws, a, as, out, NC);
}
GEMM4_FN(f32)
GEMM4_FN(f16)
GEMM4_FN(bf16)

/* ==== 32-element blocks x Q8_0 ==== */

/* Two consecutive weight blocks (or one, the upper half zero), unpacked:
 * q = the 64 quants (|w| for signed types, with neg marking w < 0; w itself for
 * the unsigned Q4_1/Q5_1), d = [d0, d1] and m = [m0, m1] (Q4_1/Q5_1). */
typedef struct {
    __m512i q;
    __mmask64 neg;
    __m128 d, m;
} wpair;

enum { B_Q4_0, B_Q4_1, B_Q5_0, B_Q5_1, B_Q8_0, B_IQ4_NL };

INLINE bool b_has_min(const int T) { return T == B_Q4_1 || T == B_Q5_1; }

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

/* The pair's scales [d0, d1] and (Q4_1/Q5_1) offsets [m0, m1]; d1 = m1 = 0 without TWO */
INLINE void b_scales(const int T, const uint8_t *w0, const bool TWO, __m128 *d, __m128 *m) {
    const uint8_t *w1 = w0 + b_size(T);
    uint16_t d0, d1 = 0, m0 = 0, m1 = 0;
    memcpy(&d0, w0, 2);
    if (TWO) memcpy(&d1, w1, 2);
    if (b_has_min(T)) {
        memcpy(&m0, w0 + 2, 2);
        if (TWO) memcpy(&m1, w1 + 2, 2);
    }
    *d = f16x2(d0, d1);
    *m = f16x2(m0, m1);
}

/* The pair's 64 quants as stored: unsigned 0..15 / 0..31 for the nibble types (IQ4_NL:
 * the table index), signed bytes for Q8_0; the upper 32 zero without TWO. */
INLINE __m512i b_raw(const int T, const uint8_t *w0, const bool TWO) {
    const uint8_t *w1 = w0 + b_size(T);
    if (T == B_Q8_0) return TWO ? load2x256(w0 + 2, w1 + 2) : load1x256(w0 + 2);
    const size_t qs_off = T == B_Q4_0 || T == B_IQ4_NL ? 2 : T == B_Q4_1 ? 4 : T == B_Q5_0 ? 6 : 8;
    __m512i q = nibbles2(TWO ? load2x128(w0 + qs_off, w1 + qs_off) : load1x128(w0 + qs_off));
    if (T == B_Q5_0 || T == B_Q5_1) {
        const size_t qh_off = T == B_Q5_0 ? 2 : 4;
        const uint64_t hb = rd32(w0 + qh_off) | (TWO ? (uint64_t)rd32(w1 + qh_off) << 32 : 0);
        q = _mm512_mask_add_epi8(q, (__mmask64)hb, q, _mm512_set1_epi8(16));
    }
    return q;
}

INLINE wpair b_unpack(const int T, const uint8_t *w0, const bool TWO) {
    wpair p;
    b_scales(T, w0, TWO, &p.d, &p.m);
    __m512i q = b_raw(T, w0, TWO);
    if (T == B_Q4_0) q = _mm512_sub_epi8(q, _mm512_set1_epi8(8));
    if (T == B_Q5_0) q = _mm512_sub_epi8(q, _mm512_set1_epi8(16));
    if (T == B_IQ4_NL) q = _mm512_shuffle_epi8(kvalues_x4(), q);
    if (!b_has_min(T)) {
        p.neg = _mm512_movepi8_mask(q);
        q = _mm512_abs_epi8(q);
    } else {
        p.neg = 0;
    }
    p.q = q;
    return p;
}

INLINE void b_step(const int T, const uint8_t *w0, int64_t b, const bool TWO, const char *a, size_t as,
                   __m512 *acc, const int NC) {
    const wpair p = b_unpack(T, w0, TWO);
    FOR_C {
        const block_q8_0 *x = (const block_q8_0 *)(a + c * as) + b;
        const __m512i xq = TWO ? load2x256(x[0].qs, x[1].qs) : load1x256(x[0].qs);
        const __m128 dx = f16x2(x[0].d, TWO ? x[1].d : 0);
        if (b_has_min(T)) {
            const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p.q, xq);
            const __m512i xs = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), xq);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), spread2(_mm_mul_ps(p.d, dx)), acc[c]);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(xs), spread2(_mm_mul_ps(p.m, dx)), acc[c]);
        } else {
            const __m512i s = dot_s8(_mm512_setzero_si512(), p.q, p.neg, xq);
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), spread2(_mm_mul_ps(p.d, dx)), acc[c]);
        }
    }
}

INLINE void blk32_k(const int T, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / 32;
    const uint8_t *wb = w;
    __m512 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) b_step(T, wb + b * b_size(T), b, true, a, as, acc, NC);
    if (b < nb) b_step(T, wb + b * b_size(T), b, false, a, as, acc, NC);
    FOR_C out[c] = _mm512_reduce_add_ps(acc[c]);
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

/* ---- 4 x 4 tiles (prefill) ----
 * Four weight rows against four activation rows. Here the weights go in unsigned,
 * w + off (off = 8, 16, 128, 128 for Q4_0, Q5_0, Q8_0, IQ4_NL; Q8_0 by flipping the
 * sign bit, IQ4_NL through a table of kvalues + 128), and each dpbusd starts from
 * -off * (the lane's activation sum), so every lane is exactly the sum of its four
 * true products. That correction, the activation loads and the activation scales are
 * made once per token and serve four rows; the weight unpacking serves four tokens.
 * Per row, token and block pair: one dpbusd, one cvt, one mul, one fma. With one
 * token (decode) the same kernel shares the activation work over four rows. */

INLINE int g_off(const int T) {
    return T == B_Q4_0 ? 8 : T == B_Q5_0 ? 16 : T == B_Q8_0 || T == B_IQ4_NL ? 128 : 0;
}

INLINE void g_step(const int T, const uint8_t *w, size_t ws, int64_t b, const bool TWO, const char *a, size_t as,
                   __m512 acc[4][4], const int NC) {
    const int off = g_off(T);
    __m512i xq[4], corr[4];
    __m512 dx[4], sx[4];
    FOR_C {
        const block_q8_0 *x = (const block_q8_0 *)(a + c * as) + b;
        xq[c] = TWO ? load2x256(x[0].qs, x[1].qs) : load1x256(x[0].qs);
        dx[c] = spread2(f16x2(x[0].d, TWO ? x[1].d : 0));
        corr[c] = _mm512_setzero_si512();
        if (off)
            corr[c] = _mm512_sub_epi32(corr[c], _mm512_dpbusd_epi32(corr[c], _mm512_set1_epi8((char)off), xq[c]));
        if (b_has_min(T))
            sx[c] = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), xq[c]));
    }
    UNROLL for (int r = 0; r < 4; r++) {
        const uint8_t *w0 = w + r * ws + b * b_size(T);
        __m128 d, m;
        b_scales(T, w0, TWO, &d, &m);
        __m512i q = b_raw(T, w0, TWO);
        if (T == B_Q8_0) q = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
        if (T == B_IQ4_NL) q = _mm512_shuffle_epi8(_mm512_xor_si512(kvalues_x4(), _mm512_set1_epi8((char)0x80)), q);
        const __m512 dw = spread2(d), mw = spread2(m);
        FOR_C {
            const __m512i s = _mm512_dpbusd_epi32(corr[c], q, xq[c]);
            acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, dx[c]), acc[r][c]);
            if (b_has_min(T)) acc[r][c] = _mm512_fmadd_ps(sx[c], _mm512_mul_ps(mw, dx[c]), acc[r][c]);
        }
    }
}

INLINE void blk32_g(const int T, int64_t n, const void *w, size_t ws, const char *a, size_t as, float *out,
                    const int NC) {
    const int64_t nb = n / 32;
    __m512 acc[4][4];
    UNROLL for (int r = 0; r < 4; r++) FOR_C acc[r][c] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) g_step(T, w, ws, b, true, a, as, acc, NC);
    if (b < nb) g_step(T, w, ws, b, false, a, as, acc, NC);
    UNROLL for (int r = 0; r < 4; r++) FOR_C out[4 * r + c] = _mm512_reduce_add_ps(acc[r][c]);
}

#define GEMM4(NAME, T)                                                                                       \
    INLINE void NAME##_gk(int64_t n, const void *w, size_t ws, const char *a, size_t as, float *out,         \
                          const int NC) {                                                                    \
        blk32_g(T, n, w, ws, a, as, out, NC);                                                                \
    }                                                                                                        \
    GEMM4_FN(NAME)
GEMM4(q4_0, B_Q4_0)
GEMM4(q4_1, B_Q4_1)
GEMM4(q5_0, B_Q5_0)
GEMM4(q5_1, B_Q5_1)
GEMM4(q8_0, B_Q8_0)
GEMM4(iq4_nl, B_IQ4_NL)

/* ==== K-quants x Q8_K ==== */

/* [v x 32 bytes | v2 x 32 bytes] */
static inline __m512i halves_epi8(int v, int v2) {
    return _mm512_inserti64x4(_mm512_set1_epi8((char)v), _mm256_set1_epi8((char)v2), 1);
}

/* [v x 16 words | v2 x 16 words] */
static inline __m512i halves_epi16(int v, int v2) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short)v), _mm256_set1_epi16((short)v2), 1);
}

/* The scale of each int32 lane of a 64-element piece, from the 16 int32 values in s:
 * lane L of piece p takes s[p * (64 / sub) + L / (sub / 4)] for sub-blocks of `sub`
 * (16 or 32) elements. The high 16 bits are cleared so that vpdpwssd multiplies the
 * lane's low half (the whole value) by the scale and its high half by 0. */
static const int32_t spread_idx[2][4][16] = {
    {{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
     {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
     {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
     {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}},
    {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
     {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
     {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
     {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}},
};

static inline __m512i spread_raw(__m512i s, int p, int sub) {
    return _mm512_permutexvar_epi32(_mm512_loadu_si512(spread_idx[sub == 32][p]), s);
}

static inline __m512i spread_scales(__m512i s, int p, int sub) {
    return _mm512_and_si512(spread_raw(s, p, sub), _mm512_set1_epi32(0xffff));
}

/* Q4_K / Q5_K: the 8 six-bit scales and mins as bytes (see quant_get_scale_min_k4) */
static inline void k4_scales(const uint8_t *s, uint64_t *sc, uint64_t *mn) {
    const uint32_t u0 = rd32(s), u1 = rd32(s + 4), u2 = rd32(s + 8);
    *sc = (u0 & 0x3f3f3f3fu) | (uint64_t)((u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u)) << 32;
    *mn = (u1 & 0x3f3f3f3fu) | (uint64_t)(((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u)) << 32;
}

/* [m0, m0, m1, m1, ... m7, m7] as int16, for a madd with the 16 bsums */
static inline __m256i k4_mins16(uint64_t mn) {
    const __m128i dup = _mm_set_epi8(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128((long long)mn), dup));
}

INLINE void k4_k(const bool Q5, int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m512 acc[QDOT_MAX_ACT];
    __m256 macc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm512_setzero_ps(), macc[c] = _mm256_setzero_ps();
    const __m512i sh = halves_epi16(0, 4), m4 = _mm512_set1_epi8(15);
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
        const __m512i sc32 = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc));
        const __m256i m16 = k4_mins16(mn);
        __m512i q[4], scv[4];
        const __m512i hv = Q5 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qh)) : _mm512_setzero_si512();
        UNROLL for (int k = 0; k < 4; k++) {
            /* piece k: sub-blocks 2k (low nibbles of qs[32k..]) and 2k+1 (high nibbles) */
            const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * k)));
            q[k] = _mm512_and_si512(_mm512_srlv_epi16(raw, sh), m4);
            if (Q5) {
                const __mmask64 hb = _mm512_test_epi8_mask(hv, halves_epi8(1 << (2 * k), 1 << (2 * k + 1)));
                q[k] = _mm512_mask_add_epi8(q[k], hb, q[k], _mm512_set1_epi8(16));
            }
            scv[k] = spread_raw(sc32, k, 32); /* unsigned: the high halves are already 0 */
        }
        const float d = h2f(dh), dmin = h2f(dmh);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m512i is = _mm512_setzero_si512();
            UNROLL for (int k = 0; k < 4; k++) {
                const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], _mm512_loadu_si512(x->qs + 64 * k));
                is = _mm512_dpwssd_epi32(is, s, scv[k]);
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_set1_ps(d * x->d), acc[c]);
            const __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), m16);
            macc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(-(dmin * x->d)), macc[c]);
        }
    }
    FOR_C out[c] = _mm512_reduce_add_ps(acc[c]) + hsum256(macc[c]);
}

INLINE void q4_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    k4_k(false, n, w, a, as, out, NC);
}
INLINE void q5_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    k4_k(true, n, w, a, as, out, NC);
}
TILE_FN(q4_K)
TILE_FN(q5_K)

/* Q2_K: 2-bit quants; element 128h + 32s + l is (qs[32h + l] >> 2s) & 3. Piece p = 2h + s/2
 * holds s and s + 1 in its two halves. Scale sc_j (low nibble), min m_j (high nibble). */
INLINE void q2_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m512 acc[QDOT_MAX_ACT];
    __m256 macc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm512_setzero_ps(), macc[c] = _mm256_setzero_ps();
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int64_t b = 0; b < nb; b++) {
        const block_q2_K *wb = (const block_q2_K *)w + b;
        const __m128i s8 = _mm_loadu_si128((const __m128i *)wb->scales);
        const __m512i sc32 = _mm512_cvtepu8_epi32(_mm_and_si128(s8, _mm_set1_epi8(15)));
        const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(15)));
        __m512i q[4], scv[4];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qs + 32 * h)));
            UNROLL for (int s2 = 0; s2 < 2; s2++) {
                const int p = 2 * h + s2;
                q[p] = _mm512_and_si512(_mm512_srlv_epi16(raw, halves_epi16(4 * s2, 4 * s2 + 2)), m3);
                scv[p] = spread_raw(sc32, p, 16); /* unsigned: the high halves are already 0 */
            }
        }
        const float d = h2f(wb->d), dmin = h2f(wb->dmin);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m512i is = _mm512_setzero_si512();
            UNROLL for (int p = 0; p < 4; p++) {
                const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[p], _mm512_loadu_si512(x->qs + 64 * p));
                is = _mm512_dpwssd_epi32(is, s, scv[p]);
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_set1_ps(d * x->d), acc[c]);
            const __m256i ms = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), m16);
            macc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_set1_ps(-(dmin * x->d)), macc[c]);
        }
    }
    FOR_C out[c] = _mm512_reduce_add_ps(acc[c]) + hsum256(macc[c]);
}
TILE_FN(q2_K)

/* Q3_K: q = 2 low bits + 4 * hmask bit - 4, in -4..3 (signed: sign trick). The 16
 * six-bit scales, minus 32, as signed bytes. */
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
    __m512 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm512_setzero_ps();
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int64_t b = 0; b < nb; b++) {
        const block_q3_K *wb = (const block_q3_K *)w + b;
        const __m512i sc32 = _mm512_cvtepi8_epi32(q3_K_scales(wb->scales));
        const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)wb->hmask));
        __m512i q[4], scv[4];
        __mmask64 neg[4];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qs + 32 * h)));
            UNROLL for (int s2 = 0; s2 < 2; s2++) {
                const int p = 2 * h + s2, s = 2 * s2;
                const __m512i v = _mm512_and_si512(_mm512_srlv_epi16(raw, halves_epi16(2 * s, 2 * s + 2)), m3);
                const __mmask64 hb = _mm512_test_epi8_mask(hm, halves_epi8(1 << (4 * h + s), 1 << (4 * h + s + 1)));
                const __m512i qs = _mm512_mask_sub_epi8(v, (__mmask64)~hb, v, _mm512_set1_epi8(4));
                neg[p] = _mm512_movepi8_mask(qs);
                q[p] = _mm512_abs_epi8(qs);
                scv[p] = spread_scales(sc32, p, 16);
            }
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m512i is = _mm512_setzero_si512();
            UNROLL for (int p = 0; p < 4; p++) {
                const __m512i s = dot_s8(_mm512_setzero_si512(), q[p], neg[p], _mm512_loadu_si512(x->qs + 64 * p));
                is = _mm512_dpwssd_epi32(is, s, scv[p]);
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_set1_ps(d * x->d), acc[c]);
        }
    }
    FOR_C out[c] = _mm512_reduce_add_ps(acc[c]);
}
TILE_FN(q3_K)

/* Q6_K: q = (low 4 bits (ql) | high 2 bits (qh) << 4) - 32, in -32..31 (signed: sign
 * trick). Element 128h + r: piece 2h (r < 64) and piece 2h + 1 (r >= 64). */
INLINE void q6_K_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m512 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
    const __m512i shl_a = halves_epi16(4, 2), shr_b = halves_epi16(0, 2);
    for (int64_t b = 0; b < nb; b++) {
        const block_q6_K *wb = (const block_q6_K *)w + b;
        const __m512i sc32 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)wb->scales));
        __m512i q[4], scv[4];
        __mmask64 neg[4];
        UNROLL for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512(wb->ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h)));
            /* bits (qh >> s) & 3 moved to bits 4-5: s = 0, 2 (shift left 4, 2) and s = 4, 6 (right 0, 2) */
            const __m512i ha = _mm512_and_si512(_mm512_sllv_epi16(qh, shl_a), m30);
            const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, shr_b), m30);
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), ha);
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), hb);
        }
        UNROLL for (int p = 0; p < 4; p++) {
            const __m512i qs = _mm512_sub_epi8(q[p], k32);
            neg[p] = _mm512_movepi8_mask(qs);
            q[p] = _mm512_abs_epi8(qs);
            scv[p] = spread_scales(sc32, p, 16);
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m512i is = _mm512_setzero_si512();
            UNROLL for (int p = 0; p < 4; p++) {
                const __m512i s = dot_s8(_mm512_setzero_si512(), q[p], neg[p], _mm512_loadu_si512(x->qs + 64 * p));
                is = _mm512_dpwssd_epi32(is, s, scv[p]);
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_set1_ps(d * x->d), acc[c]);
        }
    }
    FOR_C out[c] = _mm512_reduce_add_ps(acc[c]);
}
TILE_FN(q6_K)

/* IQ4_XS: 8 sub-blocks of 32; piece k = sub-blocks 2k, 2k+1 (qs[32k .. 32k+31]).
 * Scales in float: each lane's partial sum |sum| <= 4 * 127 * 127 * 32 * 4 < 2^24 is exact. */
/* The 8 sub-block scales ls_j - 32 of an IQ4_XS block as int32 lanes 0..7. */
static inline __m512i iq4_xs_scales(const block_iq4_xs *wb) {
    const __m128i m15 = _mm_set1_epi8(15);
    const __m128i sl = _mm_cvtsi32_si128((int)rd32(wb->scales_l));
    /* bytes [sl0 & 15, sl0 >> 4, sl1 & 15, ...]: the low 4 bits of ls_0..ls_7 */
    const __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(sl, m15), _mm_and_si128(_mm_srli_epi16(sl, 4), m15));
    const __m128i sh = _mm_set1_epi16((short)wb->scales_h);
    const __m128i hi = _mm_and_si128(_mm_srlv_epi16(sh, _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)), _mm_set1_epi16(3));
    const __m128i ls = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(lo), _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
    return _mm512_cvtepi16_epi32(_mm256_zextsi128_si256(ls));
}

INLINE void iq4_xs_k(int64_t n, const void *w, const char *a, size_t as, float *out, const int NC) {
    const int64_t nb = n / QK_K;
    __m512 acc[QDOT_MAX_ACT];
    FOR_C acc[c] = _mm512_setzero_ps();
    const __m512i kv = kvalues_x4();
    for (int64_t b = 0; b < nb; b++) {
        const block_iq4_xs *wb = (const block_iq4_xs *)w + b;
        const __m512i ls32 = iq4_xs_scales(wb);
        __m512i q[4];
        __mmask64 neg[4];
        __m512 lsf[4];
        UNROLL for (int k = 0; k < 4; k++) {
            const __m512i v = _mm512_shuffle_epi8(kv, nibbles2(_mm256_loadu_si256((const __m256i *)(wb->qs + 32 * k))));
            neg[k] = _mm512_movepi8_mask(v);
            q[k] = _mm512_abs_epi8(v);
            lsf[k] = _mm512_cvtepi32_ps(spread_raw(ls32, k, 32));
        }
        const float d = h2f(wb->d);
        FOR_C {
            const block_q8_K *x = (const block_q8_K *)(a + c * as) + b;
            __m512 t = _mm512_setzero_ps();
            UNROLL for (int k = 0; k < 4; k++) {
                const __m512i s = dot_s8(_mm512_setzero_si512(), q[k], neg[k], _mm512_loadu_si512(x->qs + 64 * k));
                t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), lsf[k], t);
            }
            acc[c] = _mm512_fmadd_ps(t, _mm512_set1_ps(d * x->d), acc[c]);
        }
    }
    FOR_C out[c] = _mm512_reduce_add_ps(acc[c]);
}
TILE_FN(iq4_xs)

/* ==== Kernel table ==== */

qdot_fn qdot_kernel_avx512(qtype t) {
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

qgemm4_fn qdot_gemm4_avx512(qtype t) {
    switch (t) {
    case QTYPE_F32: return f32_g4;
    case QTYPE_F16: return f16_g4;
    case QTYPE_BF16: return bf16_g4;
    case QTYPE_Q4_0: return q4_0_g4;
    case QTYPE_Q4_1: return q4_1_g4;
    case QTYPE_Q5_0: return q5_0_g4;
    case QTYPE_Q5_1: return q5_1_g4;
    case QTYPE_Q8_0: return q8_0_g4;
    case QTYPE_IQ4_NL: return iq4_nl_g4;
    default: return NULL;
    }
}

/* ==== Activation quantization (bit-identical to quantize_ref.c) ==== */

/* max |x| over 16 lanes into m; NaN lanes leave m unchanged (vmaxps returns the
 * second operand when either is NaN), as in the reference's `if (a > amax)`. */
static inline __m512 amax_step(__m512 m, __m512 v) {
    return _mm512_max_ps(_mm512_abs_ps(v), m);
}

/* round-half-away-from-zero(v), clamped to [-127, 127], NaN -> 0 (quant_round_f) */
static inline __m512i round_q_ps(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
    t = _mm512_mask_add_ps(t, up, t, one);
    t = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), t);
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvtps_epi32(t);
}

static inline __m256i round_q_pd(__m512d v) {
    __m512d t = _mm512_roundscale_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512d frac = _mm512_abs_pd(_mm512_sub_pd(v, t));
    const __mmask8 up = _mm512_cmp_pd_mask(frac, _mm512_set1_pd(0.5), _CMP_GE_OQ);
    const __m512d one = _mm512_or_pd(_mm512_and_pd(v, _mm512_set1_pd(-0.0)), _mm512_set1_pd(1.0));
    t = _mm512_mask_add_pd(t, up, t, one);
    t = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(v, v, _CMP_ORD_Q), t);
    t = _mm512_min_pd(_mm512_max_pd(t, _mm512_set1_pd(-127.0)), _mm512_set1_pd(127.0));
    return _mm512_cvtpd_epi32(t);
}

void quantize_row_q8_0_avx512(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK8_0 == 0);
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(amax_step(amax_step(_mm512_setzero_ps(), v0), v1));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f32_to_fp16(d);
        const __m512 vid = _mm512_set1_ps(id);
        _mm_storeu_si128((__m128i *)y[b].qs, _mm512_cvtepi32_epi8(round_q_ps(_mm512_mul_ps(v0, vid))));
        _mm_storeu_si128((__m128i *)(y[b].qs + 16), _mm512_cvtepi32_epi8(round_q_ps(_mm512_mul_ps(v1, vid))));
    }
}

void quantize_row_q8_K_avx512(const float *x, void *dst, int64_t n) {
    EDDY_ASSERT(n >= 0 && n % QK_K == 0);
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        __m512 m = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16) m = amax_step(m, _mm512_loadu_ps(x + j));
        const float amax = _mm512_reduce_max_ps(m);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const double id = 127.0 / (double)amax;
        float d = amax / 127.0f;
        if (d * 127.0f > FLT_MAX) d = nextafterf(d, 0.0f);
        y[b].d = d;
        const __m512d vid = _mm512_set1_pd(id);
        for (int g = 0; g < QK_K / 16; g++) {
            const __m512 v = _mm512_loadu_ps(x + 16 * g);
            const __m256i lo = round_q_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), vid));
            const __m256i hi = round_q_pd(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)), vid));
            const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            y[b].bsums[g] = (int16_t)_mm512_reduce_add_epi32(q);
            _mm_storeu_si128((__m128i *)(y[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
        }
    }
}
