/*
 * quant.h — the block formats eddy reads, and their scalar reference kernels.
 *
 * Owns: the exact on-disk layout of every supported GGML block type (weights) and
 * of the two activation formats Q8_0 and Q8_K; dequantization, activation
 * quantization and the one-row dot product, all as portable scalar `_ref` code.
 * SIMD variants (later) are tested against these. Does not own: the type table
 * (qtypes.h) or any validation of untrusted input — callers check types and sizes
 * read from a file (qtype_info, qtype_row_bytes) before calling in here; the
 * functions below only EDDY_ASSERT their invariants.
 *
 * Layout notes. Every field is little-endian; fp16 scales are stored as raw
 * uint16_t bits (convert with fp16_to_f32). Block pointers must be aligned to
 * their struct's alignment (2 bytes; 4 for Q8_K and F32), which GGUF's tensor
 * alignment guarantees. QK_K = 256 elements per K-quant super-block.
 *
 * Dequantization matches the `gguf` Python package (gguf.quants.dequantize) bit for
 * bit, including its order of float32 operations; see docs/formats.md.
 */
#ifndef EDDY_QUANT_QUANT_H
#define EDDY_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/fp16.h"
#include "quant/qtypes.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "eddy's block formats assume a little-endian host"
#endif

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* ==== Legacy 32-element blocks ==== */

/* Q4_0: x = d * (q - 8), q in 0..15. Element j < 16 is qs[j] & 15, element j + 16 is
 * qs[j] >> 4. */
typedef struct {
    uint16_t d;           /* fp16 scale */
    uint8_t qs[QK4_0 / 2];
} block_q4_0;
_Static_assert(sizeof(block_q4_0) == 2 + QK4_0 / 2, "Q4_0 block is 18 bytes");

/* Q4_1: x = d * q + m, q in 0..15, nibbles as Q4_0. */
typedef struct {
    uint16_t d;           /* fp16 scale */
    uint16_t m;           /* fp16 offset (the block minimum) */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;
_Static_assert(sizeof(block_q4_1) == 4 + QK4_1 / 2, "Q4_1 block is 20 bytes");

/* Q5_0: x = d * (q - 16), q in 0..31: low 4 bits as Q4_0, bit 4 of element j is bit j
 * of the little-endian uint32 qh. */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;
_Static_assert(sizeof(block_q5_0) == 2 + 4 + QK5_0 / 2, "Q5_0 block is 22 bytes");

/* Q5_1: x = d * q + m, q in 0..31, bits as Q5_0. */
typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;
_Static_assert(sizeof(block_q5_1) == 4 + 4 + QK5_1 / 2, "Q5_1 block is 24 bytes");

/* Q8_0: x = d * q, q in -128..127. Also the activation format of the 32-blocks. */
typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;
_Static_assert(sizeof(block_q8_0) == 2 + QK8_0, "Q8_0 block is 34 bytes");

/* IQ4_NL: x = d * kvalues_iq4nl[q], q in 0..15, nibbles as Q4_0. */
typedef struct {
    uint16_t d;
    uint8_t qs[QK4_NL / 2];
} block_iq4_nl;
_Static_assert(sizeof(block_iq4_nl) == 2 + QK4_NL / 2, "IQ4_NL block is 18 bytes");

/* The 16 non-linear levels shared by IQ4_NL and IQ4_XS. */
extern const int8_t kvalues_iq4nl[16];

/* ==== K-quants: 256-element super-blocks ==== */

/* Q2_K: 16 sub-blocks of 16. Sub-block j: x = d * (scales[j] & 15) * q
 *   - dmin * (scales[j] >> 4), q in 0..3. Element e = 128*h + 32*s + l (h < 2, s < 4,
 * l < 32) is (qs[32*h + l] >> 2*s) & 3. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min, 4 bits each */
    uint8_t qs[QK_K / 4];
    uint16_t d;                /* fp16 super-block scale for scales */
    uint16_t dmin;             /* fp16 super-block scale for mins */
} block_q2_K;
_Static_assert(sizeof(block_q2_K) == QK_K / 16 + QK_K / 4 + 4, "Q2_K block is 84 bytes");

/* Q3_K: 16 sub-blocks of 16. Sub-block j: x = d * (sc[j] - 32) * q, q in -4..3:
 * q = ((qs[32*h + l] >> 2*s) & 3) - 4 * !((hmask[l] >> (e / 32)) & 1) for element
 * e = 128*h + 32*s + l. sc[j] is 6 bits: the low 4 from scales[j % 8] (low nibble for
 * j < 8, high nibble otherwise), the high 2 from (scales[8 + j % 4] >> 2*(j / 4)) & 3. */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} block_q3_K;
_Static_assert(sizeof(block_q3_K) == QK_K / 8 + QK_K / 4 + 12 + 2, "Q3_K block is 110 bytes");

/* Q4_K: 8 sub-blocks of 32. Sub-block j: x = d * sc[j] * q - dmin * m[j], q in 0..15,
 * 6-bit sc/m packed in scales[12] (see quant_get_scale_min_k4). Sub-block j = 2*c + h
 * holds (qs[32*c + l] >> 4*h) & 15. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;
_Static_assert(sizeof(block_q4_K) == 4 + K_SCALE_SIZE + QK_K / 2, "Q4_K block is 144 bytes");

/* Q5_K: as Q4_K with q in 0..31: bit 4 of element l of sub-block j is (qh[l] >> j) & 1. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
_Static_assert(sizeof(block_q5_K) == 4 + K_SCALE_SIZE + QK_K / 8 + QK_K / 2,
               "Q5_K block is 176 bytes");

/* Q6_K: 16 sub-blocks of 16. Sub-block j: x = d * scales[j] * (q - 32), q in 0..63.
 * Element e = 128*h + r (h < 2, r < 128): low 4 bits (ql[64*h + r % 64] >> 4*(r / 64)) & 15,
 * high 2 bits (qh[32*h + r % 32] >> 2*(r / 32)) & 3. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;
_Static_assert(sizeof(block_q6_K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, "Q6_K block is 210 bytes");

/* IQ4_XS: 8 sub-blocks of 32. Sub-block j: x = d * (ls[j] - 32) * kvalues_iq4nl[q];
 * ls[j] = ((scales_l[j / 2] >> 4*(j % 2)) & 15) | (((scales_h >> 2*j) & 3) << 4).
 * Element l < 16 of sub-block j is qs[16*j + l] & 15, element l + 16 is qs[16*j + l] >> 4. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;
_Static_assert(sizeof(block_iq4_xs) == 4 + QK_K / 64 + QK_K / 2, "IQ4_XS block is 136 bytes");

/* Q8_K: the activation format of the K-quants and IQ4_XS. x = d * q; bsums[i] is the
 * sum of qs[16*i .. 16*i + 15] (the K-quant dot products use it for the min terms). */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;
_Static_assert(sizeof(block_q8_K) == 4 + QK_K + QK_K / 8, "Q8_K block is 292 bytes");

/* Sub-block j (< 8) scale and min of a Q4_K/Q5_K super-block, 6 bits each:
 * j < 4: sc = s[j] & 63, m = s[j+4] & 63;
 * j >= 4: sc = (s[j+4] & 15) | ((s[j-4] >> 6) << 4), m = (s[j+4] >> 4) | ((s[j] >> 6) << 4). */
static inline void quant_get_scale_min_k4(const uint8_t *s, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* ==== Reference kernels ==== */

/* True for the types dequantize_row_ref / vec_dot_ref accept as weights: F32, F16,
 * BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS (the table's
 * `supported` flag). */
static inline bool quant_weight_supported(qtype type) {
    const qtype_traits *t = qtype_info((uint32_t)type);
    return t && t->supported;
}

/* The alignment, in bytes, a row of `type` must have (the struct's alignment). */
static inline size_t quant_row_align(qtype type) {
    return (type == QTYPE_F32 || type == QTYPE_Q8_K) ? 4 : 2;
}

/* dst[0..n) = the n values of a row of `type` at src. type is a supported weight
 * type or Q8_K; n >= 0 is a multiple of the block size. Bit-exact with
 * gguf.quants.dequantize. */
void dequantize_row_ref(qtype type, const void *src, float *dst, int64_t n);

/* Activation quantization, n a multiple of 32 (Q8_0) or 256 (Q8_K).
 * Q8_0 matches gguf.quants.quantize bit for bit for finite inputs: d = amax / 127,
 * q = round-half-away(x * (1 / d)), d stored as fp16 (RNE).
 * Q8_K: d = amax / 127 (float32), q = round-half-away(x * 127 / amax) computed in
 * double, clamped to [-127, 127]; bsums filled. All-zero blocks get d = 0, q = 0.
 * NaN products are stored as q = 0 in both, so no input is undefined behaviour. */
void quantize_row_q8_0_ref(const float *x, void *dst, int64_t n);
void quantize_row_q8_K_ref(const float *x, void *dst, int64_t n);

/* Converts a row of float activations into `type`: F32 (copy), F16, BF16 (round to
 * nearest even), Q8_0 or Q8_K. */
void quantize_row_ref(qtype type, const float *x, void *dst, int64_t n);

/* The activation format a weight type's dot product takes: F32 for F32/F16/BF16,
 * Q8_0 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/IQ4_NL, Q8_K for Q2_K..Q6_K and IQ4_XS. */
qtype quant_dot_type(qtype weight_type);

/* sum_i w[i] * a[i] over one row of n elements: w_row in weight_type, act_row in
 * quant_dot_type(weight_type). Quantized types sum integer products within each
 * block and accumulate blocks in float; F32/F16/BF16 accumulate in double. */
float vec_dot_ref(qtype weight_type, int64_t n, const void *w_row, const void *act_row);

#endif
